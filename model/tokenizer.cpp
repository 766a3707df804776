// Encoding follows llama.cpp's tokenizers (the reference the GGUF vocabularies are converted for):
// special tokens are cut out first, the rest is pre-tokenized and merged piece by piece.
#include "model/tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>

#include "model/bpe_merge.h"
#include "model/pretokenizer.h"
#include "model/utf8.h"

namespace flashserve {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// Control tokens that end a turn in the chat formats we know, whatever the vocabulary calls eos.
constexpr std::array<std::string_view, 6> kEndOfTurnTexts = {
    "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<end_of_turn>", "<|endoftext|>", "</s>"};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

struct Fragment {
  int32_t special_id;     // -1: text to tokenize
  std::string_view text;
};

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t pos = 0;;) {
    size_t hit = s.find(from, pos);
    out.append(s.substr(pos, hit - pos));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    pos = hit + from.size();
  }
}

// "<0x1F>" -> 0x1F; -1 if the text is not a byte token.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Byte-level BPE token text back to bytes; characters outside the byte alphabet pass through.
std::string gpt2_decode(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    int byte = utf8::gpt2_to_byte(utf8::next(text, pos));
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerData d;
  bool byte_level = false;  // gpt2; otherwise SentencePiece-style llama
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids;
  std::unordered_map<uint64_t, PairMerge> merges;     // (left id << 32 | right id) -> rank, merged id
  std::vector<int32_t> specials;                      // Control/UserDefined/Unknown ids, longest text first
  std::vector<bool> end_of_generation;
  std::array<int32_t, 256> byte_ids{};                // llama byte fallback (<0xNN>), -1 if absent
  std::optional<Pretokenizer> pre;

  explicit Impl(TokenizerData data);
  TokenType type(int32_t id) const { return d.token_types.empty() ? TokenType::Normal : d.token_types[id]; }
  int32_t find(std::string_view text) const {
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }
  void validate() const;
  void check_special_id(int32_t id, const char* what) const;
  void require_token(int32_t id) const {
    if (id < 0 || id >= static_cast<int32_t>(d.tokens.size())) {
      throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary of " +
                              std::to_string(d.tokens.size()));
    }
  }
  void index_merges();
  void index_byte_tokens();
  void index_specials();
  void index_end_of_generation();
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  std::string normal_bytes(int32_t id) const;
};

Tokenizer::Impl::Impl(TokenizerData data) : d(std::move(data)) {
  validate();
  byte_level = d.model == "gpt2";
  // Later duplicates win, as in llama.cpp.
  for (size_t i = 0; i < d.tokens.size(); ++i) ids[d.tokens[i]] = static_cast<int32_t>(i);
  if (byte_level) {
    pre.emplace(d.pre);
    index_merges();
  } else {
    index_byte_tokens();
  }
  index_specials();
  index_end_of_generation();
}

void Tokenizer::Impl::validate() const {
  if (d.model != "gpt2" && d.model != "llama") {
    throw std::invalid_argument("unsupported tokenizer model '" + d.model + "' (want gpt2 or llama)");
  }
  const size_t n = d.tokens.size();
  if (n == 0) throw std::invalid_argument("tokenizer has no tokens");
  if (!d.token_types.empty() && d.token_types.size() != n) {
    throw std::invalid_argument("tokenizer has " + std::to_string(d.token_types.size()) + " token types for " +
                                std::to_string(n) + " tokens");
  }
  if (!d.scores.empty() && d.scores.size() != n) {
    throw std::invalid_argument("tokenizer has " + std::to_string(d.scores.size()) + " scores for " +
                                std::to_string(n) + " tokens");
  }
  for (TokenType t : d.token_types) {
    if (t < TokenType::Normal || t > TokenType::Byte) {
      throw std::invalid_argument("invalid token type " + std::to_string(static_cast<int>(t)));
    }
  }
  check_special_id(d.bos_id, "bos");
  check_special_id(d.eos_id, "eos");
  check_special_id(d.eot_id, "eot");
  check_special_id(d.unk_id, "unknown");
  check_special_id(d.pad_id, "padding");
}

void Tokenizer::Impl::index_byte_tokens() {
  byte_ids.fill(-1);
  for (int32_t i = 0; i < static_cast<int32_t>(d.tokens.size()); ++i) {
    int byte = type(i) == TokenType::Byte ? parse_byte_token(d.tokens[i]) : -1;
    if (byte >= 0) byte_ids[byte] = i;
  }
}

void Tokenizer::Impl::index_end_of_generation() {
  end_of_generation.assign(d.tokens.size(), false);
  for (int32_t id : {d.eos_id, d.eot_id}) {
    if (id >= 0) end_of_generation[id] = true;
  }
  for (int32_t i = 0; i < static_cast<int32_t>(d.tokens.size()); ++i) {
    bool turn_end = std::find(kEndOfTurnTexts.begin(), kEndOfTurnTexts.end(), d.tokens[i]) != kEndOfTurnTexts.end();
    if (type(i) == TokenType::Control && turn_end) end_of_generation[i] = true;
  }
}

void Tokenizer::Impl::check_special_id(int32_t id, const char* what) const {
  if (id < -1 || id >= static_cast<int32_t>(d.tokens.size())) {
    throw std::invalid_argument(std::string(what) + " token id " + std::to_string(id) + " is outside the vocabulary");
  }
}

void Tokenizer::Impl::index_merges() {
  for (size_t rank = 0; rank < d.merges.size(); ++rank) {
    std::string_view merge = d.merges[rank];
    // Searching from 1 lets the left part itself be a space.
    size_t sep = merge.find(' ', 1);
    if (sep == std::string::npos) {
      throw std::invalid_argument("bad merge #" + std::to_string(rank) + ": '" + std::string(merge) + "'");
    }
    int32_t left = find(merge.substr(0, sep));
    int32_t right = find(merge.substr(sep + 1));
    // A merge of strings that are not tokens can never apply to symbols we can emit.
    if (left < 0 || right < 0) continue;
    int32_t merged = find(std::string(merge.substr(0, sep)) + std::string(merge.substr(sep + 1)));
    merges.emplace(pair_key(left, right), PairMerge{static_cast<double>(rank), merged});
  }
}

void Tokenizer::Impl::index_specials() {
  for (int32_t i = 0; i < static_cast<int32_t>(d.tokens.size()); ++i) {
    TokenType t = type(i);
    const bool special = t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
    if (special && !d.tokens[i].empty()) specials.push_back(i);
  }
  std::stable_sort(specials.begin(), specials.end(),
                   [&](int32_t a, int32_t b) { return d.tokens[a].size() > d.tokens[b].size(); });
}

// Cuts special tokens out of the text, longest token first over the whole text (llama.cpp's order:
// a longer token wins over a shorter one it overlaps, wherever each starts).
std::vector<Fragment> Tokenizer::Impl::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, text});
  for (int32_t id : specials) {
    if (!parse_special && type(id) != TokenType::UserDefined) continue;
    const std::string& needle = d.tokens[id];
    if (text.find(needle) == std::string_view::npos) continue;
    std::vector<Fragment> next;
    for (const Fragment& f : fragments) {
      if (f.special_id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (size_t hit; (hit = f.text.find(needle, pos)) != std::string_view::npos; pos = hit + needle.size()) {
        if (hit > pos) next.push_back({-1, f.text.substr(pos, hit - pos)});
        next.push_back({id, f.text.substr(hit, needle.size())});
      }
      if (pos < f.text.size()) next.push_back({-1, f.text.substr(pos)});
    }
    fragments = std::move(next);
  }
  return fragments;
}

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  auto lookup = [&](std::string_view s) { return find(s); };
  auto rule = [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<PairMerge> {
    if (l.id < 0 || r.id < 0) return std::nullopt;
    auto it = merges.find(pair_key(l.id, r.id));
    if (it == merges.end()) return std::nullopt;
    return it->second;
  };
  std::string word;
  for (std::string_view piece : pre->split(text)) {
    word.clear();
    for (char c : piece) word += utf8::byte_to_gpt2(static_cast<uint8_t>(c));
    int32_t whole = pre->ignore_merges() ? find(word) : -1;
    if (whole >= 0) {
      out.push_back(whole);
      continue;
    }
    for (const MergeSymbol& symbol : merge_symbols(word, lookup, rule)) {
      if (symbol.id >= 0) {
        out.push_back(symbol.id);
        continue;
      }
      // Only a vocabulary missing a merge result or a byte's character gets here. Bytes without a
      // character are dropped, as llama.cpp does (SmolLM2 has none for e.g. 0x04 or 0xFF); the
      // "unknown" token of byte-level vocabularies is typically end-of-text, never to be injected.
      for (size_t pos = 0; pos < symbol.text.size();) {
        size_t len = std::min(utf8::char_len(static_cast<unsigned char>(symbol.text[pos])), symbol.text.size() - pos);
        int32_t char_id = find(symbol.text.substr(pos, len));
        if (char_id >= 0) out.push_back(char_id);
        pos += len;
      }
    }
  }
}

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  auto lookup = [&](std::string_view s) { return find(s); };
  auto rule = [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<PairMerge> {
    int32_t id = find(std::string_view(l.text.data(), l.text.size() + r.text.size()));
    if (id < 0) return std::nullopt;
    return PairMerge{d.scores.empty() ? 0.0 : -static_cast<double>(d.scores[id]), id};
  };
  std::string word = replace_all(text, " ", kSpmSpace);
  for (const MergeSymbol& symbol : merge_symbols(word, lookup, rule)) {
    if (symbol.id >= 0) {
      out.push_back(symbol.id);
      continue;
    }
    for (char c : symbol.text) {
      int32_t byte_id = byte_ids[static_cast<uint8_t>(c)];
      if (byte_id < 0) byte_id = d.unk_id;
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

std::string Tokenizer::Impl::normal_bytes(int32_t id) const {
  const std::string& text = d.tokens[id];
  return byte_level ? gpt2_decode(text) : replace_all(text, kSpmSpace, " ");
}

Tokenizer::Tokenizer(TokenizerData data) : impl_(std::make_unique<Impl>(std::move(data))) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const TokenizerData& d = impl_->d;
  std::vector<int32_t> out;
  if (add_special && d.add_bos && d.bos_id >= 0) out.push_back(d.bos_id);
  // SentencePiece prefixes a space to the text and, like llama.cpp, to text after a special token.
  bool after_special = true;
  std::string prefixed;
  for (const Fragment& f : impl_->partition(text, parse_special)) {
    if (f.special_id >= 0) {
      out.push_back(f.special_id);
      after_special = true;
    } else if (impl_->byte_level) {
      impl_->encode_bpe(f.text, out);
    } else {
      prefixed.clear();
      if (d.add_space_prefix && after_special) prefixed += ' ';
      prefixed.append(f.text);
      impl_->encode_spm(prefixed, out);
      after_special = false;
    }
  }
  if (add_special && d.add_eos && d.eos_id >= 0) out.push_back(d.eos_id);
  return out;
}

std::string Tokenizer::token_bytes(int32_t id, bool render_special) const {
  impl_->require_token(id);
  const std::string& text = impl_->d.tokens[id];
  switch (impl_->type(id)) {
    case TokenType::Control:
    case TokenType::Unknown:
      return render_special ? text : std::string();
    case TokenType::Unused:
      return {};
    case TokenType::UserDefined:
      return text;
    case TokenType::Byte: {
      int byte = parse_byte_token(text);
      return byte >= 0 ? std::string(1, static_cast<char>(byte)) : text;
    }
    case TokenType::Normal:
      break;
  }
  return impl_->normal_bytes(id);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  // Undo the space encode() prefixed: it belongs to the first token that came from text.
  bool strip_prefix = !impl_->byte_level && impl_->d.add_space_prefix;
  for (int32_t id : ids) {
    std::string piece = token_bytes(id, render_special);
    TokenType t = impl_->type(id);
    if (strip_prefix && t != TokenType::Control && t != TokenType::Unknown) {
      if (!piece.empty() && piece[0] == ' ') piece.erase(0, 1);
      strip_prefix = false;
    }
    out += piece;
  }
  return out;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->d.tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->d.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->d.eos_id; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->end_of_generation[id];
}

std::vector<int32_t> Tokenizer::end_of_generation_ids() const {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab_size(); ++id) {
    if (impl_->end_of_generation[id]) ids.push_back(id);
  }
  return ids;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->require_token(id);
  return impl_->d.tokens[id];
}

const TokenizerData& Tokenizer::data() const { return impl_->d; }

}  // namespace flashserve
