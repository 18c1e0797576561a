// tokenmill: the command-line entry point. Each subcommand lives in tools/commands/ and registers
// itself; a name with a space ("bench engine") becomes a nested subcommand.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cli_common.h"
#include "config_args.h"
#include "env_options.h"
#include "core/memory.h"

int main(int argc, char** argv) {
  using namespace tmill::cli;
  tmill::tune_allocator();
  CLI::App app{"tokenmill: an LLM inference server and toolkit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_string());
  auto& reg = command_registry();
  std::sort(reg.begin(), reg.end(), [](const CommandDef& a, const CommandDef& b) { return a.name < b.name; });
  std::map<std::string, CLI::App*> groups;
  std::vector<std::pair<CLI::App*, CommandRun>> runs;
  for (auto& def : reg) {
    CLI::App* parent = &app;
    std::string leaf = def.name;
    if (auto sp = def.name.find(' '); sp != std::string::npos) {
      std::string group = def.name.substr(0, sp);
      leaf = def.name.substr(sp + 1);
      auto it = groups.find(group);
      if (it == groups.end()) {
        CLI::App* g = app.add_subcommand(group, group + " commands");
        g->require_subcommand(1);
        it = groups.emplace(group, g).first;
      }
      parent = it->second;
    }
    CLI::App* sub = parent->add_subcommand(leaf, def.help);
    runs.emplace_back(sub, def.setup(*sub));
  }
  // vLLM's and llama-server's short options of several letters (-tp N, -ngl N, ...), which CLI11
  // cannot declare: spelled out (also as -tp=N).
  static const std::pair<const char*, const char*> kShort[] = {
      {"-tp", "--tensor-parallel-size"}, {"-pp", "--pipeline-parallel-size"}, {"-dp", "--data-parallel-size"},
      {"-ngl", "--n-gpu-layers"},        {"-np", "--parallel"},               {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"},        {"-fa", "--flash-attn"},             {"-cb", "--cont-batching"},
      {"-nocb", "--no-cont-batching"},   {"-ub", "--ubatch-size"},            {"-md", "--model-draft"},
      {"-ot", "--override-tensor"},      {"-sm", "--split-mode"},             {"-nkvo", "--no-kv-offload"},
      {"-ncmoe", "--n-cpu-moe"},         {"-dev", "--device"}};
  std::vector<std::string> spelled(argv, argv + argc);
  for (auto& a : spelled)
    for (const auto& [from, to] : kShort) {
      const std::string f = from;
      if (a == f) a = to;
      else if (a.rfind(f + "=", 0) == 0) a = std::string(to) + "=" + a.substr(f.size() + 1);
      else continue;
      break;
    }
  // serve's flags are also environment variables (TOKENMILL_PORT=8001, env_options.h), and
  // TOKENMILL_CONFIG names its --config file when the command line gives none.
  const bool serve = spelled.size() > 1 && spelled[1] == "serve";
  if (serve) {
    for (auto& [sub, run] : runs)
      if (sub->get_name() == "serve") bind_env_options(*sub);
    const bool has_config = std::any_of(spelled.begin(), spelled.end(), [](const std::string& a) {
      return a == "--config" || a.rfind("--config=", 0) == 0;
    });
    if (const char* c = std::getenv("TOKENMILL_CONFIG"); c && *c && !has_config) {
      spelled.push_back("--config");
      spelled.push_back(c);
    }
  }
  // vLLM's --config FILE.yaml: the file's options join the command line's (which win, and so does
  // the environment for serve).
  auto expanded = serve ? expand_config_args(spelled, env_option_set) : expand_config_args(spelled);
  if (!expanded.ok()) {
    std::fprintf(stderr, "error: %s\n", expanded.error().c_str());
    return 2;
  }
  spelled = std::move(*expanded);
  std::vector<char*> args;
  for (auto& a : spelled) args.push_back(a.data());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runs)
    if (sub->parsed()) return run();
  return 2;
}
