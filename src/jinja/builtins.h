// Built-in filters, tests, methods (str/dict/list) and globals of the Jinja interpreter.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace tmill::jinja {

class Interp;

// Evaluated call arguments.
struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;

  // Positional argument `idx` or keyword `name`; nullptr when absent.
  const Value* get(size_t idx, std::string_view name) const;
  // Like get(), but a missing argument raises TypeError naming `fn` and `name` (Python's wording).
  const Value& need(size_t idx, std::string_view name, std::string_view fn) const;
  // Raises TypeError when more than `max_pos` positional args or a keyword not in `names` is given.
  void check(std::string_view fn, size_t max_pos, std::initializer_list<std::string_view> names) const;
};

struct FilterFn {
  const char* name;
  Value (*fn)(Interp& in, const Value& v, CallArgs& args);
};
struct TestFn {
  const char* name;
  bool (*fn)(Interp& in, const Value& v, CallArgs& args);
};

const FilterFn* find_filter(std::string_view name);  // filters.cpp
const TestFn* find_test(std::string_view name);      // builtin_tests.cpp

// obj.name for str/dict/list/... (Python methods and sandbox rules). False when there is no such attribute.
bool builtin_attr(const Value& obj, std::string_view name, Value& out);  // methods.cpp
// The global functions: range, dict, namespace, cycler, joiner, raise_exception, strftime_now.
std::vector<std::pair<std::string, Value>> make_globals();

// Helpers shared by filters/methods.
std::string arg_str(const Value& v, std::string_view what);  // requires a str
int64_t arg_int(const Value& v, std::string_view what);      // requires an int
ValueList iterate(const Value& v);  // Python iter(): list items, dict keys, str chars, ... (consumes iterators)
Value make_tuple(ValueList items);

}  // namespace tmill::jinja
