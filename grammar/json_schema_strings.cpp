// JSON text pieces of the schema grammar: GBNF escaping, the fixed rules (any JSON value, string
// characters, number syntax, formats), `pattern` grammars rewritten to match the JSON-escaped form
// of the strings they describe, and object keys that avoid a set of names.
#include <algorithm>
#include <cctype>
#include <map>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_detail.h"
#include "grammar/regex.h"

namespace flashserve::grammar::json_schema_detail {
namespace {

// Characters a JSON string cannot hold unescaped (0x7F is allowed by JSON but kept out, as the
// `char` rule does, so a model never emits a raw DEL).
constexpr CodeRange kSpecials[] = {{0x00, 0x1F}, {0x22, 0x22}, {0x5C, 0x5C}, {0x7F, 0x7F}};
constexpr uint32_t kNumSpecials = 0x20 + 3;

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }

bool is_special(uint32_t cp) {
  return std::any_of(std::begin(kSpecials), std::end(kSpecials), [&](CodeRange r) { return cp >= r.lo && cp <= r.hi; });
}

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

// Code points of a string nlohmann already checked as UTF-8.
std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const int len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
    uint32_t cp = len == 1 ? lead : len == 2 ? (lead & 0x1F) : len == 3 ? (lead & 0x0F) : (lead & 0x07);
    for (int k = 1; k < len && i + size_t(k) < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + size_t(k)]) & 0x3F);
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

std::string gbnf_class(const std::vector<CodeRange>& ranges) {
  std::string out = "[";
  for (const CodeRange& r : ranges) {
    append_gbnf_char(out, r.lo, true);
    if (r.hi > r.lo) {
      out += '-';
      append_gbnf_char(out, r.hi, true);
    }
  }
  return out + "]";
}

// A class of any character but the specials and `except`.
std::string raw_class_except(const std::vector<uint32_t>& except) {
  std::string out = "[^\"\\\\\\x7F\\x00-\\x1F";
  for (uint32_t cp : except) append_gbnf_char(out, cp, true);
  return out + "]";
}

std::vector<CodeRange> without_specials(const std::vector<CodeRange>& ranges) {
  std::vector<CodeRange> out;
  for (CodeRange r : ranges) {
    for (const CodeRange& s : kSpecials) {
      if (r.lo > r.hi || s.hi < r.lo || s.lo > r.hi) continue;
      if (s.lo > r.lo) out.push_back({r.lo, s.lo - 1});
      r.lo = s.hi + 1;
    }
    if (r.lo <= r.hi) out.push_back(r);
  }
  return out;
}

bool contains(const std::vector<CodeRange>& ranges, uint32_t cp) {
  return std::any_of(ranges.begin(), ranges.end(), [&](CodeRange r) { return cp >= r.lo && cp <= r.hi; });
}

// How a special character is written inside a JSON string: \" \\ \b \t \n \f \r, else \u00XX
// (either case for the hex letter).
std::string escaped(uint32_t cp) {
  switch (cp) {
    case '"': return R"("\\\"")";
    case '\\': return R"("\\\\")";
    case '\b': return R"("\\b")";
    case '\t': return R"("\\t")";
    case '\n': return R"("\\n")";
    case '\f': return R"("\\f")";
    case '\r': return R"("\\r")";
    default: break;
  }
  const char* digits = "0123456789abcdef";
  const char low = digits[cp & 0xF];
  std::string out = std::string(R"("\\u00)") + digits[cp >> 4];
  if (low >= '0' && low <= '9') return out + low + "\"";
  return out + "\" [" + low + char(low - 'a' + 'A') + "]";
}

// A regex character class as JSON string text: the plain characters as they are, specials escaped.
std::string json_text_of_class(const std::vector<CodeRange>& ranges, RuleSink& sink) {
  std::vector<std::string> pieces;
  const std::vector<CodeRange> plain = without_specials(ranges);
  if (plain.size() == 1 && plain[0].lo == plain[0].hi) {
    pieces.push_back(gbnf_literal(utf8(plain[0].lo)));
  } else if (!plain.empty()) {
    pieces.push_back(gbnf_class(plain));
  }
  std::vector<uint32_t> specials;
  for (const CodeRange& s : kSpecials) {
    for (uint32_t cp = s.lo; cp <= s.hi; ++cp) {
      if (contains(ranges, cp)) specials.push_back(cp);
    }
  }
  if (specials.size() == kNumSpecials) {
    pieces.push_back(sink.fixed("escaped-special"));
  } else {
    for (uint32_t cp : specials) pieces.push_back(escaped(cp));
  }
  if (pieces.empty()) pieces.push_back("[]");  // an empty class: matches nothing, as in the regex
  if (pieces.size() == 1) return pieces[0];
  std::string out = "(";
  for (size_t i = 0; i < pieces.size(); ++i) out += (i ? " | " : " ") + pieces[i];
  return out + " )";
}

Grammar parse_pattern(const std::string& pattern, const std::string& path) {
  const std::string shown = "'pattern' " + Json(pattern).dump();
  try {
    return parse_gbnf(regex_to_gbnf(pattern, "pattern"), "pattern");
  } catch (const GrammarError& e) {
    fail(shown + ": " + e.what(), path);
  }
}

}  // namespace

const std::vector<FixedRule>& fixed_rules() {
  static const std::vector<FixedRule> rules = {
      {"ws", R"g(| " " | "\n" [ \t]{0,20})g", ""},
      {"value", "object | array | string | number | boolean | null", "object array string number boolean null"},
      {"object", R"g("{" ws ( member ( ws "," ws member )* ws )? "}")g", "ws member"},
      {"member", R"g(string ws ":" ws value)g", "string ws value"},
      {"array", R"g("[" ws ( value ( ws "," ws value )* ws )? "]")g", "ws value"},
      {"string", R"g("\"" char* "\"")g", "char"},
      // One code point: a surrogate pair escape is one character, a lone surrogate none.
      {"char", R"g([^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] | "\\u" hex-bmp | "\\u" [dD] [89abAB] hex hex "\\u" [dD] [c-fC-F] hex hex)g",
       "hex hex-bmp"},
      {"hex", "[0-9a-fA-F]", ""},
      {"hex-bmp", "[0-9a-cA-CeEfF] hex hex hex | [dD] [0-7] hex hex", "hex"},
      // At most 18 integer digits, 18 fraction digits and a two-digit exponent: every number the
      // grammar writes parses as a finite double (1e400 would not), and a model cannot loop on digits.
      {"integer", R"g("-"? ( "0" | [1-9] [0-9]{0,17} ))g", ""},
      {"fraction", R"g("." [0-9]{1,18})g", ""},
      {"number", R"g(integer fraction? ( [eE] [-+]? [0-9]{1,2} )?)g", "integer fraction"},
      {"boolean", R"g("true" | "false")g", ""},
      {"null", R"g("null")g", ""},
      {"key-chars", R"g([^"\\\x7F\x00-\x1F]*)g", ""},
      {"escaped-special", R"g("\\" ["\\bfnrt] | "\\u00" [01] hex | "\\u007" [fF])g", "hex"},
      {"fmt-date", R"g([0-9]{4} "-" fmt-month-day | fmt-leap-year "-02-29")g", "fmt-month-day fmt-leap-year"},
      {"fmt-month-day",
       R"g(( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) | ( "0" [13-9] | "1" [0-2] ) "-" ( "29" | "30" ) | ( "0" [13578] | "1" [02] ) "-31")g",
       ""},
      // Years divisible by 4, except centuries not divisible by 400.
      {"fmt-leap-year", R"g([0-9]{2} ( [02468] [48] | [2468] "0" | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "00")g", ""},
      {"fmt-hour", R"g([01] [0-9] | "2" [0-3])g", ""},
      {"fmt-time", R"g(fmt-hour ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] fmt-hour ":" [0-5] [0-9] ))g",
       "fmt-hour"},
      {"fmt-date-time", R"g(fmt-date "T" fmt-time)g", "fmt-date fmt-time"},
      {"fmt-uuid", R"g(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})g", "hex"},
      {"fmt-ipv4", R"g(fmt-octet "." fmt-octet "." fmt-octet "." fmt-octet)g", "fmt-octet"},
      {"fmt-octet", R"g("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])g", ""},
      {"fmt-email", R"g(fmt-email-atom ( "." fmt-email-atom )* "@" fmt-email-label ( "." fmt-email-label )+)g",
       "fmt-email-atom fmt-email-label"},
      {"fmt-email-atom", R"g([A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+)g", ""},
      {"fmt-email-label", R"g([A-Za-z0-9] ( [A-Za-z0-9\-]{0,61} [A-Za-z0-9] )?)g", ""},
  };
  return rules;
}

// UTF-8 sequences stay as they are: the literal matches the same bytes.
std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      append_gbnf_char(out, c, /*in_class=*/false);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

bool is_single_term(const std::string& t) {
  if (t.empty()) return false;
  if (t[0] != '"') return std::all_of(t.begin(), t.end(), is_name_char);
  size_t i = 1;
  while (i < t.size() && t[i] != '"') i += t[i] == '\\' ? 2 : 1;
  return i == t.size() - 1;
}

std::string rule_name_base(const std::string& hint) {
  std::string base;
  for (char c : hint.substr(0, 48)) base += is_name_char(c) ? c : '-';
  if (base.empty()) base = "x";
  // The parser names its helpers group-N, seq-N, star-N, opt-N; a rule of ours by such a name
  // would be defined twice.
  for (const std::string helper : {"group", "seq", "star", "opt"}) {
    const std::string_view rest = std::string_view(base).substr(std::min(base.size(), helper.size()));
    const bool numbered = rest.size() > 1 && rest[0] == '-' &&
                          std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (base.rfind(helper, 0) == 0 && (rest.empty() || numbered)) return base + "-x";
  }
  return base;
}

std::string repeat_suffix(uint64_t min, std::optional<uint64_t> max) {
  if (!max) return min == 0 ? "*" : min == 1 ? "+" : "{" + std::to_string(min) + ",}";
  if (min == *max) return min == 1 ? "" : "{" + std::to_string(min) + "}";
  if (min == 0 && *max == 1) return "?";
  return "{" + std::to_string(min) + "," + std::to_string(*max) + "}";
}

std::string format_rule(const std::string& format, const std::string& path, RuleSink& sink) {
  static const std::map<std::string, std::string_view> kFormats = {
      {"date", "fmt-date"}, {"time", "fmt-time"}, {"date-time", "fmt-date-time"},
      {"uuid", "fmt-uuid"}, {"ipv4", "fmt-ipv4"}, {"email", "fmt-email"}};
  const auto it = kFormats.find(format);
  if (it == kFormats.end()) fail("unsupported format '" + format + "'", path);
  return sink.fixed(it->second);
}

std::string pattern_string(const std::string& pattern, const std::string& path, const std::string& hint,
                           RuleSink& sink) {
  const Grammar g = parse_pattern(pattern, path);
  std::vector<std::string> names(size_t(g.num_rules()));
  const std::string root = sink.fresh_name(hint + "-pattern");
  for (int32_t r = 0; r < g.num_rules(); ++r) names[size_t(r)] = r == g.root() ? root : sink.fresh_name(root);
  for (int32_t r = 0; r < g.num_rules(); ++r) {
    std::string body;
    for (int32_t start : g.alternatives(r)) {
      std::string alt;
      for (int32_t pos = start; g.at(pos).kind != Element::Kind::End; ++pos) {
        const Element& e = g.at(pos);
        alt += (alt.empty() ? "" : " ") +
               (e.kind == Element::Kind::Rule ? names[size_t(e.index)] : json_text_of_class(g.class_ranges(e.index), sink));
      }
      body += (body.empty() ? "" : " | ") + (alt.empty() ? std::string("\"\"") : alt);
    }
    sink.add_rule(names[size_t(r)], body);
  }
  return "\"\\\"\" " + root + " \"\\\"\"";
}

std::string key_other_than(const std::vector<std::string>& names, const std::string& hint, RuleSink& sink) {
  // A trie of the names; each node's rule matches the rest of any key that leaves the trie or
  // stops at a node that ends no name. Names with specials cannot be written unescaped: no entry.
  struct Node {
    std::map<uint32_t, size_t> next;
    bool ends_name = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    const std::vector<uint32_t> cps = code_points(name);
    if (std::any_of(cps.begin(), cps.end(), is_special)) continue;
    size_t at = 0;
    for (uint32_t cp : cps) {
      auto [it, added] = trie[at].next.try_emplace(cp, trie.size());
      const size_t child = it->second;
      if (added) trie.emplace_back();
      at = child;
    }
    trie[at].ends_name = true;
    // Every node costs a rule of some 40 bytes: stop before building what cannot be written.
    if (trie.size() > kMaxGrammarBytes / 40) fail_too_large();
  }
  std::vector<std::string> rule_names(trie.size());
  rule_names[0] = sink.fresh_name(hint + "-key");
  const std::string rest = sink.fixed("key-chars");
  for (size_t i = 0; i < trie.size(); ++i) {
    std::vector<uint32_t> children;
    std::string body = trie[i].ends_name ? "" : "\"\" | ";
    for (const auto& [cp, child] : trie[i].next) {
      children.push_back(cp);
      rule_names[child] = sink.fresh_name(rule_names[0]);  // children come after their parent
      body += gbnf_literal(utf8(cp)) + " " + rule_names[child] + " | ";
    }
    body += raw_class_except(children) + " " + rest;
    sink.add_rule(rule_names[i], body);
  }
  return "\"\\\"\" " + rule_names[0] + " \"\\\"\"";
}

}  // namespace flashserve::grammar::json_schema_detail
