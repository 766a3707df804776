#include "server/http_framing.h"

#include <algorithm>
#include <cctype>

namespace flashserve {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr size_t kMaxChunkLine = 1024;  // size, extensions and CRLF of one chunk

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// RFC 9110 token characters: what a method or a header name may be made of.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::isalnum(u) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// CR and LF may appear in a head only as CRLF line ends, and NUL not at all (RFC 9110 section 5.5).
// cpp-httplib, which parses the request after us, ends a line at a lone LF and reads the request
// line as a C string: a head with any of these would read as different lines to it than to us.
bool has_stray_control(std::string_view head) {
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\0') return true;
    if (head[i] == '\r' && (i + 1 == head.size() || head[i + 1] != '\n')) return true;
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) return true;
  }
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value (Connection's) lists `token`.
bool lists_token(std::string_view value, std::string_view token) {
  for (size_t start = 0; start <= value.size();) {
    const size_t end = std::min(value.find(',', start), value.size());
    if (iequals(trim(value.substr(start, end - start)), token)) return true;
    start = end + 1;
  }
  return false;
}

// Decimal digits only, no sign, no overflow past `cap` (anything larger reads as cap + 1).
bool parse_length(std::string_view s, size_t cap, size_t& out) {
  if (s.empty()) return false;
  size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = std::min(cap + 1, v * 10 + size_t(c - '0'));
  }
  out = v;
  return true;
}

// Hex digits, optionally followed by ";extensions"; anything larger than `cap` reads as cap + 1.
bool parse_chunk_size(std::string_view line, size_t cap, size_t& out) {
  line = trim(line.substr(0, line.find(';')));
  if (line.empty()) return false;
  size_t v = 0;
  for (char c : line) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                  : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                              : -1;
    if (d < 0) return false;
    v = std::min(cap + 1, v * 16 + size_t(d));
  }
  out = v;
  return true;
}

}  // namespace

RequestFramer::State RequestFramer::feed(std::string_view buffer) {
  if (error_status_) return State::Error;
  if (!head_end_) {
    const State s = parse_head(buffer);
    if (s != State::Complete) return s;
  }
  return chunked_ ? read_chunked_body(buffer) : read_fixed_body(buffer);
}

RequestFramer::State RequestFramer::fail(int status, std::string message) {
  error_status_ = status;
  error_ = std::move(message);
  return State::Error;
}

RequestFramer::State RequestFramer::complete(size_t consumed) {
  request_ = head_;
  request_ += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n";
  request_ += body_;
  body_.clear();
  consumed_ = consumed;
  return State::Complete;
}

// Returns Complete once the head is parsed (the body may still be missing), so feed() moves on.
RequestFramer::State RequestFramer::parse_head(std::string_view buffer) {
  // Resume where the last search stopped: a head trickled in byte by byte costs linear time.
  const size_t end = buffer.find("\r\n\r\n", head_scan_);
  if (end == std::string_view::npos) {
    head_scan_ = buffer.size() < 3 ? 0 : buffer.size() - 3;
    if (buffer.size() > limits_.max_head_bytes) {
      return fail(431, "the request head exceeds " + std::to_string(limits_.max_head_bytes) + " bytes");
    }
    return State::NeedMore;
  }
  if (end + 4 > limits_.max_head_bytes) {
    return fail(431, "the request head exceeds " + std::to_string(limits_.max_head_bytes) + " bytes");
  }
  std::string_view head = buffer.substr(0, end);
  if (has_stray_control(head)) return fail(400, "a lone CR or LF, or a NUL, in the request head");
  const size_t line_end = std::min(head.find(kCrlf), head.size());
  const std::string_view request_line = head.substr(0, line_end);
  const size_t sp1 = request_line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "malformed request line");
  }
  method_ = std::string(request_line.substr(0, sp1));
  target_ = std::string(request_line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!is_token(method_) || target_.empty()) return fail(400, "malformed request line");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
  head_.assign(request_line);
  head_ += kCrlf;

  bool has_length = false, keep_alive = false;
  for (size_t pos = line_end; pos < head.size();) {
    pos += kCrlf.size();
    const size_t next = std::min(head.find(kCrlf, pos), head.size());
    const std::string_view line = head.substr(pos, next - pos);
    const size_t next_pos = next;
    const size_t colon = line.find(':');
    // No space before the colon and no folded lines: both are ways to smuggle a second meaning
    // past one parser and not another.
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
      return fail(400, "malformed header line");
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      size_t n = 0;
      if (!parse_length(value, limits_.max_body_bytes, n) || (has_length && n != content_length_)) {
        return fail(400, "invalid Content-Length");
      }
      has_length = true;
      content_length_ = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      if (!iequals(value, "chunked")) return fail(501, "Transfer-Encoding '" + std::string(value) + "' is not supported");
      chunked_ = true;
    } else if (iequals(name, "Expect")) {
      if (!iequals(value, "100-continue")) return fail(417, "Expect '" + std::string(value) + "' is not supported");
      expect_continue_ = true;
    } else {
      if (iequals(name, "Connection")) {
        wants_close_ = wants_close_ || lists_token(value, "close");
        keep_alive = keep_alive || lists_token(value, "keep-alive");
      }
      head_.append(line);
      head_ += kCrlf;
    }
    pos = next_pos;
  }
  if (version == "HTTP/1.0" && !keep_alive) wants_close_ = true;
  if (has_length && chunked_) return fail(400, "both Content-Length and Transfer-Encoding are set");
  if (content_length_ > limits_.max_body_bytes) {
    return fail(413, "the request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
  }
  head_end_ = end + 4;
  chunk_pos_ = head_end_;
  return State::Complete;
}

RequestFramer::State RequestFramer::read_fixed_body(std::string_view buffer) {
  if (buffer.size() < head_end_ + content_length_) return State::NeedMore;
  body_.assign(buffer.substr(head_end_, content_length_));
  return complete(head_end_ + content_length_);
}

RequestFramer::State RequestFramer::read_chunked_body(std::string_view buffer) {
  for (;;) {
    const size_t line_end = buffer.find(kCrlf, chunk_pos_);
    if (line_end == std::string_view::npos) {
      // The last byte may be the CR of the line's CRLF, so it is not counted yet: otherwise a line
      // of exactly kMaxChunkLine would be refused when its CR and LF arrive apart and accepted when
      // they arrive together.
      return buffer.size() - chunk_pos_ > kMaxChunkLine + 1 ? fail(400, "malformed chunk size line") : State::NeedMore;
    }
    if (line_end - chunk_pos_ > kMaxChunkLine) return fail(400, "malformed chunk size line");
    const size_t room = limits_.max_body_bytes - body_.size();
    size_t size = 0;
    if (!parse_chunk_size(buffer.substr(chunk_pos_, line_end - chunk_pos_), room, size)) {
      return fail(400, "malformed chunk size line");
    }
    if (size > room) return fail(413, "the request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
    const size_t data = line_end + kCrlf.size();
    if (size == 0) {
      // Trailer fields end with an empty line; they are read past and dropped. They are held to the
      // head limit whether they arrive whole or in pieces, so the answer does not depend on which.
      size_t pos = data;
      for (;;) {
        const size_t end = buffer.find(kCrlf, pos);
        const size_t trailer_bytes = (end == std::string_view::npos ? buffer.size() : end + kCrlf.size()) - data;
        if (trailer_bytes > limits_.max_head_bytes) return fail(431, "chunked trailers are too large");
        if (end == std::string_view::npos) return State::NeedMore;
        if (end == pos) return complete(end + kCrlf.size());
        pos = end + kCrlf.size();
      }
    }
    if (buffer.size() < data + size + kCrlf.size()) return State::NeedMore;
    if (buffer.substr(data + size, kCrlf.size()) != kCrlf) return fail(400, "chunk data is not followed by CRLF");
    body_.append(buffer.substr(data, size));
    chunk_pos_ = data + size + kCrlf.size();
  }
}

}  // namespace flashserve
