// compile_gbnf / compile / GrammarCache.
#include <list>
#include <mutex>
#include <unordered_map>

#include "grammar/compiler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/internal.h"
#include "grammar/json_schema.h"

namespace tmill::grammar {

Grammar::Grammar() = default;
Grammar::~Grammar() = default;
const Vocabulary& Grammar::vocab() const { return *impl_->vocab; }
size_t Grammar::num_rules() const { return impl_->prog.rules.size(); }

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab,
                                                    std::string_view root) {
  return compile_gbnf(gbnf, std::move(vocab), root, CompileLimits{});
}

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab,
                                                    std::string_view root, const CompileLimits& lim) {
  TM_ASSIGN_OR_RETURN(gbnf::Syntax syn, gbnf::parse(gbnf));
  TM_ASSIGN_OR_RETURN(Program prog, compile_program(syn, root, lim));
  std::shared_ptr<Grammar> g(new Grammar());
  g->impl_ = std::make_unique<Grammar::Impl>();
  g->impl_->vocab = std::move(vocab);
  g->impl_->prog = std::move(prog);
  g->impl_->bindings = std::make_unique<Bindings>(static_cast<size_t>(g->impl_->prog.num_states()));
  return std::shared_ptr<const Grammar>(std::move(g));
}

Result<std::shared_ptr<const Grammar>> compile(const OutputConstraint& c, std::shared_ptr<const Vocabulary> vocab) {
  JsonOptions opt;
  opt.flexible_whitespace = c.flexible_whitespace;
  std::string gbnf;
  switch (c.kind) {
    case OutputConstraint::Kind::None:
      return Error{"no output constraint to compile"};
    case OutputConstraint::Kind::Grammar:
      return compile_gbnf(c.text, std::move(vocab));
    case OutputConstraint::Kind::JsonObject:
      gbnf = json_object_gbnf(opt);
      break;
    case OutputConstraint::Kind::JsonSchema: {
      // Ordered: properties are enforced in the schema's order.
      auto schema = nlohmann::ordered_json::parse(c.text, nullptr, false);
      if (schema.is_discarded()) return Error{"json_schema: the schema is not valid JSON"};
      TM_ASSIGN_OR_RETURN(gbnf, json_schema_to_gbnf(schema, opt));
      break;
    }
    case OutputConstraint::Kind::Regex: {
      TM_ASSIGN_OR_RETURN(gbnf, regex_to_gbnf(c.text));
      break;
    }
    case OutputConstraint::Kind::Choice:
      if (c.choices.empty()) return Error{"choice: the list of choices is empty"};
      gbnf = choices_to_gbnf(c.choices);
      break;
  }
  auto g = compile_gbnf(gbnf, std::move(vocab));
  if (!g.ok()) {
    // A translator's output that does not compile is our bug or a limit; say which input it came from.
    return Error{std::string(to_string(c.kind)) + ": " + g.error()};
  }
  return g;
}

struct GrammarCache::Impl {
  std::shared_ptr<const Vocabulary> vocab;
  size_t capacity;
  std::mutex mu;
  using Entry = std::pair<std::string, Result<std::shared_ptr<const Grammar>>>;
  std::list<Entry> lru;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
};

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t capacity) : impl_(std::make_unique<Impl>()) {
  impl_->vocab = std::move(vocab);
  impl_->capacity = capacity == 0 ? 1 : capacity;
}
GrammarCache::~GrammarCache() = default;
const std::shared_ptr<const Vocabulary>& GrammarCache::vocab() const { return impl_->vocab; }

Result<std::shared_ptr<const Grammar>> GrammarCache::get(const OutputConstraint& c) {
  // Length-prefixed fields: no two different constraints share a key.
  std::string key;
  auto put = [&](std::string_view s) {
    key += std::to_string(s.size());
    key += ':';
    key += s;
  };
  key += static_cast<char>('0' + static_cast<int>(c.kind));
  key += c.flexible_whitespace ? 'f' : 'c';
  put(c.text);
  for (const auto& ch : c.choices) put(ch);
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->index.find(key);
    if (it != impl_->index.end()) {
      impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
      return it->second->second;
    }
  }
  auto r = compile(c, impl_->vocab);  // outside the lock: compiles of different grammars overlap
  std::lock_guard lock(impl_->mu);
  auto it = impl_->index.find(key);
  if (it != impl_->index.end()) return it->second->second;
  impl_->lru.emplace_front(key, r);
  impl_->index.emplace(std::move(key), impl_->lru.begin());
  while (impl_->lru.size() > impl_->capacity) {
    impl_->index.erase(impl_->lru.back().first);
    impl_->lru.pop_back();
  }
  return r;
}

}  // namespace tmill::grammar
