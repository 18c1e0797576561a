#include "env_options.h"

#include <cctype>
#include <cstdlib>

namespace tmill::cli {

namespace {
bool excluded(const std::string& name) { return name == "api-key" || name == "lora-scaled" || name == "help"; }
}  // namespace

std::string env_name(const std::string& long_name) {
  std::string out = kEnvPrefix;
  for (char c : long_name) out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void bind_env_options(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const auto& names = opt->get_lnames();
    if (names.empty() || excluded(names.front())) continue;
    opt->envname(env_name(names.front()));
  }
}

bool env_option_set(const std::string& key) {
  std::string k = key;
  for (char& c : k)
    if (c == '_') c = '-';
  if (excluded(k)) return false;
  const char* v = std::getenv(env_name(k).c_str());
  return v && *v;
}

}  // namespace tmill::cli
