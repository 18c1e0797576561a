// fuzz-deps: server
// libFuzzer target: bytes -> serve's --models-file parser (server/models_file.h), then each router
// it defines through prepare_router and route() (server/router.h) on fixed requests, one with a long
// last user message. Checks: no crash, sanitizer report or runaway time (regexes run under PCRE2's
// limits); an error names the file; a parsed file has at least one model, every name, alias, file,
// chain entry non-empty, names used once, finite durations and LoRA scales; a prepared router routes
// every request to a non-empty chain of configured models.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "server/models_file.h"
#include "server/router.h"

using namespace tmill;
using namespace tmill::server;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// A long message with words a rule's regex may look for, and runs that make backtracking costly.
const std::string& long_message() {
  static const std::string m = [] {
    std::string s = "please review this code: ";
    for (int i = 0; i < 400; ++i) s += "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bug function x=1; ";
    return s + "\nthanks, reviewer \xc3\xa9\xe2\x82\xac";
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;  // a models file is small; big inputs only slow the YAML parser down
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto f = parse_models_file(text, "m.yaml", "/models");
  if (!f.ok()) {
    check(f.error().rfind("m.yaml", 0) == 0);  // errors name the file (and, mostly, line and column)
    return 0;
  }
  check(!f->models.empty());
  std::set<std::string> names;
  for (const ModelsFileEntry& e : f->models) {
    check(!e.spec.name.empty() && !e.spec.path.empty());
    check(names.insert(e.spec.name).second);
    for (const std::string& a : e.spec.aliases) check(!a.empty() && names.insert(a).second);
    check(std::isfinite(e.spec.idle_unload_s) && e.spec.idle_unload_s >= 0 && e.spec.idle_unload_s <= 1e9);
    check(e.spec.pinned ? e.spec.idle_unload_s == 0 : true);
    for (const AdapterSpec& l : e.spec.loras) check(!l.name.empty() && !l.path.empty() && std::isfinite(l.scale));
    if (e.engine.threads) check(*e.engine.threads >= 1);
    if (e.engine.max_model_len) check(*e.engine.max_model_len >= 1);
    if (e.engine.max_num_seqs) check(*e.engine.max_num_seqs >= 1);
  }
  std::set<std::string> models = names;  // routers may only name these
  for (RouterSpec r : f->routers) {
    check(!r.name.empty() && names.insert(r.name).second);
    check(!r.default_chain.empty());
    check(std::isfinite(r.load_timeout_s) && r.load_timeout_s >= 0);
    for (const RouteRule& rule : r.rules) {
      check(!rule.chain.empty());
      for (const std::string& m : rule.chain) check(!m.empty());
    }
    if (!prepare_router(r, [&](const std::string& m) { return models.count(m) > 0; }).ok()) continue;
    for (const std::string* msg : {&long_message(), static_cast<const std::string*>(nullptr)}) {
      RouteInput in;
      in.has_tools = msg != nullptr;
      in.has_json_schema = msg == nullptr;
      in.last_user_message = msg ? *msg : "hi";
      in.prompt_tokens = [&] { return static_cast<int64_t>(in.last_user_message.size() / 4); };
      in.header = [](const std::string& h) -> std::optional<std::string> {
        if (h.size() == 6) return std::string("premium");
        return std::nullopt;
      };
      in.metadata = [](const std::string& k) -> std::optional<std::string> { return k == "tier" ? "gold" : k; };
      const std::string first = r.classifier ? r.classifier->choices[0] : "";
      in.classify = [&]() -> Result<std::string> { return first; };
      const RouteDecision d = route(r, in);
      check(!d.rule.empty() && !d.chain.empty());
      for (const std::string& m : d.chain) check(models.count(m) > 0);
    }
  }
  return 0;
}
