// Byte-level BPE pre-tokenization: the regex cascade that cuts text into the pieces BPE merges never
// cross, chosen by a GGUF `tokenizer.ggml.pre` name (the names and regexes llama.cpp's converter
// writes and uses).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve {

class Pretokenizer {
 public:
  // Throws std::invalid_argument naming an unknown pre-tokenizer.
  explicit Pretokenizer(const std::string& pre);
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Each regex splits every piece the previous one produced; the text between matches is kept as
  // pieces too, so the pieces always concatenate back to `text`. Invalid UTF-8 never matches and
  // so ends up in pieces of its own.
  std::vector<std::string_view> split(std::string_view text) const;

  // Pieces that are whole vocabulary entries skip merging (Llama-3's tokenizer.json says so).
  bool ignore_merges() const { return ignore_merges_; }

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  bool ignore_merges_ = false;
};

}  // namespace flashserve
