#include "server/http_parser.h"

#include <algorithm>

namespace tmill::server {

namespace {

bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20) || x == y;
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string percent_decode(std::string_view p, bool plus_is_space) {
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size(); i++) {
    if (plus_is_space && p[i] == '+') {
      out.push_back(' ');
      continue;
    }
    if (p[i] == '%' && i + 2 < p.size()) {
      const int h = hex_value(p[i + 1]), l = hex_value(p[i + 2]);
      if (h >= 0 && l >= 0) {
        out.push_back(static_cast<char>(h * 16 + l));
        i += 2;
        continue;
      }
    }
    out.push_back(p[i]);
  }
  return out;
}

namespace {

// %XX decoded; a malformed escape stays as it is ('+' is not a space in a path).
std::string decode_path(std::string_view p) { return percent_decode(p, false); }

// Splits off the next line (LF or CRLF), without its line end.
std::string_view next_line(std::string_view& s) {
  const size_t nl = s.find('\n');
  std::string_view line = s.substr(0, nl);
  s.remove_prefix(nl == std::string_view::npos ? s.size() : nl + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

size_t find_head_end(std::string_view buf, const HttpLimits& lim, int* status) {
  size_t pos = 0, headers = 0;
  bool first = true;
  for (;;) {
    const size_t limit = first ? lim.max_request_line : lim.max_header_line;
    const size_t nl = buf.find('\n', pos);
    const size_t len = (nl == std::string_view::npos ? buf.size() : nl) - pos;
    if (len > limit + 1) {  // +1: the CR
      *status = first ? 414 : 431;
      return 0;
    }
    if (nl == std::string_view::npos) {
      if (buf.size() > lim.max_header_bytes) *status = 431;
      return 0;
    }
    const bool empty = len == 0 || (len == 1 && buf[pos] == '\r');
    pos = nl + 1;
    if (pos > lim.max_header_bytes) {
      *status = 431;
      return 0;
    }
    if (empty) {
      if (first) continue;  // empty lines before a request line are ignored (RFC 9112 2.2)
      return pos;
    }
    if (!first && ++headers > lim.max_headers) {
      *status = 431;
      return 0;
    }
    first = false;
  }
}

int parse_request_head(std::string_view head, const HttpLimits& lim, RequestHead& out) {
  std::string_view rest = head;
  std::string_view line;
  do line = next_line(rest);
  while (line.empty() && !rest.empty());
  // METHOD SP target SP HTTP/1.x
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return 400;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return 400;
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (method.size() > 32) return 400;
  for (char c : method)
    if (c < 'A' || c > 'Z') return 400;  // methods are case-sensitive; ours are upper-case tokens
  if (target.size() > lim.max_request_line) return 414;
  if (target.front() != '/') return 400;  // origin-form only (no proxy or '*' requests)
  for (unsigned char c : target)
    if (c <= 0x20 || c == 0x7f) return 400;
  if (version == "HTTP/1.1") out.minor = 1;
  else if (version == "HTTP/1.0") out.minor = 0;
  else return 400;
  out.method = method;
  out.target = target;
  out.path = decode_path(target.substr(0, target.find('?')));
  const size_t q = target.find('?');
  out.query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  out.keep_alive = out.minor >= 1;

  bool te_seen = false, conn_close = false, conn_keep = false;
  while (!rest.empty()) {
    line = next_line(rest);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') return 400;  // obsolete line folding
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return 400;
    const std::string_view name = line.substr(0, colon);
    for (unsigned char c : name)
      if (!is_tchar(c)) return 400;  // also rejects "Name :" (whitespace before the colon)
    const std::string_view value = trim(line.substr(colon + 1));
    for (unsigned char c : value)
      if ((c < 0x20 && c != '\t') || c == 0x7f) return 400;
    if (out.headers.size() >= lim.max_headers) return 431;
    out.headers.emplace_back(name, value);
    if (iequals(name, "Content-Length")) {
      if (value.empty() || value.size() > 18) return 400;
      uint64_t n = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return 400;
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      if (out.content_length && *out.content_length != n) return 400;
      out.content_length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      // Only "chunked" (last) is understood; anything else cannot be framed: 400.
      std::string_view v = value;
      const size_t comma = v.rfind(',');
      if (comma != std::string_view::npos) {
        if (!iequals(trim(v.substr(0, comma)), "identity")) return 400;
        v = trim(v.substr(comma + 1));
      }
      if (!iequals(v, "chunked") || te_seen || out.minor == 0) return 400;
      te_seen = true;
    } else if (iequals(name, "Connection")) {
      std::string_view v = value;
      while (!v.empty()) {
        const size_t c = v.find(',');
        const std::string_view tok = trim(v.substr(0, c));
        if (iequals(tok, "close")) conn_close = true;
        if (iequals(tok, "keep-alive")) conn_keep = true;
        v.remove_prefix(c == std::string_view::npos ? v.size() : c + 1);
      }
    } else if (iequals(name, "Expect")) {
      if (iequals(value, "100-continue")) out.expect_continue = out.minor >= 1;
    }
  }
  out.chunked = te_seen;
  if (out.chunked && out.content_length) {
    out.content_length.reset();  // RFC 9112 6.3: chunked wins, and the connection closes after
    conn_close = true;
  }
  if (conn_close) out.keep_alive = false;
  else if (conn_keep) out.keep_alive = true;
  return 0;
}

size_t ChunkedDecoder::feed(std::string_view in, std::string& body, size_t max_body) {
  size_t i = 0;
  while (i < in.size() && state_ != State::Done && state_ != State::Error) {
    const char c = in[i];
    switch (state_) {
      case State::Size: {
        const int h = hex_value(c);
        if (h >= 0) {
          if (++size_digits_ > 15) state_ = State::Error;
          remaining_ = remaining_ * 16 + static_cast<uint64_t>(h);
        } else if (size_digits_ == 0) {
          state_ = State::Error;
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::SizeExt;
        } else if (c == '\r') {
          state_ = State::SizeLf;
        } else if (c == '\n') {
          state_ = remaining_ == 0 ? State::Trailer : State::Data;
        } else {
          state_ = State::Error;
        }
        i++;
        break;
      }
      case State::SizeExt:
        if (++trailer_bytes_ > 8192) state_ = State::Error;
        else if (c == '\n') state_ = remaining_ == 0 ? State::Trailer : State::Data;
        i++;
        break;
      case State::SizeLf:
        state_ = c != '\n' ? State::Error : remaining_ == 0 ? State::Trailer : State::Data;
        i++;
        break;
      case State::Data: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size() - i));
        if (body.size() + n > max_body) {
          too_large_ = true;
          state_ = State::Error;
          break;
        }
        body.append(in.data() + i, n);
        i += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::DataCr;
        break;
      }
      case State::DataCr:
        state_ = c == '\r' ? State::DataLf : c == '\n' ? State::Size : State::Error;
        size_digits_ = 0;
        i++;
        break;
      case State::DataLf:
        state_ = c == '\n' ? State::Size : State::Error;
        i++;
        break;
      case State::Trailer:
        if (++trailer_bytes_ > 8192) {
          state_ = State::Error;
        } else if (c == '\n') {
          if (trailer_line_ == 0) state_ = State::Done;
          trailer_line_ = 0;
        } else if (c != '\r') {
          trailer_line_++;
        }
        i++;
        break;
      case State::Done:
      case State::Error:
        break;
    }
  }
  return i;
}

std::string_view http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

}  // namespace tmill::server
