// Hyperparameters from GGUF metadata: the keys every family shares, with llama.cpp's defaults for
// the optional ones and the consistency checks the forward pass relies on; then the family's own.
#include "model/model_config.h"

#include <algorithm>
#include <limits>

#include "kernels/moe_routing.h"
#include "model/gguf.h"
#include "model/model_family.h"

namespace flashserve {
namespace {

constexpr const char* kTokensKey = "tokenizer.ggml.tokens";

// "(n)", built by appending: GCC 12 misreports `"(" + std::string` with -Wrestrict.
std::string in_parens(int64_t v) {
  std::string s = "(";
  s += std::to_string(v);
  s += ")";
  return s;
}

void read_attention(const ConfigKeys& k, ModelConfig& c) {
  c.num_heads = k.positive_int("attention.head_count");
  c.num_kv_heads = k.positive_int("attention.head_count_kv", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    k.fail("attention.head_count_kv", in_parens(c.num_kv_heads) + " must divide " +
                                          k.key("attention.head_count") + " (" + std::to_string(c.num_heads) + ")");
  }
  if (!k.has("attention.key_length") && c.dim % c.num_heads != 0) {
    k.fail("attention.head_count", in_parens(c.num_heads) + " must divide " +
                                       k.key("embedding_length") + " (" + std::to_string(c.dim) + ")");
  }
  // Heads may be wider than dim / heads (Qwen3, Gemma 3): Q projects dim -> heads * head_dim and the
  // output projection back, with equal key and value widths.
  c.head_dim = k.positive_int("attention.key_length", c.dim / c.num_heads);
  if (k.positive_int("attention.value_length", c.head_dim) != c.head_dim) {
    k.fail("attention.value_length", "must equal the key length " + std::to_string(c.head_dim));
  }
  c.rms_eps = k.positive_float("attention.layer_norm_rms_epsilon");
}

void read_rope(const ConfigKeys& k, ModelConfig& c) {
  c.rope_dim = k.positive_int("rope.dimension_count", c.head_dim);
  if (c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim) {
    k.fail("rope.dimension_count", in_parens(c.rope_dim) + " must be even and at most the head size " +
                                       std::to_string(c.head_dim));
  }
  c.rope_theta = k.positive_float("rope.freq_base", 10000.0f);
  std::string scaling = k.string("rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope_freq_scale = 1.0f / k.positive_float("rope.scaling.factor", 1.0f);
  } else if (scaling == "llama3") {
    c.rope_freqs_required = true;  // Llama 3.1+: the per-pair factors come as rope_freqs.weight
  } else if (scaling != "none") {
    k.fail("rope.scaling.type", "'" + scaling + "' is not supported (only 'none', 'linear' and 'llama3')");
  }
}

// Dense models omit both keys (or write zeros); the limits are the routing kernel's.
void read_experts(const ConfigKeys& k, ModelConfig& c) {
  const uint64_t experts = k.uint_or("expert_count", 0);
  const uint64_t used = k.uint_or("expert_used_count", 0);
  if (experts == 0) {
    if (used != 0) k.fail("expert_used_count", in_parens(used) + " is set but " + k.key("expert_count") + " is 0 or missing");
    return;
  }
  if (experts > uint64_t(kernels::kMoeMaxExperts)) {
    k.fail("expert_count", in_parens(experts) + " exceeds the supported maximum of " +
                               std::to_string(kernels::kMoeMaxExperts));
  }
  const uint64_t max_used = std::min<uint64_t>(experts, kernels::kMoeMaxTopK);
  if (used < 1 || used > max_used) {
    k.fail("expert_used_count", in_parens(used) + " must be between 1 and " + std::to_string(max_used) +
                                    " (the smaller of " + k.key("expert_count") + " and " +
                                    std::to_string(kernels::kMoeMaxTopK) + ")");
  }
  c.num_experts = static_cast<int32_t>(experts);
  c.num_experts_used = static_cast<int32_t>(used);
}

// Without `<arch>.vocab_size`, the vocabulary is the tokenizer's token list.
int32_t read_vocab_size(const GgufFile& f, const ConfigKeys& k) {
  if (k.has("vocab_size")) return k.positive_int("vocab_size");
  const GgufValue* tokens = f.find(kTokensKey);
  if (!tokens || tokens->type != GgufType::ARRAY) {
    k.fail("vocab_size", std::string("is missing and there is no ") + kTokensKey + " array");
  }
  uint64_t n = std::get<GgufArray>(tokens->v).size();
  if (n == 0 || n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    k.fail("vocab_size", std::string("is missing and ") + kTokensKey + " has " + std::to_string(n) + " entries");
  }
  return static_cast<int32_t>(n);
}

Pooling read_pooling(const ConfigKeys& k) {
  switch (k.uint_or("pooling_type", 0)) {
    case 0: return Pooling::Last;
    case 1: return Pooling::Mean;
    case 2: return Pooling::Cls;
    case 3: return Pooling::Last;
    case 4: return Pooling::Rank;
  }
  k.fail("pooling_type", "must be 0 (none), 1 (mean), 2 (cls), 3 (last) or 4 (rank)");
}

}  // namespace

const char* to_string(Pooling p) {
  switch (p) {
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    case Pooling::Rank: return "rank";
  }
  return "?";
}

ModelConfig read_model_config(const GgufFile& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  const ModelFamily* family = find_family(c.arch);
  if (!family) throw GgufError(f.path() + ": unsupported architecture '" + c.arch + "' (supported: " + family_names() + ")");
  c.rope_neox = family->rope_neox;
  c.name = f.get_string("general.name", "");
  ConfigKeys k(f, c.arch);
  c.num_layers = k.positive_int("block_count");
  c.dim = k.positive_int("embedding_length");
  c.ffn_dim = k.positive_int("feed_forward_length");
  c.context_len = k.positive_int("context_length");
  read_attention(k, c);
  read_rope(k, c);
  c.vocab_size = read_vocab_size(f, k);
  read_experts(k, c);
  c.pooling = read_pooling(k);
  if (family->read_keys) family->read_keys(k, c);
  return c;
}

}  // namespace flashserve
