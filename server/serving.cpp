#include "server/serving.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include "model/tool_prompt.h"
#include "scheduler/grammar_vocabulary.h"

namespace flashserve {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

size_t longest_token_bytes(const Tokenizer& tok) {
  size_t longest = 1;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) longest = std::max(longest, tok.token_bytes(id).size());
  return longest;
}

// Stable for one build and model configuration, different when either changes.
std::string fingerprint(const Model& model, const EngineOptions& options) {
  const ModelConfig& c = model.config();
  const std::string identity = c.name + "|" + c.arch + "|" + std::to_string(c.num_layers) + "|" +
                               std::to_string(c.vocab_size) + "|" + options.device + "|" + __DATE__ " " __TIME__;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(std::hash<std::string>{}(identity)));
  return std::string("fp_") + hex;
}

// Seconds from `from` to `to`, or -1 when `to` never happened (e.g. aborted while still queued).
double span(Clock::time_point from, Clock::time_point to) { return to == Clock::time_point{} ? -1.0 : seconds(to - from); }

// One line per request at completion: what ops people grep for. -1 marks a stage never reached.
// On the output thread, through the asynchronous logger: a stalled log pipe drops lines, it never
// stalls requests.
void log_finished(const RequestOutput& o) {
  const RequestTimings& t = o.timings;
  spdlog::info("request {} finished: reason={} prompt_tokens={} output_tokens={} cached_tokens={} preemptions={} "
               "queue={:.3f}s ttft={:.3f}s e2e={:.3f}s{}{}",
               o.req_id, to_string(*o.finish), o.num_prompt_tokens, o.num_output_tokens, o.num_cached_tokens,
               o.num_preemptions, span(t.arrival, t.first_scheduled), span(t.arrival, t.first_token),
               span(t.arrival, t.finished), o.error ? " error=" : "", o.error ? o.error->message : "");
}

}  // namespace

void RequestStream::push(const RequestOutput& o) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(o);
    ready_.notify_one();
  }
  if (notify_) notify_();
}

std::optional<RequestOutput> RequestStream::next(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!ready_.wait_until(lock, deadline, [&] { return !events_.empty(); })) return std::nullopt;
  RequestOutput o = std::move(events_.front());
  events_.pop_front();
  return o;
}

Serving::Serving(const Model& model, std::string served_model_name, const EngineOptions& options,
                 ServingObserver* observer)
    : model_(model),
      model_name_(std::move(served_model_name)),
      observer_(observer),
      runner_(options.make_runner(model)),
      grammars_(std::make_unique<grammar::GrammarCache>(grammar_vocabulary(model.tokenizer(), runner_->vocab_size()))),
      max_waiting_(options.max_waiting),
      engine_(*runner_, model.tokenizer(), options.engine_config()),
      max_prompt_bytes_(size_t(engine_.max_model_len()) * longest_token_bytes(model.tokenizer())),
      max_tokens_default_(options.max_tokens_default),
      fingerprint_(fingerprint(model, options)),
      outputs_(engine_, model.tokenizer()) {
  // A template file asked for must work; a model without a usable one only loses chat.
  if (!options.chat_template_file.empty()) {
    template_ = std::make_unique<ChatTemplate>(options.chat_template(model));
  } else {
    try {
      template_ = std::make_unique<ChatTemplate>(model.chat_template());
    } catch (const UnsupportedTemplate& e) {
      template_error_ = e.what();
      spdlog::warn("chat completions disabled: {}", template_error_);
    }
  }
  template_renders_tools_ = template_ && renders_hermes_tools(*template_);
  const ReasoningTags tags;
  const std::string& parser = options.reasoning_parser;
  if (parser == "auto" ? template_ && template_->source().find(tags.close) != std::string::npos : parser != "none") {
    reasoning_tags_ = tags;
  }
  reasoning_budget_default_ = options.reasoning_budget;
  max_num_seqs_ = options.max_num_seqs;
  if (observer_) outputs_.set_step_observer([this](const StepStats& s) { observer_->on_step(s); });
  const std::vector<int32_t> windows = runner_->kv_group_windows();
  const auto windowed = std::count_if(windows.begin(), windows.end(), [](int32_t w) { return w > 0; });
  spdlog::info("KV cache: {} blocks of {} tokens in {} layer group(s), {} with a sliding window; longest sequence {} "
               "tokens", runner_->num_kv_blocks(), runner_->block_size(), windows.size(), windowed,
               engine_.max_model_len());
  engine_.start();
}

// The engine goes first: its last aborts still reach the streams through the output thread.
Serving::~Serving() {
  engine_.stop();
  outputs_.stop();
}

// The roles the API takes today (developer arrives here as system); a model's template may accept
// more, but tool messages belong to tool calling, which is not implemented yet.
std::vector<int32_t> Serving::chat_prompt(const std::vector<ChatMessage>& messages) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return chat_prompt(list, nullptr);
}

std::vector<int32_t> Serving::chat_prompt(const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& tools,
                                          const nlohmann::ordered_json& template_kwargs) const {
  if (!template_) throw UnsupportedTemplate(template_error_);
  for (const auto& m : messages) {
    const std::string role = m.value("role", "");
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      throw std::invalid_argument("unsupported message role '" + role + "' (system, developer, user, assistant, tool)");
    }
  }
  const std::string text = template_renders_tools_
                               ? template_->render(with_argument_objects(messages), /*add_generation_prompt=*/true, tools,
                                                   template_kwargs)
                               : template_->render(with_tools_as_text(messages, tools), /*add_generation_prompt=*/true,
                                                   nullptr, template_kwargs);
  return model_.encode_rendered_chat(text);
}

// The prompt's last few tokens hold the generation prompt's end, tag included if the template wrote one.
bool Serving::opens_reasoning(const std::vector<int32_t>& prompt) const {
  if (!reasoning_tags_) return false;
  const size_t tail = std::min<size_t>(prompt.size(), 16);
  std::string text = tokenizer().decode(std::vector<int32_t>(prompt.end() - tail, prompt.end()));
  text.erase(text.find_last_not_of(" \t\r\n") + 1);
  return text.ends_with(reasoning_tags_->open);
}

ReasoningBudget Serving::reasoning_budget(int32_t max_tokens, bool starts_inside) const {
  ReasoningBudget b;
  b.max_tokens = max_tokens;
  b.open_ids = tokenizer().encode(reasoning_tags_->open, /*add_special=*/false, /*parse_special=*/true);
  b.close_ids = tokenizer().encode(reasoning_tags_->close, /*add_special=*/false, /*parse_special=*/true);
  b.starts_inside = starts_inside;
  b.vocab_size = runner_->vocab_size();
  return b;
}

std::vector<int32_t> Serving::text_prompt(const std::string& text) const {
  return tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/true);
}

SubmitResult Serving::submit(std::vector<GenerateRequest> choices, std::function<void()> notify) {
  SubmitResult result;
  if (draining_) {
    result.error = RequestError{ErrorKind::Unavailable, "the server is shutting down"};
    return result;
  }
  std::vector<Submission> batch;
  for (GenerateRequest& g : choices) {
    auto stream = std::make_shared<RequestStream>("req-" + std::to_string(next_id_++), notify);
    g.req_id = stream->req_id();
    batch.push_back({std::move(g), [this, stream](const RequestOutput& o) { on_output(*stream, o); }});
    result.streams.push_back(std::move(stream));
  }
  const int32_t n = int32_t(batch.size());
  in_flight_ += n;
  if (auto error = outputs_.submit(std::move(batch))) {
    in_flight_ -= n;
    result.streams.clear();
    result.error = std::move(error);
  }
  return result;
}

// On the output thread.
void Serving::on_output(RequestStream& stream, const RequestOutput& o) {
  if (observer_) observer_->on_output(o);
  if (o.finish) log_finished(o);
  stream.push(o);
  if (o.finish && --in_flight_ == 0) {
    std::lock_guard lock(idle_mu_);
    idle_.notify_all();
  }
}

void Serving::cancel(const std::string& req_id) { outputs_.cancel(req_id); }

void Serving::count_rejected(std::string_view reason) const {
  if (observer_) observer_->on_rejected(reason);
}

bool Serving::wait_idle(Clock::time_point deadline) {
  std::unique_lock lock(idle_mu_);
  return idle_.wait_until(lock, deadline, [&] { return in_flight_ == 0; });
}

void Serving::abort_in_flight() { engine_.abort_all(RequestError{ErrorKind::Unavailable, "the server is shutting down"}); }

bool Serving::ready(Clock::duration max_silence) const {
  return !draining_ && Clock::now() - engine_.stats().heartbeat < max_silence;
}

}  // namespace flashserve
