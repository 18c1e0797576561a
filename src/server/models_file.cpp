#include "server/models_file.h"

#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/mmap.h"

namespace tmill::server {

namespace {

// Thrown inside the parser, turned into an Error naming the file and line.
struct FileError {
  std::string message;
};

class Parser {
 public:
  Parser(std::string source, std::string base_dir) : source_(std::move(source)), base_(std::move(base_dir)) {}

  [[noreturn]] void fail(const YAML::Node& n, const std::string& what) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null()) throw FileError{fmt::format("{}: {}", source_, what)};
    throw FileError{fmt::format("{}:{}:{}: {}", source_, m.line + 1, m.column + 1, what)};
  }

  // Every key of `map` must be one of `allowed`.
  void keys(const YAML::Node& map, const std::string& where, std::initializer_list<const char*> allowed) const {
    if (!map.IsMap()) fail(map, where + " must be a mapping");
    for (const auto& kv : map) {
      const std::string k = kv.first.as<std::string>();
      bool ok = false;
      std::string list;
      for (const char* a : allowed) {
        ok |= k == a;
        list += (list.empty() ? "" : ", ") + std::string(a);
      }
      if (!ok) fail(kv.first, fmt::format("unknown key '{}' in {} (known: {})", k, where, list));
    }
  }

  std::string str(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, fmt::format("'{}' must be a string", key));
    return n.as<std::string>();
  }
  int64_t integer(const YAML::Node& n, const std::string& key, int64_t min, int64_t max) const {
    int64_t v = 0;
    if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
      fail(n, fmt::format("'{}' must be an integer", key));
    if (v < min || v > max) fail(n, fmt::format("'{}' must be in [{}, {}]", key, min, max));
    return v;
  }
  bool boolean(const YAML::Node& n, const std::string& key) const {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) fail(n, fmt::format("'{}' must be true or false", key));
    return v;
  }
  // A string that names something (a model, a file, a key): never empty.
  std::string name(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    if (s.empty()) fail(n, fmt::format("'{}' must not be empty", key));
    return s;
  }
  // A name or a list of names; an empty list only where `may_be_empty` (aliases), never for a chain.
  std::vector<std::string> names(const YAML::Node& n, const std::string& key, bool may_be_empty = false) const {
    std::vector<std::string> out;
    if (n.IsScalar()) out.push_back(name(n, key));
    else if (n.IsSequence())
      for (const auto& x : n) out.push_back(name(x, key));
    else fail(n, fmt::format("'{}' must be a name or a list of names", key));
    if (out.empty() && !may_be_empty) fail(n, fmt::format("'{}' must not be an empty list", key));
    return out;
  }
  std::string path(const YAML::Node& n, const std::string& key) const {
    std::string p = name(n, key);
    if (!p.empty() && p[0] != '/' && !base_.empty()) p = (std::filesystem::path(base_) / p).string();
    return p;
  }

  ModelsFileEntry model(const YAML::Node& n) const {
    keys(n, "a model", {"name", "file", "aliases", "threads", "kv_cache_memory", "kv_cache_dtype", "max_model_len",
                        "max_num_seqs", "chat_template", "residency", "idle_unload", "loras", "max_loras", "pooling"});
    ModelsFileEntry e;
    if (!n["file"]) fail(n, "a model needs 'file' (its GGUF file)");
    e.spec.path = path(n["file"], "file");
    if (n["name"]) e.spec.name = name(n["name"], "name");
    if (n["aliases"]) e.spec.aliases = names(n["aliases"], "aliases", true);
    if (n["threads"]) e.engine.threads = static_cast<int>(integer(n["threads"], "threads", 1, 4096));
    if (n["kv_cache_memory"]) e.engine.kv_cache_memory = str(n["kv_cache_memory"], "kv_cache_memory");
    if (n["kv_cache_dtype"]) e.engine.kv_cache_dtype = str(n["kv_cache_dtype"], "kv_cache_dtype");
    if (n["max_model_len"])
      e.engine.max_model_len = static_cast<int32_t>(integer(n["max_model_len"], "max_model_len", 1, INT32_MAX));
    if (n["max_num_seqs"])
      e.engine.max_num_seqs = static_cast<int32_t>(integer(n["max_num_seqs"], "max_num_seqs", 1, 1 << 20));
    if (n["pooling"]) {
      e.engine.pooling = str(n["pooling"], "pooling");
      if (*e.engine.pooling != "mean" && *e.engine.pooling != "cls" && *e.engine.pooling != "last" &&
          *e.engine.pooling != "rank")
        fail(n["pooling"], "'pooling' must be mean, cls, last or rank");
    }
    if (n["chat_template"]) {
      const std::string t = str(n["chat_template"], "chat_template");
      // A template text stays as is; anything else is a file next to the models file.
      e.spec.chat_template = t.find("{{") != std::string::npos || t.find("{%") != std::string::npos
                                 ? t
                                 : path(n["chat_template"], "chat_template");
    }
    if (n["loras"]) {
      // LoRA adapters on this model, each a model name: NAME=FILE, FILE, or {name, file, scale}.
      const YAML::Node& l = n["loras"];
      if (!l.IsSequence()) fail(l, "'loras' must be a list of adapters (NAME=FILE or {name, file, scale})");
      for (const auto& x : l) {
        AdapterSpec a;
        if (x.IsScalar()) {
          std::string t = x.as<std::string>();
          const size_t eq = t.find('=');
          if (eq != std::string::npos && eq > 0 && t.substr(0, eq).find('/') == std::string::npos) {
            a.name = t.substr(0, eq);
            t = t.substr(eq + 1);
          }
          a.path = t;
        } else if (x.IsMap()) {
          keys(x, "a LoRA adapter", {"name", "file", "scale"});
          if (!x["file"]) fail(x, "a LoRA adapter needs 'file'");
          a.path = name(x["file"], "file");
          if (x["name"]) a.name = name(x["name"], "name");
          if (x["scale"]) {
            float v = 0;
            if (!x["scale"].IsScalar() || !YAML::convert<float>::decode(x["scale"], v) || !std::isfinite(v))
              fail(x["scale"], "'scale' must be a finite number");
            a.scale = v;
          }
        } else {
          fail(x, "a LoRA adapter is NAME=FILE or {name, file, scale}");
        }
        if (a.path.empty()) fail(x, "a LoRA adapter needs a file");
        if (a.path[0] != '/' && !base_.empty()) a.path = (std::filesystem::path(base_) / a.path).string();
        if (a.name.empty()) {
          a.name = std::filesystem::path(a.path).filename().string();
          if (a.name.size() > 5 && a.name.ends_with(".gguf")) a.name.resize(a.name.size() - 5);
          if (a.name.empty()) fail(x, "a LoRA adapter whose file names no file needs a 'name'");
        }
        e.spec.loras.push_back(std::move(a));
      }
    }
    if (n["max_loras"]) e.engine.max_loras = static_cast<int32_t>(integer(n["max_loras"], "max_loras", 1, 1 << 16));
    if (n["residency"]) {
      const std::string r = str(n["residency"], "residency");
      if (r == "pinned") e.spec.pinned = true;
      else if (r == "on_demand") e.spec.pinned = false;
      else fail(n["residency"], fmt::format("'residency' must be pinned or on_demand, not '{}'", r));
    }
    if (n["idle_unload"]) {
      if (e.spec.pinned) fail(n["idle_unload"], "'idle_unload' needs 'residency: on_demand' (pinned models stay loaded)");
      auto d = parse_duration_seconds(str(n["idle_unload"], "idle_unload"));
      if (!d.ok()) fail(n["idle_unload"], "'idle_unload': " + d.error());
      if (*d < 0) fail(n["idle_unload"], "'idle_unload' must not be negative");
      e.spec.idle_unload_s = *d;
    }
    return e;
  }

  RouteRule rule(const YAML::Node& n) const {
    keys(n, "a rule", {"name", "model", "min_prompt_tokens", "max_prompt_tokens", "has_tools", "has_json_schema",
                       "last_user_regex", "header", "metadata", "classifier"});
    RouteRule r;
    if (n["name"]) r.name = name(n["name"], "name");
    if (!n["model"]) fail(n, "a rule needs 'model' (a model or a fallback chain [a, b])");
    r.chain = names(n["model"], "model");
    if (n["min_prompt_tokens"]) r.min_prompt_tokens = integer(n["min_prompt_tokens"], "min_prompt_tokens", 0, INT64_MAX);
    if (n["max_prompt_tokens"]) r.max_prompt_tokens = integer(n["max_prompt_tokens"], "max_prompt_tokens", 0, INT64_MAX);
    if (n["has_tools"]) r.has_tools = boolean(n["has_tools"], "has_tools");
    if (n["has_json_schema"]) r.has_json_schema = boolean(n["has_json_schema"], "has_json_schema");
    if (n["last_user_regex"]) r.last_user_regex = str(n["last_user_regex"], "last_user_regex");
    if (n["header"]) {
      keys(n["header"], "'header'", {"name", "equals"});
      if (!n["header"]["name"] || !n["header"]["equals"]) fail(n["header"], "'header' needs 'name' and 'equals'");
      r.header_name = name(n["header"]["name"], "name");
      r.header_equals = str(n["header"]["equals"], "equals");
    }
    if (n["metadata"]) {
      keys(n["metadata"], "'metadata'", {"key", "equals"});
      if (!n["metadata"]["key"] || !n["metadata"]["equals"]) fail(n["metadata"], "'metadata' needs 'key' and 'equals'");
      r.metadata_key = name(n["metadata"]["key"], "key");
      r.metadata_equals = str(n["metadata"]["equals"], "equals");
    }
    if (n["classifier"]) {
      keys(n["classifier"], "a rule's 'classifier'", {"equals"});
      if (!n["classifier"]["equals"]) fail(n["classifier"], "a rule's 'classifier' needs 'equals' (one of the choices)");
      r.classifier_equals = name(n["classifier"]["equals"], "equals");
    }
    return r;
  }

  RouterSpec router(const YAML::Node& n) const {
    keys(n, "a router", {"name", "default", "rules", "tokenizer_model", "classifier", "load_timeout"});
    RouterSpec s;
    if (!n["name"]) fail(n, "a router needs 'name' (the virtual model's name, e.g. auto)");
    s.name = name(n["name"], "name");
    if (!n["default"]) fail(n, "a router needs 'default' (the model when no rule matches)");
    s.default_chain = names(n["default"], "default");
    if (n["tokenizer_model"]) s.tokenizer_model = name(n["tokenizer_model"], "tokenizer_model");
    if (n["load_timeout"]) {
      auto d = parse_duration_seconds(str(n["load_timeout"], "load_timeout"));
      if (!d.ok() || *d <= 0) fail(n["load_timeout"], "'load_timeout' must be a positive duration (e.g. 10s)");
      s.load_timeout_s = *d;
    }
    if (n["classifier"]) {
      const YAML::Node c = n["classifier"];
      keys(c, "'classifier'", {"model", "question", "choices", "max_message_chars"});
      if (!c["model"] || !c["question"] || !c["choices"])
        fail(c, "'classifier' needs 'model', 'question' and 'choices'");
      RouteClassifier rc;
      rc.model = name(c["model"], "model");
      rc.question = name(c["question"], "question");
      rc.choices = names(c["choices"], "choices");
      if (c["max_message_chars"])
        rc.max_message_chars = static_cast<int32_t>(integer(c["max_message_chars"], "max_message_chars", 1, 1 << 20));
      s.classifier = std::move(rc);
    }
    if (n["rules"]) {
      if (!n["rules"].IsSequence()) fail(n["rules"], "'rules' must be a list");
      for (const auto& r : n["rules"]) s.rules.push_back(rule(r));
    }
    return s;
  }

  ModelsFile file(const YAML::Node& root) const {
    if (!root.IsMap()) fail(root, "the models file must be a mapping with 'models'");
    keys(root, "the models file", {"models", "routers", "memory_limit"});
    ModelsFile f;
    if (root["memory_limit"]) f.memory_limit = str(root["memory_limit"], "memory_limit");
    if (!root["models"] || !root["models"].IsSequence() || root["models"].size() == 0)
      fail(root, "'models' must be a list of at least one model");
    std::set<std::string> seen;
    for (const auto& m : root["models"]) {
      ModelsFileEntry e = model(m);
      if (e.spec.name.empty()) {
        e.spec.name = std::filesystem::path(e.spec.path).filename().string();
        if (e.spec.name.size() > 5 && e.spec.name.ends_with(".gguf")) e.spec.name.resize(e.spec.name.size() - 5);
        if (e.spec.name.empty()) fail(m, "a model whose 'file' names no file needs a 'name'");
      }
      std::vector<std::string> all = e.spec.aliases;
      all.push_back(e.spec.name);
      for (const auto& x : all)
        if (!seen.insert(x).second) fail(m, fmt::format("the model name '{}' is used twice", x));
      f.models.push_back(std::move(e));
    }
    if (root["routers"]) {
      if (!root["routers"].IsSequence()) fail(root["routers"], "'routers' must be a list");
      for (const auto& r : root["routers"]) {
        RouterSpec s = router(r);
        if (!seen.insert(s.name).second) fail(r, fmt::format("the router name '{}' is also a model's name", s.name));
        f.routers.push_back(std::move(s));
      }
    }
    return f;
  }

 private:
  std::string source_, base_;
};

}  // namespace

Result<ModelsFile> parse_models_file(const std::string& text, const std::string& source, const std::string& base_dir) {
  try {
    const YAML::Node root = YAML::Load(text);
    return Parser(source, base_dir).file(root);
  } catch (const FileError& e) {
    return Error{e.message};
  } catch (const YAML::Exception& e) {
    // yaml-cpp's own message carries "yaml-cpp: error at line L, column C: ..."
    return Error{fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg)};
  }
}

Result<ModelsFile> load_models_file(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return Error{"--models-file: " + text.error()};
  return parse_models_file(*text, path, std::filesystem::path(path).parent_path().string());
}

}  // namespace tmill::server
