// fuzz-deps: server
// libFuzzer target: raw bytes -> the event-driven transport's request parsing (server/http_parser.h),
// fed as the socket would: find_head_end on growing prefixes, parse_request_head on the head, then
// the rest through ChunkedDecoder in pieces. Checks: no crash or overread; find_head_end's answer does
// not depend on how the bytes were split; a parsed head respects the limits; a chunked body never
// exceeds its cap and the decoder consumes no more than it was given.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/http_parser.h"

using namespace tmill::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  HttpLimits lim;
  lim.max_request_line = 256;  // small limits reach the limit paths with short inputs
  lim.max_header_bytes = 2048;
  lim.max_header_line = 512;
  lim.max_headers = 16;
  int status = 0;
  const size_t end = find_head_end(in, lim, &status);
  // The same answer when the bytes arrive one prefix at a time.
  size_t seen_end = 0;
  int seen_status = 0;
  for (size_t n = 1; n <= size && seen_end == 0 && seen_status == 0; n += 1 + n / 8)
    seen_end = find_head_end(in.substr(0, n), lim, &seen_status);
  if (seen_end == 0 && seen_status == 0) seen_end = find_head_end(in, lim, &seen_status);
  if (status != 0 && seen_status == 0) std::abort();
  if (status == 0 && end != 0 && seen_end != end) std::abort();
  if (status != 0 || end == 0) return 0;
  if (end > lim.max_header_bytes) std::abort();
  RequestHead head;
  if (parse_request_head(in.substr(0, end), lim, head) != 0) return 0;
  if (head.method.empty() || head.path.empty() || head.headers.size() > lim.max_headers) std::abort();
  if (head.chunked && head.content_length) std::abort();
  if (!head.chunked) return 0;
  ChunkedDecoder dec;
  std::string body;
  const size_t cap = 1024;
  std::string_view rest = in.substr(end);
  size_t step = 1;
  while (!rest.empty() && !dec.done() && !dec.error()) {
    const std::string_view piece = rest.substr(0, step);
    const size_t used = dec.feed(piece, body, cap);
    if (used > piece.size() || body.size() > cap) std::abort();
    if (used < piece.size() && !dec.done() && !dec.error()) std::abort();  // it stops only at the end
    rest.remove_prefix(used);
    step = step * 2 + 1;
  }
  return 0;
}
