#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/pretokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <stdexcept>

namespace flashserve {
namespace {

// The patterns are spelled as in the models' tokenizer.json, except that case-insensitive
// contractions are written out: under Unicode case folding (?i:'s) would also match "'ſ".
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kContractions = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";
constexpr const char* kLlama3Tail =
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Tail =
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
// DeepSeek LLM's letter class: Latin, Greek, Cyrillic, Armenian, Georgian... but no CJK. Its classes
// are matched as written (as Hugging Face does); llama.cpp turns non-ASCII whitespace into "\v"
// first, so it differs where a class lists such whitespace (U+3000; U+2000-U+200A in U+0800-U+4E00).
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    "\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    "\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe"
    "\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
    "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    "\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06"
    "\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
    "\U0001e900-\U0001e943]+";

struct Family {
  std::vector<std::string> names;
  std::vector<std::string> regexes;
  bool ignore_merges = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      // "default" (a vocabulary that names no pre-tokenizer) is plain GPT-2 here; llama.cpp falls
      // back to an older mix of four regexes instead.
      {{"default", "gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4"}, {kGpt2}},
      // Digits one by one, then GPT-2 on what is left.
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"},
       {std::string(kContractions) + kLlama3Tail}, /*ignore_merges=*/true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {std::string(kContractions) + kLlama3Tail}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez"}, {std::string(kContractions) + kQwen2Tail}},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters, "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
        R"(\s+$)", kCjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
  };
  return kFamilies;
}

const Family& find_family(const std::string& pre) {
  for (const auto& f : families()) {
    if (std::find(f.names.begin(), f.names.end(), pre) != f.names.end()) return f;
  }
  throw std::invalid_argument("unsupported pre-tokenizer '" + pre + "' (tokenizer.ggml.pre)");
}

}  // namespace

struct Pretokenizer::Regex {
  pcre2_code* code = nullptr;

  explicit Regex(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    // MATCH_INVALID_UTF: user text may be invalid UTF-8; such bytes simply never match.
    // DOLLAR_ENDONLY: "$" means end of piece, not "before a final newline".
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                         &err, &err_offset, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw std::invalid_argument("pre-tokenizer regex does not compile at offset " +
                                  std::to_string(err_offset) + ": " + reinterpret_cast<char*>(msg));
    }
    // JIT is an optimisation only: pcre2_match falls back to the interpreter without it.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
  ~Regex() { pcre2_code_free(code); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the matches of this regex in `piece` and the text between them to `out`.
  void split_into(std::string_view piece, pcre2_match_data* md, std::vector<std::string_view>& out) const {
    auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t pos = 0, kept = 0;
    while (pos < piece.size()) {
      int rc = pcre2_match(code, subject, piece.size(), pos, 0, md, nullptr);
      // A JIT stack too small for a long backtracking run: redo that match in the interpreter,
      // which uses the heap.
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(code, subject, piece.size(), pos, PCRE2_NO_JIT, md, nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) throw std::runtime_error("pre-tokenizer regex failed with PCRE2 error " + std::to_string(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t begin = ov[0], end = ov[1];
      if (begin > kept) out.push_back(piece.substr(kept, begin - kept));
      if (end > begin) out.push_back(piece.substr(begin, end - begin));
      kept = std::max(kept, end);
      pos = end > begin ? end : end + 1;  // none of our patterns matches empty; never loop anyway
    }
    if (kept < piece.size()) out.push_back(piece.substr(kept));
  }
};

Pretokenizer::Pretokenizer(const std::string& pre) {
  const Family& family = find_family(pre);
  for (const auto& pattern : family.regexes) regexes_.push_back(std::make_unique<Regex>(pattern));
  ignore_merges_ = family.ignore_merges;
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  for (const auto& regex : regexes_) {
    // Match data is per call so that one Tokenizer can encode from many threads at once.
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(regex->code, nullptr), &pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    std::vector<std::string_view> next;
    next.reserve(pieces.size());
    for (auto piece : pieces) regex->split_into(piece, md.get(), next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace flashserve
