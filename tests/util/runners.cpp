#include "tests/util/runners.h"

#include "model/kv_groups.h"

namespace flashserve::test {
namespace {

KvPoolSizer exactly(int32_t num_blocks) {
  return [num_blocks](const kernels::Backend&, size_t) { return num_blocks; };
}

}  // namespace

std::unique_ptr<LlamaRunner> cpu_runner(const Model& model, int32_t num_blocks, int32_t block_size, bool q8,
                                        kernels::DType kv_type) {
  return cpu_runner_on(model, kernels::make_cpu_backend(q8), num_blocks, block_size, kv_type);
}

std::unique_ptr<LlamaRunner> cpu_runner_on(const Model& model, std::unique_ptr<kernels::Backend> backend,
                                           int32_t num_blocks, int32_t block_size, kernels::DType kv_type) {
  RunnerConfig c;
  c.block_size = block_size;
  c.kv_type = kv_type;
  const int32_t groups = kv_groups(model.config()).num_groups();
  return std::make_unique<LlamaRunner>(model, std::move(backend), c, exactly(num_blocks * groups));
}

std::vector<std::vector<int32_t>> per_group(const ModelRunner& runner, const std::vector<int32_t>& table) {
  const int32_t groups = int32_t(runner.kv_group_windows().size()), stride = runner.num_kv_blocks() / groups;
  std::vector<std::vector<int32_t>> tables;
  for (int32_t g = 0; g < groups; ++g) {
    tables.push_back(table);
    for (int32_t& b : tables.back()) b += g * stride;
  }
  return tables;
}

std::unique_ptr<LlamaRunner> cuda_runner(const Model& model, int32_t num_blocks, RunnerConfig config,
                                         bool batch_invariant) {
  if (config.kv_type == kernels::DType::F32) config.kv_type = kernels::DType::F16;
  return std::make_unique<LlamaRunner>(model, kernels::make_cuda_backend(batch_invariant), config, exactly(num_blocks));
}

}  // namespace flashserve::test
