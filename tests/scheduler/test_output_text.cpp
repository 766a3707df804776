// OutputText: stop strings within and across tokens, held-back text released when a partial match
// fails, the earliest of several stops, UTF-8 never cut, and plain StreamDecoder behaviour without
// stops. The tiny byte-level vocabulary makes every byte its own token (id = byte value), which
// puts token boundaries anywhere; the real SmolLM2 vocabulary adds multi-byte word tokens.
#include <gtest/gtest.h>

#include <string_view>

#include "model/gguf.h"
#include "model/utf8.h"
#include "scheduler/output_text.h"
#include "tests/util/test_paths.h"
#include "tests/util/tiny_model.h"

namespace flashserve {
namespace {

using Ids = std::vector<int32_t>;
using Strings = std::vector<std::string>;

const Tokenizer& tiny() {
  static const Tokenizer tok = [] {
    const std::string path = test::temp_model_path("output_text");
    test::write_tiny_model(path, {});
    return Tokenizer(Tokenizer::data_from_gguf(*GgufFile::open(path)));
  }();
  return tok;
}

const Tokenizer& real() {
  static const Tokenizer tok(Tokenizer::data_from_gguf(*GgufFile::open(test::real_model_path())));
  return tok;
}

constexpr int32_t kImEnd = 260;  // a control token of the tiny vocabulary

// One token per byte in the tiny vocabulary.
Ids bytes(std::string_view s) {
  Ids ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

bool valid_utf8(const std::string& s) {
  std::string copy = s;
  return utf8::take_complete(copy, /*final=*/true) == s;
}

struct Fed {
  Strings deltas;       // one per token pushed
  std::string text;     // all released text
  int stopped_at = -1;  // index of the token that completed a stop string
  std::string stop;     // the stop string it reported
};

// Pushes tokens until a stop string matches.
Fed feed(OutputText& out, const Ids& ids) {
  Fed run;
  for (size_t i = 0; i < ids.size() && run.stopped_at < 0; ++i) {
    OutputText::Delta d = out.push(ids[i]);
    EXPECT_TRUE(valid_utf8(d.text)) << "token " << i << " released a cut character";
    run.deltas.push_back(d.text);
    run.text += d.text;
    if (d.stop) {
      run.stopped_at = static_cast<int>(i);
      run.stop = *d.stop;
    }
  }
  return run;
}

Fed feed(const Tokenizer& tok, Strings stop, const Ids& ids) {
  OutputText out(tok, std::move(stop));
  return feed(out, ids);
}

// ---------------------------------------------------------------------------------------------
TEST(OutputText, WithoutStopsMatchesStreamDecoder) {
  for (const Tokenizer* tok : {&tiny(), &real()}) {
    const Ids ids = tok->encode("Hi a€😀世, café 😀!", false, false);
    StreamDecoder dec(*tok);
    OutputText out(*tok, {});
    for (int32_t id : ids) {
      const OutputText::Delta d = out.push(id);
      EXPECT_EQ(d.text, dec.push(id));
      EXPECT_FALSE(d.stop);
    }
    EXPECT_EQ(out.flush(), dec.flush());
  }
}

TEST(OutputText, StopInsideOneToken) {
  // Tiny vocabulary: "he" is one token (256); the stop is its second half.
  Fed run = feed(tiny(), {"e"}, {'x', 256, 'y'});
  EXPECT_EQ(run.deltas, (Strings{"x", "h"}));
  EXPECT_EQ(run.stopped_at, 1);
  // Real vocabulary: " world" is one token, and the stop ends inside it; "ld" is never released.
  const Ids ids = real().encode("Hello world, goodbye", false, false);
  run = feed(real(), {"wor"}, ids);
  EXPECT_EQ(run.text, "Hello ");
  EXPECT_EQ(run.stopped_at, 1);
}

TEST(OutputText, StopAcrossTokens) {
  const Fed run = feed(tiny(), {"Hello world"}, bytes("Say Hello world now"));
  EXPECT_EQ(run.text, "Say ");
  EXPECT_EQ(run.stopped_at, 14);  // the 'd'
  for (size_t i = 4; i < run.deltas.size(); ++i) EXPECT_EQ(run.deltas[i], "") << i;
}

TEST(OutputText, AbandonedPartialMatchIsReleased) {
  OutputText out(tiny(), {"Hello world"});
  const Fed run = feed(out, bytes("Hello there"));
  EXPECT_EQ(run.stopped_at, -1);
  EXPECT_EQ(run.deltas, (Strings{"", "", "", "", "", "", "Hello t", "h", "e", "r", "e"}));
  EXPECT_EQ(out.flush(), "");
}

TEST(OutputText, HoldsOnlyTheLongestSuffixThatCouldStillMatch) {
  // After "aa" only the second 'a' can begin "abc"; the first goes out.
  const Fed run = feed(tiny(), {"abc"}, bytes("aabc"));
  EXPECT_EQ(run.deltas, (Strings{"", "a", "", ""}));
  EXPECT_EQ(run.stopped_at, 3);
}

TEST(OutputText, EarliestStopWins) {
  Fed run = feed(tiny(), {"world", "lo w"}, bytes("Hello world"));
  EXPECT_EQ(run.text, "Hel");
  EXPECT_EQ(run.stop, "lo w");
  // Both complete on the same token; the one starting first decides what is released, and is the
  // one reported.
  for (const Strings& stops : {Strings{"bc", "abc"}, Strings{"abc", "bc"}}) {
    run = feed(tiny(), stops, bytes("xabc"));
    EXPECT_EQ(run.text, "x");
    EXPECT_EQ(run.stop, "abc");
  }
  // Two starting at the same place within one token ("he", 256): the one listed first.
  EXPECT_EQ(feed(tiny(), {"he", "h"}, {'x', 256}).stop, "he");
  EXPECT_EQ(feed(tiny(), {"h", "he"}, {'x', 256}).stop, "h");
}

TEST(OutputText, NeverSplitsACharacter) {
  Fed run = feed(tiny(), {"😀!"}, bytes("a😀b😀!c"));
  EXPECT_EQ(run.text, "a😀b");
  EXPECT_EQ(run.stopped_at, 10);  // the '!'
  // An emoji that only looked like the start of the stop comes out whole.
  run = feed(tiny(), {"😀!"}, bytes("😀x"));
  EXPECT_EQ(run.text, "😀x");
  // A stop string opening with a continuation byte matches the tail of "é", yet "é" is held whole.
  run = feed(tiny(), {"\xA9z"}, bytes("éq"));
  EXPECT_EQ(run.deltas, (Strings{"", "", "éq"}));
  // Emoji split over several tokens of the real vocabulary.
  run = feed(real(), {"so"}, real().encode("I love 😀🎉 so much", false, false));
  EXPECT_EQ(run.text, "I love 😀🎉 ");
  EXPECT_GE(run.stopped_at, 0);
}

TEST(OutputText, FlushReleasesHeldText) {
  OutputText out(tiny(), {"world"});
  EXPECT_EQ(feed(out, bytes("Hello wor")).text, "Hello ");
  EXPECT_EQ(out.flush(), "wor");
  // An unfinished character comes out of the decoder as U+FFFD, after the held text.
  OutputText cut(tiny(), {"ab"});
  EXPECT_EQ(feed(cut, {'x', 'a', 0xF0}).text, "x");
  EXPECT_EQ(cut.flush(), "a\uFFFD");
}

TEST(OutputText, ControlTokensRenderAsNothing) {
  OutputText out(tiny(), {"<|"});
  const OutputText::Delta d = out.push(kImEnd);
  EXPECT_EQ(d.text, "");
  EXPECT_FALSE(d.stop);
}

}  // namespace
}  // namespace flashserve
