// Streaming OpenAI completions over HTTP (POST /v1/completions, stream true), timed per chunk.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "client/backend.h"

namespace flashserve::bench {

// Splits a text/event-stream body, fed in arbitrary pieces, into the data of each event.
class SseParser {
 public:
  explicit SseParser(std::function<void(std::string_view data)> on_data) : on_data_(std::move(on_data)) {}
  void feed(std::string_view bytes);

 private:
  void dispatch_line(std::string_view line);
  std::function<void(std::string_view)> on_data_;
  std::string pending_;  // bytes after the last complete line
  std::string data_;     // data lines of the event being read, joined with '\n'
  bool has_data_ = false;
};

// Turns the events of one streamed completion, with the time each arrived (seconds after the
// request was sent), into a result. Content chunks are those with non-empty text.
class CompletionStreamRecorder {
 public:
  void on_event(std::string_view data, double t_s);
  // Stream over at `t_s`; a stream that never said [DONE] is an error.
  RequestResult finish(double t_s);

 private:
  RequestResult result_;
  ContentTimer content_;
  int32_t usage_tokens_ = -1;
  bool done_ = false;
};

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model;         // sent as "model" when set
  double timeout_s = 300.0;  // whole request, send to last byte
  std::string json_schema;   // when set (JSON text): every request constrained to it, strict
};

class HttpBackend final : public Backend {
 public:
  explicit HttpBackend(HttpOptions options) : options_(std::move(options)) {}
  RequestResult send(const BenchRequest& request) override;

 private:
  std::string body(const BenchRequest& request) const;
  HttpOptions options_;
};

}  // namespace flashserve::bench
