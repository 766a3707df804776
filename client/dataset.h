// Prompts read from a file instead of made up: a JSON array of objects, or JSONL (one object a
// line), each with "prompt" (a string) and optionally "max_tokens".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/workload.h"

namespace flashserve::bench {

struct DatasetItem {
  std::string prompt;
  std::optional<int32_t> max_tokens;
};

// Throws std::runtime_error naming the file (and line or item) when it cannot be read, is
// empty, or an item lacks a string "prompt" or has a max_tokens that is not a positive integer.
std::vector<DatasetItem> load_dataset(const std::string& path);
std::vector<DatasetItem> parse_dataset(const std::string& text, const std::string& name);

// `num_requests` requests cycling through the items in an order shuffled by `seed` (the same seed
// gives the same requests). Items without max_tokens generate `default_output_len` tokens.
std::vector<BenchRequest> make_dataset_workload(const std::vector<DatasetItem>& items, int32_t num_requests,
                                                int32_t default_output_len, uint64_t seed);

}  // namespace flashserve::bench
