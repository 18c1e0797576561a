// Internal to the filter implementation: helpers shared by filters.cpp (sequence filters,
// registry) and filters_text.cpp (text and number filters).
#pragma once

#include <string>
#include <string_view>

#include "jinja/interp.h"

namespace tmill::jinja {

std::string html_escape(std::string_view s);

namespace filt {

using Args = CallArgs;

inline Value arg_or(const Args& a, size_t idx, std::string_view name, const Value& dflt) {
  const Value* v = a.get(idx, name);
  return v ? *v : dflt;
}

inline bool arg_bool(const Args& a, size_t idx, std::string_view name, bool dflt) {
  const Value* v = a.get(idx, name);
  return v ? truthy(*v) : dflt;
}

inline Value text(std::string s, const Value& like) { return Value::string(std::move(s), like.markup); }
inline std::string soft_str(const Value& v) { return v.kind == Kind::String ? v.str() : to_str(v); }

// Text and number filters (filters_text.cpp).
Value f_abs(Interp& in, const Value& v, Args& a);
Value f_capitalize(Interp& in, const Value& v, Args& a);
Value f_lower(Interp& in, const Value& v, Args& a);
Value f_upper(Interp& in, const Value& v, Args& a);
Value f_title(Interp& in, const Value& v, Args& a);
Value f_center(Interp& in, const Value& v, Args& a);
Value f_escape(Interp& in, const Value& v, Args& a);
Value f_forceescape(Interp& in, const Value& v, Args& a);
Value f_safe(Interp& in, const Value& v, Args& a);
Value f_string(Interp& in, const Value& v, Args& a);
Value f_int(Interp& in, const Value& v, Args& a);
Value f_float(Interp& in, const Value& v, Args& a);
Value f_format(Interp& in, const Value& v, Args& a);
Value f_indent(Interp& in, const Value& v, Args& a);
Value f_pprint(Interp& in, const Value& v, Args& a);
Value f_replace(Interp& in, const Value& v, Args& a);
Value f_round(Interp& in, const Value& v, Args& a);
Value f_tojson(Interp& in, const Value& v, Args& a);
Value f_trim(Interp& in, const Value& v, Args& a);
Value f_truncate(Interp& in, const Value& v, Args& a);
Value f_wordcount(Interp& in, const Value& v, Args& a);

}  // namespace filt
}  // namespace tmill::jinja
