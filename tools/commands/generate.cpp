// tokenmill generate: text generation on the engine, one prompt or a JSONL file of prompts
// (offline batch inference, like vLLM's LLM.generate). Generated text goes to stdout, logs to stderr.
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/log.h"
#include "engine_options.h"
#include "tokenizer/tokenizer.h"

namespace {
using nlohmann::json;

struct GenerateCli {
  tmill::cli::EngineCli engine;
  std::string prompt;
  bool has_prompt = false;
  std::string prompts_file;
  int32_t max_tokens = 256;
  float temperature = 0.8f, top_p = 0.95f, min_p = 0.0f, repetition_penalty = 1.0f;
  int32_t top_k = 0;
  int64_t seed = -1;
  bool ignore_eos = false, json_out = false, no_stream = false;
  std::vector<std::string> stop;
  // The adapter every request uses unless its JSONL line picks another ("" = the base model).
  std::string lora;
  float lora_scale = 1.0f;
};

struct Job {
  tmill::GenerateRequest req;
  std::vector<int32_t> tokens;
  std::string text;
  bool done = false;
  std::string error;
};

// One JSONL line -> a request, with the command-line values as defaults.
tmill::Result<tmill::GenerateRequest> parse_line(const std::string& line, const GenerateCli& o, std::string* prompt) {
  json j;
  try {
    j = json::parse(line);
  } catch (const std::exception& e) {
    return tmill::Error{std::string("invalid JSON: ") + e.what()};
  }
  if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
    return tmill::Error{"each line needs a string \"prompt\""};
  *prompt = j["prompt"].get<std::string>();
  tmill::GenerateRequest r;
  r.max_tokens = j.value("max_tokens", o.max_tokens);
  r.sampling.temperature = j.value("temperature", o.temperature);
  r.sampling.top_p = j.value("top_p", o.top_p);
  r.sampling.top_k = j.value("top_k", o.top_k);
  r.sampling.min_p = j.value("min_p", o.min_p);
  if (j.contains("seed") && j["seed"].is_number_integer()) r.sampling.seed = j["seed"].get<uint64_t>();
  else if (o.seed >= 0) r.sampling.seed = static_cast<uint64_t>(o.seed);
  r.ignore_eos = j.value("ignore_eos", o.ignore_eos);
  if (j.contains("stop") && j["stop"].is_array())
    for (auto& s : j["stop"]) r.stop.push_back(s.get<std::string>());
  r.lora = j.value("lora", o.lora);
  r.lora_scale = j.value("lora_scale", j.contains("lora") ? 1.0f : o.lora_scale);
  return r;
}

int run(GenerateCli& o) {
  using namespace tmill;
  // One --lora applies to every prompt (llama.cpp's meaning); with several, each JSONL line picks one.
  auto loras = cli::lora_flags(o.engine);
  if (!loras.ok()) {
    log_error("{}", loras.error());
    return 2;
  }
  if (loras->size() == 1) {
    o.lora = (*loras)[0].name;
    o.lora_scale = (*loras)[0].scale;
  } else if (loras->size() > 1 && o.prompts_file.empty()) {
    log_error("several LoRA adapters: a request uses one; give one --lora, or pick per line of --prompts-file with \"lora\"");
    return 2;
  }
  auto eng = cli::create_engine(o.engine);
  if (!eng.ok()) {
    log_error("{}", eng.error());
    return 1;
  }
  Engine& e = **eng;
  auto tok = e.tokenizer();
  std::vector<std::unique_ptr<Job>> jobs;
  auto tokenize = [&](const std::string& text) {
    std::vector<int32_t> ids = tok->encode(text, /*add_special=*/true, /*parse_special=*/true);
    if (ids.empty()) ids.push_back(tok->bos_id() >= 0 ? tok->bos_id() : 0);  // no prompt: start from BOS
    return ids;
  };
  if (!o.prompts_file.empty()) {
    std::ifstream in(o.prompts_file);
    if (!in) {
      log_error("cannot open {}", o.prompts_file);
      return 1;
    }
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string prompt;
      auto r = parse_line(line, o, &prompt);
      if (!r.ok()) {
        log_error("{}:{}: {}", o.prompts_file, n, r.error());
        return 1;
      }
      auto job = std::make_unique<Job>();
      job->req = std::move(r).value();
      job->req.prompt = tokenize(prompt);
      jobs.push_back(std::move(job));
    }
  } else {
    auto job = std::make_unique<Job>();
    job->req.max_tokens = o.max_tokens;
    job->req.sampling.temperature = o.temperature;
    job->req.sampling.top_p = o.top_p;
    job->req.sampling.top_k = o.top_k;
    job->req.sampling.min_p = o.min_p;
    job->req.sampling.repetition_penalty = o.repetition_penalty;
    if (o.seed >= 0) job->req.sampling.seed = static_cast<uint64_t>(o.seed);
    job->req.ignore_eos = o.ignore_eos;
    job->req.stop = o.stop;
    job->req.lora = o.lora;
    job->req.lora_scale = o.lora_scale;
    job->req.prompt = tokenize(o.has_prompt ? o.prompt : std::string());
    jobs.push_back(std::move(job));
  }
  const bool stream = jobs.size() == 1 && !o.json_out && !o.no_stream;
  for (auto& jp : jobs) {
    Job* j = jp.get();
    // max_tokens beyond the context is clamped for this offline tool (the server returns 400 instead)
    const int32_t room = e.max_model_len() - static_cast<int32_t>(j->req.prompt.size());
    if (j->req.max_tokens > room && room >= 1) j->req.max_tokens = room;
    auto id = e.submit(j->req, [j, stream](const RequestOutput& out) {
      j->tokens.insert(j->tokens.end(), out.token_ids.begin(), out.token_ids.end());
      j->text += out.text;
      if (stream && !out.text.empty()) {
        std::fwrite(out.text.data(), 1, out.text.size(), stdout);
        std::fflush(stdout);
      }
      if (out.finished) {
        j->done = true;
        if (out.finish_reason == FinishReason::Error) j->error = out.stop_reason;
      }
    });
    if (!id.ok()) {
      log_error("request rejected: {}", id.error());
      return 1;
    }
  }
  e.run_until_idle();
  int rc = 0;
  for (auto& j : jobs) {
    if (!j->error.empty()) {
      log_error("generation failed: {}", j->error);
      rc = 1;
    }
    if (o.json_out || !o.prompts_file.empty()) {
      json out = {{"prompt_tokens", j->req.prompt}, {"tokens", j->tokens}, {"text", j->text}};
      std::string s = out.dump(-1, ' ', false, json::error_handler_t::replace);
      std::printf("%s\n", s.c_str());
    } else if (!stream) {
      std::fwrite(j->text.data(), 1, j->text.size(), stdout);
    }
  }
  if (stream) std::printf("\n");
  if (e.config().speculative.enabled()) {
    std::fflush(stdout);
    const EngineStats st = e.stats();
    log_info("speculative decoding: {} drafts, {} draft tokens, {} accepted ({:.1f}%)", st.spec_num_drafts,
             st.spec_num_draft_tokens, st.spec_num_accepted_tokens,
             st.spec_num_draft_tokens ? 100.0 * st.spec_num_accepted_tokens / st.spec_num_draft_tokens : 0.0);
  }
  return rc;
}

TM_COMMAND("generate", "generate text with the engine (one prompt, or --prompts-file FILE.jsonl)",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<GenerateCli>();
             tmill::cli::add_engine_options(app, o->engine);
             tmill::cli::add_gpu_memory_option(app, o->engine);
             tmill::cli::add_lora_options(app, o->engine);
             app.add_option("--prompt", o->prompt, "prompt text (default: start from BOS alone)");
             app.add_option("--prompts-file", o->prompts_file,
                            "JSONL, one {\"prompt\", \"max_tokens\", \"temperature\", \"seed\", \"lora\", \"lora_scale\", ...} per line");
             app.add_option("-n,--max-tokens", o->max_tokens, "tokens to generate at most")->capture_default_str();
             app.add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str();
             app.add_option("--top-p", o->top_p, "nucleus sampling")->capture_default_str();
             app.add_option("--top-k", o->top_k, "0 = off")->capture_default_str();
             app.add_option("--min-p", o->min_p, "0 = off")->capture_default_str();
             app.add_option("--repetition-penalty", o->repetition_penalty, "1 = off")->capture_default_str();
             app.add_option("--seed", o->seed, "random seed (default: random)");
             app.add_option("--stop", o->stop, "stop string (repeatable)");
             app.add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-sequence tokens");
             app.add_flag("--json", o->json_out, "print {\"prompt_tokens\",\"tokens\",\"text\"} as JSON");
             app.add_flag("--no-stream", o->no_stream, "print the text at the end instead of as it is generated");
             return [o, &app] {
               o->has_prompt = app.count("--prompt") > 0;
               return run(*o);
             };
           });
}  // namespace
