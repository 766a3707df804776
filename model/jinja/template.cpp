#include "model/jinja/template.h"

#include "model/jinja/builtins.h"
#include "model/jinja/lexer.h"
#include "model/jinja/parser.h"
#include "model/jinja/render.h"

namespace flashserve::jinja {

Template Template::parse(std::string_view source) {
  Template t;
  t.body_ = std::make_shared<const Body>(jinja::parse(tokenize(source)));
  return t;
}

std::string Template::render(const std::vector<std::pair<std::string, Value>>& variables, const Limits& limits) const {
  auto root = std::make_shared<Frame>();
  add_globals(*root);
  for (const auto& [name, value] : variables) root->vars[name] = value;
  Interpreter in(limits, root);
  std::string out;
  in.render(*body_, out);
  return out;
}

namespace {

template <typename Json>
Value convert(const Json& j, Budget& budget, uint32_t depth) {
  if (depth > budget.limits().max_depth) {
    throw TemplateError(ErrorKind::Limit, "template limit reached: values nested deeper than " +
                                              std::to_string(budget.limits().max_depth));
  }
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      return u <= uint64_t(INT64_MAX) ? Value::integer(int64_t(u)) : Value::number(double(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(convert(x, budget, depth + 1));
      return Value::list(std::move(items), budget);
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        items.emplace_back(Value::string(it.key()), convert(it.value(), budget, depth + 1));
      }
      return Value::dict(std::move(items), budget, /*keys_unique=*/true);
    }
    default: return Value::none();  // binary and discarded values do not come from JSON text
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j, Budget& budget) { return convert(j, budget, 1); }
Value from_json(const nlohmann::json& j, Budget& budget) { return convert(j, budget, 1); }

}  // namespace flashserve::jinja
