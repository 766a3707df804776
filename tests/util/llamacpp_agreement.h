// Our top-1 against llama.cpp's, teacher-forced on its greedy continuations: the fixture shape of
// scripts/gen_llamacpp_fixture.py and bench/llamacpp/dump_logits.cpp.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include "model/forward_batch.h"
#include "model/model.h"

namespace flashserve::test {

struct Top1Agreement {
  int decisive = 0;    // positions where llama.cpp's top-1/top-2 gap exceeds the threshold
  int agree = 0;       // ... and our top-1 is its
  int arbitrated = 0;  // ... and it is not, but the exact f64 pass picks ours
  int agree_all = 0, total = 0;
  int self_flips = 0;  // positions where llama.cpp's batched and token-by-token top-1 differ
  double max_diff = 0, sum_diff = 0;  // |our logit - llama.cpp's| at its top-1
};

// Logits at every position of `tokens`, one prefill on the CPU (q8: with 8-bit activations).
ForwardOutput score_all_positions(const Model& model, const std::vector<int32_t>& tokens, bool q8 = false,
                                  kernels::DType kv_type = kernels::DType::F32);

double top_gap(const nlohmann::json& top);

// Every prompt of `fixture` scored with its continuation (q8: with 8-bit activations). Each decisive
// disagreement is printed, tagged with `label`, with the token the exact f64 forward pass picks;
// with arbitrate, one that exact arithmetic does not side with us on is a failed EXPECT.
Top1Agreement top1_agreement(const Model& model, const nlohmann::json& fixture, double decisive_gap,
                             const std::string& label, bool q8 = false, bool arbitrate = true);

}  // namespace flashserve::test
