// Shared pieces of the CLI: the command registry and the default-model lookup.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"

namespace tmill::cli {

// A command's setup adds its options to `app` and returns what runs when it is chosen.
using CommandRun = std::function<int()>;
using CommandSetup = std::function<CommandRun(CLI::App& app)>;

struct CommandDef {
  std::string name;
  std::string help;
  CommandSetup setup;
};

std::vector<CommandDef>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string help, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

// The bundled default model: $TOKENMILL_DEFAULT_MODEL, else models/stories260K/stories260K.gguf
// next to the executable's source tree or install prefix.
std::string default_model_path();

std::string version_string();

// Token ids from the command line: "1,2,3" or a JSON array "[1, 2, 3]"; every id must be in
// [0, n_vocab). Used by `detokenize --ids` and `eval logits --tokens`.
Result<std::vector<int32_t>> parse_token_ids(const std::string& text, int64_t n_vocab);

}  // namespace tmill::cli

#define TM_CLI_CONCAT_INNER_(a, b) a##b
#define TM_CLI_CONCAT_(a, b) TM_CLI_CONCAT_INNER_(a, b)
// Variadic so the setup lambda may contain unparenthesized commas.
#define TM_COMMAND(name, help, ...) \
  static ::tmill::cli::CommandRegistrar TM_CLI_CONCAT_(tm_cmd_registrar_, __LINE__)(name, help, __VA_ARGS__)
