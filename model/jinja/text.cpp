#include "model/jinja/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "model/utf8.h"

namespace flashserve::jinja {

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  // Shortest round-trip digits in scientific form: "-1.2345e+02".
  const auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, size_t(r.ptr - buf));
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::stoi(std::string(sci.substr(e + 1)));
  const int point = exponent + 1;  // digits[0:point] are the integer part
  const int n = int(digits.size());
  if (point > 16 || point <= -4) {
    out += digits[0];
    if (n > 1) out.append(".").append(digits, 1);
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (point <= 0) return out + "0." + std::string(size_t(-point), '0') + digits;
  if (point >= n) return out + digits + std::string(size_t(point - n), '0') + ".0";
  return out + digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
}

namespace {

// Python's str.isprintable() for the characters a repr() keeps as they are (approximate outside
// Latin-1: format characters and separators are escaped, everything else kept).
bool printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return false;
  if ((cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f)) return false;
  return cp != 0x1680 && cp != 0x3000 && cp != 0xfeff && !(cp >= 0xd800 && cp <= 0xdfff);
}

void append_repr_string(std::string& out, const std::string& s, Budget& budget) {
  const bool has_single = s.find('\'') != std::string::npos;
  const char quote = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  std::string r(1, quote);
  for (std::string_view ch : text::chars(s)) {
    const uint32_t cp = text::code_point(ch);
    char esc[16];
    if (ch.size() == 1 && (ch[0] == quote || ch[0] == '\\')) {
      r.append("\\").append(ch);
    } else if (cp == '\n') {
      r += "\\n";
    } else if (cp == '\r') {
      r += "\\r";
    } else if (cp == '\t') {
      r += "\\t";
    } else if (printable(cp)) {
      r.append(ch);
    } else {
      std::snprintf(esc, sizeof(esc), cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      r += esc;
    }
  }
  r += quote;
  budget.append(out, r);
}

void append_container(std::string& out, const Value& v, Budget& budget) {
  if (v.is(Value::Kind::List)) {
    const ListData& l = v.list();
    budget.append(out, l.tuple ? "(" : "[");
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i) budget.append(out, ", ");
      append_repr(out, l.items[i], budget);
    }
    budget.append(out, l.tuple ? (l.items.size() == 1 ? ",)" : ")") : "]");
    return;
  }
  budget.append(out, "{");
  bool first = true;
  for (const auto& [k, val] : v.dict().items) {
    if (!first) budget.append(out, ", ");
    first = false;
    append_repr(out, k, budget);
    budget.append(out, ": ");
    append_repr(out, val, budget);
  }
  budget.append(out, "}");
}

}  // namespace

void append_str(std::string& out, const Value& v, Budget& budget) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return;
    case Value::Kind::None: budget.append(out, "None"); return;
    case Value::Kind::Bool: budget.append(out, v.as_bool() ? "True" : "False"); return;
    case Value::Kind::Int: budget.append(out, std::to_string(v.as_int())); return;
    case Value::Kind::Float: budget.append(out, float_repr(v.as_double())); return;
    case Value::Kind::String: budget.append(out, v.str()); return;
    case Value::Kind::List:
    case Value::Kind::Dict: append_container(out, v, budget); return;
    case Value::Kind::Namespace: {
      budget.append(out, "<Namespace {");
      bool first = true;
      for (const auto& [k, val] : v.ns().attrs) {
        if (!first) budget.append(out, ", ");
        first = false;
        append_repr(out, Value::string(k), budget);
        budget.append(out, ": ");
        append_repr(out, val, budget);
      }
      budget.append(out, "}>");
      return;
    }
    case Value::Kind::Callable: budget.append(out, "<function " + v.fn().name() + ">"); return;
  }
}

std::string to_str(const Value& v, Budget& budget) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v, budget);
  return out;
}

void append_repr(std::string& out, const Value& v, Budget& budget) {
  if (v.is_string()) {
    append_repr_string(out, v.str(), budget);
  } else if (v.is_undefined()) {
    budget.append(out, "Undefined");
  } else {
    append_str(out, v, budget);
  }
}

namespace {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii, Budget& budget) {
  std::string r = "\"";
  for (std::string_view ch : text::chars(s)) {
    const uint32_t cp = text::code_point(ch);
    char esc[16];
    switch (cp) {
      case '"': r += "\\\""; continue;
      case '\\': r += "\\\\"; continue;
      case '\n': r += "\\n"; continue;
      case '\r': r += "\\r"; continue;
      case '\t': r += "\\t"; continue;
      case '\b': r += "\\b"; continue;
      case '\f': r += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7f)) {
      if (cp >= 0x10000) {
        std::snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        std::snprintf(esc, sizeof(esc), "\\u%04x", cp);
      }
      r += esc;
    } else {
      r.append(ch);
    }
  }
  r += '"';
  budget.append(out, r);
}

void append_json_at(std::string& out, const Value& v, const JsonOptions& o, Budget& budget, int level);

void newline(std::string& out, const JsonOptions& o, Budget& budget, int level) {
  if (!o.pretty) return;
  budget.append(out, "\n");
  for (int i = 0; i < level; ++i) budget.append(out, o.indent);
}

std::string json_key(const Value& k, Budget& budget) {
  switch (k.kind()) {
    case Value::Kind::String: return k.str();
    case Value::Kind::None: return "null";
    case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
    case Value::Kind::Int:
    case Value::Kind::Float: return to_str(k, budget);
    default: fail("keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

void append_json_at(std::string& out, const Value& v, const JsonOptions& o, Budget& budget, int level) {
  switch (v.kind()) {
    case Value::Kind::None: budget.append(out, "null"); return;
    case Value::Kind::Bool: budget.append(out, v.as_bool() ? "true" : "false"); return;
    case Value::Kind::Int: budget.append(out, std::to_string(v.as_int())); return;
    case Value::Kind::Float: {
      const double d = v.as_double();
      budget.append(out, std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : float_repr(d));
      return;
    }
    case Value::Kind::String: append_json_string(out, v.str(), o.ensure_ascii, budget); return;
    case Value::Kind::List: {
      const auto& items = v.list().items;
      if (items.empty()) return budget.append(out, "[]");
      budget.append(out, "[");
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) budget.append(out, o.item_separator);
        newline(out, o, budget, level + 1);
        append_json_at(out, items[i], o, budget, level + 1);
      }
      newline(out, o, budget, level);
      budget.append(out, "]");
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict().items.empty()) return budget.append(out, "{}");
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.dict().items) entries.emplace_back(json_key(k, budget), &val);
      if (o.sort_keys) {
        budget.spend(entries.size() * 8);
        std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      budget.append(out, "{");
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) budget.append(out, o.item_separator);
        newline(out, o, budget, level + 1);
        append_json_string(out, entries[i].first, o.ensure_ascii, budget);
        budget.append(out, o.key_separator);
        append_json_at(out, *entries[i].second, o, budget, level + 1);
      }
      newline(out, o, budget, level);
      budget.append(out, "}");
      return;
    }
    default: fail("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

void append_json(std::string& out, const Value& v, const JsonOptions& options, Budget& budget) {
  append_json_at(out, v, options, budget, 0);
}

namespace text {

std::vector<std::string_view> chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = std::min(utf8::char_len(static_cast<unsigned char>(s[i])), s.size() - i);
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) n = k;  // truncated sequence
    }
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len = std::min(utf8::char_len(static_cast<unsigned char>(s[i])), s.size() - i);
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) len = k;
    }
    i += len;
    ++n;
  }
  return n;
}

uint32_t code_point(std::string_view ch) {
  if (ch.size() == 1) return static_cast<unsigned char>(ch[0]);
  size_t pos = 0;
  return utf8::next(ch, pos);
}

bool is_space(std::string_view ch) {
  const uint32_t cp = code_point(ch);
  if (ch.size() == 1) return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::string strip(std::string_view s, bool left, bool right, const std::string* strip_chars) {
  const std::vector<std::string_view> cs = chars(s);
  std::vector<std::string_view> set;
  if (strip_chars) set = chars(*strip_chars);
  auto strippable = [&](std::string_view ch) {
    return strip_chars ? std::find(set.begin(), set.end(), ch) != set.end() : is_space(ch);
  };
  size_t b = 0, e = cs.size();
  while (left && b < e && strippable(cs[b])) ++b;
  while (right && e > b && strippable(cs[e - 1])) --e;
  if (b == e) return {};
  const size_t begin = size_t(cs[b].data() - s.data());
  const size_t end = size_t(cs[e - 1].data() + cs[e - 1].size() - s.data());
  return std::string(s.substr(begin, end - begin));
}

namespace {

// Python's simple case mappings for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other
// characters have no case here (Python's final-sigma rule is left out too).
uint32_t upper_cp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) || (c >= 0x430 && c <= 0x44f)) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if (((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) && (c & 1)) return c == 0x131 ? 'I' : c - 1;
  if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && !(c & 1)) return c - 1;
  switch (c) {
    case 0xb5: return 0x39c;
    case 0xff: return 0x178;
    case 0x17f: return 'S';
    case 0x3c2: return 0x3a3;
    case 0x3ac: return 0x386;
    case 0x3ad: case 0x3ae: case 0x3af: return c - 37;
    case 0x3cc: return 0x38c;
    case 0x3cd: case 0x3ce: return c - 63;
    default: return c;
  }
}

uint32_t lower_cp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3ab && c != 0x3a2) || (c >= 0x410 && c <= 0x42f)) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if (((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) && !(c & 1)) return c + 1;
  if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && (c & 1)) return c + 1;
  switch (c) {
    case 0x178: return 0xff;
    case 0x386: return 0x3ac;
    case 0x388: case 0x389: case 0x38a: return c + 37;
    case 0x38c: return 0x3cc;
    case 0x38e: case 0x38f: return c + 63;
    default: return c;
  }
}

bool cased(uint32_t c) { return upper_cp(c) != c || lower_cp(c) != c || c == 0xdf || c == 0x138 || c == 0x149; }

enum class Case { Upper, Lower, Title };

void append_cased(std::string& out, std::string_view ch, Case how) {
  const uint32_t c = code_point(ch);
  if (ch.size() == 1 && c >= 0x80) {  // an invalid byte stays as it is
    out.append(ch);
    return;
  }
  if (c == 0xdf && how != Case::Lower) {  // ß
    out += how == Case::Upper ? "SS" : "Ss";
  } else if (c == 0x130 && how == Case::Lower) {  // İ
    out += "i\xcc\x87";
  } else {
    utf8::append(out, how == Case::Lower ? lower_cp(c) : upper_cp(c));
  }
}

std::string map_case(std::string_view s, Case how) {
  std::string out;
  out.reserve(s.size());
  for (std::string_view ch : chars(s)) append_cased(out, ch, how);
  return out;
}

}  // namespace

std::string upper(std::string_view s) { return map_case(s, Case::Upper); }
std::string lower(std::string_view s) { return map_case(s, Case::Lower); }

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (std::string_view ch : chars(s)) {
    append_cased(out, ch, prev_cased ? Case::Lower : Case::Title);
    prev_cased = cased(code_point(ch));
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (std::string_view ch : chars(s)) {
    append_cased(out, ch, first ? Case::Title : Case::Lower);
    first = false;
  }
  return out;
}

bool is_cased(std::string_view ch) { return cased(code_point(ch)); }

std::vector<std::string> splitlines(std::string_view s) {
  std::vector<std::string> out;
  std::string line;
  const std::vector<std::string_view> cs = chars(s);
  for (size_t i = 0; i < cs.size(); ++i) {
    const uint32_t cp = code_point(cs[i]);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
                     (cs[i].size() > 1 && (cp == 0x85 || cp == 0x2028 || cp == 0x2029));
    if (!brk) {
      line.append(cs[i]);
      continue;
    }
    if (cp == '\r' && i + 1 < cs.size() && cs[i + 1] == "\n") ++i;
    out.push_back(std::move(line));
    line.clear();
  }
  if (!line.empty()) out.push_back(std::move(line));
  return out;
}

}  // namespace text
}  // namespace flashserve::jinja
