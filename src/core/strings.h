// Small string helpers shared by the CLI, server and tools.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace tmill {

// "2GiB", "512MiB", "1.5G", "1000000" -> bytes. K/M/G/T are powers of 1024 (as vLLM/llama.cpp read them);
// KB/MB/GB use powers of 1000.
Result<uint64_t> parse_size(std::string_view s);
std::string format_bytes(uint64_t bytes);  // "1.50 GiB"
std::vector<std::string> split(std::string_view s, char sep);
bool is_valid_utf8(std::string_view s);

}  // namespace tmill
