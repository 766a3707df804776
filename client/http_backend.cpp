#include "client/http_backend.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace flashserve::bench {

using json = nlohmann::json;

void SseParser::feed(std::string_view bytes) {
  pending_.append(bytes);
  size_t start = 0;
  for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(pending_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    dispatch_line(line);
  }
  pending_.erase(0, start);
}

// An empty line ends an event; only "data" fields matter here (comments and other fields skipped).
void SseParser::dispatch_line(std::string_view line) {
  if (line.empty()) {
    if (has_data_) on_data_(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (!line.starts_with("data:")) return;
  line.remove_prefix(5);
  if (line.starts_with(' ')) line.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(line);
  has_data_ = true;
}

void CompletionStreamRecorder::on_event(std::string_view data, double t_s) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return;
  if (j.contains("error")) {
    result_.error = ErrorKind::Stream;
    result_.error_detail = j["error"].dump();
    return;
  }
  if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
    usage_tokens_ = u->value("completion_tokens", -1);
  }
  const auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty()) return;
  const json& text = (*choices)[0]["text"];
  if (!text.is_string() || text.get_ref<const std::string&>().empty()) return;
  content_.on_content(t_s, result_);
}

RequestResult CompletionStreamRecorder::finish(double t_s) {
  result_.e2e_s = t_s;
  result_.output_tokens = usage_tokens_ >= 0 ? usage_tokens_ : content_.count();
  if (result_.ok() && (!done_ || content_.count() == 0)) {
    result_.error = ErrorKind::Stream;
    result_.error_detail = done_ ? "no content in the stream" : "stream ended without [DONE]";
  }
  return result_;
}

std::string HttpBackend::body(const BenchRequest& request) const {
  json j = {{"prompt", request.prompt},
            {"max_tokens", request.output_len},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}}};
  if (!options_.model.empty()) j["model"] = options_.model;
  // A grammar decides where the text may end, so end-of-sequence is honoured with one (the
  // schema should be one no output finishes within output_len, for equal lengths).
  if (options_.json_schema.empty()) {
    j["ignore_eos"] = true;
  } else {
    j["response_format"] = {{"type", "json_schema"},
                            {"json_schema", {{"name", "bench"}, {"strict", true}, {"schema", json::parse(options_.json_schema)}}}};
  }
  return j.dump();
}

namespace {

ErrorKind error_kind(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout: return ErrorKind::Connect;
    case httplib::Error::Read:
    case httplib::Error::Canceled: return ErrorKind::Timeout;  // we cancel only past the deadline
    default: return ErrorKind::Other;
  }
}

}  // namespace

RequestResult HttpBackend::send(const BenchRequest& request) {
  using clock = std::chrono::steady_clock;
  httplib::Client client(options_.host, options_.port);
  const auto timeout = std::chrono::duration<double>(options_.timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));

  const auto start = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  CompletionStreamRecorder recorder;
  std::string error_body;
  int status = 0;
  SseParser parser([&](std::string_view data) { recorder.on_event(data, elapsed()); });

  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body(request);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status == 200) {
      parser.feed({data, n});
    } else {
      error_body.append(data, n);
    }
    return elapsed() < options_.timeout_s;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = client.send(req, res, err);
  const double end_s = elapsed();

  RequestResult result;
  if (!sent) {
    result.error = error_kind(err);
    result.error_detail = httplib::to_string(err);
  } else if (status != 200) {
    result.error = ErrorKind::HttpStatus;
    result.error_detail = std::to_string(status) + " " + error_body;
  } else {
    result = recorder.finish(end_s);
  }
  result.e2e_s = end_s;
  result.input_len = request.input_len;
  return result;
}

}  // namespace flashserve::bench
