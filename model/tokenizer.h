// Tokenizers as GGUF stores them: byte-level BPE (`tokenizer.ggml.model = gpt2`, merges ranked by
// order, pre-tokenizer regexes chosen by `tokenizer.ggml.pre`) and SentencePiece-style BPE
// (`llama`: merges driven by token scores, U+2581 for spaces, <0xNN> byte fallback).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace flashserve {

class GgufFile;

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct TokenizerData {
  std::string model;                 // "gpt2" or "llama"
  std::string pre = "default";       // pre-tokenizer name (gpt2 only)
  std::vector<std::string> tokens;
  std::vector<TokenType> token_types;   // empty: all Normal
  std::vector<float> scores;            // llama only
  std::vector<std::string> merges;      // gpt2 only: "left right", highest priority first
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;        // llama only: prepend U+2581 to the text
};

class Tokenizer {
 public:
  // Throws std::invalid_argument naming the problem (unknown model or pre-tokenizer, bad merge...).
  explicit Tokenizer(TokenizerData data);
  static TokenizerData data_from_gguf(const GgufFile& f);

  // Text matching a UserDefined token's string (Gemma's runs of spaces and newlines) always becomes
  // that token; with parse_special, so does a Control/Unknown token's (e.g. "<|im_start|>"), as in
  // llama.cpp. add_special: BOS/EOS as the vocabulary asks (add_bos/add_eos).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  // Bytes of one token as it contributes to text (control tokens render as their text when
  // render_special, else as nothing). May be a partial UTF-8 sequence.
  std::string token_bytes(int32_t id, bool render_special = true) const;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = true) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool is_end_of_generation(int32_t id) const;  // eos, eot, or a control token like <|im_end|>
  std::vector<int32_t> end_of_generation_ids() const;  // those tokens, ascending
  const std::string& token_text(int32_t id) const;
  const TokenizerData& data() const;

  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text that is only ever cut at UTF-8 character boundaries:
// bytes of an incomplete character are held back until the tokens that complete it arrive.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool render_special = false);
  std::string push(int32_t id);  // text that became complete with this token (possibly empty)
  std::string flush();           // whatever is held back (invalid bytes as U+FFFD)
 private:
  const Tokenizer& tok_;
  bool render_special_;
  std::string pending_;
};

}  // namespace flashserve
