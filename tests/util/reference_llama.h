// A deliberately plain Llama forward pass in double precision over a contiguous sequence: the
// yardstick the real engine's logits are compared against.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace flashserve {
class GgufFile;
}

namespace flashserve::test {

// Logits for every position of `tokens`: [tokens.size()][vocab]. Expands all weights to double
// on each call: fine for tiny models; for the real one, keep a ReferenceLlama.
std::vector<std::vector<double>> reference_logits(const GgufFile& f, const std::vector<int32_t>& tokens);

class ReferenceLlama {
 public:
  explicit ReferenceLlama(const GgufFile& f);
  ~ReferenceLlama();
  std::vector<std::vector<double>> logits(const std::vector<int32_t>& tokens) const;
  // The final norm's output for every position: [tokens.size()][dim] (what embeddings pool).
  std::vector<std::vector<double>> hidden_states(const std::vector<int32_t>& tokens) const;

 private:
  struct Weights;
  std::unique_ptr<Weights> w_;
};

// max |a - b| / max |b| over one row.
double relative_error(const float* a, const std::vector<double>& b);

}  // namespace flashserve::test
