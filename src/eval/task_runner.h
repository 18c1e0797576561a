// Runs task cases through the Engine: every case submitted at once (continuous batching), greedy,
// then each answer scored. One ModelRun per model; reports in eval/task_report.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "eval/divergence.h"
#include "eval/tasks.h"

namespace tmill {
class ChatTemplate;
class Engine;
class Tokenizer;
}  // namespace tmill

namespace tmill::eval {

struct TaskRunOptions {
  int32_t default_max_tokens = 128;  // for cases without "max_tokens"
};

struct CaseResult {
  std::string id;
  std::string prompt_text;     // the prompt as sent (chat template applied)
  std::string answer;          // generated text
  bool pass = false;
  std::string detail;          // metric explanation
  std::string error;           // the request failed (then pass = false)
  std::string finish_reason;   // "stop", "length", "error"
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double latency_s = 0;        // submission -> last token (all cases are submitted together)
  double ttft_s = 0;           // submission -> first token
};

struct ModelRun {
  std::string model;            // path
  std::string model_name;       // general.name, else the file name
  std::string chat_template;    // "model" or "chatml fallback" (when a case has messages), else ""
  std::vector<CaseResult> cases;  // in task-file order
  int32_t passed = 0;
  double accuracy = 0;          // passed / cases
  SampleSummary latency_s;      // over cases
  SampleSummary ttft_s;
  double wall_s = 0;            // first submission -> all done
  int64_t prompt_tokens = 0, completion_tokens = 0;
  double tokens_per_s = 0;      // completion tokens / wall_s
  double load_s = 0;
};

// Renders a case's prompt to token ids: "prompt" is tokenized with BOS as the vocabulary asks;
// "messages" go through `tmpl` (required then) with add_generation_prompt, and BOS is added only when
// the vocabulary wants one and the template did not write it. *text receives the rendered prompt.
Result<std::vector<int32_t>> render_case_prompt(const TaskCase& c, const Tokenizer& tok, const ChatTemplate* tmpl,
                                                std::string* text);

// Submits every case to `engine` (greedy) and runs it until all are done.
Result<ModelRun> run_tasks(Engine& engine, const std::vector<TaskCase>& cases, const TaskRunOptions& opt);

}  // namespace tmill::eval
