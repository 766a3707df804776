// RequestFramer alone: where a request ends, what it is rewritten to, and what is refused before
// the body is read (sizes, smuggling shapes, unsupported encodings).
#include <gtest/gtest.h>

#include <string>

#include "server/http_framing.h"

namespace flashserve {
namespace {

using State = RequestFramer::State;

FramingLimits small_limits() { return {1024, 100}; }

// Feeds `bytes` one at a time, as a trickling client would, and returns the final state.
State trickle(RequestFramer& f, const std::string& bytes) {
  State s = State::NeedMore;
  for (size_t i = 1; i <= bytes.size() && s == State::NeedMore; ++i) s = f.feed(std::string_view(bytes).substr(0, i));
  return s;
}

TEST(RequestFramer, ContentLengthBodyIsRewrittenUnchanged) {
  RequestFramer f(small_limits());
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n";
  ASSERT_EQ(f.feed(req), State::Complete);
  EXPECT_EQ(f.method(), "POST");
  EXPECT_EQ(f.target(), "/v1/completions");
  EXPECT_EQ(f.request(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(f.consumed(), req.find("GET"));  // the pipelined request stays for the next framer
}

TEST(RequestFramer, ChunkedBodyIsDecodedWithExtensionsAndTrailers) {
  RequestFramer f(small_limits());
  const std::string req =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n";
  ASSERT_EQ(trickle(f, req), State::Complete);
  EXPECT_EQ(f.request(), "POST /x HTTP/1.1\r\nContent-Length: 13\r\n\r\nabc0123456789");
  EXPECT_EQ(f.consumed(), req.size());
}

// The defect this front door fixes: a chunked body used to skip --max-body-bytes.
TEST(RequestFramer, ChunkedBodyCountsAgainstTheBodyLimit) {
  RequestFramer f(small_limits());
  std::string req = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 30; ++i) req += "5\r\naaaaa\r\n";  // 150 bytes > 100
  EXPECT_EQ(f.feed(req), State::Error);
  EXPECT_EQ(f.error_status(), 413);
  RequestFramer one_big(small_limits());
  EXPECT_EQ(one_big.feed("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n"), State::Error);
  EXPECT_EQ(one_big.error_status(), 413);  // refused from the size line, before any data
}

TEST(RequestFramer, OversizedContentLengthIsRefusedBeforeTheBody) {
  RequestFramer f(small_limits());
  EXPECT_EQ(f.feed("POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n"), State::Error);
  EXPECT_EQ(f.error_status(), 413);
  RequestFramer huge(small_limits());
  EXPECT_EQ(huge.feed("POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), State::Error);
  EXPECT_EQ(huge.error_status(), 413);
}

TEST(RequestFramer, HeadLimitHoldsEvenWithoutAnEnd) {
  RequestFramer f(small_limits());
  EXPECT_EQ(f.feed("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a')), State::Error);
  EXPECT_EQ(f.error_status(), 431);
}

TEST(RequestFramer, SmugglingShapesAreRefused) {
  const std::pair<std::string, int> cases[] = {
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", 417},
      {"POST / HTTP/2.0\r\n\r\n", 505},
      {"POST  / HTTP/1.1\r\n\r\n", 400},
  };
  for (const auto& [req, status] : cases) {
    RequestFramer f(small_limits());
    EXPECT_EQ(f.feed(req), State::Error) << req;
    EXPECT_EQ(f.error_status(), status) << req;
  }
}

TEST(RequestFramer, ExpectContinueIsAnsweredByTheLoopAndDropped) {
  RequestFramer f(small_limits());
  const std::string head = "POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  EXPECT_EQ(f.feed(head), State::NeedMore);
  EXPECT_TRUE(f.head_complete());
  EXPECT_TRUE(f.expects_continue());
  EXPECT_EQ(f.announced_body_bytes(), 2u);
  ASSERT_EQ(f.feed(head + "{}"), State::Complete);
  EXPECT_EQ(f.request(), "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}");
}

TEST(RequestFramer, SplittingDoesNotChangeTheResult) {
  const std::string req = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
  RequestFramer whole(small_limits()), bytewise(small_limits());
  ASSERT_EQ(whole.feed(req), State::Complete);
  ASSERT_EQ(trickle(bytewise, req), State::Complete);
  EXPECT_EQ(whole.request(), bytewise.request());
  EXPECT_EQ(whole.consumed(), bytewise.consumed());
}

}  // namespace
}  // namespace flashserve
