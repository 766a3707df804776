// libFuzzer target: RequestFramer on arbitrary bytes, framed the way a connection frames them:
// whatever has arrived is fed, each complete request is cut off the front and a fresh framer takes
// the rest (a pipelining client). The input is framed once all at once and again arriving in pieces
// (cut where a hash of the input says and, for short inputs, one byte at a time); both must come to
// exactly the same requests and the same end. A framer whose answer depends on how TCP happened to
// split the stream is one a client can steer. Every complete request must read only one way to the
// HTTP library behind the framer, and every refusal must carry one of the framer's statuses.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_framing.h"
#include "tests/fuzz/finding.h"

namespace {

using namespace flashserve;
using State = RequestFramer::State;

// Small limits, so that inputs of a few KiB cross both of them.
constexpr FramingLimits kLimits{1024, 4096};
// One feed per byte: past this size the hashed cuts alone stand in for a trickling client.
constexpr size_t kMaxTrickleBytes = 2048;
constexpr uint64_t kMaxPieces = 16;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_http_framing", what, detail);
}

void expect(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) finding(what, detail);
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// cpp-httplib ends a line at any LF, so a lone CR or LF in the head passed on could start a header
// the framer never saw (a Transfer-Encoding, say), and it reads the request line as a C string, so
// a NUL would cut it short. No NUL, and every line break a CRLF.
bool only_crlf_breaks(std::string_view head) {
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\0') return false;
    if (head[i] == '\r' && (i + 1 == head.size() || head[i + 1] != '\n')) return false;
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) return false;
  }
  return true;
}

// A complete request, checked against `buffer`, the bytes it was framed from.
void check_complete(const RequestFramer& f, std::string_view buffer) {
  expect(f.consumed() > 0 && f.consumed() <= buffer.size(), "consumed() is outside the bytes fed");
  const size_t input_head_end = buffer.find("\r\n\r\n");
  expect(input_head_end != std::string_view::npos && input_head_end + 4 <= kLimits.max_head_bytes,
         "a request was completed from a head over the head limit", buffer);

  const std::string& request = f.request();
  const size_t head_end = request.find("\r\n\r\n");
  expect(head_end != std::string::npos, "request() has no end of head", request);
  const std::string_view head(request.data(), head_end + 2);  // every line with its CRLF
  const std::string_view body = std::string_view(request).substr(head_end + 4);
  expect(body.size() <= kLimits.max_body_bytes, "the body passed on exceeds the body limit", request);
  expect(only_crlf_breaks(request.substr(0, head_end + 4)), "request()'s head has a lone CR or LF, or a NUL", request);

  const size_t line_end = head.find("\r\n");
  expect(head.substr(0, line_end) == buffer.substr(0, buffer.find("\r\n")), "the request line changed", request);
  expect(head.substr(0, line_end).starts_with(f.method() + " " + f.target() + " "),
         "method() and target() do not match the request line", request);

  size_t num_lengths = 0;
  bool length_is_last = false;
  for (size_t pos = line_end + 2; pos < head.size();) {
    const size_t next = head.find("\r\n", pos);
    const std::string_view line = head.substr(pos, next - pos);
    const std::string_view name = line.substr(0, line.find(':'));
    length_is_last = iequals(name, "Content-Length");
    if (length_is_last) {
      ++num_lengths;
      expect(line == "Content-Length: " + std::to_string(body.size()), "Content-Length does not match the body", request);
    }
    expect(!iequals(name, "Transfer-Encoding"), "request() has a Transfer-Encoding header", request);
    expect(!iequals(name, "Expect"), "request() has an Expect header", request);
    pos = next + 2;
  }
  expect(num_lengths == 1 && length_is_last, "request() must end its head with one Content-Length", request);
}

void check_error(RequestFramer& f, std::string_view buffer) {
  const int s = f.error_status();
  expect(s == 400 || s == 413 || s == 417 || s == 431 || s == 501 || s == 505, "undocumented error status",
         std::to_string(s));
  expect(!f.error_message().empty(), "an error without a message");
  expect(f.feed(buffer) == State::Error, "a framer in error accepted more bytes");
}

// Where framing a byte stream came to: every request completed, then how it stopped.
struct Outcome {
  std::vector<std::string> requests;
  std::vector<size_t> consumed;
  State last = State::NeedMore;
  int error_status = 0;
  std::string error_message;
  // What the event loop reads from a framer still waiting for bytes.
  bool head_complete = false;
  std::string method, target;
  bool expects_continue = false;
  size_t announced_body_bytes = 0;

  bool operator==(const Outcome&) const = default;
};

// Frames `input` arriving in pieces that end at `cuts` (increasing, the last one input.size()).
// The bytes fed are always a slice of the input itself, so ASan sees a read past its end.
Outcome frame(std::string_view input, const std::vector<size_t>& cuts) {
  Outcome out;
  RequestFramer f(kLimits);
  size_t start = 0;  // the first byte of the request being framed
  for (size_t arrived : cuts) {
    while (start < arrived) {
      const std::string_view buffer = input.substr(start, arrived - start);
      const State s = f.feed(buffer);
      if (s == State::NeedMore) break;
      if (s == State::Error) {
        check_error(f, buffer);
        out.last = State::Error;
        out.error_status = f.error_status();
        out.error_message = f.error_message();
        return out;
      }
      check_complete(f, buffer);
      out.requests.push_back(f.request());
      out.consumed.push_back(f.consumed());
      start += f.consumed();
      f = RequestFramer(kLimits);
    }
  }
  out.head_complete = f.head_complete();
  out.method = f.method();
  out.target = f.target();
  out.expects_continue = f.expects_continue();
  out.announced_body_bytes = f.announced_body_bytes();
  return out;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Up to kMaxPieces cut points chosen by a hash of the input: every mutation cuts it anew.
std::vector<size_t> hashed_cuts(std::string_view input) {
  uint64_t state = fnv1a(input);
  const uint64_t num_cuts = splitmix(state) % kMaxPieces;
  std::vector<size_t> cuts;
  for (uint64_t i = 0; i < num_cuts; ++i) cuts.push_back(1 + splitmix(state) % input.size());
  cuts.push_back(input.size());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

void expect_same(const Outcome& whole, const Outcome& pieces, const char* how, std::string_view input) {
  if (whole == pieces) return;
  std::fprintf(stderr, "fuzz_http_framing: %s: %zu vs %zu requests, state %d vs %d, status %d vs %d ('%s' vs '%s')\n",
               how, whole.requests.size(), pieces.requests.size(), int(whole.last), int(pieces.last),
               whole.error_status, pieces.error_status, whole.error_message.c_str(), pieces.error_message.c_str());
  finding("framing depends on how the bytes were split", input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const Outcome whole = frame(input, {size});
  expect_same(whole, frame(input, hashed_cuts(input)), "cut where the hash says", input);
  if (size <= kMaxTrickleBytes) {
    std::vector<size_t> every_byte(size);
    for (size_t i = 0; i < size; ++i) every_byte[i] = i + 1;
    expect_same(whole, frame(input, every_byte), "one byte at a time", input);
  }
  return 0;
}
