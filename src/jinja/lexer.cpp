#include "jinja/lexer.h"

#include <cmath>
#include <cstdlib>

#include "jinja/pystr.h"
#include "jinja/value.h"

namespace tmill::jinja {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Text: return "template data";
    case Tok::VarBegin: return "begin of print statement";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "begin of statement block";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::Name: return "name";
    case Tok::String: return "string";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    case Tok::Op: return "operator";
    case Tok::Eof: return "end of template";
  }
  return "token";
}

namespace {

[[noreturn]] void syntax_error(const std::string& msg, int line) { throw JinjaError("TemplateSyntaxError", msg, line); }

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's "\s+" fullmatch over the whole string (non-empty, all whitespace).
bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (size_t pos = 0; pos < s.size();)
    if (!py::is_space(py::next_cp(s, pos))) return false;
  return true;
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t p = pos;
    if (!py::is_space(py::next_cp(s, p))) break;
    pos = p;
  }
  return pos;
}

int count_nl(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python "unicode-escape" decoding of a string literal body.
std::string decode_escapes(std::string_view s, int line) {
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    char c = s[k];
    if (c != '\\' || k + 1 >= s.size()) {
      out += c;
      continue;
    }
    char e = s[++k];
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int d = 0; d < digits; ++d) {
          int h = k + 1 < s.size() ? hexval(s[k + 1]) : -1;
          if (h < 0) syntax_error(std::string("truncated \\") + e + " escape in string literal", line);
          cp = cp * 16 + static_cast<uint32_t>(h);
          ++k;
        }
        if (cp > 0x10FFFF) syntax_error("illegal Unicode character in string literal", line);
        py::append_utf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int d = 0; d < 2 && k + 1 < s.size() && s[k + 1] >= '0' && s[k + 1] <= '7'; ++d)
            cp = cp * 8 + static_cast<uint32_t>(s[++k] - '0');
          py::append_utf8(out, cp);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& opt) : s_(src), opt_(opt) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      size_t t = find_tag(pos_);
      if (t == std::string_view::npos) {
        emit_text(s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      char kind = s_[t + 1];
      size_t p = t + 2;
      char mod = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) mod = s_[p++];
      bool line_starting = pos_ == 0 || s_[pos_ - 1] == '\n';
      std::string_view text = s_.substr(pos_, t - pos_);
      emit_text(strip_text(text, mod, kind != '{', line_starting));
      line_ += count_nl(text);
      pos_ = p;
      if (kind == '#') {
        comment();
      } else if (kind == '%' && try_raw()) {
        // handled
      } else {
        tag(kind == '{');
      }
    }
    out_.push_back(Token{Tok::Eof, "", line_});
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t k = s_.find('{', from); k != std::string_view::npos; k = s_.find('{', k + 1))
      if (k + 1 < s_.size() && (s_[k + 1] == '{' || s_[k + 1] == '%' || s_[k + 1] == '#')) return k;
    return std::string_view::npos;
  }

  std::string_view strip_text(std::string_view text, char mod, bool lstrip_kind, bool line_starting) const {
    if (mod == '-') {
      size_t e = text.size();
      while (e > 0) {  // rstrip Unicode whitespace
        size_t st = e - 1;
        while (st > 0 && (static_cast<unsigned char>(text[st]) & 0xC0) == 0x80) --st;
        size_t p = st;
        if (!py::is_space(py::next_cp(text, p))) break;
        e = st;
      }
      return text.substr(0, e);
    }
    if (mod != '+' && opt_.lstrip_blocks && lstrip_kind) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && all_space(text.substr(l_pos))) return text.substr(0, l_pos);
    }
    return text;
  }

  void emit_text(std::string_view text) {
    if (!text.empty()) out_.push_back(Token{Tok::Text, std::string(text), line_});
  }

  // After a block/comment end: "-" strips all following whitespace, plain end applies trim_blocks.
  void after_end(char end_mod) {
    if (end_mod == '-') {
      size_t e = skip_space(s_, pos_);
      line_ += count_nl(s_.substr(pos_, e - pos_));
      pos_ = e;
    } else if (end_mod == 0 && opt_.trim_blocks && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }

  void comment() {
    size_t e = s_.find("#}", pos_);
    if (e == std::string_view::npos) syntax_error("Missing end of comment tag", line_);
    char end_mod = (e > pos_ && (s_[e - 1] == '-' || s_[e - 1] == '+')) ? s_[e - 1] : 0;
    line_ += count_nl(s_.substr(pos_, e - pos_));
    pos_ = e + 2;
    after_end(end_mod);
  }

  // {% raw %}...{% endraw %}: body is literal text.
  bool try_raw() {
    size_t p = skip_ws(pos_);
    if (s_.compare(p, 3, "raw") != 0 || (p + 3 < s_.size() && is_name_char(s_[p + 3]))) return false;
    p = skip_ws(p + 3);
    bool strip_after = false;
    if (s_.compare(p, 3, "-%}") == 0) {
      strip_after = true;
      p += 3;
    } else if (s_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    line_ += count_nl(s_.substr(pos_, p - pos_));
    pos_ = p;
    if (strip_after) after_end('-');
    // Find "{%[-+]? \s* endraw \s* (+%}|-%}|%})".
    for (size_t k = s_.find("{%", pos_); k != std::string_view::npos; k = s_.find("{%", k + 1)) {
      size_t q = k + 2;
      char mod = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) mod = s_[q++];
      q = skip_ws(q);
      if (s_.compare(q, 6, "endraw") != 0) continue;
      q = skip_ws(q + 6);
      char end_mod = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) end_mod = s_[q++];
      if (s_.compare(q, 2, "%}") != 0) continue;
      bool line_starting = pos_ == 0 || s_[pos_ - 1] == '\n';
      std::string_view body = s_.substr(pos_, k - pos_);
      emit_text(strip_text(body, mod, true, line_starting));
      line_ += count_nl(s_.substr(pos_, q + 2 - pos_));
      pos_ = q + 2;
      after_end(end_mod);
      return true;
    }
    syntax_error("Missing end of raw directive", line_);
  }

  size_t skip_ws(size_t p) const {
    while (p < s_.size() && is_ws(s_[p])) ++p;
    return p;
  }

  void push(Tok t, std::string v, int line) { out_.push_back(Token{t, std::move(v), line}); }

  void tag(bool is_var) {
    push(is_var ? Tok::VarBegin : Tok::BlockBegin, "", line_);
    std::string balance;
    while (true) {
      if (pos_ >= s_.size())
        syntax_error(std::string("unexpected end of template, expected '") +
                         (is_var ? "end of print statement" : "end of statement block") + "'.",
                     line_);
      if (balance.empty()) {
        if (is_var) {
          if (s_.compare(pos_, 3, "-}}") == 0) {
            push(Tok::VarEnd, "", line_);
            pos_ += 3;
            after_end('-');
            return;
          }
          if (s_.compare(pos_, 2, "}}") == 0) {
            push(Tok::VarEnd, "", line_);
            pos_ += 2;
            return;
          }
        } else {
          char m = s_[pos_];
          if ((m == '-' || m == '+') && s_.compare(pos_ + 1, 2, "%}") == 0) {
            push(Tok::BlockEnd, "", line_);
            pos_ += 3;
            after_end(m);
            return;
          }
          if (s_.compare(pos_, 2, "%}") == 0) {
            push(Tok::BlockEnd, "", line_);
            pos_ += 2;
            after_end(0);
            return;
          }
        }
      }
      char c = s_[pos_];
      if (is_ws(c)) {
        line_ += c == '\n';
        ++pos_;
      } else if (is_digit(c)) {
        number();
      } else if (is_name_start(c)) {
        size_t b = pos_;
        while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
        push(Tok::Name, std::string(s_.substr(b, pos_ - b)), line_);
      } else if (c == '"' || c == '\'') {
        string_lit(c);
      } else {
        op(balance);
      }
    }
  }

  void number() {
    size_t b = pos_;
    auto digits = [&](auto pred) {
      size_t st = pos_;
      while (pos_ < s_.size() && (pred(s_[pos_]) || (s_[pos_] == '_' && pos_ > st && pos_ + 1 < s_.size() && pred(s_[pos_ + 1]))))
        ++pos_;
      return pos_ > st;
    };
    auto strip_us = [](std::string_view v) {
      std::string r;
      for (char ch : v)
        if (ch != '_') r += ch;
      return r;
    };
    bool after_dot = b > 0 && s_[b - 1] == '.';
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && std::string_view("xXoObB").find(s_[pos_ + 1]) != std::string_view::npos) {
      char base_c = static_cast<char>(s_[pos_ + 1] | 0x20);
      int base = base_c == 'x' ? 16 : base_c == 'o' ? 8 : 2;
      pos_ += 2;
      if (pos_ < s_.size() && s_[pos_] == '_') ++pos_;
      if (!digits([&](char ch) { int h = hexval(ch); return h >= 0 && h < base; }))
        syntax_error("invalid integer literal", line_);
      std::string d = strip_us(s_.substr(b + 2, pos_ - b - 2));
      errno = 0;
      unsigned long long v = std::strtoull(d.c_str(), nullptr, base);
      if (errno || v > static_cast<unsigned long long>(INT64_MAX)) syntax_error("integer literal too large", line_);
      Token t{Tok::Int, std::string(s_.substr(b, pos_ - b)), line_};
      t.ival = static_cast<int64_t>(v);
      out_.push_back(t);
      return;
    }
    digits(is_digit);
    size_t int_end = pos_;
    bool is_float = false;
    if (!after_dot) {
      if (pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
        ++pos_;
        digits(is_digit);
        is_float = true;
      }
      if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
        size_t save = pos_;
        ++pos_;
        if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
        if (pos_ < s_.size() && is_digit(s_[pos_])) {
          digits(is_digit);
          is_float = true;
        } else {
          pos_ = save;
        }
      }
    }
    if (is_float) {
      std::string d = strip_us(s_.substr(b, pos_ - b));
      Token t{Tok::Float, d, line_};
      t.fval = std::strtod(d.c_str(), nullptr);
      out_.push_back(t);
      return;
    }
    pos_ = int_end;
    if (s_[b] == '0') {  // "0", "00", "0_0": a leading zero only continues with zeros
      pos_ = b + 1;
      while (pos_ < s_.size() && (s_[pos_] == '0' || (s_[pos_] == '_' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '0')))
        ++pos_;
    }
    std::string d = strip_us(s_.substr(b, pos_ - b));
    if (d.size() > 19 || (d.size() == 19 && d > "9223372036854775807"))
      syntax_error("integer literal too large (integers are 64-bit)", line_);
    Token t{Tok::Int, d, line_};
    t.ival = std::strtoll(d.c_str(), nullptr, 10);
    out_.push_back(t);
  }

  void string_lit(char q) {
    size_t b = pos_++;
    int start_line = line_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      line_ += s_[pos_] == '\n';
      ++pos_;
    }
    if (pos_ >= s_.size())
      syntax_error("unexpected char " + py::repr_str(std::string(1, q)) + " at " + std::to_string(b), start_line);
    ++pos_;
    push(Tok::String, decode_escapes(s_.substr(b + 1, pos_ - b - 2), start_line), start_line);
  }

  void op(std::string& balance) {
    static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* o : two)
      if (s_.compare(pos_, 2, o) == 0) {
        push(Tok::Op, o, line_);
        pos_ += 2;
        return;
      }
    char c = s_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      std::string shown;
      size_t p = pos_;
      py::append_utf8(shown, py::next_cp(s_, p));
      syntax_error("unexpected char " + py::repr_str(shown) + " at " + std::to_string(pos_), line_);
    }
    if (c == '(' || c == '[' || c == '{') {
      balance += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) syntax_error(std::string("unexpected '") + c + "'", line_);
      if (balance.back() != c)
        syntax_error(std::string("unexpected '") + c + "', expected '" + balance.back() + "'", line_);
      balance.pop_back();
    }
    push(Tok::Op, std::string(1, c), line_);
    ++pos_;
  }

  std::string_view s_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& opt) {
  std::string norm;
  norm.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      norm += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      norm += source[k];
    }
  }
  if (!opt.keep_trailing_newline && !norm.empty() && norm.back() == '\n') norm.pop_back();
  return Lexer(norm, opt).run();
}

}  // namespace tmill::jinja
