// Reports of `eval tasks`: JSON (for CI), a markdown table, and a self-contained HTML page
// (inline CSS and SVG charts, no external assets, no scripts).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/task_runner.h"
#include "eval/tasks.h"

namespace tmill::eval {

struct TaskReport {
  std::string tasks_file;
  std::vector<TaskCase> cases;
  std::vector<ModelRun> runs;  // one per model, each with one CaseResult per case (same order)
};

// Column names: general.name, plus the file name where two runs share it, plus "#k" where even that
// collides (the same file twice).
std::vector<std::string> display_names(const TaskReport& r);
// True when the models disagree on a case (pass/fail or answer text differ).
bool case_differs(const TaskReport& r, size_t case_index);

// {"tasks_file", "cases": N, "models": [{model, name, label, accuracy, passed, total, latency_s{p50,p95,mean,max},
//   ttft_s{...}, tokens_per_s, wall_s, prompt_tokens, completion_tokens, cases: [...]}],
//  "per_case": [{id, metric, expected, differs, results: [{pass, answer, detail}]}]}
nlohmann::ordered_json report_json(const TaskReport& r);
std::string report_markdown(const TaskReport& r);
std::string report_html(const TaskReport& r);

}  // namespace tmill::eval
