// Python string formatting used by templates: "%"-formatting (str % args, the `format` filter),
// str.format() (a common subset of the format mini-language) and datetime.strftime.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "jinja/interp.h"
#include "jinja/pystr.h"

namespace tmill::jinja {

namespace {

constexpr int64_t kMaxWidth = 1 << 20;

std::string pad_to(std::string s, int64_t width, char align, const std::string& fill = " ") {
  int64_t len = static_cast<int64_t>(py::cp_len(s));
  if (width <= len) return s;
  if (width > kMaxWidth) raise("ValueError", "format width too large");
  int64_t total = width - len, left = align == '<' ? 0 : align == '>' ? total : align == '^' ? total / 2 : total;
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < total - left; ++k) out += fill;
  return out;
}

double to_double_arg(const Value& v, char conv) {
  if (v.is_number()) return v.as_double();
  raise("TypeError", std::string("must be real number, not ") + type_name(v) + " (%" + conv + ")");
}

int64_t to_int_arg(const Value& v, char conv) {
  if (v.is_int()) return v.as_int();
  if (v.kind == Kind::Float && (conv == 'd' || conv == 'i' || conv == 'u')) {
    if (std::isnan(v.f) || std::isinf(v.f) || std::fabs(v.f) >= 9.2e18) raise("OverflowError", "cannot convert float to integer");
    return static_cast<int64_t>(v.f);
  }
  if (conv == 'd' || conv == 'i' || conv == 'u')
    raise("TypeError", std::string("%") + conv + " format: a real number is required, not " + type_name(v));
  raise("TypeError", std::string("%") + conv + " format: an integer is required, not " + type_name(v));
}

std::string c_format(const std::string& spec, double d) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, spec.c_str(), d);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), spec.c_str(), d);
  big.resize(static_cast<size_t>(n));
  return big;
}

std::string c_format_int(const std::string& spec, long long x) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, spec.c_str(), x);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), spec.c_str(), x);
  big.resize(static_cast<size_t>(n));
  return big;
}

std::string float_special(double d, bool upper) {
  std::string s = std::isnan(d) ? "nan" : (d < 0 ? "-inf" : "inf");
  return upper ? py::upper(s) : s;
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
  ValueList pos;
  const DictObj* mapping = nullptr;
  if (args.is_tuple()) pos = args.list_obj().items;
  else if (args.kind == Kind::Dict) mapping = &args.dict_obj();
  else pos.push_back(args);
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) raise("ValueError", "incomplete format");
    const Value* arg = nullptr;
    if (fmt[k] == '(') {
      size_t close = fmt.find(')', k);
      if (close == std::string::npos) raise("ValueError", "incomplete format key");
      if (!mapping) raise("TypeError", "format requires a mapping");
      const Value* v = mapping->find(std::string_view(fmt).substr(k + 1, close - k - 1));
      if (!v) raise("KeyError", py::repr_str(fmt.substr(k + 1, close - k - 1)));
      arg = v;
      used_mapping = true;
      k = close + 1;
    }
    std::string flags;
    while (k < fmt.size() && std::strchr("-+ #0", fmt[k])) flags += fmt[k++];
    auto take_num = [&](int64_t& out_n) {
      if (k < fmt.size() && fmt[k] == '*') {
        if (next >= pos.size()) raise("TypeError", "not enough arguments for format string");
        out_n = arg_int(pos[next++], "* width");
        ++k;
        return true;
      }
      bool any = false;
      out_n = 0;
      while (k < fmt.size() && fmt[k] >= '0' && fmt[k] <= '9') {
        out_n = std::min<int64_t>(out_n * 10 + (fmt[k++] - '0'), kMaxWidth + 1);
        any = true;
      }
      return any;
    };
    int64_t width = -1, prec = -1;
    if (!take_num(width)) width = -1;
    if (k < fmt.size() && fmt[k] == '.') {
      ++k;
      if (!take_num(prec)) prec = 0;
    }
    if (width > kMaxWidth || prec > kMaxWidth) raise("ValueError", "format width too large");
    while (k < fmt.size() && (fmt[k] == 'h' || fmt[k] == 'l' || fmt[k] == 'L')) ++k;
    if (k >= fmt.size()) raise("ValueError", "incomplete format");
    char conv = fmt[k];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (mapping) {
        arg = &args;
      } else {
        if (next >= pos.size()) raise("TypeError", "not enough arguments for format string");
        arg = &pos[next++];
      }
    }
    bool left = flags.find('-') != std::string::npos;
    std::string piece;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        piece = conv == 's' ? to_str(*arg) : repr(*arg);
        if (prec >= 0) piece = piece.substr(0, py::byte_offset(piece, static_cast<size_t>(prec)));
        piece = pad_to(piece, width, left ? '<' : '>');
        break;
      }
      case 'c': {
        if (arg->kind == Kind::String && py::cp_len(arg->str()) == 1) piece = arg->str();
        else py::append_utf8(piece, static_cast<uint32_t>(to_int_arg(*arg, 'c')));
        piece = pad_to(piece, width, left ? '<' : '>');
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        long long x = to_int_arg(*arg, conv);
        std::string spec = "%" + flags + (width >= 0 ? std::to_string(width) : "") +
                           (prec >= 0 ? "." + std::to_string(prec) : "") + "ll" + (conv == 'u' || conv == 'i' ? 'd' : conv);
        if ((conv == 'x' || conv == 'X' || conv == 'o') && x < 0) {
          std::string body = c_format_int("%" + std::string(flags.find('#') != std::string::npos ? "#" : "") + "ll" + conv, -x);
          if (conv == 'o' && flags.find('#') != std::string::npos) body = "0o" + body.substr(1);
          piece = pad_to("-" + body, width, left ? '<' : '>');
        } else {
          piece = c_format_int(spec, x);
          if (conv == 'o' && flags.find('#') != std::string::npos) {
            size_t z = piece.find('0');
            if (z != std::string::npos) piece.insert(z + 1, "o");
          }
        }
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        double d = to_double_arg(*arg, conv);
        if (std::isnan(d) || std::isinf(d)) {
          piece = pad_to(float_special(d, conv >= 'A' && conv <= 'Z'), width, left ? '<' : '>');
        } else {
          std::string spec = "%" + flags + (width >= 0 ? std::to_string(width) : "") + "." +
                             std::to_string(prec >= 0 ? prec : 6) + conv;
          piece = c_format(spec, d);
        }
        break;
      }
      default: raise("ValueError", std::string("unsupported format character '") + conv + "'");
    }
    out += piece;
  }
  if (!mapping && next < pos.size()) raise("TypeError", "not all arguments converted during string formatting");
  (void)used_mapping;
  charge_bytes(out.size());
  return out;
}

namespace {

// format(value, spec) for the mini-language: [[fill]align][sign][#][0][width][,_][.prec][type]
std::string format_spec(const Value& v, const std::string& spec) {
  size_t k = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (!spec.empty()) {
    size_t p = 0;
    uint32_t first = py::next_cp(spec, p);
    if (p < spec.size() && is_align(spec[p])) {
      fill.clear();
      py::append_utf8(fill, first);
      align = spec[p];
      k = p + 1;
    } else if (is_align(spec[0])) {
      align = spec[0];
      k = 1;
    }
  }
  char sign = 0;
  if (k < spec.size() && (spec[k] == '+' || spec[k] == '-' || spec[k] == ' ')) sign = spec[k++];
  bool alt = false;
  if (k < spec.size() && spec[k] == '#') {
    alt = true;
    ++k;
  }
  if (k < spec.size() && spec[k] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++k;
  }
  int64_t width = -1, prec = -1;
  while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k]))) {
    width = std::min<int64_t>(std::max<int64_t>(width, 0) * 10 + (spec[k++] - '0'), kMaxWidth + 1);
  }
  char group = 0;
  if (k < spec.size() && (spec[k] == ',' || spec[k] == '_')) group = spec[k++];
  if (k < spec.size() && spec[k] == '.') {
    ++k;
    prec = 0;
    while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k])))
      prec = std::min<int64_t>(prec * 10 + (spec[k++] - '0'), kMaxWidth + 1);
  }
  char type = k < spec.size() ? spec[k++] : 0;
  if (k != spec.size() || width > kMaxWidth || prec > kMaxWidth) raise("ValueError", "Invalid format specifier");
  std::string body;
  bool numeric = v.is_number();
  if (v.kind == Kind::String || (!numeric && (type == 0 || type == 's'))) {
    if (type != 0 && type != 's') raise("ValueError", std::string("Unknown format code '") + type + "' for object of type 'str'");
    body = to_str(v);
    if (prec >= 0) body = body.substr(0, py::byte_offset(body, static_cast<size_t>(prec)));
    return pad_to(body, width, align ? (align == '=' ? '<' : align) : '<', fill);
  }
  if (!numeric) raise("TypeError", "unsupported format string passed to " + type_name(v) + ".__format__");
  bool neg = false;
  if ((type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'c') &&
      v.kind != Kind::Float) {
    int64_t x = v.as_int();
    neg = x < 0;
    uint64_t ux = neg ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
    if (type == 'c') {
      py::append_utf8(body, static_cast<uint32_t>(ux));
    } else if (type == 'b') {
      do {
        body.insert(body.begin(), static_cast<char>('0' + (ux & 1)));
        ux >>= 1;
      } while (ux);
      if (alt) body = "0b" + body;
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, type == 'x' ? "%llx" : type == 'X' ? "%llX" : type == 'o' ? "%llo" : "%llu",
                    static_cast<unsigned long long>(ux));
      body = buf;
      if (alt && (type == 'x' || type == 'X' || type == 'o')) body = std::string("0") + (type == 'o' ? 'o' : type) + body;
    }
    if (group && (type == 0 || type == 'd')) {
      std::string g;
      for (size_t n = 0; n < body.size(); ++n) {
        if (n && (body.size() - n) % 3 == 0) g += group;
        g += body[n];
      }
      body = g;
    }
  } else {
    double d = v.as_double();
    if (type != 0 && !std::strchr("eEfFgG%", type)) raise("ValueError", std::string("Unknown format code '") + type + "' for object of type 'float'");
    neg = std::signbit(d) && !std::isnan(d);
    d = std::fabs(d);
    if (std::isnan(d) || std::isinf(d)) {
      body = float_special(d, type == 'E' || type == 'F' || type == 'G');
    } else if (type == 0 && prec < 0) {
      body = py::float_repr(d);
    } else if (type == '%') {
      body = c_format("%." + std::to_string(prec < 0 ? 6 : prec) + "f", d * 100) + "%";
    } else {
      char t = type == 0 ? 'g' : type;
      body = c_format(std::string("%") + (alt ? "#" : "") + "." + std::to_string(prec < 0 ? 6 : prec) + t, d);
    }
  }
  std::string sgn = neg ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
  if (align == '=') {
    int64_t len = static_cast<int64_t>(py::cp_len(sgn + body));
    std::string padding;
    for (int64_t n = len; n < width; ++n) padding += fill;
    return sgn + padding + body;
  }
  return pad_to(sgn + body, width, align ? align : '>', fill);
}

}  // namespace

std::string brace_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  bool used_auto = false, used_manual = false;
  for (size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') {
        out += '}';
        ++k;
        continue;
      }
      raise("ValueError", "Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    size_t close = fmt.find('}', k);
    if (close == std::string::npos) raise("ValueError", "expected '}' before end of string");
    std::string field = fmt.substr(k + 1, close - k - 1);
    k = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (used_manual) raise("ValueError", "cannot switch from manual field specification to automatic field numbering");
      used_auto = true;
      if (auto_idx >= args.pos.size()) raise("IndexError", "Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
      v = &args.pos[auto_idx++];
    } else if (std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      if (used_auto) raise("ValueError", "cannot switch from automatic field numbering to manual field specification");
      used_manual = true;
      size_t idx = field.size() > 6 ? SIZE_MAX : std::stoul(field);
      if (idx >= args.pos.size()) raise("IndexError", "Replacement index " + field + " out of range for positional args tuple");
      v = &args.pos[idx];
    } else {
      for (const auto& [name, val] : args.kw)
        if (name == field) v = &val;
      if (!v) raise("KeyError", py::repr_str(field));
    }
    Value shown = *v;
    if (conv == "r" || conv == "a") shown = Value::string(repr(*v));
    else if (conv == "s") shown = Value::string(to_str(*v));
    else if (!conv.empty()) raise("ValueError", "Unknown conversion specifier " + conv);
    out += spec.empty() ? to_str(shown) : format_spec(shown, spec);
  }
  charge_bytes(out.size());
  return out;
}

std::string py_strftime(const std::string& fmt, const std::tm& tm) {
  std::string out;
  std::string chunk;  // run of directives handed to the C library
  auto flush = [&]() {
    if (chunk.empty()) return;
    std::vector<char> buf(chunk.size() * 32 + 256);
    std::string f = "x" + chunk;  // leading char so an empty expansion is distinguishable from overflow
    size_t n = std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
    if (n > 0) out.append(buf.data() + 1, n - 1);
    chunk.clear();
  };
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] == '%' && k + 1 < fmt.size()) {
      char d = fmt[k + 1];
      if (d == 'f' || d == 'z' || d == 'Z') {
        flush();
        if (d == 'f') out += "000000";
        ++k;
        continue;
      }
      chunk += '%';
      chunk += d;
      ++k;
      continue;
    }
    chunk += fmt[k];
    if (chunk.size() > 512) flush();
  }
  flush();
  charge_bytes(out.size());
  return out;
}

}  // namespace tmill::jinja
