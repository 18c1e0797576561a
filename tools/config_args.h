// vLLM's `--config FILE.yaml`: command-line options written as a YAML mapping, for any subcommand.
//
//   port: 8001                 ->  --port 8001
//   max_model_len: 4096        ->  --max-model-len 4096   (underscores and dashes both accepted)
//   api-key: [k1, k2]          ->  --api-key k1 k2        (a sequence: a repeatable option's values)
//   enable-prefix-caching: true ->  --enable-prefix-caching (true: the flag; false: left out)
//   model: /models/m.gguf      ->  --model /models/m.gguf
//
// The options from the file come before those on the command line, and an option given on the
// command line is not taken from the file: the command line wins, as in vLLM.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/result.h"

namespace tmill::cli {

// Returns argv without `--config FILE` / `--config=FILE` and with the file's options appended.
// `skip(key)` (optional; the key as a long option name) leaves a file option out: serve passes
// env_option_set, so an option set in the environment is not taken from the file.
// Errors: an unreadable
// file, YAML that is not a mapping of scalars / sequences of scalars (naming the key and the line),
// two --config flags.
Result<std::vector<std::string>> expand_config_args(const std::vector<std::string>& argv,
                                                    const std::function<bool(const std::string&)>& skip = {});

}  // namespace tmill::cli
