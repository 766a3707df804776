#include "client/dataset.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace flashserve::bench {
namespace {

using json = nlohmann::json;

DatasetItem to_item(const json& j, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error(where + ": expected an object");
  const auto prompt = j.find("prompt");
  if (prompt == j.end() || !prompt->is_string()) throw std::runtime_error(where + ": missing string \"prompt\"");
  DatasetItem item{prompt->get<std::string>(), std::nullopt};
  if (const auto mt = j.find("max_tokens"); mt != j.end() && !mt->is_null()) {
    if (!mt->is_number_integer() || mt->get<int64_t>() < 1 || mt->get<int64_t>() > INT32_MAX) {
      throw std::runtime_error(where + ": \"max_tokens\" must be a positive integer");
    }
    item.max_tokens = mt->get<int32_t>();
  }
  return item;
}

// JSONL: a blank line is skipped; anything else must be one JSON object.
std::vector<DatasetItem> parse_jsonl(const std::string& text, const std::string& name) {
  std::vector<DatasetItem> items;
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = name + " line " + std::to_string(line_no);
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw std::runtime_error(where + ": not valid JSON");
    items.push_back(to_item(j, where));
  }
  return items;
}

}  // namespace

std::vector<DatasetItem> parse_dataset(const std::string& text, const std::string& name) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  std::vector<DatasetItem> items;
  // A leading '[' means one JSON array; otherwise it is JSONL (a one-line JSONL file parses either way).
  if (first != std::string::npos && text[first] == '[') {
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw std::runtime_error(name + ": not valid JSON");
    for (size_t i = 0; i < j.size(); ++i) items.push_back(to_item(j[i], name + " item " + std::to_string(i)));
  } else {
    items = parse_jsonl(text, name);
  }
  if (items.empty()) throw std::runtime_error(name + ": no prompts");
  return items;
}

std::vector<DatasetItem> load_dataset(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open dataset " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_dataset(text.str(), path);
}


std::vector<BenchRequest> make_dataset_workload(const std::vector<DatasetItem>& items, int32_t num_requests,
                                                int32_t default_output_len, uint64_t seed) {
  if (items.empty()) throw std::invalid_argument("empty dataset");
  if (default_output_len < 1) throw std::invalid_argument("lengths must be at least 1");
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);  // mt19937_64 + libstdc++ shuffle: reproducible
  std::vector<BenchRequest> requests;
  requests.reserve(size_t(std::max(0, num_requests)));
  for (int32_t i = 0; i < num_requests; ++i) {
    const DatasetItem& item = items[order[size_t(i) % order.size()]];
    requests.push_back({item.prompt, word_count(item.prompt), item.max_tokens.value_or(default_output_len)});
  }
  return requests;
}

}  // namespace flashserve::bench
