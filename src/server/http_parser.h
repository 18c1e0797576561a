// HTTP/1.1 request parsing for the event-driven transport (http_server.cpp): the request line and
// headers of one request (parse_request_head), and an incremental decoder of chunked request bodies
// (ChunkedDecoder). Pure functions over bytes, no sockets: tests/unit/server and
// tests/fuzz/fuzz_http_parser.cpp drive them directly.
//
// Why our own and not a library: Debian's packaged parsers (libhttp-parser, llhttp) would be a new
// build dependency for ~250 lines of code whose job here is narrow (origin-form requests to an API
// server, bounded sizes), and the limits (request line, header size and count) must be checked
// before anything is buffered without bound, which we do in the same pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmill::server {

struct HttpLimits {
  size_t max_request_line = 8192;   // longer: 414
  size_t max_header_bytes = 65536;  // request line + headers; larger: 431
  size_t max_header_line = 8192;    // one header line; longer: 431
  size_t max_headers = 100;         // more: 431
};

struct RequestHead {
  std::string method;
  std::string target;  // as sent
  std::string query;   // the target after '?', as sent ("" when none)
  std::string path;    // percent-decoded, without the query string
  int minor = 1;       // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<uint64_t> content_length;
  bool chunked = false;           // Transfer-Encoding: chunked (wins over Content-Length)
  bool keep_alive = true;         // from the version and Connection
  bool expect_continue = false;   // Expect: 100-continue
  bool has_body() const { return chunked || content_length.value_or(0) > 0; }
};

// Where the head ends in `buf` (the offset just past the empty line), 0 when it is not complete yet,
// or an HTTP error status when what is there already breaks the limits (414, 431) or is not HTTP
// (400). `*status` is set only on error.
size_t find_head_end(std::string_view buf, const HttpLimits& limits, int* status);

// %XX escapes decoded (a malformed one stays as it is); plus_is_space: '+' is a space (a query's
// form encoding; not in a path).
std::string percent_decode(std::string_view s, bool plus_is_space);

// Parses a complete head (as delimited by find_head_end). 0 on success, else the status to answer
// (400 malformed, 414, 431).
int parse_request_head(std::string_view head, const HttpLimits& limits, RequestHead& out);

// Decodes a chunked body as its bytes arrive. feed() consumes what it can and appends data to
// `body`; it stops at the end of the body (done()) and leaves what follows (the next request).
class ChunkedDecoder {
 public:
  // Bytes consumed from `in`; sets error() on a malformed body, too_large() past max_body.
  size_t feed(std::string_view in, std::string& body, size_t max_body);
  bool done() const { return state_ == State::Done; }
  bool error() const { return state_ == State::Error; }
  bool too_large() const { return too_large_; }

 private:
  enum class State { Size, SizeExt, SizeLf, Data, DataCr, DataLf, Trailer, Done, Error };
  State state_ = State::Size;
  uint64_t remaining_ = 0;
  int size_digits_ = 0;
  size_t trailer_line_ = 0;   // bytes in the current trailer line
  size_t trailer_bytes_ = 0;  // all trailer bytes (bounded)
  bool too_large_ = false;
};

std::string_view http_reason(int status);

}  // namespace tmill::server
