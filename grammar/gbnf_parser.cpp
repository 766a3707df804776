#include "grammar/gbnf_parser.h"

#include <limits>
#include <string>
#include <vector>

namespace flashserve::grammar {
namespace {

using Sequence = std::vector<Element>;

// Nested groups recurse; this bounds the recursion so a hostile grammar cannot exhaust the stack.
constexpr int kMaxNesting = 256;
// Each copy a bounded repetition makes costs elements; refuse counts no grammar could afford.
constexpr uint64_t kMaxRepeat = kMaxGrammarElements;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Grammar parse(std::string_view root) && {
    skip_blank_lines();
    while (pos_ < s_.size()) {
      parse_rule();
      skip_blank_lines();
    }
    return std::move(b_).build(root);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError("grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        return;
      }
    }
  }
  void skip_blank_lines() { skip_space(true); }

  // At a line's end: whether the rule goes on with a line beginning `|` (moving there if so).
  bool continues_on_next_line() {
    const size_t saved = pos_;
    skip_space(true);
    if (peek() == '|') return true;
    pos_ = saved;
    return false;
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  void parse_rule() {
    const std::string name = parse_name();
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const int32_t rule = b_.rule(name);
    if (b_.defined(rule)) fail("rule '" + name + "' is defined twice");
    b_.define(rule, parse_alternatives(0));
    skip_space(false);
    if (!at_end() && peek() != '\n') fail(std::string("unexpected '") + peek() + "'");
  }

  std::vector<Sequence> parse_alternatives(int depth) {
    if (depth > kMaxNesting) fail("groups nested more than 256 deep");
    const bool nested = depth > 0;
    std::vector<Sequence> alts{parse_sequence(depth)};
    for (;;) {
      if (!nested && peek() == '\n' && !continues_on_next_line()) break;
      if (peek() != '|') break;
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(depth));
    }
    return alts;
  }

  Sequence parse_sequence(int depth) {
    const bool nested = depth > 0;
    Sequence seq;
    for (;;) {
      skip_space(nested);
      const char c = peek();
      if (at_end() || c == '|' || c == ')' || c == '\n') return seq;
      Sequence item = parse_primary(depth);
      item = parse_postfix(std::move(item));
      seq.insert(seq.end(), item.begin(), item.end());
    }
  }

  Sequence parse_primary(int depth) {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return {{Element::Kind::Chars, parse_class()}};
    if (c == '.') {
      ++pos_;
      return {{Element::Kind::Chars, b_.char_class({}, true)}};
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      std::vector<Sequence> alts = parse_alternatives(depth + 1);
      skip_space(true);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      if (alts.size() == 1) return alts[0];
      const int32_t rule = b_.new_rule("group");
      b_.define(rule, alts);
      return {{Element::Kind::Rule, rule}};
    }
    if (is_name_char(c)) {
      const std::string name = parse_name();
      return {{Element::Kind::Rule, b_.rule(name)}};
    }
    fail(std::string("unexpected '") + c + "'");
  }

  // One element standing for `item`, wrapping a longer sequence in a rule of its own.
  Element single(const Sequence& item) {
    if (item.size() == 1) return item[0];
    const int32_t rule = b_.new_rule("seq");
    b_.define(rule, {item});
    return {Element::Kind::Rule, rule};
  }

  // x* as star ::= x star | "" (tail recursion keeps the matcher's stacks flat).
  Element star(Element x) {
    const int32_t rule = b_.new_rule("star");
    b_.define(rule, {{x, {Element::Kind::Rule, rule}}, {}});
    return {Element::Kind::Rule, rule};
  }

  Sequence parse_postfix(Sequence item) {
    const char c = peek();
    if (c != '*' && c != '+' && c != '?' && c != '{') return item;
    ++pos_;
    const Element x = single(item);
    if (c == '*') return {star(x)};
    if (c == '+') return {x, star(x)};
    uint64_t min = 0, max = 1;
    bool bounded = true;
    if (c == '{') {
      skip_space(false);
      min = max = parse_count();
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        if (peek() == '}') {
          bounded = false;
        } else {
          max = parse_count();
          if (max < min) fail("repetition {m,n} with n < m");
        }
        skip_space(false);
      }
      if (peek() != '}') fail("expected '}'");
      ++pos_;
    }
    Sequence out(min, x);
    if (!bounded) {
      out.push_back(star(x));
      return out;
    }
    // At most max - min more: opt_k ::= x opt_{k-1} | "", opt_1 ::= x | "".
    int32_t tail = -1;
    for (uint64_t k = 0; k < max - min; ++k) {
      const int32_t rule = b_.new_rule("opt");
      Sequence first{x};
      if (tail >= 0) first.push_back({Element::Kind::Rule, tail});
      b_.define(rule, {first, {}});
      tail = rule;
    }
    if (tail >= 0) out.push_back({Element::Kind::Rule, tail});
    return out;
  }

  uint64_t parse_count() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + uint64_t(peek() - '0');
      if (v > kMaxRepeat) fail("repetition count over 1048576");
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return v;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) fail("expected a hex digit");
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    if (v > 0x10FFFF) fail("code point beyond U+10FFFF");
    return v;
  }

  // One character of a literal or class, escapes resolved; the caller checks for its delimiter.
  uint32_t parse_char() {
    if (at_end()) fail("unterminated literal or class");
    const auto lead = static_cast<unsigned char>(peek());
    if (lead == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'': return uint32_t(e);
        default: pos_ -= 2; fail(std::string("unknown escape '\\") + e + "'");
      }
    }
    if (lead == '\n') fail("newline inside a literal or class (write \\n)");
    int len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + size_t(len) > s_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? lead : len == 2 ? (lead & 0x1F) : len == 3 ? (lead & 0x0F) : (lead & 0x07);
    for (int i = 1; i < len; ++i) {
      const auto c = static_cast<unsigned char>(s_[pos_ + size_t(i)]);
      if ((c & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (c & 0x3F);
    }
    pos_ += size_t(len);
    return cp;
  }

  Sequence parse_literal() {
    ++pos_;  // "
    Sequence seq;
    while (peek() != '"') {
      const uint32_t cp = parse_char();
      seq.push_back({Element::Kind::Chars, b_.char_class({{cp, cp}}, false)});
    }
    ++pos_;
    return seq;
  }

  int32_t parse_class() {
    ++pos_;  // [
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    std::vector<CodeRange> ranges;
    while (peek() != ']') {
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range with its end before its start");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return b_.char_class(std::move(ranges), negate);
  }

  std::string_view s_;
  size_t pos_ = 0;
  GrammarBuilder b_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) { return Parser(text).parse(root); }

}  // namespace flashserve::grammar
