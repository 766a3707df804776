// What a schema may say: the accepted keywords and the shapes of their values, local $ref lookup,
// and allOf folded into a single schema.
#include <algorithm>
#include <cmath>
#include <set>

#include "grammar/json_schema_detail.h"

namespace flashserve::grammar::json_schema_detail {
namespace {

constexpr std::string_view kAnnotations[] = {"title",      "description", "default",  "examples",
                                             "$schema",    "$id",         "$comment", "deprecated",
                                             "readOnly",   "writeOnly",   "$defs",    "definitions",
                                             // OpenAPI's hint for oneOf (pydantic writes it); no rule of its own
                                             "discriminator"};

enum class Shape { Types, Schema, SchemaMap, SchemaList, Names, Count, Number, Text, Values, Any };

struct Keyword {
  std::string_view name;
  Shape shape;
};

constexpr Keyword kKeywords[] = {
    {"type", Shape::Types},           {"properties", Shape::SchemaMap},   {"required", Shape::Names},
    {"additionalProperties", Shape::Schema}, {"items", Shape::Schema},    {"prefixItems", Shape::SchemaList},
    {"minItems", Shape::Count},       {"maxItems", Shape::Count},         {"minLength", Shape::Count},
    {"maxLength", Shape::Count},      {"pattern", Shape::Text},           {"format", Shape::Text},
    {"minimum", Shape::Number},       {"maximum", Shape::Number},         {"exclusiveMinimum", Shape::Number},
    {"exclusiveMaximum", Shape::Number}, {"enum", Shape::Values},         {"const", Shape::Any},
    {"anyOf", Shape::SchemaList},     {"oneOf", Shape::SchemaList},       {"allOf", Shape::SchemaList},
    {"$ref", Shape::Text},
};

constexpr std::string_view kTypeNames[] = {"null", "boolean", "object", "array", "number", "integer", "string"};

bool is_schema(const Json& v) { return v.is_boolean() || v.is_object(); }

bool is_count(const Json& v) {
  if (v.is_number_unsigned()) return true;
  if (v.is_number_integer()) return v.get<int64_t>() >= 0;
  return v.is_number_float() && v.get<double>() >= 0 && std::floor(v.get<double>()) == v.get<double>();
}

bool is_type_name(const Json& v) {
  return v.is_string() && std::find(std::begin(kTypeNames), std::end(kTypeNames), v.get<std::string>()) !=
                              std::end(kTypeNames);
}

void check_shape(const Keyword& k, const Json& v, const std::string& path) {
  const std::string name(k.name);
  switch (k.shape) {
    case Shape::Types: {
      const bool ok = is_type_name(v) || (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), is_type_name));
      if (!ok) fail("'type' must be one of null, boolean, object, array, number, integer, string or a list of them", path);
      return;
    }
    case Shape::Schema:
      if (name == "items" && v.is_array()) fail("'items' as a list is not supported (use 'prefixItems')", path);
      if (!is_schema(v)) fail("'" + name + "' must be a schema (an object or a boolean)", path);
      return;
    case Shape::SchemaMap:
      if (!v.is_object()) fail("'" + name + "' must be an object", path);
      for (const auto& [key, sub] : v.items()) {
        if (!is_schema(sub)) fail("'" + name + "' values must be schemas", child_path(child_path(path, name), key));
      }
      return;
    case Shape::SchemaList:
      if (!v.is_array() || (name != "prefixItems" && v.empty())) fail("'" + name + "' must be a non-empty list of schemas", path);
      if (!std::all_of(v.begin(), v.end(), is_schema)) fail("'" + name + "' must be a list of schemas", path);
      return;
    case Shape::Names:
      if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const Json& s) { return s.is_string(); })) {
        fail("'" + name + "' must be a list of strings", path);
      }
      return;
    case Shape::Count:
      if (!is_count(v)) fail("'" + name + "' must be a non-negative integer", path);
      return;
    case Shape::Number:
      if (!v.is_number()) fail("'" + name + "' must be a number", path);
      return;
    case Shape::Text:
      if (!v.is_string()) fail("'" + name + "' must be a string", path);
      return;
    case Shape::Values:
      if (!v.is_array() || v.empty()) fail("'" + name + "' must be a non-empty list", path);
      return;
    case Shape::Any:
      return;
  }
}

const Keyword* find_keyword(std::string_view name) {
  for (const Keyword& k : kKeywords) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// RFC 6901 reference token: ~1 is '/', ~0 is '~'.
std::string unescape_token(std::string_view token, const std::string& ref, const std::string& path) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] != '~') {
      out += token[i];
      continue;
    }
    const char next = i + 1 < token.size() ? token[i + 1] : '\0';
    if (next != '0' && next != '1') fail("$ref '" + ref + "' has a bad '~' escape", path);
    out += next == '0' ? '~' : '/';
    ++i;
  }
  return out;
}

// A URI fragment's %XX escapes.
std::string percent_decode(std::string_view s, const std::string& ref, const std::string& path) {
  auto hex = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    fail("$ref '" + ref + "' has a bad '%' escape", path);
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) fail("$ref '" + ref + "' has a bad '%' escape", path);
    out += char(hex(s[i + 1]) * 16 + hex(s[i + 2]));
    i += 2;
  }
  return out;
}

// ---- allOf ----

using Parts = std::vector<std::pair<const Json*, std::string>>;

// Thrown when the parts provably match nothing.
struct Empty {};

struct Flattening {
  std::vector<std::string> inlining;  // the $ref targets being inlined, outermost first
  std::set<std::string> inlined;      // every target inlined so far
  size_t& work;
};

// The parts' top-level $ref and allOf, recursively replaced by what they point to. A target
// already inlined adds nothing (all of A and A is A), so $refs that fan out to the same schemas
// cost their number, not the number of paths to them.
void flatten(const SchemaDoc& doc, const Json& s, const std::string& path, int depth, Flattening& f,
             std::vector<const Json*>& out) {
  if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth), path);
  charge_work(f.work, 1, path);
  if (s.is_boolean()) {
    if (!s.get<bool>()) throw Empty{};
    return;
  }
  if (!s.is_object()) fail("expected a schema (an object or a boolean)", path);
  doc.check_keywords(s, path);
  if (s.contains("$ref")) {
    const SchemaDoc::Target t = doc.resolve(s["$ref"], path);
    if (std::find(f.inlining.begin(), f.inlining.end(), t.pointer) != f.inlining.end()) {
      fail("$ref '" + s["$ref"].get<std::string>() + "' recurses without consuming input", path);
    }
    if (f.inlined.insert(t.pointer).second) {
      f.inlining.push_back(t.pointer);
      flatten(doc, *t.schema, t.pointer, depth + 1, f, out);
      f.inlining.pop_back();
    }
  }
  if (s.contains("allOf")) {
    const Json& branches = s["allOf"];
    for (size_t i = 0; i < branches.size(); ++i) {
      flatten(doc, branches[i], child_path(child_path(path, "allOf"), std::to_string(i)), depth + 1, f, out);
    }
  }
  out.push_back(&s);
}

// The schema all of `schemas` describe together: true drops out, false absorbs.
Json conjunction(std::vector<Json> schemas) {
  if (std::find(schemas.begin(), schemas.end(), Json(false)) != schemas.end()) return false;
  schemas.erase(std::remove(schemas.begin(), schemas.end(), Json(true)), schemas.end());
  if (schemas.empty()) return true;
  if (schemas.size() == 1) return schemas[0];
  return Json{{"allOf", std::move(schemas)}};
}

// Types both sides allow; an integer is a number.
std::vector<std::string> intersect_types(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  auto has = [](const std::vector<std::string>& v, const char* t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  std::vector<std::string> out;
  for (const std::string& t : a) {
    if (has(b, t.c_str())) out.push_back(t);
    else if (t == "integer" && has(b, "number")) out.push_back(t);
    else if (t == "number" && has(b, "integer")) out.push_back("integer");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// A part's schema for property `name`: from `properties`, else its `additionalProperties`.
std::optional<Json> property_constraint(const Json& part, const std::string& name) {
  if (part.contains("properties") && part["properties"].contains(name)) return part["properties"][name];
  if (part.contains("additionalProperties")) return part["additionalProperties"];
  return std::nullopt;
}

// A part's schema for array element `index`: from `prefixItems`, else its `items`.
std::optional<Json> element_constraint(const Json& part, size_t index) {
  if (part.contains("prefixItems") && index < part["prefixItems"].size()) return part["prefixItems"][index];
  if (part.contains("items")) return part["items"];
  return std::nullopt;
}

// Each part's properties/additionalProperties only know that part's own property list, so every
// property any part lists is constrained by every part; unlisted ones by every additionalProperties.
void merge_objects(const std::vector<const Json*>& parts, Json& out) {
  std::vector<std::string> names, required;
  std::vector<Json> extra;
  for (const Json* p : parts) {
    const Json listed = p->value("properties", Json::object());
    for (const auto& [name, _] : listed.items()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const Json& r : p->value("required", Json::array())) {
      const std::string name = r.get<std::string>();
      if (std::find(required.begin(), required.end(), name) == required.end()) required.push_back(name);
    }
    if (p->contains("additionalProperties")) extra.push_back((*p)["additionalProperties"]);
  }
  for (const std::string& name : names) {
    std::vector<Json> constraints;
    for (const Json* p : parts) {
      if (std::optional<Json> c = property_constraint(*p, name)) constraints.push_back(std::move(*c));
    }
    out["properties"][name] = conjunction(std::move(constraints));
  }
  if (!required.empty()) out["required"] = required;
  if (!extra.empty()) out["additionalProperties"] = conjunction(std::move(extra));
}

// Likewise for arrays: `items` covers the elements after that part's own prefixItems.
void merge_arrays(const std::vector<const Json*>& parts, Json& out) {
  size_t prefix = 0;
  std::vector<Json> rest;
  for (const Json* p : parts) {
    if (p->contains("prefixItems")) prefix = std::max(prefix, (*p)["prefixItems"].size());
    if (p->contains("items")) rest.push_back((*p)["items"]);
  }
  for (size_t j = 0; j < prefix; ++j) {
    std::vector<Json> constraints;
    for (const Json* p : parts) {
      if (std::optional<Json> c = element_constraint(*p, j)) constraints.push_back(std::move(*c));
    }
    out["prefixItems"].push_back(conjunction(std::move(constraints)));
  }
  if (!rest.empty()) out["items"] = conjunction(std::move(rest));
}

bool is_lower_bound(const std::string& k) {
  return k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum";
}
bool is_upper_bound(const std::string& k) {
  return k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum";
}
bool merged_elsewhere(const std::string& k) {
  return is_annotation(k) || k == "$ref" || k == "allOf" || k == "type" || k == "properties" || k == "required" ||
         k == "additionalProperties" || k == "items" || k == "prefixItems";
}

Json merge_parts(const std::vector<const Json*>& parts, const std::string& path) {
  Json out = Json::object();
  std::optional<std::vector<std::string>> types;
  for (const Json* p : parts) {
    if (p->contains("type")) {
      types = types ? intersect_types(*types, type_names((*p)["type"])) : type_names((*p)["type"]);
      if (types->empty()) throw Empty{};
    }
    for (const auto& [k, v] : p->items()) {
      if (merged_elsewhere(k)) continue;
      if (!out.contains(k)) {
        out[k] = v;
      } else if (is_lower_bound(k)) {
        if (out[k] < v) out[k] = v;
      } else if (is_upper_bound(k)) {
        if (v < out[k]) out[k] = v;
      } else if (out[k] != v) {
        fail("'" + k + "' in more than one allOf branch is not supported", path);
      }
    }
  }
  if (types) out["type"] = *types;
  merge_objects(parts, out);
  merge_arrays(parts, out);
  return out;
}

}  // namespace

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw GrammarError("json schema: " + what + " at " + where(path));
}

[[noreturn]] void fail_too_large() { throw GrammarError("json schema: the grammar would be over 1 MiB"); }

std::string where(const std::string& path) { return path.empty() ? "the root" : path; }

std::string child_path(const std::string& path, std::string_view token) {
  std::string out = path + "/";
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::vector<std::string> type_names(const Json& t) {
  if (t.is_string()) return {t.get<std::string>()};
  return t.get<std::vector<std::string>>();
}

std::vector<std::string> implied_types(const Json& s) {
  std::vector<std::string> out;
  if (has_any(s, {"properties", "required", "additionalProperties"})) out.push_back("object");
  if (has_any(s, {"items", "prefixItems", "minItems", "maxItems"})) out.push_back("array");
  if (has_any(s, {"minLength", "maxLength", "pattern", "format"})) out.push_back("string");
  if (has_numeric_bounds(s)) out.push_back("number");
  return out;
}

bool has_type(const Json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

bool has_any(const Json& s, std::initializer_list<const char*> keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
}

std::optional<uint64_t> count_keyword(const Json& s, const char* key, const std::string& path) {
  if (!s.contains(key)) return std::nullopt;
  const double v = s[key].get<double>();
  if (v > double(kMaxRepeat)) {
    fail("'" + std::string(key) + "' " + s[key].dump() + " is over the supported maximum of " +
             std::to_string(kMaxRepeat),
         path);
  }
  return uint64_t(v);
}

// Without recursion: a hostile document may nest deeply.
size_t count_values(const Json& root) {
  size_t n = 0;
  std::vector<const Json*> stack{&root};
  while (!stack.empty()) {
    const Json* v = stack.back();
    stack.pop_back();
    ++n;
    if (v->is_structured()) {
      for (const Json& child : *v) stack.push_back(&child);
    }
  }
  return n;
}

bool is_annotation(std::string_view keyword) {
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), keyword) != std::end(kAnnotations);
}

std::optional<std::string> first_keyword_outside(const Json& schema, std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, _] : schema.items()) {
    if (!is_annotation(k) && std::find(allowed.begin(), allowed.end(), k) == allowed.end()) return k;
  }
  return std::nullopt;
}

void SchemaDoc::check_keywords(const Json& schema, const std::string& path) const {
  for (const auto& [k, v] : schema.items()) {
    // $id below the root moves the base that "#..." refs resolve against; we resolve from the root.
    if (k == "$id" && !path.empty()) fail("'$id' below the root is not supported", path);
    if (is_annotation(k)) continue;
    const Keyword* keyword = find_keyword(k);
    if (!keyword) fail("unsupported keyword '" + k + "'", path);
    check_shape(*keyword, v, path);
  }
}

SchemaDoc::Target SchemaDoc::resolve(const Json& ref, const std::string& path) const {
  const std::string text = ref.get<std::string>();
  if (text.empty() || text[0] != '#') fail("$ref '" + text + "' is not local (only '#...' refs are supported)", path);
  const std::string fragment = percent_decode(std::string_view(text).substr(1), text, path);
  if (!fragment.empty() && fragment[0] != '/') fail("$ref '" + text + "' is not a JSON pointer", path);
  Target t{"", &root_};
  size_t start = 1;
  while (start <= fragment.size() && !fragment.empty()) {
    const size_t end = std::min(fragment.find('/', start), fragment.size());
    const std::string token = unescape_token(std::string_view(fragment).substr(start, end - start), text, path);
    const Json& node = *t.schema;
    const Json* next = nullptr;
    if (node.is_object() && node.contains(token)) {
      next = &node[token];
    } else if (node.is_array() && !token.empty() && token.size() < 10 &&
               std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               (token == "0" || token[0] != '0') && std::stoul(token) < node.size()) {
      next = &node[std::stoul(token)];
    }
    if (!next) fail("$ref '" + text + "' does not resolve", path);
    t.schema = next;
    t.pointer = child_path(t.pointer, token);
    start = end + 1;
  }
  return t;
}

void charge_work(size_t& work, size_t n, const std::string& path) {
  work += n;
  if (work > kMaxWork) fail("schema too complex: over " + std::to_string(kMaxWork) + " steps to compile", path);
}

std::optional<Json> merge_schemas(const SchemaDoc& doc, const Parts& parts, int depth, size_t& work) {
  try {
    std::vector<const Json*> flat;
    Flattening f{{}, {}, work};
    for (const auto& [schema, path] : parts) flatten(doc, *schema, path, depth, f, flat);
    return merge_parts(flat, parts.front().second);
  } catch (const Empty&) {
    return std::nullopt;
  }
}

}  // namespace flashserve::grammar::json_schema_detail
