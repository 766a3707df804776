#include "grammar/regex_parser.h"

#include <string>
#include <utility>

namespace flashserve::grammar {
namespace {

// Groups recurse; this bounds the recursion so a hostile pattern cannot exhaust the stack.
constexpr int kMaxGroupNesting = 256;
// Each repetition costs grammar elements per count; larger counts are better said with * or +.
constexpr uint32_t kMaxRepeatCount = 10000;

// ECMA-262's \d, \w and \s (WhiteSpace and LineTerminator), and the line terminators `.` stops at.
CodeSet digits() { return {{'0', '9'}}; }
CodeSet word_chars() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
CodeSet white_space() {
  return {{0x09, 0x0D}, {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}
CodeSet line_terminators() { return {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_name_start(char c) { return is_letter(c) || c == '_' || c == '$'; }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One thing a class may hold: a single character (which may bound a range) or a set like \d.
struct ClassAtom {
  CodeSet set;
  bool single = false;
  uint32_t cp = 0;  // when single

  static ClassAtom of(uint32_t c) { return {{{c, c}}, true, c}; }
  static ClassAtom of(CodeSet s) { return {std::move(s), false, 0}; }
};

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : p_(pattern) {}

  RegexPtr parse() {
    RegexPtr r = alternation(0);
    if (!at_end()) fail("unmatched ')'", pos_);  // the only thing that stops a top-level alternation early
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    size_t chars = 0;
    for (size_t i = 0; i < at && i < p_.size(); ++i) chars += (static_cast<unsigned char>(p_[i]) & 0xC0) != 0x80;
    throw GrammarError("regex: " + what + " at position " + std::to_string(chars));
  }

  bool at_end() const { return pos_ >= p_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }

  RegexPtr alternation(int depth) {
    std::vector<RegexPtr> alternatives{sequence(depth)};
    while (peek() == '|') {
      ++pos_;
      alternatives.push_back(sequence(depth));
    }
    return regex_alt(std::move(alternatives));
  }

  // ^ and $ assert the ends of the input, which a full match reaches anyway at the ends of the
  // pattern and of its top-level alternatives; elsewhere they would need lookaround.
  RegexPtr sequence(int depth) {
    const bool top = depth == 0;
    std::vector<RegexPtr> items;
    if (top && peek() == '^') ++pos_;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (top && peek() == '$' && (pos_ + 1 == p_.size() || peek(1) == '|')) {
        ++pos_;
        break;
      }
      items.push_back(quantified(atom(depth)));
    }
    return regex_seq(std::move(items));
  }

  RegexPtr atom(int depth) {
    const size_t start = pos_;
    const char c = peek();
    switch (c) {
      case '(': return group(depth);
      case '[': return char_class();
      case '.': ++pos_; return regex_chars(complement_ranges(line_terminators()));
      case '\\': return regex_chars(escape(false).set);
      case '*': case '+': case '?': fail(std::string("quantifier '") + c + "' has nothing to repeat", start);
      case '{':
        if (quantifier_ahead()) fail("quantifier '{' has nothing to repeat", start);
        fail("'{' that starts no repetition {n}, {n,} or {n,m} (write \\{ for the character)", start);
      case '^': fail("'^' is only supported at the start of the pattern", start);
      case '$': fail("'$' is only supported at the end of the pattern", start);
      default: {  // `]` and `}` on their own are plain characters, as in ECMA-262's Annex B
        const uint32_t cp = code_point();
        return regex_chars({{cp, cp}});
      }
    }
  }

  RegexPtr quantified(RegexPtr item) {
    uint32_t min = 0, max = kUnbounded;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : kUnbounded;
    } else if (c == '{' && quantifier_ahead()) {
      bounds(min, max);
    } else {
      return item;
    }
    if (peek() == '?') ++pos_;  // lazy: the same strings, preferred in another order
    return regex_repeat(std::move(item), min, max);
  }

  // Whether {n}, {n,} or {n,m} starts here (anything else with a brace is not a quantifier).
  bool quantifier_ahead() const {
    size_t i = 1;
    while (is_digit(peek(i))) ++i;
    if (i == 1) return false;
    if (peek(i) == ',') {
      for (++i; is_digit(peek(i));) ++i;
    }
    return peek(i) == '}';
  }

  void bounds(uint32_t& min, uint32_t& max) {
    const size_t start = pos_;
    ++pos_;  // {
    min = max = count();
    if (peek() == ',') {
      ++pos_;
      max = peek() == '}' ? kUnbounded : count();
    }
    ++pos_;  // }
    if (max < min) {
      fail("repetition " + std::string(p_.substr(start, pos_ - start)) + " has its maximum below its minimum", start);
    }
  }

  uint32_t count() {
    const size_t start = pos_;
    uint32_t v = 0;
    for (; is_digit(peek()); ++pos_) {
      v = v * 10 + uint32_t(peek() - '0');
      if (v > kMaxRepeatCount) fail("repetition count above 10000", start);
    }
    return v;
  }

  RegexPtr group(int depth) {
    const size_t open = pos_;
    if (depth >= kMaxGroupNesting) fail("groups nested more than 256 deep", open);
    ++pos_;
    if (peek() == '?') group_kind(open);
    RegexPtr inner = alternation(depth + 1);
    if (peek() != ')') fail("'(' is never closed", open);
    ++pos_;
    return inner;
  }

  // After "(?": only (?: and (?<name> group without asserting anything.
  void group_kind(size_t open) {
    ++pos_;
    const char c = peek();
    const char next = peek(1);
    if (c == ':') {
      ++pos_;
    } else if (c == '=') {
      fail("lookahead '(?=' is not supported", open);
    } else if (c == '!') {
      fail("negative lookahead '(?!' is not supported", open);
    } else if (c == '<' && next == '=') {
      fail("lookbehind '(?<=' is not supported", open);
    } else if (c == '<' && next == '!') {
      fail("negative lookbehind '(?<!' is not supported", open);
    } else if (c == '<') {
      group_name(open);
    } else if (at_end()) {
      fail("'(' is never closed", open);
    } else {  // inline modifiers (?i) (?-s:...), Python's (?P<name>...), and the like
      const std::string shown = c >= 0x20 && c < 0x7F ? std::string("(?") + c : "(?";
      fail("group '" + shown + "' is not supported: only (?: and (?<name> groups are", open);
    }
  }

  void group_name(size_t open) {
    ++pos_;  // <
    bool valid = is_name_start(peek());
    while (is_name_start(peek()) || is_digit(peek())) ++pos_;
    valid = valid && peek() == '>';
    if (!valid) fail("group name in '(?<name>' must be letters, digits, _ or $, not starting with a digit", open);
    ++pos_;
  }

  RegexPtr char_class() {
    const size_t open = pos_;
    ++pos_;
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    CodeSet ranges;
    for (;;) {
      if (at_end()) fail("'[' is never closed", open);
      if (peek() == ']') break;
      const ClassAtom lo = class_atom(open);
      if (peek() != '-' || peek(1) == ']') {
        ranges.insert(ranges.end(), lo.set.begin(), lo.set.end());
        continue;
      }
      const size_t dash = pos_++;
      const ClassAtom hi = class_atom(open);
      if (!lo.single || !hi.single) fail("a class escape like \\d cannot bound a range", dash);
      if (hi.cp < lo.cp) fail("range ends before it starts", dash);
      ranges.push_back({lo.cp, hi.cp});
    }
    ++pos_;
    CodeSet set = normalized_ranges(std::move(ranges));
    return regex_chars(negate ? complement_ranges(set) : std::move(set));
  }

  ClassAtom class_atom(size_t open) {
    if (at_end()) fail("'[' is never closed", open);
    if (peek() == '\\') return escape(true);
    return ClassAtom::of(code_point());
  }

  ClassAtom escape(bool in_class) {
    const size_t start = pos_++;
    if (at_end()) fail("pattern ends with a lone backslash", start);
    const char e = p_[pos_++];
    switch (e) {
      case 'd': return ClassAtom::of(digits());
      case 'D': return ClassAtom::of(complement_ranges(digits()));
      case 'w': return ClassAtom::of(word_chars());
      case 'W': return ClassAtom::of(complement_ranges(word_chars()));
      case 's': return ClassAtom::of(white_space());
      case 'S': return ClassAtom::of(complement_ranges(white_space()));
      case 'n': return ClassAtom::of('\n');
      case 'r': return ClassAtom::of('\r');
      case 't': return ClassAtom::of('\t');
      case 'f': return ClassAtom::of('\f');
      case 'v': return ClassAtom::of('\v');
      case 'x': return ClassAtom::of(hex(2, "\\x needs two hex digits", start));
      case 'u': return ClassAtom::of(unicode_escape(start));
      case 'c': return ClassAtom::of(control(start));
      case '0':
        if (is_digit(peek())) fail("octal escape is not supported", start);
        return ClassAtom::of(uint32_t(0));
      case 'b':
        if (in_class) return ClassAtom::of('\b');
        fail("word boundary \\b is not supported", start);
      case 'B': fail("word boundary \\B is not supported", start);
      case 'k': fail("backreference \\k<name> is not supported", start);
      case 'p': case 'P': fail(std::string("unicode property escape \\") + e + "{...} is not supported", start);
      default: break;
    }
    if (is_digit(e)) fail(std::string("backreference \\") + e + " is not supported", start);
    // Any other ASCII punctuation stands for itself (\. \* \/ \- ...); letters are reserved.
    const auto u = static_cast<unsigned char>(e);
    if (u >= 0x20 && u < 0x7F && !is_letter(e)) return ClassAtom::of(uint32_t(u));
    fail(u < 0x80 ? std::string("unknown escape \\") + e : "unknown escape", start);
  }

  uint32_t control(size_t start) {
    if (!is_letter(peek())) fail("\\c must be followed by a letter", start);
    return uint32_t(p_[pos_++]) % 32;
  }

  // `digits` hex digits, consumed only when all are there.
  bool try_hex(int digits, uint32_t& v) {
    v = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = hex_value(peek(size_t(i)));
      if (d < 0) return false;
      v = v * 16 + uint32_t(d);
    }
    pos_ += size_t(digits);
    return true;
  }

  uint32_t hex(int digits, const char* error, size_t start) {
    uint32_t v = 0;
    if (!try_hex(digits, v)) fail(error, start);
    return v;
  }

  // \uHHHH or \u{H...}. A surrogate pair written as two escapes is the one character it encodes.
  uint32_t unicode_escape(size_t start) {
    if (peek() == '{') return braced_code_point(start);
    const uint32_t cp = hex(4, "\\u needs four hex digits or {hex digits}", start);
    if (cp < 0xD800 || cp > 0xDBFF || peek() != '\\' || peek(1) != 'u') return cp;
    const size_t saved = pos_;
    pos_ += 2;
    uint32_t low = 0;
    if (try_hex(4, low) && low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    pos_ = saved;
    return cp;
  }

  uint32_t braced_code_point(size_t start) {
    ++pos_;  // {
    uint32_t v = 0;
    const size_t first = pos_;
    for (int d; (d = hex_value(peek())) >= 0; ++pos_) {
      v = v * 16 + uint32_t(d);
      if (v > kLastCodePoint) fail("\\u{...} beyond U+10FFFF", start);
    }
    if (pos_ == first || peek() != '}') fail("\\u{ needs hex digits and a closing '}'", start);
    ++pos_;
    return v;
  }

  uint32_t code_point() {
    const auto lead = static_cast<unsigned char>(p_[pos_]);
    const int len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + size_t(len) > p_.size()) fail("invalid UTF-8", pos_);
    uint32_t cp = len == 1 ? lead : lead & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto c = static_cast<unsigned char>(p_[pos_ + size_t(i)]);
      if ((c & 0xC0) != 0x80) fail("invalid UTF-8", pos_);
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
    if (cp < kSmallest[len] || cp > kLastCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8", pos_);
    pos_ += size_t(len);
    return cp;
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

RegexPtr parse_regex(std::string_view pattern) { return RegexParser(pattern).parse(); }

}  // namespace flashserve::grammar
