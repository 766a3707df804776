// Dataset files: JSON arrays and JSONL parse to the same items, bad files fail with a message
// that names the file and place, and requests cycle through the items in a seeded order.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "client/dataset.h"

namespace fb = flashserve::bench;
namespace fs = std::filesystem;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path path = fs::temp_directory_path() / (std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& text) {
  try {
    fb::parse_dataset(text, "data.jsonl");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Dataset, JsonArrayAndJsonlGiveTheSameItems) {
  const std::string array = R"([{"prompt": "hello there", "max_tokens": 5}, {"prompt": "one two three"}])";
  const std::string jsonl = "{\"prompt\": \"hello there\", \"max_tokens\": 5}\n\n{\"prompt\": \"one two three\"}\r\n";
  const std::string a_path = write_temp("a.json", array), l_path = write_temp("l.jsonl", jsonl);
  const auto a = fb::load_dataset(a_path), l = fb::load_dataset(l_path);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(l.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a[i].prompt, l[i].prompt);
    EXPECT_EQ(a[i].max_tokens, l[i].max_tokens);
  }
  EXPECT_EQ(a[0].max_tokens, 5);
  EXPECT_FALSE(a[1].max_tokens.has_value());
  fs::remove(a_path);
  fs::remove(l_path);
}

TEST(Dataset, BadFilesGiveClearErrors) {
  EXPECT_THROW(fb::load_dataset("/nonexistent/prompts.jsonl"), std::runtime_error);
  EXPECT_EQ(error_of(""), "data.jsonl: no prompts");
  EXPECT_EQ(error_of("{\"prompt\": \"a\"}\n{oops\n"), "data.jsonl line 2: not valid JSON");
  EXPECT_EQ(error_of("{\"text\": \"a\"}"), "data.jsonl line 1: missing string \"prompt\"");
  EXPECT_EQ(error_of("[{\"prompt\": \"a\"}, {\"prompt\": 3}]"), "data.jsonl item 1: missing string \"prompt\"");
  EXPECT_EQ(error_of("[{\"prompt\": \"a\", \"max_tokens\": 0}]"),
            "data.jsonl item 0: \"max_tokens\" must be a positive integer");
  EXPECT_EQ(error_of("[{\"prompt\": \"a\"}"), "data.jsonl: not valid JSON");
  EXPECT_EQ(error_of("[1]"), "data.jsonl item 0: expected an object");
}

TEST(Dataset, RequestsCycleThroughItemsDeterministically) {
  std::vector<fb::DatasetItem> items;
  for (int i = 0; i < 5; ++i) items.push_back({"prompt number " + std::to_string(i), i == 0 ? std::optional(9) : std::nullopt});
  const auto a = fb::make_dataset_workload(items, 12, 7, 42), b = fb::make_dataset_workload(items, 12, 7, 42);
  ASSERT_EQ(a.size(), 12u);
  std::set<std::string> first_round;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].prompt, a[i % 5].prompt) << "cycles with the file's length";
    EXPECT_EQ(a[i].input_len, 3);
    EXPECT_EQ(a[i].output_len, a[i].prompt == "prompt number 0" ? 9 : 7);
    if (i < 5) first_round.insert(a[i].prompt);
  }
  EXPECT_EQ(first_round.size(), 5u) << "every item once before any repeats";
  bool order_differs = false;
  for (uint64_t seed = 0; seed < 8 && !order_differs; ++seed) {
    order_differs = fb::make_dataset_workload(items, 5, 7, seed)[0].prompt != a[0].prompt;
  }
  EXPECT_TRUE(order_differs) << "the seed picks the order";
}
