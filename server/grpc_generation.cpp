#include "server/grpc_generation.h"

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "model/bounded_json.h"
#include "server/grpc_convert.h"

namespace flashserve::grpc_api {
namespace {

using grpc::Status;
using grpc::StatusCode;

// A client that stops reading gets this many messages queued before its call is ended.
constexpr size_t kMaxPendingWrites = 4096;

Status invalid(const std::string& message) { return {StatusCode::INVALID_ARGUMENT, message}; }

Status too_long(const Serving& serving) {
  return {StatusCode::OUT_OF_RANGE, "the prompt is longer than the context window of " +
                                        std::to_string(serving.max_model_len()) + " tokens can hold"};
}

// The request's constraint compiled into params.grammar (shared with the HTTP API's cache). The
// compile stops early once `cancelled` says so.
Status constrain(const Serving& serving, const pb::Constraint& c, SamplingParams& params,
                 const std::function<bool()>& cancelled) {
  std::string gbnf;
  try {
    switch (c.kind_case()) {
      case pb::Constraint::KIND_NOT_SET: return Status::OK;
      case pb::Constraint::kJsonSchema: {
        // Ordered, so properties are generated in the order the schema lists them.
        const auto schema = parse_bounded_json<nlohmann::ordered_json>(c.json_schema());
        if (schema.is_discarded()) return invalid("constraint.json_schema is not valid JSON");
        grammar::JsonSchemaOptions options;
        options.strict = c.strict();
        gbnf = grammar::json_schema_to_gbnf(schema, options);
        break;
      }
      case pb::Constraint::kJsonObject:
        if (!c.json_object()) return Status::OK;
        gbnf = grammar::any_json_object_gbnf();
        break;
      case pb::Constraint::kRegex: gbnf = grammar::regex_to_gbnf(c.regex()); break;
      case pb::Constraint::kGrammar: gbnf = c.grammar(); break;
    }
    params.grammar = serving.compile_grammar(gbnf, cancelled);
  } catch (const grammar::CompileCancelled& e) {
    return {StatusCode::UNAVAILABLE, std::string(e.what()) + ": the call was cancelled or the server is stopping"};
  } catch (const grammar::GrammarError& e) {
    return invalid(std::string("constraint: ") + e.what());
  } catch (const JsonOverLimit& e) {
    return invalid(std::string("constraint.json_schema: ") + e.what());
  }
  return Status::OK;
}

Status chat_prompt_ids(const Serving& serving, const pb::ChatMessages& messages, std::vector<int32_t>& ids) {
  if (messages.messages().empty()) return invalid("messages must hold at least one message");
  if (messages.messages_size() > serving.max_model_len()) return too_long(serving);
  std::vector<ChatMessage> chat;
  size_t total_bytes = 0;
  for (const pb::ChatMessage& m : messages.messages()) {
    chat.push_back({m.role() == "developer" ? "system" : m.role(), m.content()});
    total_bytes += m.content().size();
  }
  if (total_bytes > serving.max_prompt_bytes()) return too_long(serving);
  try {
    ids = serving.chat_prompt(chat);
  } catch (const UnsupportedTemplate& e) {
    return invalid(e.what());
  } catch (const std::invalid_argument& e) {
    return invalid(e.what());
  }
  return Status::OK;
}

// The prompt as token ids, its size checked before any tokenizing. An empty token id list is left
// to the engine, which refuses it.
Status prompt_ids(const Serving& serving, const pb::GenerateRequest& req, std::vector<int32_t>& ids) {
  switch (req.prompt_case()) {
    case pb::GenerateRequest::kText:
      // Checked here: with a BOS-adding vocabulary the empty text would still make one token.
      if (req.text().empty()) return invalid("the prompt is empty");
      if (req.text().size() > serving.max_prompt_bytes()) return too_long(serving);
      ids = serving.text_prompt(req.text());
      return Status::OK;
    case pb::GenerateRequest::kTokenIds:
      if (req.token_ids().ids_size() > serving.max_model_len()) return too_long(serving);
      ids.assign(req.token_ids().ids().begin(), req.token_ids().ids().end());
      return Status::OK;
    case pb::GenerateRequest::kMessages:
      return chat_prompt_ids(serving, req.messages(), ids);
    case pb::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return invalid("the prompt is empty: set text, token_ids or messages");
}

// The call's deadline on the engine's clock (the engine drops requests whose client gave up).
Clock::time_point engine_deadline(const grpc::CallbackServerContext& ctx) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(deadline - std::chrono::system_clock::now());
}

Status cancelled_status(const grpc::CallbackServerContext& ctx) {
  if (std::chrono::system_clock::now() >= ctx.deadline()) return {StatusCode::DEADLINE_EXCEEDED, "deadline exceeded"};
  return {StatusCode::CANCELLED, "cancelled by the client"};
}

}  // namespace

Status engine_request(const Serving& serving, const pb::GenerateRequest& req, const std::function<bool()>& cancelled,
                      GenerateRequest& out) {
  if (Status s = prompt_ids(serving, req, out.prompt_ids); !s.ok()) return s;
  out.params = to_sampling_params(req);
  out.priority = req.priority();
  if (req.has_speculative()) {
    const pb::Speculative& sp = req.speculative();
    if (sp.has_method()) {
      out.speculative.method = parse_speculative_method(sp.method());
      if (!out.speculative.method) return invalid("speculative.method must be \"off\", \"ngram\" or \"suffix\"");
    }
    if (sp.has_num_tokens()) out.speculative.num_speculative_tokens = sp.num_tokens();
  }
  return constrain(serving, req.constraint(), out.params, cancelled);
}

namespace {

bool wants_logprobs(const pb::GenerateRequest& req) {
  return req.sampling().has_logprobs() && req.sampling().logprobs() >= 0;
}

// What both calls share: the request and its one engine request. `self_` keeps the reactor alive
// until gRPC's OnDone; notify hooks hold it weakly, so events after that are dropped.
template <typename Derived>
class GenerationCall : public std::enable_shared_from_this<Derived> {
 protected:
  GenerationCall(grpc::CallbackServerContext* ctx, Serving& serving) : ctx_(ctx), serving_(serving) {}

  // Parses, checks and submits; returns the status to finish with when that fails.
  Status begin(const grpc::ByteBuffer& request, const ApiKey& key) {
    if (Status s = check_auth(*ctx_, key); !s.ok()) return s;
    if (Status s = parse(request, req_, "GenerateRequest"); !s.ok()) return s;
    const Clock::time_point arrival = Clock::now();
    GenerateRequest r;
    // A compile takes this gRPC thread; it ends early if the client leaves or the server stops.
    const auto cancelled = [ctx = ctx_, &serving = serving_] { return ctx->IsCancelled() || serving.draining(); };
    if (Status s = engine_request(serving_, req_, cancelled, r); !s.ok()) return s;
    r.arrival = arrival;
    r.deadline = engine_deadline(*ctx_);
    std::weak_ptr<Derived> weak = this->weak_from_this();
    std::vector<GenerateRequest> one;
    one.push_back(std::move(r));
    SubmitResult submitted = serving_.submit(std::move(one), [weak] {
      if (auto call = weak.lock()) call->on_events();
    });
    if (submitted.error) return to_status(*submitted.error);
    std::lock_guard lock(mu_);
    stream_ = std::move(submitted.streams.front());
    return Status::OK;
  }

  // gRPC reports the call cancelled (client gone, deadline): the engine request goes too.
  void cancel_request() {
    std::lock_guard lock(mu_);
    if (stream_ && !engine_done_) serving_.cancel(stream_->req_id());
  }

  grpc::CallbackServerContext* ctx_;
  Serving& serving_;
  pb::GenerateRequest req_;
  std::mutex mu_;  // orders engine events (output thread) against gRPC's reactions
  std::shared_ptr<RequestStream> stream_;
  bool engine_done_ = false;  // the final event arrived
  bool finished_ = false;     // Finish has been called (exactly once)
  std::shared_ptr<Derived> self_;
};

class GenerateCall final : public grpc::ServerUnaryReactor, public GenerationCall<GenerateCall> {
 public:
  GenerateCall(grpc::CallbackServerContext* ctx, grpc::ByteBuffer* response, Serving& serving)
      : GenerationCall(ctx, serving), response_(response) {}

  void start(const grpc::ByteBuffer& request, const ApiKey& key) {
    self_ = shared_from_this();
    Status s = begin(request, key);
    if (!s.ok()) {
      serving_.count_rejected(rejection_reason(s));
      finish_once(std::move(s));
      return;
    }
    on_events();  // events that came before the stream was stored
  }

  void on_events() {
    std::optional<Status> finish;
    {
      std::lock_guard lock(mu_);
      if (!stream_ || finished_) return;
      while (std::optional<RequestOutput> o = stream_->try_next()) {
        text_ += o->text;
        add_tokens(o->tokens, wants_logprobs(req_), serving_.tokenizer(), resp_.mutable_tokens());
        if (!o->finish) continue;
        engine_done_ = true;
        if (o->error) {
          finish = to_status(*o->error);
        } else {
          resp_.set_id(stream_->req_id());
          resp_.set_text(valid_utf8(std::move(text_)));
          resp_.set_finish_reason(to_proto(*o->finish));
          fill_usage(*o, resp_.mutable_usage());
          *response_ = serialize(resp_);
          finish = Status::OK;
        }
        finished_ = true;
        break;
      }
    }
    if (finish) Finish(*finish);
  }

  void OnCancel() override {
    cancel_request();
    finish_once(cancelled_status(*ctx_));
  }
  void OnDone() override { auto last = std::move(self_); }

 private:
  void finish_once(Status s) {
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(std::move(s));
  }

  grpc::ByteBuffer* response_;
  pb::GenerateResponse resp_;
  std::string text_;
};

class GenerateStreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                 public GenerationCall<GenerateStreamCall> {
 public:
  GenerateStreamCall(grpc::CallbackServerContext* ctx, Serving& serving) : GenerationCall(ctx, serving) {}

  void start(const grpc::ByteBuffer& request, const ApiKey& key) {
    self_ = shared_from_this();
    Status s = begin(request, key);
    if (s.ok()) {
      on_events();  // events that came before the stream was stored
      return;
    }
    serving_.count_rejected(rejection_reason(s));
    Step step;
    {
      std::lock_guard lock(mu_);
      final_ = std::move(s);
      step = next_step();
    }
    take(step);
  }

  void on_events() {
    Step step;
    {
      std::lock_guard lock(mu_);
      if (!stream_ || final_) return;
      while (std::optional<RequestOutput> o = stream_->try_next()) {
        if (o->finish && o->error) {
          engine_done_ = true;
          final_ = to_status(*o->error);
          break;
        }
        pb::GenerateStreamResponse msg;
        msg.set_id(stream_->req_id());
        msg.set_text(o->text);
        add_tokens(o->tokens, wants_logprobs(req_), serving_.tokenizer(), msg.mutable_tokens());
        if (o->finish) {
          msg.set_finish_reason(to_proto(*o->finish));
          fill_usage(*o, msg.mutable_usage());
          engine_done_ = true;
          final_ = Status::OK;
        }
        pending_.push_back(serialize(msg));
        if (final_) break;
      }
      if (pending_.size() > kMaxPendingWrites && !final_) {
        serving_.cancel(stream_->req_id());
        final_ = Status(StatusCode::RESOURCE_EXHAUSTED, "the client is not reading the stream");
      }
      step = next_step();
    }
    take(step);
  }

  void OnWriteDone(bool ok) override {
    Step step;
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      pending_.pop_front();
      if (!ok && !final_) final_ = cancelled_status(*ctx_);
      step = next_step();
    }
    take(step);
  }

  void OnCancel() override {
    cancel_request();
    Step step;
    {
      std::lock_guard lock(mu_);
      if (!final_ || final_->ok()) final_ = cancelled_status(*ctx_);
      pending_.erase(pending_.begin() + (writing_ ? 1 : 0), pending_.end());  // nobody will read them
      step = next_step();
    }
    take(step);
  }

  void OnDone() override { auto last = std::move(self_); }

 private:
  struct Step {
    const grpc::ByteBuffer* write = nullptr;
    std::optional<Status> finish;
  };

  // Under mu_: one write at a time, Finish once nothing is left to write. The step is taken after
  // mu_ is released, because gRPC may run a reaction (OnWriteDone) on the calling thread. That is
  // safe: no Finish can happen while a write is marked in flight, and OnDone (which ends this
  // object) only comes after Finish.
  Step next_step() {
    Step step;
    if (finished_ || writing_) return step;
    if (!pending_.empty()) {
      writing_ = true;
      step.write = &pending_.front();  // deque elements stay put while others are pushed
    } else if (final_) {
      finished_ = true;
      step.finish = *final_;
    }
    return step;
  }

  void take(const Step& step) {
    if (step.write) StartWrite(step.write);
    if (step.finish) Finish(*step.finish);
  }

  std::deque<grpc::ByteBuffer> pending_;  // front is being written while writing_
  bool writing_ = false;
  std::optional<Status> final_;
};

}  // namespace

Status parse(const grpc::ByteBuffer& buffer, google::protobuf::Message& msg, const char* what) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return invalid(std::string("cannot read the ") + what);
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (!msg.ParseFromString(bytes)) return invalid(std::string("the request is not a valid ") + what + " message");
  const google::protobuf::UnknownFieldSet& unknown = msg.GetReflection()->GetUnknownFields(msg);
  if (!unknown.empty()) {
    return invalid(std::string(what) + " has a field this server does not know (number " +
                   std::to_string(unknown.field(0).number()) + "); refused rather than ignored");
  }
  return Status::OK;
}

grpc::ByteBuffer serialize(const google::protobuf::Message& msg) {
  const std::string bytes = msg.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

Status check_auth(const grpc::CallbackServerContext& ctx, const ApiKey& key) {
  if (!key.required()) return Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  const std::string_view given = it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
  if (key.accepts(given)) return Status::OK;
  return {StatusCode::UNAUTHENTICATED, "missing or wrong API key: send metadata 'authorization: Bearer <key>'"};
}

Status to_status(const RequestError& e) {
  switch (e.kind) {
    case ErrorKind::Invalid: return invalid(e.message);
    case ErrorKind::TooLong: return {StatusCode::OUT_OF_RANGE, e.message};
    case ErrorKind::Overloaded: return {StatusCode::RESOURCE_EXHAUSTED, e.message};
    case ErrorKind::Deadline: return {StatusCode::DEADLINE_EXCEEDED, e.message};
    case ErrorKind::Unavailable: return {StatusCode::UNAVAILABLE, e.message};
    case ErrorKind::Internal: break;
  }
  return {StatusCode::INTERNAL, e.message};
}

std::string_view rejection_reason(const Status& s) {
  switch (s.error_code()) {
    case StatusCode::UNAUTHENTICATED: return "unauthenticated";
    case StatusCode::INVALID_ARGUMENT: return to_string(ErrorKind::Invalid);
    case StatusCode::OUT_OF_RANGE: return to_string(ErrorKind::TooLong);
    case StatusCode::RESOURCE_EXHAUSTED: return to_string(ErrorKind::Overloaded);
    case StatusCode::UNAVAILABLE: return to_string(ErrorKind::Unavailable);
    case StatusCode::DEADLINE_EXCEEDED: return to_string(ErrorKind::Deadline);
    default: return to_string(ErrorKind::Internal);
  }
}

grpc::ServerUnaryReactor* start_generate(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response, Serving& serving, const ApiKey& key) {
  auto call = std::make_shared<GenerateCall>(ctx, response, serving);
  call->start(*request, key);
  return call.get();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* start_generate_stream(grpc::CallbackServerContext* ctx,
                                                                  const grpc::ByteBuffer* request, Serving& serving,
                                                                  const ApiKey& key) {
  auto call = std::make_shared<GenerateStreamCall>(ctx, serving);
  call->start(*request, key);
  return call.get();
}

}  // namespace flashserve::grpc_api
