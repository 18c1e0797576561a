#include <cstdio>

#include "cli_common.h"
#include "core/cpu.h"

namespace {
TM_COMMAND("version", "print version and CPU features", [](CLI::App&) -> tmill::cli::CommandRun {
  return [] {
    std::printf("tokenmill %s (isa: %s)\n", tmill::cli::version_string().c_str(),
                tmill::isa_name(tmill::active_isa()));
    return 0;
  };
});
}  // namespace
