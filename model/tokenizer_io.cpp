// Getting a tokenizer in (from GGUF metadata) and text out (streamed at character boundaries).
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/utf8.h"

namespace flashserve {
namespace {

int32_t optional_id(const GgufFile& f, const std::string& key) {
  return f.has(key) ? static_cast<int32_t>(f.get_int(key)) : -1;
}

}  // namespace

TokenizerData Tokenizer::data_from_gguf(const GgufFile& f) {
  TokenizerData d;
  d.model = f.get_string("tokenizer.ggml.model");
  d.pre = f.get_string("tokenizer.ggml.pre", "default");
  d.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type")) {
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) d.token_types.push_back(static_cast<TokenType>(t));
  }
  if (f.has("tokenizer.ggml.scores")) d.scores = f.get_float_array("tokenizer.ggml.scores");
  if (f.has("tokenizer.ggml.merges")) d.merges = f.get_string_array("tokenizer.ggml.merges");
  d.bos_id = optional_id(f, "tokenizer.ggml.bos_token_id");
  d.eos_id = optional_id(f, "tokenizer.ggml.eos_token_id");
  d.eot_id = optional_id(f, "tokenizer.ggml.eot_token_id");
  d.unk_id = optional_id(f, "tokenizer.ggml.unknown_token_id");
  d.pad_id = optional_id(f, "tokenizer.ggml.padding_token_id");
  // SentencePiece models add BOS and a leading space unless told otherwise; byte-level BPE does not.
  const bool spm = d.model == "llama";
  d.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", spm);
  d.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  d.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", spm);
  return d;
}

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool render_special) : tok_(tok), render_special_(render_special) {}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_bytes(id, render_special_);
  return utf8::take_complete(pending_, /*final=*/false);
}

std::string StreamDecoder::flush() { return utf8::take_complete(pending_, /*final=*/true); }

}  // namespace flashserve
