#include "tests/util/runners.h"

namespace flashserve::test {
namespace {

KvPoolSizer exactly(int32_t num_blocks) {
  return [num_blocks](const kernels::Backend&, size_t) { return num_blocks; };
}

}  // namespace

std::unique_ptr<LlamaRunner> cpu_runner(const LlamaModel& model, int32_t num_blocks, int32_t block_size) {
  RunnerConfig c;
  c.block_size = block_size;
  c.kv_type = kernels::DType::F32;
  return std::make_unique<LlamaRunner>(model, kernels::make_cpu_backend(), c, exactly(num_blocks));
}

std::unique_ptr<LlamaRunner> cuda_runner(const LlamaModel& model, int32_t num_blocks, RunnerConfig config) {
  if (config.kv_type == kernels::DType::F32) config.kv_type = kernels::DType::F16;
  return std::make_unique<LlamaRunner>(model, kernels::make_cuda_backend(), config, exactly(num_blocks));
}

}  // namespace flashserve::test
