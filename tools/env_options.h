// Every flag of a command also settable by environment variable: --max-model-len N is
// TOKENMILL_MAX_MODEL_LEN=N (prefix + the long name in capitals, '-' as '_'). For containers and
// service managers, where the command line is fixed and the environment is what a deployment sets.
//
// Precedence: the command line, then the environment, then a --config file, then the default.
// A flag takes 1/true/yes/on or 0/false/no/off; a repeatable option takes one value from the
// environment. Left out: --api-key (TOKENMILL_API_KEY adds a key to those of the command line, its
// own older meaning) and options of two values per use (--lora-scaled FILE SCALE).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tmill::cli {

inline constexpr const char* kEnvPrefix = "TOKENMILL_";

// The variable of a long option name: "max-model-len" -> "TOKENMILL_MAX_MODEL_LEN".
std::string env_name(const std::string& long_name);

// Sets CLI11's envname on every option of `app` that has a long name (see above for the exceptions).
void bind_env_options(CLI::App& app);

// True when the variable of option `key` (a long name, '-' or '_') is set and not empty: a
// --config file's value for it is then left out, so the environment wins over the file.
bool env_option_set(const std::string& key);

}  // namespace tmill::cli
