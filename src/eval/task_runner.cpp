#include "eval/task_runner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "core/log.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace tmill::eval {

Result<std::vector<int32_t>> render_case_prompt(const TaskCase& c, const Tokenizer& tok, const ChatTemplate* tmpl,
                                                std::string* text) {
  std::vector<int32_t> ids;
  if (c.prompt) {
    *text = *c.prompt;
    ids = tok.encode(*c.prompt, /*add_special=*/true, /*parse_special=*/true);
  } else {
    if (!tmpl) return Error{"a case has \"messages\" but no chat template is available"};
    auto rendered = apply_chat_template(*tmpl, *c.messages, /*add_generation_prompt=*/true,
                                        tok.bos_id() >= 0 ? tok.bos_text() : "", tok.eos_id() >= 0 ? tok.eos_text() : "");
    if (!rendered.ok()) return Error{"chat template: " + rendered.error()};
    *text = std::move(rendered).value();
    ids = tok.encode(*text, /*add_special=*/false, /*parse_special=*/true);
    if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id()))
      ids.insert(ids.begin(), tok.bos_id());
  }
  if (ids.empty() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  if (ids.empty()) return Error{"the prompt is empty"};
  return ids;
}

namespace {

using Clock = std::chrono::steady_clock;

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Pending {
  CaseResult* out = nullptr;
  Clock::time_point submitted;
  bool first = true;
  bool done = false;
};

}  // namespace

Result<ModelRun> run_tasks(Engine& engine, const std::vector<TaskCase>& cases, const TaskRunOptions& opt) {
  ModelRun run;
  run.model = engine.config().model_path;
  run.model_name = engine.model_info().name;
  const Tokenizer& tok = *engine.tokenizer();

  std::unique_ptr<ChatTemplate> tmpl;
  if (std::any_of(cases.begin(), cases.end(), [](const TaskCase& c) { return c.messages.has_value(); })) {
    const std::string src = tok.chat_template().value_or("");
    TM_ASSIGN_OR_RETURN(ChatTemplate t, chat_template_for_model(src, run.model_name));
    tmpl = std::make_unique<ChatTemplate>(std::move(t));
    run.chat_template = src.empty() ? "chatml fallback" : "model";
  }

  run.cases.resize(cases.size());
  std::vector<Pending> pending(cases.size());
  const auto t0 = Clock::now();
  for (size_t i = 0; i < cases.size(); ++i) {
    const TaskCase& c = cases[i];
    CaseResult& r = run.cases[i];
    r.id = c.id;
    Pending& p = pending[i];
    p.out = &r;
    auto ids = render_case_prompt(c, tok, tmpl.get(), &r.prompt_text);
    if (!ids.ok()) {
      r.error = ids.error();
      p.done = true;
      continue;
    }
    GenerateRequest req;
    req.prompt = std::move(ids).value();
    req.sampling.temperature = 0;  // greedy
    req.max_tokens = c.max_tokens > 0 ? c.max_tokens : opt.default_max_tokens;
    req.stop = c.stop;
    r.prompt_tokens = static_cast<int32_t>(req.prompt.size());
    const int32_t room = engine.max_model_len() - r.prompt_tokens;
    if (room < 1) {
      r.error = fmt::format("the prompt ({} tokens) does not fit max_model_len {}", r.prompt_tokens, engine.max_model_len());
      p.done = true;
      continue;
    }
    req.max_tokens = std::min(req.max_tokens, room);
    p.submitted = Clock::now();
    auto id = engine.submit(std::move(req), [&p](const RequestOutput& o) {
      const auto now = Clock::now();
      CaseResult& r = *p.out;
      if (p.first && !o.token_ids.empty()) {
        r.ttft_s = secs(p.submitted, now);
        p.first = false;
      }
      r.answer += o.text;
      r.completion_tokens = o.completion_tokens;
      if (o.finished) {
        r.latency_s = secs(p.submitted, now);
        r.finish_reason = std::string(to_string(o.finish_reason));
        if (o.finish_reason == FinishReason::Error) r.error = o.stop_reason.empty() ? "generation failed" : o.stop_reason;
        p.done = true;
      }
    });
    if (!id.ok()) {
      r.error = "rejected: " + id.error();
      p.done = true;
    }
  }
  engine.run_until_idle();
  run.wall_s = secs(t0, Clock::now());

  std::vector<double> lat, ttft;
  for (size_t i = 0; i < cases.size(); ++i) {
    CaseResult& r = run.cases[i];
    if (!pending[i].done && r.error.empty()) r.error = "the engine stopped before the case finished";
    if (r.error.empty()) {
      const MetricResult m = score_answer(cases[i], r.answer);
      r.pass = m.pass;
      r.detail = m.detail;
      lat.push_back(r.latency_s);
      ttft.push_back(r.ttft_s);
    } else {
      r.detail = r.error;
    }
    run.passed += r.pass ? 1 : 0;
    run.prompt_tokens += r.prompt_tokens;
    run.completion_tokens += r.completion_tokens;
  }
  run.accuracy = cases.empty() ? 0 : static_cast<double>(run.passed) / static_cast<double>(cases.size());
  run.latency_s = summarize(lat);
  run.ttft_s = summarize(ttft);
  run.tokens_per_s = run.wall_s > 0 ? static_cast<double>(run.completion_tokens) / run.wall_s : 0;
  return run;
}

}  // namespace tmill::eval
