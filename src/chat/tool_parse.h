// Internal pieces of the tool-call parsers (chat/tool_calls.h): the snapshot every format parser builds
// from the whole text so far, a JSON prefix scanner, and the readers shared by several formats.
//
// Each format is a function of (text so far, final) to a Snapshot. Streaming re-parses the growing text
// and sends the difference, so every parser must be monotone: the content and each call's arguments of
// a longer text extend those of a shorter one, and a call's name once known stays the same.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

namespace tmill::toolparse {

struct PartialCall {
  std::string id;
  std::string name;
  std::string arguments;  // as far as known
  bool name_known = false;
  bool done = false;      // complete and well-formed
};

struct Snapshot {
  std::string content;
  std::vector<PartialCall> calls;
};

// Collects content pieces and calls in text order; build() trims whitespace next to calls and, unless
// final, holds back trailing whitespace (a call may follow).
class SnapshotBuilder {
 public:
  void content(std::string_view s);
  void call(PartialCall c);
  Snapshot build(bool final) const;

 private:
  struct Item {
    bool is_call;
    std::string text;
    PartialCall call;
  };
  std::vector<Item> items_;
};

struct Context {
  const nlohmann::ordered_json* tools = nullptr;
};

using ParseFn = void (*)(std::string_view text, bool final, const Context& ctx, SnapshotBuilder& out);

// Format parsers (tool_formats_*.cpp).
void parse_hermes(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_llama3_json(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_mistral(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_granite(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_command_r(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_firefunction(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_functionary(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_deepseek(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_kimi_k2(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_harmony(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_qwen3_coder(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_glm45(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_minimax_m2(std::string_view, bool, const Context&, SnapshotBuilder&);
void parse_gemma4(std::string_view, bool, const Context&, SnapshotBuilder&);

constexpr size_t npos = std::string_view::npos;

// End of the text that is safe to show: all of it when final, else up to the longest suffix of
// text[from..] that is a proper prefix of one of the markers.
size_t held_end(std::string_view text, size_t from, bool final, std::initializer_list<std::string_view> markers);
size_t skip_ws(std::string_view text, size_t pos);
bool is_ws(char c);
std::string_view trim(std::string_view s);

// JSON prefix scanning: Complete (end = one past the value), Partial (the text ends inside a valid
// prefix of a value), Invalid (no value can start like this).
enum class Scan : uint8_t { Complete, Partial, Invalid };
struct JsonScan {
  Scan status;
  size_t begin;  // first byte of the value (after whitespace)
  size_t end;
};
JsonScan scan_json(std::string_view text, size_t pos);

// A call written as a JSON object with a name key and an arguments key (others ignored).
struct CallKeys {
  std::initializer_list<std::string_view> name;
  std::initializer_list<std::string_view> args;
  std::initializer_list<std::string_view> id;
};
extern const CallKeys kNameArguments;  // name / arguments|parameters
struct CallObject {
  Scan status = Scan::Partial;
  size_t end = 0;  // Complete: one past '}'
  PartialCall call;  // done when status is Complete with a name and complete arguments
};
CallObject scan_call_object(std::string_view text, size_t pos, const CallKeys& keys);

// A JSON array of call objects at text[pos] ('[' after whitespace). Complete only when every element
// is a well-formed call. Partial keeps the complete calls and the one being written.
struct CallArray {
  Scan status = Scan::Partial;
  size_t end = 0;
  std::vector<PartialCall> calls;
};
CallArray scan_call_array(std::string_view text, size_t pos, const CallKeys& keys);

// The arguments of a call whose JSON value starts at text[pos]: raw text as far as it goes (a string
// value is decoded once complete). Sets call.arguments and returns the scan.
JsonScan read_arguments(std::string_view text, size_t pos, PartialCall& call);

// Formats that write each argument as text (XML): the value as JSON, typed by the function's
// `parameters` schema when the request gave one (a string parameter stays a string; others are parsed
// as JSON when they parse), else parsed as JSON when it parses and kept a string otherwise.
std::string typed_argument(const Context& ctx, std::string_view function, std::string_view param,
                           std::string_view value);
// {"k": v, ...} built one argument at a time (", " and ": " separators as Python's json.dumps).
void append_argument(std::string& args, std::string_view key, const std::string& json_value);

// The part of `text` from `pos` up to the first `marker` (npos when absent).
size_t find_from(std::string_view text, std::string_view marker, size_t pos);

// Generic "OPEN body CLOSE" blocks (hermes-like): content outside, `body` parsed by `read_body` which
// appends calls for the block and returns false when the block is malformed. `closed` says whether
// CLOSE was seen (or the text is final); a malformed closed block is kept as content.
using BodyReader = bool (*)(std::string_view body, bool closed, const Context& ctx, std::vector<PartialCall>& calls);
// `also_hold`: another marker whose start is held back in the content (a second way to open a block).
void parse_blocks(std::string_view text, bool final, const Context& ctx, SnapshotBuilder& out, std::string_view open,
                  std::string_view close, BodyReader read_body, std::string_view also_hold = {});

}  // namespace tmill::toolparse
