// Placeholder definitions of the grammar engine's API, replaced as the engine lands.
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace tmill::grammar {

namespace {
Error not_yet() { return Error{"structured output is not implemented yet"}; }
}  // namespace

Result<std::string> json_schema_to_gbnf(const nlohmann::json&, const JsonOptions&) { return not_yet(); }
std::string json_object_gbnf(const JsonOptions&) { return {}; }
Result<std::string> regex_to_gbnf(std::string_view) { return not_yet(); }
std::string choices_to_gbnf(const std::vector<std::string>&) { return {}; }
std::string gbnf_literal(std::string_view) { return {}; }

}  // namespace tmill::grammar
