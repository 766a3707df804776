// `flashserve generate`: one prompt in, text streamed to stdout, a speed line on stderr.
#pragma once
#include <cstdint>
#include <string>

namespace flashserve {

struct GenerateOptions {
  std::string model_path;
  std::string prompt;
  bool chat = false;          // wrap the prompt in the model's chat template
  int32_t max_tokens = 256;
  float temperature = 0.0f;   // 0: greedy
  uint64_t seed = 0;
  int32_t block_size = 16;
};

// Returns the process exit code; errors are printed to stderr, never thrown.
int run_generate(const GenerateOptions& opts);

}  // namespace flashserve
