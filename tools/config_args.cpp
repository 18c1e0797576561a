#include "config_args.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace tmill::cli {

namespace {

// "--max_model_len=4" -> "max-model-len"; "" for a non-option (values, the positional MODEL).
std::string option_name(const std::string& a) {
  if (a.size() < 3 || a.rfind("--", 0) != 0) return "";
  std::string n = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
  std::replace(n.begin(), n.end(), '_', '-');
  return n;
}

}  // namespace

Result<std::vector<std::string>> expand_config_args(const std::vector<std::string>& argv,
                                                    const std::function<bool(const std::string&)>& skip) {
  std::string path;
  std::vector<std::string> rest;
  int found = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--config") {
      if (i + 1 >= argv.size()) return Error{"--config needs a YAML file"};
      path = argv[++i];
      ++found;
    } else if (a.rfind("--config=", 0) == 0) {
      path = a.substr(9);
      ++found;
    } else {
      rest.push_back(a);
    }
  }
  if (found == 0) return argv;
  if (found > 1) return Error{"--config is given more than once"};
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Error{fmt::format("--config {}: cannot read the file", path)};
  } catch (const YAML::Exception& e) {
    return Error{fmt::format("--config {}: {}", path, e.what())};
  }
  if (root.IsNull()) return rest;  // an empty file: no options
  if (!root.IsMap()) return Error{fmt::format("--config {}: must be a mapping of option: value", path)};

  std::set<std::string> given;
  for (const auto& a : rest)
    if (std::string n = option_name(a); !n.empty()) given.insert(n);

  std::vector<std::string> from_file;
  for (const auto& kv : root) {
    const std::string raw = kv.first.as<std::string>();
    std::string key = raw;
    if (key.rfind("--", 0) == 0) key = key.substr(2);
    std::replace(key.begin(), key.end(), '_', '-');
    const int line = kv.first.Mark().line + 1;
    if (key.empty() || key == "config")
      return Error{fmt::format("--config {}: line {}: option '{}' cannot be set in a config file", path, line, raw)};
    if (given.count(key)) continue;  // the command line wins
    if (skip && skip(key)) continue;  // and so does the environment (serve's TOKENMILL_*)
    const YAML::Node& v = kv.second;
    const std::string flag = "--" + key;
    if (v.IsScalar()) {
      const std::string s = v.as<std::string>();
      if (v.Tag() != "!" && (s == "true" || s == "True" || s == "false" || s == "False")) {
        if (s == "true" || s == "True") from_file.push_back(flag);
        continue;
      }
      from_file.push_back(flag);
      from_file.push_back(s);
    } else if (v.IsSequence()) {
      if (v.size() == 0) continue;
      from_file.push_back(flag);
      for (const auto& e : v) {
        if (!e.IsScalar())
          return Error{fmt::format("--config {}: line {}: '{}' must be a value or a list of values", path, line, raw)};
        from_file.push_back(e.as<std::string>());
      }
    } else if (v.IsNull()) {
      return Error{fmt::format("--config {}: line {}: '{}' has no value", path, line, raw)};
    } else {
      return Error{fmt::format("--config {}: line {}: '{}' must be a value or a list of values", path, line, raw)};
    }
  }
  // After the command line's own arguments: its subcommand words and a positional MODEL keep their
  // places, and every option from the file starts with its flag.
  std::vector<std::string> out = rest;
  out.insert(out.end(), from_file.begin(), from_file.end());
  return out;
}

}  // namespace tmill::cli
