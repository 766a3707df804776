// Finds where one HTTP/1.1 request ends in the bytes read so far, before any of it is parsed for
// real: the head within a size limit, then a Content-Length or chunked body within the body limit
// (chunked bodies are counted as they arrive, so no encoding gets past --max-body-bytes). A
// complete request is handed on rewritten with a Content-Length body, so the HTTP library never
// runs its own chunked reader. Pure and incremental, so it is unit-tested and fuzzed alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashserve {

struct FramingLimits {
  size_t max_head_bytes = 32 << 10;
  size_t max_body_bytes = 16 << 20;
};

class RequestFramer {
 public:
  enum class State {
    NeedMore,  // feed more bytes
    Complete,  // request() holds the whole request; consumed() bytes of the input were used
    Error,     // error_status() / error_message() say why; the connection must be closed after
  };

  explicit RequestFramer(FramingLimits limits) : limits_(limits) {}

  // `buffer` is everything received since the request began (it only grows between calls).
  State feed(std::string_view buffer);
  // Once the head is complete: the request line's method and path, and whether the client waits
  // for "100 Continue" before sending its body.
  bool head_complete() const { return head_end_ != 0; }
  const std::string& method() const { return method_; }
  const std::string& target() const { return target_; }
  bool expects_continue() const { return expect_continue_; }
  // The client asked for the connection to end after this answer ("Connection: close", or
  // HTTP/1.0 without keep-alive): so it does, even when the answer is an error the request's
  // parser gives before it reads the headers.
  bool wants_close() const { return wants_close_; }
  // The body size announced by Content-Length (0 for chunked or none); lets a caller refuse
  // before reading it.
  size_t announced_body_bytes() const { return content_length_; }

  // Complete: the request with a Content-Length body and no Transfer-Encoding or Expect header.
  const std::string& request() const { return request_; }
  size_t consumed() const { return consumed_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_; }

 private:
  State parse_head(std::string_view buffer);
  State read_fixed_body(std::string_view buffer);
  State read_chunked_body(std::string_view buffer);
  State fail(int status, std::string message);
  State complete(size_t consumed);

  FramingLimits limits_;
  size_t head_scan_ = 0;      // where to resume looking for the blank line
  size_t head_end_ = 0;       // bytes of head, including the blank line; 0 until it is complete
  std::string head_;          // the head to pass on (lines kept, framing headers dropped)
  std::string method_, target_;
  bool chunked_ = false;
  bool expect_continue_ = false;
  bool wants_close_ = false;
  size_t content_length_ = 0;
  // Chunked decoding state: where parsing resumes, and the body decoded so far.
  size_t chunk_pos_ = 0;
  std::string body_;
  std::string request_;
  size_t consumed_ = 0;
  int error_status_ = 0;
  std::string error_;
};

}  // namespace flashserve
