// A CPU backend that hashes what every op writes, in call order: two runs of the same forward pass
// on different compiled copies of the CPU ops (kernels/cpu_isa.h) can then be compared op by op, and
// the first op whose output differs named with its layer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace flashserve::test {

struct TracedOp {
  std::string name;   // the Backend method
  int32_t norm_index;  // rmsnorm / add_rmsnorm calls before and including this one
  uint64_t hash;       // FNV-1a of the bytes it wrote
};

// The first entry where `got` and `want` differ, described with its layer (counted from the norms:
// a model of num_layers layers calls (num_norms - 1) / num_layers per layer, then the final one);
// "" when they are the same.
std::string first_traced_difference(const std::vector<TracedOp>& got, const std::vector<TracedOp>& want,
                                    int32_t num_layers);

// Wraps a host backend; `trace` grows by one entry per op call and must outlive the backend.
std::unique_ptr<kernels::Backend> op_trace_backend(std::unique_ptr<kernels::Backend> inner, std::vector<TracedOp>& trace);

}  // namespace flashserve::test
