// What the renderer calls by name: operators, sandboxed attribute and item access, Python's str /
// dict / list methods, filters, tests and global functions.
#pragma once
#include <string>

#include "model/jinja/ast.h"
#include "model/jinja/render.h"
#include "model/jinja/value.h"

namespace flashserve::jinja {

// Binary arithmetic (+ - * / // % **) with Python's rules; int overflow is an error.
Value arithmetic(Op op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& v, bool minus);

// obj.name: a method of str/dict/list first, then the item (as jinja2's sandbox looks up);
// undefined when neither exists, an error when obj is undefined.
Value get_attribute(Budget& budget, const Value& obj, const std::string& name);
// obj[key]: the item first, then (for a string key) the attribute; undefined when missing.
Value get_item(Budget& budget, const Value& obj, const Value& key);
// obj[start:stop:step] on a list, tuple or string (parts may be undefined/none).
Value slice(Budget& budget, const Value& obj, const Value& start, const Value& stop, const Value& step);

Value call_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args);
// Throws for an unknown filter or test, as jinja2 does when it is reached.
Value apply_filter(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);

// range, dict, namespace, and Hugging Face's raise_exception and strftime_now.
void add_globals(Frame& root);

// A Python index into a sequence of `size` items (negative counts from the end); false if outside.
bool resolve_index(int64_t index, size_t size, size_t& out);
// str() of a value, as a filter argument or method receiver.
std::string text_of(Interpreter& in, const Value& v);
// markupsafe's escape: & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

}  // namespace flashserve::jinja
