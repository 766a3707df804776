#include "model/jinja/lexer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "model/jinja/text.h"
#include "model/jinja/value.h"
#include "model/utf8.h"

namespace flashserve::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "\r\n" and "\r" become "\n"; one trailing newline goes (keep_trailing_newline=False).
std::string normalize(std::string_view source) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root();
    Token end;
    end.type = TokenType::End;
    place(end, src_.size());
    out_.push_back(std::move(end));
    return std::move(out_);
  }

 private:
  [[noreturn]] void error(const std::string& message, size_t at) const {
    Token t;
    place(t, at);
    throw TemplateError(ErrorKind::Syntax, message, t.line, t.column);
  }

  void place(Token& t, size_t at) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t line = size_t(it - line_starts_.begin());
    t.line = int(line);
    t.column = int(at - line_starts_[line - 1]) + 1;
  }

  void emit(TokenType type, size_t at, std::string text = {}) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    place(t, at);
    out_.push_back(std::move(t));
  }

  bool at(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // Length of the whitespace character at p (Python's \s), 0 if none.
  size_t space_at(size_t p) const {
    if (p >= src_.size()) return 0;
    const size_t n = std::min(utf8::char_len(static_cast<unsigned char>(src_[p])), src_.size() - p);
    return text::is_space(std::string_view(src_).substr(p, n)) ? n : 0;
  }
  size_t skip_space(size_t p) const {
    while (size_t n = space_at(p)) p += n;
    return p;
  }

  // Text before a tag, with the tag's whitespace control applied (`lstrip`: a block or comment tag).
  void text_before(size_t begin, size_t end, char sign, bool lstrip) {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') {
      text = text::strip(text, false, true);
    } else if (sign != '+' && lstrip) {
      const size_t line = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((line > 0 || line_starting_) && line < text.size()) {
        bool blank = true;
        for (std::string_view ch : text::chars(std::string_view(text).substr(line))) blank = blank && text::is_space(ch);
        if (blank) text.resize(line);
      }
    }
    if (!text.empty()) emit(TokenType::Text, begin, std::move(text));
  }

  // After a block or comment end at p (just past "%}"/"#}", `sign` the character before it).
  size_t after_block_end(size_t p, char sign) {
    if (sign == '-') p = skip_space(p);
    else if (sign != '+' && p < src_.size() && src_[p] == '\n') ++p;
    line_starting_ = p > 0 && src_[p - 1] == '\n';
    return p;
  }

  // {%(-|+|)\s*raw\s*(-%}|%}) at p: returns the end of the match, or 0.
  size_t raw_tag(size_t p, std::string_view word, bool allow_plus_end) const {
    if (!at(p, "{%")) return 0;
    p += 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_space(p);
    if (!at(p, word)) return 0;
    p = skip_space(p + word.size());
    if (at(p, "-%}") || (allow_plus_end && at(p, "+%}"))) return p + 3;
    if (at(p, "%}")) return p + 2;
    return 0;
  }

  void root() {
    size_t tag = pos_;
    while ((tag = src_.find('{', tag)) != std::string::npos) {
      if (tag + 1 < src_.size() && (src_[tag + 1] == '{' || src_[tag + 1] == '%' || src_[tag + 1] == '#')) break;
      ++tag;
    }
    if (tag == std::string::npos) {
      emit(TokenType::Text, pos_, src_.substr(pos_));
      pos_ = src_.size();
      return;
    }
    const char kind = src_[tag + 1];
    size_t p = tag + 2;
    const char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
    text_before(pos_, tag, sign, kind != '{');
    if (sign) ++p;
    if (kind == '#') {
      pos_ = comment(tag, p);
    } else if (size_t raw_end = raw_tag(tag, "raw", false)) {
      pos_ = raw(tag, raw_end);
    } else {
      pos_ = tag_tokens(kind, tag, p);
    }
  }

  size_t comment(size_t tag, size_t p) {
    for (; p < src_.size(); ++p) {
      if (at(p, "-#}") || at(p, "+#}")) return after_block_end(p + 3, src_[p]);
      if (at(p, "#}")) return after_block_end(p + 2, 0);
    }
    error("missing end of comment tag", tag);
  }

  size_t raw(size_t tag, size_t body) {
    if (src_[body - 3] == '-') body = skip_space(body);
    line_starting_ = body > 0 && src_[body - 1] == '\n';
    for (size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      if (size_t end = raw_tag(p, "endraw", true)) {
        const char sign = src_[p + 2] == '-' || src_[p + 2] == '+' ? src_[p + 2] : 0;
        text_before(body, p, sign, true);
        if (src_[end - 3] == '-' || src_[end - 3] == '+') return after_block_end(end, src_[end - 3]);
        return after_block_end(end, 0);
      }
    }
    error("missing end of raw directive", tag);
  }

  // The tokens of a {{ }} or {% %} tag whose body starts at p; returns the position after it.
  size_t tag_tokens(char kind, size_t tag, size_t p) {
    const bool block = kind == '%';
    emit(block ? TokenType::BlockBegin : TokenType::VariableBegin, tag);
    std::string balance;  // closers expected, innermost last
    while (true) {
      if (p >= src_.size()) error(block ? "unexpected end of template in a block tag" : "unexpected end of template in {{ }}", tag);
      if (balance.empty()) {
        const char close = block ? '%' : '}';
        if ((src_[p] == '-' || (block && src_[p] == '+')) && p + 2 < src_.size() + 0 && src_[p + 1] == close && src_[p + 2] == '}') {
          emit(block ? TokenType::BlockEnd : TokenType::VariableEnd, p);
          if (block) return after_block_end(p + 3, src_[p]);
          const size_t end = skip_space(p + 3);
          line_starting_ = src_[end - 1] == '\n';
          return end;
        }
        if (src_[p] == close && p + 1 < src_.size() && src_[p + 1] == '}') {
          emit(block ? TokenType::BlockEnd : TokenType::VariableEnd, p);
          if (block) return after_block_end(p + 2, 0);
          line_starting_ = false;
          return p + 2;
        }
      }
      if (size_t n = space_at(p)) {
        p += n;
      } else if (is_digit(src_[p])) {
        p = number(p);
      } else if (is_name_start(src_[p])) {
        size_t e = p;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        emit(TokenType::Name, p, src_.substr(p, e - p));
        p = e;
      } else if (src_[p] == '\'' || src_[p] == '"') {
        p = string(p);
      } else {
        p = op(p, balance);
      }
    }
  }

  // Digits with single underscores between them, from p; returns the end (p if none).
  size_t digits(size_t p, int base = 10) const {
    size_t e = p;
    while (e < src_.size()) {
      const char c = src_[e];
      const int v = hex_value(c);
      if (v >= 0 && v < base && (base == 16 || is_digit(c))) {
        ++e;
      } else if (c == '_' && e > p && e + 1 < src_.size() && hex_value(src_[e + 1]) >= 0 &&
                 hex_value(src_[e + 1]) < base && (base == 16 || is_digit(src_[e + 1]))) {
        ++e;
      } else {
        break;
      }
    }
    return e;
  }

  size_t number(size_t p) {
    auto strip_underscores = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    const char x = p + 1 < src_.size() ? char(src_[p + 1] | 0x20) : 0;
    if (src_[p] == '0' && (x == 'b' || x == 'o' || x == 'x')) {
      const int base = x == 'b' ? 2 : x == 'o' ? 8 : 16;
      size_t s = p + 2;
      if (s < src_.size() && src_[s] == '_') ++s;
      const size_t e = digits(s, base);
      if (e == s) error("invalid integer literal", p);
      return integer(p, e, strip_underscores(src_.substr(s, e - s)), base);
    }
    size_t e = digits(p);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1]) && (p == 0 || src_[p - 1] != '.')) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] | 0x20) == 'e' && (p == 0 || src_[p - 1] != '.')) {
      size_t s = e + 1;
      if (s < src_.size() && (src_[s] == '+' || src_[s] == '-')) ++s;
      if (s < src_.size() && is_digit(src_[s])) {
        e = digits(s);
        is_float = true;
      }
    }
    const std::string lit = strip_underscores(src_.substr(p, e - p));
    if (!is_float) {
      // Python has no leading zeros in decimals: "007" lexes as "00" then "7", as in jinja2.
      if (lit.size() > 1 && lit[0] == '0') {
        size_t z = p + 1;
        while (z < e && (src_[z] == '0' || src_[z] == '_')) ++z;
        return integer(p, z, "0", 10);
      }
      return integer(p, e, lit, 10);
    }
    Token t;
    t.type = TokenType::Float;
    t.number = std::strtod(lit.c_str(), nullptr);
    place(t, p);
    out_.push_back(std::move(t));
    return e;
  }

  size_t integer(size_t p, size_t e, const std::string& digits_text, int base) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(digits_text.c_str(), &end, base);
    if (errno == ERANGE || v > uint64_t(INT64_MAX)) error("integer literal too large", p);
    Token t;
    t.type = TokenType::Integer;
    t.integer = int64_t(v);
    place(t, p);
    out_.push_back(std::move(t));
    return e;
  }

  size_t string(size_t p) {
    const char quote = src_[p];
    std::string value;
    size_t i = p + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      if (src_[i] != '\\') {
        value += src_[i];
        continue;
      }
      if (++i >= src_.size()) break;
      i = escape(i, value);
    }
    if (i >= src_.size()) error("unterminated string literal", p);
    emit(TokenType::String, p, std::move(value));
    return i + 1;
  }

  // Python's escape at src_[i] (just after the backslash); returns the index of its last character.
  size_t escape(size_t i, std::string& out) {
    const char c = src_[i];
    switch (c) {
      case '\n': return i;  // line continuation
      case '\\': case '\'': case '"': out += c; return i;
      case 'a': out += '\a'; return i;
      case 'b': out += '\b'; return i;
      case 'f': out += '\f'; return i;
      case 'n': out += '\n'; return i;
      case 'r': out += '\r'; return i;
      case 't': out += '\t'; return i;
      case 'v': out += '\v'; return i;
      default: break;
    }
    if (c >= '0' && c <= '7') {
      uint32_t v = 0;
      size_t k = i;
      for (; k < i + 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++k) v = v * 8 + uint32_t(src_[k] - '0');
      utf8::append(out, v);
      return k - 1;
    }
    const int width = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (width == 0) {
      if (c == 'N') error("\\N{...} escapes are not supported", i - 1);
      out.append("\\").append(1, c);  // unknown escapes stay as written
      return i;
    }
    uint32_t v = 0;
    for (int k = 1; k <= width; ++k) {
      if (i + size_t(k) >= src_.size() || hex_value(src_[i + size_t(k)]) < 0) error("truncated \\" + std::string(1, c) + " escape", i - 1);
      v = v * 16 + uint32_t(hex_value(src_[i + size_t(k)]));
    }
    if (v > 0x10ffff) error("illegal Unicode character", i - 1);
    utf8::append(out, v);
    return i + size_t(width);
  }

  size_t op(size_t p, std::string& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view o : kTwo) {
      if (at(p, o)) {
        emit(TokenType::Operator, p, std::string(o));
        return p + 2;
      }
    }
    const char c = src_[p];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      error("unexpected character '" + std::string(text::chars(std::string_view(src_).substr(p, 4)).front()) + "'", p);
    }
    if (c == '(' || c == '[' || c == '{') balance += c == '(' ? ')' : c == '[' ? ']' : '}';
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) error(std::string("unexpected '") + c + "'", p);
      if (balance.back() != c) error(std::string("unexpected '") + c + "', expected '" + balance.back() + "'", p);
      balance.pop_back();
    }
    emit(TokenType::Operator, p, std::string(1, c));
    return p + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace flashserve::jinja
