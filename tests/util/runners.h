// Runners for tests: a model on a given backend with a KV pool of a given size.
#pragma once
#include <memory>
#include <vector>
#include "model/llama_runner.h"

namespace flashserve::test {

// A pool of `num_blocks` blocks for each of the model's KV groups (model/kv_groups.h): exactly
// num_blocks for a model without sliding-window layers.
// q8: 8-bit activations for quantized weights (make_cpu_backend), else the exact f32 path; kv_type:
// the cache's element type (f32, or f16 as the server stores by default).
std::unique_ptr<LlamaRunner> cpu_runner(const Model& model, int32_t num_blocks, int32_t block_size = 16,
                                        bool q8 = false, kernels::DType kv_type = kernels::DType::F32);

// The same on a given CPU backend (a compiled copy of the ops, or one wrapped for tracing).
std::unique_ptr<LlamaRunner> cpu_runner_on(const Model& model, std::unique_ptr<kernels::Backend> backend,
                                           int32_t num_blocks, int32_t block_size = 16,
                                           kernels::DType kv_type = kernels::DType::F32);

// One sequence's block tables from one table, in the layout cpu_runner's pool has room for: group g
// holds block b at b + g * (pool / groups).
std::vector<std::vector<int32_t>> per_group(const ModelRunner& runner, const std::vector<int32_t>& table);

// On the CUDA backend with an F16 (or `config.kv_type`) cache and exactly `num_blocks` blocks;
// throws without a device.
std::unique_ptr<LlamaRunner> cuda_runner(const Model& model, int32_t num_blocks, RunnerConfig config = {},
                                         bool batch_invariant = false);

}  // namespace flashserve::test
