// A Jinja template engine for chat templates: the subset of Jinja that real chat templates use,
// rendered as Hugging Face renders them (jinja2's ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and loop controls; raise_exception, strftime_now and a json.dumps tojson).
// Templates come from model files, so everything is bounded: syntax nesting, recursion, loop
// iterations, work and output size (`Limits`); every failure is a TemplateError with its position.
//
//   auto t = jinja::Template::parse(source);
//   std::string text = t.render({{"messages", messages}, {"add_generation_prompt", Value::boolean(true)}});
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/jinja/value.h"

namespace flashserve::jinja {

struct Stmt;

class Template {
 public:
  // Throws TemplateError (Syntax).
  static Template parse(std::string_view source);

  // Renders with `variables` (over the globals); thread-safe: a render shares nothing but the
  // parsed tree. Throws TemplateError.
  std::string render(const std::vector<std::pair<std::string, Value>>& variables, const Limits& limits = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

// JSON as template values: objects become dicts in the JSON's key order (ordered_json keeps the
// order of the text; nlohmann::json has sorted it). Throws TemplateError (Limit) when nested
// deeper than limits.max_depth.
Value from_json(const nlohmann::ordered_json& j, Budget& budget);
Value from_json(const nlohmann::json& j, Budget& budget);

}  // namespace flashserve::jinja
