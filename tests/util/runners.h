// Runners for tests: a model on a given backend with a KV pool of exactly `num_blocks` blocks.
#pragma once
#include <memory>
#include "model/llama_runner.h"

namespace flashserve::test {

std::unique_ptr<LlamaRunner> cpu_runner(const LlamaModel& model, int32_t num_blocks, int32_t block_size = 16);

// On the CUDA backend with an F16 (or `config.kv_type`) cache; throws without a device.
std::unique_ptr<LlamaRunner> cuda_runner(const LlamaModel& model, int32_t num_blocks, RunnerConfig config = {});

}  // namespace flashserve::test
