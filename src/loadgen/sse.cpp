#include "loadgen/sse.h"

namespace tmill::loadgen {

bool SseParser::feed(std::string_view bytes, const Handler& on_event) {
  if (malformed_) return false;
  size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes[0] == '\n') i = 1;
    skip_lf_ = false;
  }
  while (i < bytes.size()) {
    // Find the next line terminator in the rest of this piece.
    size_t j = i;
    while (j < bytes.size() && bytes[j] != '\n' && bytes[j] != '\r') ++j;
    if (j == bytes.size()) {
      line_.append(bytes.substr(i));
      if (line_.size() > max_line_) {
        malformed_ = true;
        return false;
      }
      return true;
    }
    std::string_view piece = bytes.substr(i, j - i);
    if (line_.empty()) {
      process_line(piece, on_event);
    } else {
      line_.append(piece);
      process_line(line_, on_event);
      line_.clear();
    }
    if (bytes[j] == '\r') {
      if (j + 1 < bytes.size()) {
        i = (bytes[j + 1] == '\n') ? j + 2 : j + 1;
      } else {
        skip_lf_ = true;
        i = j + 1;
      }
    } else {
      i = j + 1;
    }
  }
  return true;
}

void SseParser::finish(const Handler& on_event) {
  if (malformed_) return;
  if (!line_.empty()) {
    process_line(line_, on_event);
    line_.clear();
  }
  if (has_data_) dispatch(on_event);
}

void SseParser::process_line(std::string_view line, const Handler& on_event) {
  if (line.empty()) {
    dispatch(on_event);
    return;
  }
  if (line[0] == ':') return;  // comment / keep-alive
  std::string_view field = line, value;
  if (auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data.push_back('\n');
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event.assign(value);
  } else if (field == "id") {
    pending_.id.assign(value);
  }  // "retry" and unknown fields: ignored
}

void SseParser::dispatch(const Handler& on_event) {
  if (has_data_) {
    ++events_;
    on_event(pending_);
  }
  pending_.data.clear();
  pending_.event.clear();
  has_data_ = false;
}

}  // namespace tmill::loadgen
