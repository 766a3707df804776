// JSON Schema to GBNF. Each subschema becomes an expression over shared rules (ws, string, number,
// ...); expressions that are used from several places, or need grouping, become rules of their
// own, named after where they sit in the schema and shared between identical bodies.
//
// Soundness first: a keyword we cannot enforce is refused, never dropped, and where enforcing a
// keyword exactly would cost too much (lengths counted as repetitions, key order) the grammar
// accepts a subset of the valid documents rather than a superset.
#include "grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "grammar/json_schema_detail.h"

namespace flashserve::grammar {
namespace {

using namespace json_schema_detail;

// A GBNF expression; `alternatives` when it has a top-level '|' (it needs parentheses in a sequence).
struct Expr {
  std::string text;
  bool alternatives = false;
};

std::string in_sequence(const Expr& e) { return e.alternatives ? "( " + e.text + " )" : e.text; }

Expr union_of(const std::vector<Expr>& options) {
  Expr out;
  for (const Expr& o : options) out.text += (out.text.empty() ? "" : " | ") + o.text;
  out.alternatives = options.size() > 1 || (options.size() == 1 && options[0].alternatives);
  return out;
}

Expr union_of(const std::vector<std::string>& options) {
  std::vector<Expr> exprs;
  for (const std::string& o : options) exprs.push_back({o, false});
  return union_of(exprs);
}

class Compiler final : public RuleSink {
 public:
  Compiler(const Json& root, const JsonSchemaOptions& options) : root_(root), doc_(root), options_(options) {
    for (const FixedRule& r : fixed_rules()) used_.insert(std::string(r.name));
  }

  std::string compile_document() {
    const std::string& document = options_.document_rule;
    used_.insert("root");
    used_.insert(document);
    reserve(document);
    ref_names_[""] = document;
    open_refs_.push_back("");
    const Expr body = compile(root_, "", document, 0);
    open_refs_.pop_back();
    set_body(document, body.text);
    std::string out;
    for (const auto& [name, rule_body] : rules_) out += name + " ::= " + rule_body + "\n";
    return out;
  }

  std::string fresh_name(const std::string& hint) override {
    const std::string base = rule_name_base(hint);
    if (used_.insert(base).second) return base;
    for (int& n = next_suffix_.try_emplace(base, 2).first->second;; ++n) {
      const std::string name = base + "-" + std::to_string(n);
      if (used_.insert(name).second) return name;
    }
  }

  void add_rule(const std::string& name, std::string body) override {
    reserve(name);
    set_body(name, std::move(body));
  }

  std::string fixed(std::string_view name) override {
    const std::string n(name);
    if (!fixed_defined_.insert(n).second) return n;
    const auto& table = fixed_rules();
    const auto it = std::find_if(table.begin(), table.end(), [&](const FixedRule& r) { return r.name == name; });
    add_rule(n, std::string(it->body));
    for (size_t start = 0; start < it->deps.size();) {
      const size_t end = std::min(it->deps.find(' ', start), it->deps.size());
      fixed(it->deps.substr(start, end - start));
      start = end + 1;
    }
    return n;
  }

 private:
  // Children of an object or array come after a '{' or '['. Until then, reaching a $ref that is
  // still being compiled would make a rule that reaches itself without consuming input.
  class AfterBracket {
   public:
    explicit AfterBracket(std::vector<std::string>& open) : open_(open), saved_(std::move(open)) { open_.clear(); }
    ~AfterBracket() { open_ = std::move(saved_); }
    AfterBracket(const AfterBracket&) = delete;
    AfterBracket& operator=(const AfterBracket&) = delete;

   private:
    std::vector<std::string>& open_;
    std::vector<std::string> saved_;
  };

  void reserve(const std::string& name) {
    rule_index_[name] = rules_.size();
    rules_.emplace_back(name, "");
  }

  void set_body(const std::string& name, std::string body) {
    bytes_ += name.size() + body.size() + 6;
    if (bytes_ > kMaxGrammarBytes) fail_too_large();
    rules_[rule_index_.at(name)].second = std::move(body);
  }

  // A rule for `body`, shared with any earlier rule of the same body.
  std::string define(const std::string& hint, const std::string& body) {
    if (const auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    const std::string name = fresh_name(hint);
    add_rule(name, body);
    by_body_.emplace(body, name);
    return name;
  }

  std::string as_term(const std::string& hint, const Expr& e) {
    return !e.alternatives && is_single_term(e.text) ? e.text : define(hint, e.text);
  }

  std::string term(const Json& s, const std::string& path, const std::string& hint, int depth) {
    return as_term(hint, compile(s, path, hint, depth));
  }

  // A rule with a bounded repetition in it: the parser spends about one rule per repetition, so
  // new ones count against a total.
  std::string define_repeating(const std::string& hint, const std::string& body, uint64_t repeats,
                               const std::string& path) {
    if (!by_body_.count(body)) {
      repeats_ += repeats;
      if (repeats_ > kMaxRepeatTotal) {
        fail("length and item bounds add up to over " + std::to_string(kMaxRepeatTotal) + " repetitions", path);
      }
    }
    return define(hint, body);
  }

  void charge_work(size_t n, const std::string& path) { json_schema_detail::charge_work(work_, n, path); }

  std::optional<Json> merge(const std::vector<std::pair<const Json*, std::string>>& parts, int depth) {
    std::optional<Json> merged = merge_schemas(doc_, parts, depth, work_);
    if (merged) charge_work(count_values(*merged), parts.front().second);
    return merged;
  }

  Expr compile(const Json& s, const std::string& path, const std::string& hint, int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth), path);
    charge_work(1, path);
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("schema false matches nothing", path);
      return {fixed("value")};
    }
    if (!s.is_object()) fail("expected a schema (an object or a boolean)", path);
    doc_.check_keywords(s, path);
    const bool ref_with_siblings = s.contains("$ref") && first_keyword_outside(s, {"$ref"});
    if (s.contains("allOf") || ref_with_siblings) {
      const std::optional<Json> merged = merge({{&s, path}}, depth + 1);
      if (!merged) fail("allOf matches nothing", path);
      return compile(*merged, path, hint, depth + 1);
    }
    if (s.contains("$ref")) return {compile_ref(s["$ref"], path, depth)};
    if (s.contains("anyOf") || s.contains("oneOf")) return compile_alternatives(s, path, hint, depth);
    if (s.contains("enum") || s.contains("const")) return compile_enum(s, path);
    return compile_types(s, path, hint, depth);
  }

  std::string compile_ref(const Json& ref, const std::string& path, int depth) {
    const SchemaDoc::Target t = doc_.resolve(ref, path);
    if (!open_refs_.empty()) {
      const std::string& from = open_refs_.back();
      if (from == t.pointer || reaches(t.pointer, from)) {
        fail("$ref '" + ref.get<std::string>() + "' recurses without consuming input", path);
      }
      no_progress_edges_[from].insert(t.pointer);
    }
    if (const auto it = ref_names_.find(t.pointer); it != ref_names_.end()) return it->second;
    const std::string name = fresh_name(t.pointer.substr(t.pointer.rfind('/') + 1));
    reserve(name);
    ref_names_[t.pointer] = name;
    open_refs_.push_back(t.pointer);
    const Expr body = compile(*t.schema, t.pointer, name, depth + 1);
    open_refs_.pop_back();
    set_body(name, body.text);
    return name;
  }

  // Whether `to` can be reached from `from` through $refs that consume nothing in between.
  bool reaches(const std::string& from, const std::string& to) const {
    std::vector<std::string> stack{from};
    std::set<std::string> seen{from};
    while (!stack.empty()) {
      const std::string at = stack.back();
      stack.pop_back();
      if (at == to) return true;
      const auto it = no_progress_edges_.find(at);
      if (it == no_progress_edges_.end()) continue;
      for (const std::string& next : it->second) {
        if (seen.insert(next).second) stack.push_back(next);
      }
    }
    return false;
  }

  // anyOf and oneOf. Sibling keywords hold in every branch, so they are merged into each branch; a
  // branch they contradict is dropped. A grammar cannot count how many branches a document
  // matches, so oneOf is compiled as anyOf only when no document can match two of its branches.
  Expr compile_alternatives(const Json& s, const std::string& path, const std::string& hint, int depth) {
    if (s.contains("anyOf") && s.contains("oneOf")) fail("'anyOf' and 'oneOf' together are not supported", path);
    const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
    Json siblings = Json::object();
    for (const auto& [k, v] : s.items()) {
      if (k != key && !is_annotation(k)) siblings[k] = v;
    }
    std::vector<Json> kept;  // the branches that can match, siblings merged in
    std::vector<std::string> kept_at;
    const Json& branches = s[key];
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string at = child_path(child_path(path, key), std::to_string(i));
      std::optional<Json> branch = siblings.empty() ? std::optional<Json>(branches[i])
                                                    : merge({{&siblings, path}, {&branches[i], at}}, depth + 1);
      if (!branch || *branch == Json(false)) continue;
      kept.push_back(std::move(*branch));
      kept_at.push_back(at);
    }
    if (kept.empty()) fail("no '" + key + "' branch can match", path);
    if (key == "oneOf") check_exclusive(kept, kept_at, path, depth);
    std::vector<Expr> options;
    for (size_t i = 0; i < kept.size(); ++i) {
      options.push_back(compile(kept[i], kept_at[i], hint + "-" + std::to_string(i), depth + 1));
    }
    return union_of(options);
  }

  void check_exclusive(const std::vector<Json>& branches, const std::vector<std::string>& at, const std::string& path,
                       int depth) {
    std::vector<Json> plain;
    for (size_t i = 0; i < branches.size(); ++i) plain.push_back(inlined(branches[i], at[i], depth));
    for (size_t i = 0; i < plain.size(); ++i) {
      for (size_t j = i + 1; j < plain.size(); ++j) {
        charge_work(1, path);
        if (disjoint(plain[i], at[i], plain[j], at[j], depth)) continue;
        fail("'oneOf' branches " + std::to_string(i) + " and " + std::to_string(j) +
                 " may both match, which a grammar cannot rule out; make them differ in 'type', 'const'/'enum' "
                 "values or a required property's 'const', or use 'anyOf'",
             path);
      }
    }
  }

  // The schema with a top-level $ref or allOf inlined, for looking at its keywords.
  Json inlined(const Json& s, const std::string& path, int depth) {
    if (!s.is_object() || !(s.contains("$ref") || s.contains("allOf"))) return s;
    return merge({{&s, path}}, depth + 1).value_or(Json(false));
  }

  // Provably no JSON value validates against both: their types or values cannot meet, or both are
  // objects requiring a property whose schemas are disjoint (a discriminator).
  bool disjoint(const Json& a, const std::string& a_at, const Json& b, const std::string& b_at, int depth) {
    if (a == Json(false) || b == Json(false)) return true;
    if (!a.is_object() || !b.is_object()) return false;
    const std::optional<std::vector<std::string>> ta = validated_types(a), tb = validated_types(b);
    if (ta && tb && !types_meet(*ta, *tb)) return true;
    const std::optional<std::vector<Json>> va = allowed_values(a), vb = allowed_values(b);
    if (va && vb && std::none_of(va->begin(), va->end(), [&](const Json& v) {
          return std::find(vb->begin(), vb->end(), v) != vb->end();
        })) {
      return true;
    }
    if (depth > kMaxDepth || !a.contains("properties") || !b.contains("properties")) return false;
    for (const auto& [name, a_prop] : a["properties"].items()) {
      if (!is_required(a, name) || !is_required(b, name) || !b["properties"].contains(name)) continue;
      const std::string pa = child_path(child_path(a_at, "properties"), name);
      const std::string pb = child_path(child_path(b_at, "properties"), name);
      if (disjoint(inlined(a_prop, pa, depth), pa, inlined(b["properties"][name], pb, depth), pb, depth + 1)) return true;
    }
    return false;
  }

  static bool is_required(const Json& s, const std::string& name) {
    const auto it = s.find("required");
    return it != s.end() && std::find(it->begin(), it->end(), Json(name)) != it->end();
  }

  // The JSON types a value valid against `s` can have; nullopt for any (keywords such as
  // `properties` alone do not stop other types from validating).
  static std::optional<std::vector<std::string>> validated_types(const Json& s) {
    if (s.contains("type")) return type_names(s["type"]);
    const std::optional<std::vector<Json>> values = allowed_values(s);
    if (!values) return std::nullopt;
    std::vector<std::string> types;
    for (const Json& v : *values) {
      for (const char* t : {"null", "boolean", "object", "array", "string", "integer", "number"}) {
        if (has_type(v, t)) types.push_back(t);
      }
    }
    return types;
  }

  static bool types_meet(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    auto meets = [](const std::string& x, const std::string& y) {
      return x == y || (x == "integer" && y == "number") || (x == "number" && y == "integer");
    };
    for (const std::string& x : a) {
      for (const std::string& y : b) {
        if (meets(x, y)) return true;
      }
    }
    return false;
  }

  static std::optional<std::vector<Json>> allowed_values(const Json& s) {
    if (s.contains("const")) return std::vector<Json>{s["const"]};
    if (s.contains("enum")) return s["enum"].get<std::vector<Json>>();
    return std::nullopt;
  }

  Expr compile_enum(const Json& s, const std::string& path) {
    if (const auto k = first_keyword_outside(s, {"enum", "const", "type"})) {
      fail("'" + *k + "' next to 'enum' or 'const' is not supported", path);
    }
    std::vector<Json> values;
    if (s.contains("enum")) {
      for (const Json& v : s["enum"]) {
        if (!s.contains("const") || v == s["const"]) values.push_back(v);
      }
    } else {
      values.push_back(s["const"]);
    }
    if (s.contains("type")) {
      const std::vector<std::string> types = type_names(s["type"]);
      values.erase(std::remove_if(values.begin(), values.end(),
                                  [&](const Json& v) {
                                    return std::none_of(types.begin(), types.end(),
                                                        [&](const std::string& t) { return has_type(v, t); });
                                  }),
                   values.end());
    }
    std::vector<std::string> literals;
    std::unordered_set<std::string> seen;
    for (const Json& v : values) {
      std::string lit = literal_of(v, path, 0);
      if (seen.insert(lit).second) literals.push_back(std::move(lit));
    }
    if (literals.empty()) fail("no value satisfies 'enum', 'const' and 'type' together", path);
    return union_of(literals);
  }

  // The JSON text of `v` with the whitespace rule between tokens.
  std::string literal_of(const Json& v, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail("'enum' or 'const' value nested deeper than " + std::to_string(kMaxDepth), path);
    charge_work(1, path);
    if (!v.is_object() && !v.is_array()) return gbnf_literal(v.dump());
    const std::string ws = fixed("ws");
    const bool object = v.is_object();
    std::string out = object ? "\"{\" " + ws : "\"[\" " + ws;
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      out += first ? " " : " " + ws + " \",\" " + ws + " ";
      if (object) out += gbnf_literal(Json(k).dump()) + " " + ws + " \":\" " + ws + " ";
      out += literal_of(item, path, depth + 1);
      first = false;
    }
    if (!first) out += " " + ws;
    return out + (object ? " \"}\"" : " \"]\"");
  }

  Expr compile_types(const Json& s, const std::string& path, const std::string& hint, int depth) {
    std::vector<std::string> types = s.contains("type") ? type_names(s["type"]) : implied_types(s);
    if (types.empty()) return {fixed("value")};
    const bool any_number = std::find(types.begin(), types.end(), "number") != types.end();
    std::vector<Expr> options;
    std::set<std::string> done;
    for (const std::string& t : types) {
      if (!done.insert(t).second || (t == "integer" && any_number)) continue;
      if (t == "null" || t == "boolean") options.push_back({fixed(t)});
      if (t == "object") options.push_back(compile_object(s, path, hint, depth));
      if (t == "array") options.push_back(compile_array(s, path, hint, depth));
      if (t == "string") options.push_back(compile_string(s, path, hint));
      if (t == "number" || t == "integer") options.push_back(compile_number(s, path, t == "integer"));
    }
    return union_of(options);
  }

  Expr compile_number(const Json& s, const std::string& path, bool integer) {
    if (!has_numeric_bounds(s)) return {fixed(integer ? "integer" : "number")};
    const std::vector<std::string> alts = bounded_number_alternatives(s, integer, integer ? "" : fixed("fraction"));
    if (alts.empty()) fail(std::string("no ") + (integer ? "integer" : "number") + " satisfies the bounds", path);
    return union_of(alts);
  }

  Expr compile_string(const Json& s, const std::string& path, const std::string& hint) {
    const bool has_length = s.contains("minLength") || s.contains("maxLength");
    if (int(has_length) + int(s.contains("pattern")) + int(s.contains("format")) > 1) {
      fail("'pattern', 'format' and 'minLength'/'maxLength' cannot be combined", path);
    }
    const std::string quote = R"("\"")";
    if (s.contains("format")) return {quote + " " + format_rule(s["format"], path, *this) + " " + quote};
    if (s.contains("pattern")) {
      const std::string pattern = s["pattern"].get<std::string>();
      auto [it, added] = pattern_terms_.try_emplace(pattern);
      if (added) it->second = pattern_string(pattern, path, hint, *this);
      return {it->second};
    }
    const uint64_t min = count_keyword(s, "minLength", path).value_or(0);
    const std::optional<uint64_t> max = count_keyword(s, "maxLength", path);
    if (max && *max < min) fail("'maxLength' is less than 'minLength'", path);
    if (min == 0 && !max) return {fixed("string")};
    const std::string body = quote + " " + fixed("char") + repeat_suffix(min, max) + " " + quote;
    return {define_repeating(hint, body, max.value_or(min), path)};
  }

  struct Property {
    std::string name, value;
    bool required;
  };

  // Listed properties in order, each present or (unless required) absent, then any extra
  // properties. A tail of the object used from two places becomes a rule of its own, so the grammar
  // stays linear in the number of properties.
  Expr compile_object(const Json& s, const std::string& path, const std::string& hint, int depth) {
    const Json props = s.value("properties", Json::object());
    std::vector<std::string> required;
    for (const Json& name : s.value("required", Json::array())) {
      const std::string r = name.get<std::string>();
      if (std::find(required.begin(), required.end(), r) == required.end()) required.push_back(r);
    }
    const Json extra = s.value("additionalProperties", Json(!options_.strict));
    if (props.empty() && required.empty() && extra == Json(true)) return {fixed("object")};

    const AfterBracket after_bracket(open_refs_);
    auto is_required = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };
    std::vector<Property> listed;
    std::vector<std::string> names;
    for (const auto& [name, schema] : props.items()) {
      names.push_back(name);
      const std::string at = child_path(child_path(path, "properties"), name);
      if (schema == Json(false)) {
        if (is_required(name)) fail("required property '" + name + "' has the schema false", at);
        continue;
      }
      listed.push_back({name, term(schema, at, hint + "-" + name, depth + 1), is_required(name)});
    }
    std::string extra_value;
    if (extra != Json(false)) extra_value = term(extra, child_path(path, "additionalProperties"), hint + "-extra", depth + 1);
    for (const std::string& name : required) {
      if (props.contains(name)) continue;
      if (extra_value.empty()) {
        fail("required property '" + name + "' is not in 'properties' and additionalProperties is false", path);
      }
      names.push_back(name);
      listed.push_back({name, extra_value, true});
    }
    return {"\"{\" " + fixed("ws") + " " + in_sequence(object_members(listed, names, extra_value, hint))};
  }

  Expr object_members(const std::vector<Property>& listed, const std::vector<std::string>& names,
                      const std::string& extra_value, const std::string& hint) {
    const std::string ws = fixed("ws");
    const std::string comma = ws + " \",\" " + ws + " ";
    const size_t n = listed.size();
    // need_first[i]: property i can be the first one written; need_after[i]: it can follow another.
    std::vector<bool> need_first(n + 1, false), need_after(n + 1, false);
    need_first[0] = true;
    for (size_t i = 0; i < n; ++i) {
      need_first[i + 1] = need_first[i] && !listed[i].required;
      need_after[i + 1] = need_first[i] || need_after[i];
    }
    // after[i]: the rest of the object from property i on, something already written.
    std::vector<Expr> after(n + 1);
    after[n] = {ws + R"( "}")"};
    Expr empty_rest{R"("}")"};  // nothing written and no listed property left
    if (!extra_value.empty()) {
      auto [it, added] = key_terms_.try_emplace(names);
      if (added) it->second = names.empty() ? fixed("string") : key_other_than(names, hint, *this);
      const std::string& key = it->second;
      const std::string member = key + " " + ws + " \":\" " + ws + " " + extra_value;
      const std::string rest = fresh_name(hint + "-rest");
      add_rule(rest, after[n].text + " | " + comma + member + " " + rest);
      empty_rest = {R"("}" | )" + member + " " + rest, true};
      after[n] = {rest};
    }
    std::vector<std::string> members(n), followed_by(n);
    for (size_t i = n; i-- > 0;) {
      const Property& p = listed[i];
      const int uses = (need_after[i] ? (p.required ? 1 : 2) : 0) + (need_first[i] ? 1 : 0);
      followed_by[i] = uses > 1 ? as_term(hint + "-tail", after[i + 1]) : in_sequence(after[i + 1]);
      members[i] = gbnf_literal(Json(p.name).dump()) + " " + ws + " \":\" " + ws + " " + p.value;
      if (!need_after[i]) continue;
      after[i] = {comma + members[i] + " " + followed_by[i]};
      if (!p.required) after[i] = union_of({after[i], Expr{followed_by[i]}});
    }
    // The first property written is any of those before the first required one, or that one.
    std::vector<Expr> starts;
    for (size_t i = 0; i < n && need_first[i]; ++i) starts.push_back({members[i] + " " + followed_by[i]});
    if (need_first[n]) starts.push_back(empty_rest);
    return union_of(starts);
  }

  // Prefix items in order, then `items` up to the length bounds; after[j] matches the rest of the
  // array once j prefix items are written.
  Expr compile_array(const Json& s, const std::string& path, const std::string& hint, int depth) {
    const uint64_t min = count_keyword(s, "minItems", path).value_or(0);
    std::optional<uint64_t> max = count_keyword(s, "maxItems", path);
    if (max && *max < min) fail("'maxItems' is less than 'minItems'", path);
    if (!has_any(s, {"items", "prefixItems"}) && min == 0 && !max) return {fixed("array")};

    const AfterBracket after_bracket(open_refs_);
    auto cap = [&](uint64_t n) { max = max ? std::min(*max, n) : n; };
    std::vector<std::string> prefix;
    const Json prefix_items = s.value("prefixItems", Json::array());
    for (size_t j = 0; j < prefix_items.size() && (!max || j < *max); ++j) {
      if (prefix_items[j] == Json(false)) {
        cap(j);
        break;
      }
      const std::string at = child_path(child_path(path, "prefixItems"), std::to_string(j));
      prefix.push_back(term(prefix_items[j], at, hint + "-" + std::to_string(j), depth + 1));
    }
    const Json items = s.value("items", Json(true));
    std::string item;
    if (items == Json(false)) {
      cap(prefix.size());
    } else {
      item = term(items, child_path(path, "items"), hint + "-item", depth + 1);
    }
    if (max && min > *max) fail("no array length satisfies 'minItems', 'maxItems' and 'prefixItems'", path);

    const std::string ws = fixed("ws");
    const std::string open = R"("[" )" + ws, close = ws + R"( "]")";
    if (max == 0u) return {open + R"( "]")"};
    // Items after the prefix, each preceded by a comma.
    auto more_items = [&](uint64_t lo, std::optional<uint64_t> hi) -> std::string {
      if (hi == 0u) return "";
      const std::string body = "( " + ws + " \",\" " + ws + " " + item + " )" + repeat_suffix(lo, hi);
      return define_repeating(hint + "-more", body, hi.value_or(lo), path) + " ";
    };
    auto minus = [](std::optional<uint64_t> v, uint64_t n) { return v ? std::optional<uint64_t>(*v - n) : v; };
    if (prefix.empty()) {
      if (min == 0) return {open + " ( " + item + " " + more_items(0, minus(max, 1)) + ws + " )? \"]\""};
      return {open + " " + item + " " + more_items(min - 1, minus(max, 1)) + close};
    }
    const uint64_t k = prefix.size();
    Expr next{more_items(min > k ? min - k : 0, minus(max, k)) + close};
    for (uint64_t j = k - 1; j >= 1; --j) {
      Expr more{ws + " \",\" " + ws + " " + prefix[j] + " " + in_sequence(next)};
      next = j >= min ? union_of({Expr{close}, more}) : more;
    }
    const std::string items_from_first = prefix[0] + " " + in_sequence(next);
    if (min == 0) return {open + " ( \"]\" | " + items_from_first + " )"};
    return {open + " " + items_from_first};
  }

  const Json& root_;
  SchemaDoc doc_;
  JsonSchemaOptions options_;

  std::vector<std::pair<std::string, std::string>> rules_;  // in output order
  std::unordered_map<std::string, size_t> rule_index_;
  std::unordered_map<std::string, std::string> by_body_;
  std::unordered_set<std::string> used_, fixed_defined_;
  std::unordered_map<std::string, int> next_suffix_;
  size_t bytes_ = 0;
  uint64_t repeats_ = 0;
  size_t work_ = 0;

  std::map<std::string, std::string> pattern_terms_;             // one rule set per distinct pattern
  std::map<std::vector<std::string>, std::string> key_terms_;   // and per set of listed names
  std::map<std::string, std::string> ref_names_;  // pointer -> rule
  std::vector<std::string> open_refs_;            // refs entered since the last bracket
  std::map<std::string, std::set<std::string>> no_progress_edges_;
};

std::string compile_schema(const Json& schema, const JsonSchemaOptions& options) {
  try {
    return Compiler(schema, options).compile_document();
  } catch (const nlohmann::json::exception& e) {  // e.g. a string that is not UTF-8
    throw GrammarError(std::string("json schema: ") + e.what());
  }
}

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  return compile_schema(schema, options);
}

std::string json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options) {
  return compile_schema(Json(schema), options);
}

std::string any_json_object_gbnf() { return compile_schema(Json{{"type", "object"}}, {}); }

}  // namespace flashserve::grammar
