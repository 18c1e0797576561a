// Placeholder definitions of the grammar engine's API, replaced as the engine lands.
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace tmill::grammar {

namespace {
Error not_yet() { return Error{"structured output is not implemented yet"}; }
}  // namespace

struct Vocabulary::Impl {
  VocabularyData data;
};
Vocabulary::Vocabulary() = default;
Vocabulary::~Vocabulary() = default;
std::shared_ptr<const Vocabulary> Vocabulary::create(VocabularyData data) {
  std::shared_ptr<Vocabulary> v(new Vocabulary());
  v->impl_ = std::make_unique<Impl>(Impl{std::move(data)});
  return v;
}
int32_t Vocabulary::size() const { return static_cast<int32_t>(impl_->data.token_bytes.size()); }
const std::string& Vocabulary::token_bytes(int32_t t) const { return impl_->data.token_bytes.at(static_cast<size_t>(t)); }
const std::vector<int32_t>& Vocabulary::eos_tokens() const { return impl_->data.eos_tokens; }

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view, std::shared_ptr<const Vocabulary>,
                                                    std::string_view) {
  return not_yet();
}
Result<std::shared_ptr<const Grammar>> compile(const OutputConstraint&, std::shared_ptr<const Vocabulary>) {
  return not_yet();
}


}  // namespace tmill::grammar
