// Map-reduce over a long document: chunking at paragraph boundaries, the map batch, then reduce
// levels over groups of answers that fit the context, with per-stage tokens and time.
#include "server/map_reduce.h"

#include <chrono>

#include <span>

#include <fmt/format.h>

#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t count_tokens(const Tokenizer& tok, const std::string& s) {
  return static_cast<int64_t>(tok.encode(s, false, false).size());
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\n' || s[a] == '\t' || s[a] == '\r')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\n' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
  return s.substr(a, b - a);
}

// Paragraphs: runs of non-blank lines, each joined with '\n'.
std::vector<std::string> paragraphs(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += (cur.empty() ? "" : "\n") + line;
    }
    pos = end + 1;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// Splits s after each occurrence of `sep` (kept with the piece before it).
std::vector<std::string> split_after(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t at = s.find(sep, start);
    size_t end = at == std::string::npos ? s.size() : at + sep.size();
    out.push_back(s.substr(start, end - start));
    start = end;
  }
  return out;
}

// A piece too long alone: lines, then sentences, then token slices.
void split_long(const std::string& piece, const Tokenizer& tok, int32_t max_tokens, int depth,
                std::vector<std::string>& out) {
  if (count_tokens(tok, piece) <= max_tokens) {
    out.push_back(piece);
    return;
  }
  if (depth < 2) {
    const std::vector<std::string> parts = split_after(piece, depth == 0 ? "\n" : ". ");
    if (parts.size() > 1) {
      // pack the parts back greedily so pieces stay as large as allowed
      std::string cur;
      for (const std::string& p : parts) {
        if (!cur.empty() && count_tokens(tok, cur + p) > max_tokens) {
          split_long(cur, tok, max_tokens, depth + 1, out);
          cur.clear();
        }
        cur += p;
      }
      if (!cur.empty()) split_long(cur, tok, max_tokens, depth + 1, out);
      return;
    }
    split_long(piece, tok, max_tokens, depth + 1, out);
    return;
  }
  const std::vector<int32_t> ids = tok.encode(piece, false, false);
  const size_t step = static_cast<size_t>(std::max(1, max_tokens - std::min(8, max_tokens / 4)));
  for (size_t i = 0; i < ids.size(); i += step)
    out.push_back(tok.decode(std::span(ids).subspan(i, std::min(step, ids.size() - i))));
}

std::string replace_all(std::string s, const std::string& what, const std::string& with) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size())) s.replace(at, what.size(), with);
  return s;
}

json stage_json(const StageReport& s) {
  return {{"stage", s.stage},
          {"level", s.level},
          {"inputs", s.inputs},
          {"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.completion_tokens},
          {"seconds", s.seconds}};
}

}  // namespace

json map_reduce_json(const MapReduceResult& r, const std::string& model) {
  json stages = json::array();
  for (const StageReport& s : r.stages) stages.push_back(stage_json(s));
  return {{"id", random_id("mapred-")},
          {"object", "map_reduce"},
          {"created", std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()},
          {"model", model},
          {"output", r.output},
          {"chunks", r.chunks},
          {"document_tokens", r.document_tokens},
          {"stages", std::move(stages)},
          {"usage",
           {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", r.completion_tokens},
            {"total_tokens", r.prompt_tokens + r.completion_tokens}}},
          {"seconds", r.seconds}};
}


std::vector<std::string> chunk_document(const std::string& text, const Tokenizer& tok, int32_t max_tokens) {
  std::vector<std::string> pieces;
  for (const std::string& p : paragraphs(text)) split_long(p, tok, max_tokens, 0, pieces);
  std::vector<std::string> chunks;
  std::string cur;
  for (std::string& p : pieces) {
    if (!cur.empty() && count_tokens(tok, cur + "\n\n" + p) > max_tokens) {
      chunks.push_back(std::move(cur));
      cur.clear();
    }
    cur += (cur.empty() ? "" : "\n\n") + p;
  }
  if (!cur.empty()) chunks.push_back(std::move(cur));
  return chunks;
}

Result<MapReduceResult> run_map_reduce(const std::string& document, const Tokenizer& tok, int32_t max_model_len,
                                       const MapReduceOptions& opts, const PromptBuilder& build,
                                       const BatchRunner& run, const MapReduceProgress& progress) {
  const auto t0 = SteadyClock::now();
  if (trim(document).empty()) return Error{"the document is empty"};
  if (opts.map_prompt.find("{chunk}") == std::string::npos) return Error{"map_prompt: no {chunk} placeholder"};
  if (opts.reduce_prompt.find("{summaries}") == std::string::npos)
    return Error{"reduce_prompt: no {summaries} placeholder"};
  if (opts.max_tokens < 1) return Error{"max_tokens must be at least 1"};
  const int64_t slack = 8;  // tokenization at the seams may merge or split a token or two
  auto budget_of = [&](const std::string& prompt, const char* placeholder) {
    return static_cast<int64_t>(max_model_len) - opts.max_tokens - slack -
           static_cast<int64_t>(build(replace_all(prompt, placeholder, "")).size());
  };
  int64_t chunk_budget = budget_of(opts.map_prompt, "{chunk}");
  if (opts.chunk_tokens > 0) chunk_budget = std::min<int64_t>(chunk_budget, opts.chunk_tokens);
  if (chunk_budget < 16)
    return Error{fmt::format("the context ({} tokens) leaves {} tokens for a chunk beside the map prompt and "
                             "max_tokens {}; lower max_tokens",
                             max_model_len, chunk_budget, opts.max_tokens)};
  const int64_t reduce_budget = budget_of(opts.reduce_prompt, "{summaries}");
  if (reduce_budget < 2 * (opts.max_tokens + 2))
    return Error{fmt::format("the context ({} tokens) cannot hold two answers of max_tokens {} in a reduce; lower "
                             "max_tokens",
                             max_model_len, opts.max_tokens)};

  MapReduceResult res;
  res.document_tokens = count_tokens(tok, document);
  const std::vector<std::string> chunks = chunk_document(document, tok, static_cast<int32_t>(chunk_budget));
  res.chunks = static_cast<int32_t>(chunks.size());

  auto stage = [&](const char* name, int32_t level, const std::vector<std::string>& texts)
      -> Result<std::vector<std::string>> {
    const auto ts = SteadyClock::now();
    StageReport rep;
    rep.stage = name;
    rep.level = level;
    rep.inputs = static_cast<int32_t>(texts.size());
    std::vector<std::vector<int32_t>> prompts;
    prompts.reserve(texts.size());
    for (const std::string& t : texts) {
      prompts.push_back(build(t));
      if (static_cast<int64_t>(prompts.back().size()) + opts.max_tokens > max_model_len)
        return Error{fmt::format("a {} prompt of {} tokens does not fit the context with max_tokens {}", name,
                                 prompts.back().size(), opts.max_tokens)};
    }
    if (progress) progress(rep, 0, rep.inputs);
    auto outs = run(prompts, [&](int32_t done) {
      if (progress) progress(rep, done, rep.inputs);
    });
    if (!outs.ok()) return Error{fmt::format("{} level {}: {}", name, level, outs.error())};
    if (outs->size() != texts.size()) return Error{"the runner returned a wrong number of answers"};
    std::vector<std::string> answers;
    for (const StageOutput& o : *outs) {
      rep.prompt_tokens += o.prompt_tokens;
      rep.completion_tokens += o.completion_tokens;
      answers.push_back(trim(o.text));
    }
    rep.seconds = std::chrono::duration<double>(SteadyClock::now() - ts).count();
    res.prompt_tokens += rep.prompt_tokens;
    res.completion_tokens += rep.completion_tokens;
    res.stages.push_back(rep);
    return answers;
  };

  std::vector<std::string> map_texts;
  for (const std::string& c : chunks) map_texts.push_back(replace_all(opts.map_prompt, "{chunk}", c));
  TM_ASSIGN_OR_RETURN(std::vector<std::string> items, stage("map", 0, map_texts));

  for (int32_t level = 1; items.size() > 1; ++level) {
    std::vector<std::string> groups;
    std::string cur;
    size_t in_cur = 0;
    for (const std::string& it : items) {
      const std::string joined = in_cur ? cur + "\n\n" + it : it;
      if (in_cur && count_tokens(tok, joined) > reduce_budget) {
        groups.push_back(std::move(cur));
        cur = it;
        in_cur = 1;
      } else {
        cur = joined;
        ++in_cur;
      }
    }
    groups.push_back(std::move(cur));
    if (groups.size() >= items.size())
      return Error{"the answers are too long to combine in the context; lower max_tokens"};
    std::vector<std::string> texts;
    for (const std::string& g : groups) texts.push_back(replace_all(opts.reduce_prompt, "{summaries}", g));
    TM_ASSIGN_OR_RETURN(items, stage("reduce", level, texts));
  }
  res.output = items.empty() ? std::string() : items[0];
  res.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return res;
}

}  // namespace tmill::server
