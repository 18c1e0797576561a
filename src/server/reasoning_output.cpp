// Per-request reasoning split and its response mapping (reasoning_output.h).
#include "server/reasoning_output.h"

#include "chat/chat_template.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_fields.h"

namespace tmill::server {

Result<ReasoningConfig> reasoning_config(std::string_view name) {
  ReasoningConfig cfg;
  if (name.empty() || name == "auto") return cfg;
  cfg.auto_detect = false;
  auto spec = reasoning_parser(name);
  if (!spec.ok()) return Error{spec.error() + ", or auto"};
  cfg.spec = std::move(spec).value();
  return cfg;
}

void map_reasoning(const json& body, const ServerContext& ctx, MappedRequest& m) {
  const bool include = opt_bool(body, "include_reasoning").value_or(true);
  std::optional<ReasoningParserSpec> spec = ctx.reasoning.spec;
  if (ctx.reasoning.auto_detect) {
    const json* own = field(body, "chat_template");  // the request's own template, else the server's
    if (own && own->is_string()) spec = reasoning_parser_for_template(own->get_ref<const std::string&>());
    else if (ctx.chat_template) spec = reasoning_parser_for_template(ctx.chat_template->source());
  }
  if (!spec || m.prompts.size() != 1) return;
  MappedPrompt& p = m.prompts[0];
  RequestReasoning r{std::move(*spec), ReasoningStart::MaybeTag, include};
  r.start = reasoning_start(r.spec, p.text);
  // The output opens with the reasoning: a constraint (JSON schema, tool call, ...) governs the answer
  // after the end tag. (MaybeTag: the model may answer at once, so the constraint starts at once.)
  OutputConstraint& c = p.request.constraint;
  if (c.active() && c.after.empty() && r.start == ReasoningStart::InReasoning) c.after = r.spec.end;
  m.reasoning = std::move(r);
}

void split_reasoning_choices(const MappedRequest& m, std::vector<ChoiceOutput>& choices) {
  if (!m.reasoning) return;
  for (ChoiceOutput& c : choices) {
    ReasoningSplit s = split_reasoning(c.text, m.reasoning->spec, m.reasoning->start);
    c.text = std::move(s.content);
    c.reasoning_split = true;
    if (m.reasoning->include) c.reasoning = std::move(s.reasoning);
  }
}

std::vector<ReasoningStream> reasoning_streams(const MappedRequest& m, size_t choices) {
  std::vector<ReasoningStream> out;
  if (m.reasoning)
    for (size_t i = 0; i < choices; ++i) out.emplace_back(m.reasoning->spec, m.reasoning->start);
  return out;
}

std::string reasoning_delta(const MappedRequest& m, ReasoningStream& st, const std::string& text, bool finished,
                            json& delta) {
  ReasoningStream::Delta d = st.feed(text);
  if (finished) {
    ReasoningStream::Delta last = st.finish();
    d.reasoning += last.reasoning;
    d.content += last.content;
  }
  if (!d.reasoning.empty() && m.reasoning && m.reasoning->include) delta["reasoning_content"] = std::move(d.reasoning);
  return std::move(d.content);
}

}  // namespace tmill::server
