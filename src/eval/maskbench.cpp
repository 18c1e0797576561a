#include "eval/maskbench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/mmap.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace tmill::eval {

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Python's repr(float): the shortest round-trip digits (nlohmann's dump has them), positional for
// decimal exponents in [-4, 16), scientific otherwise ("1e-05", "1e+16").
std::string python_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  std::string s = Json(d).dump();
  bool neg = !s.empty() && s[0] == '-';
  if (neg) s.erase(0, 1);
  std::string digits;
  long point = -1;
  size_t p = 0;
  for (; p < s.size() && s[p] != 'e' && s[p] != 'E'; ++p) {
    if (s[p] == '.') {
      point = long(digits.size());
    } else {
      digits += s[p];
    }
  }
  if (point < 0) point = long(digits.size());
  if (p < s.size()) point += std::strtol(s.c_str() + p + 1, nullptr, 10);
  // Strip leading zeros (adjusting the point) and trailing zeros.
  while (digits.size() > 1 && digits[0] == '0') {
    digits.erase(0, 1);
    --point;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (digits == "0") return neg ? "-0.0" : "0.0";
  long exp10 = point - 1;
  std::string out;
  if (exp10 >= -4 && exp10 < 16) {
    if (point <= 0) {
      out = "0." + std::string(size_t(-point), '0') + digits;
    } else if (size_t(point) >= digits.size()) {
      out = digits + std::string(size_t(point) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char buf[32];
    std::snprintf(buf, sizeof buf, "e%c%02ld", exp10 < 0 ? '-' : '+', std::labs(exp10));
    out += buf;
  }
  return neg ? "-" + out : out;
}

void dumps(const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
        out += ": ";
        dumps(it.value(), out);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        dumps(v[i], out);
      }
      out += ']';
      return;
    }
    case Json::value_t::number_float: out += python_float(v.get<double>()); return;
    default: out += v.dump(-1, ' ', false, Json::error_handler_t::replace); return;
  }
}

std::string category_of(const std::string& id, const Json& meta) {
  if (meta.is_object() && meta.contains("category") && meta["category"].is_string()) return meta["category"];
  size_t p = id.find("---");
  if (p != std::string::npos) return id.substr(0, p);
  size_t u = id.find_last_of('_');
  if (u != std::string::npos && u + 1 < id.size() &&
      std::all_of(id.begin() + long(u) + 1, id.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return id.substr(0, u);
  return id;
}

Json percentiles(std::vector<float> v) {
  Json j = Json::object();
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (float x : v) sum += x;
  auto pct = [&](double q) -> double {
    if (v.empty()) return 0;
    size_t k = size_t(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0);
    return v[std::min(k, v.size() - 1)];
  };
  auto r = [](double x) { return std::round(x * 10) / 10; };
  j["mean"] = r(v.empty() ? 0 : sum / double(v.size()));
  j["p50"] = r(pct(0.5));
  j["p75"] = r(pct(0.75));
  j["p90"] = r(pct(0.9));
  j["p95"] = r(pct(0.95));
  j["p99"] = r(pct(0.99));
  j["p999"] = r(pct(0.999));
  j["max"] = r(v.empty() ? 0 : v.back());
  return j;
}

const char* const kStatuses[] = {"passing", "compile_error", "validation_error", "invalidation_error", "timeout"};

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& v) {
  std::string out;
  dumps(v, out);
  return out;
}

Result<MaskBenchCase> load_maskbench_case(const std::string& path) {
  TM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{path + ": not a JSON object"};
  MaskBenchCase c;
  c.id = std::filesystem::path(path).stem().string();
  c.category = category_of(c.id, j.contains("meta") ? j["meta"] : Json());
  if (!j.contains("schema")) return Error{path + ": no \"schema\""};
  c.schema = j["schema"];
  if (j.contains("tests") && j["tests"].is_array()) {
    for (auto& t : j["tests"]) {
      if (!t.is_object() || !t.contains("data")) continue;
      c.tests.push_back({t.value("valid", false), python_json_dumps(t["data"])});
    }
  }
  return c;
}

Result<std::vector<std::string>> maskbench_files(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    if (it->path().extension() == ".json") files.push_back(it->path().string());
  }
  if (ec) return Error{dir + ": " + ec.message()};
  std::sort(files.begin(), files.end());
  return files;
}

std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const Tokenizer& tok) {
  grammar::VocabularyData d;
  d.token_bytes = tok.token_bytes_all();
  d.eos_tokens = tok.eog_ids();
  if (d.eos_tokens.empty() && tok.eos_id() >= 0) d.eos_tokens.push_back(tok.eos_id());
  return grammar::Vocabulary::create(std::move(d));
}

SchemaResult run_maskbench_case(const MaskBenchCase& c, const std::shared_ptr<const grammar::Vocabulary>& vocab,
                                const Tokenizer& tok, const MaskBenchOptions& opt) {
  SchemaResult r;
  r.id = c.id;
  r.category = c.category;
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(opt.timeout_ms);
  grammar::JsonOptions jo;
  jo.flexible_whitespace = opt.flexible_whitespace;
  jo.any_order = opt.any_order;
  auto gbnf = grammar::json_schema_to_gbnf(c.schema, jo);
  if (!gbnf.ok()) {
    r.status = "compile_error";
    r.error = gbnf.error();
    return r;
  }
  auto g = grammar::compile_gbnf(*gbnf, vocab);
  if (!g.ok()) {
    r.status = "compile_error";
    r.error = "GBNF: " + g.error();
    return r;
  }
  std::vector<uint32_t> mask(grammar::Matcher::mask_words(vocab->size()));
  bool first_mask = true;
  std::string validation, invalidation;
  for (size_t ti = 0; ti < c.tests.size(); ++ti) {
    const auto& t = c.tests[ti];
    std::vector<int32_t> ids = tok.encode(t.text, /*add_special=*/false, /*parse_special=*/false);
    grammar::Matcher m(*g);
    bool rejected = false;
    for (size_t k = 0; k < ids.size(); ++k) {
      if (Clock::now() > deadline) {
        r.status = "timeout";
        r.error = "over " + std::to_string(opt.timeout_ms) + " ms";
        return r;
      }
      const auto tm = Clock::now();
      const int32_t id = ids[k];
      bool allowed = true;
      if (opt.masks) {
        m.fill_mask(mask);
        allowed = (mask[size_t(id) / 32] >> (id % 32)) & 1u;
      }
      if (allowed && !m.accept_token(id)) allowed = false;  // with masks: they and the matcher disagree, a bug
      double us = us_since(tm);
      if (first_mask) {
        r.ttfm_us = us_since(t0);
        first_mask = false;
      } else {
        r.mask_us.push_back(float(us));
      }
      ++r.tokens;
      if (!allowed) {
        rejected = true;
        break;
      }
    }
    bool accepted = !rejected && m.accepting();
    if (t.valid && !accepted && validation.empty()) {
      validation = "valid test " + std::to_string(ti) + " rejected" + (rejected ? "" : " (not accepting at the end)");
    }
    if (!t.valid && accepted && invalidation.empty()) invalidation = "invalid test " + std::to_string(ti) + " accepted";
  }
  if (first_mask) r.ttfm_us = us_since(t0);
  if (Clock::now() > deadline) {
    r.status = "timeout";
    r.error = "over " + std::to_string(opt.timeout_ms) + " ms";
    return r;
  }
  double sum = 0;
  for (float x : r.mask_us) {
    sum += x;
    r.max_mask_us = std::max(r.max_mask_us, double(x));
  }
  r.mean_mask_us = r.mask_us.empty() ? 0 : sum / double(r.mask_us.size());
  if (!invalidation.empty()) {
    r.status = "invalidation_error";
    r.error = invalidation;
  } else if (!validation.empty()) {
    r.status = "validation_error";
    r.error = validation;
  } else {
    r.status = "passing";
  }
  return r;
}

nlohmann::ordered_json MaskBenchReport::to_json() const {
  Json j = Json::object();
  std::map<std::string, int64_t> counts;
  std::vector<float> tbm, ttfm;
  int64_t tokens = 0;
  for (auto& r : results) {
    ++counts[r.status];
    tbm.insert(tbm.end(), r.mask_us.begin(), r.mask_us.end());
    if (r.status != "compile_error") ttfm.push_back(float(r.ttfm_us));
    tokens += r.tokens;
  }
  j["schemas"] = results.size();
  for (const char* s : kStatuses) j[s] = counts[s];
  j["tbm_us"] = percentiles(std::move(tbm));
  j["ttfm_us"] = percentiles(std::move(ttfm));
  j["tokens"] = tokens;
  Json per = Json::array();
  for (auto& r : results) {
    per.push_back({{"id", r.id},
                   {"status", r.status},
                   {"ttfm_us", std::round(r.ttfm_us * 10) / 10},
                   {"tokens", r.tokens},
                   {"mean_mask_us", std::round(r.mean_mask_us * 10) / 10},
                   {"max_mask_us", std::round(r.max_mask_us * 10) / 10},
                   {"error", r.error}});
  }
  j["per_schema"] = per;
  return j;
}

std::string MaskBenchReport::table() const {
  struct Row {
    int64_t n = 0, st[5] = {0, 0, 0, 0, 0};
  };
  std::map<std::string, Row> cats;
  Row all;
  for (auto& r : results) {
    int k = 0;
    while (k < 5 && r.status != kStatuses[k]) ++k;
    if (k == 5) continue;
    ++cats[r.category].n;
    ++cats[r.category].st[k];
    ++all.n;
    ++all.st[k];
  }
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "| %-28s | %7s | %8s | %7s | %8s | %8s | %10s | %7s |\n", "category", "schemas",
                "passing", "compile", "validat.", "invalid.", "timeout", "pass %");
  out += buf;
  out += "|------------------------------|---------|----------|---------|----------|----------|------------|---------|\n";
  auto line = [&](const std::string& name, const Row& r) {
    std::snprintf(buf, sizeof buf, "| %-28s | %7lld | %8lld | %7lld | %8lld | %8lld | %10lld | %6.1f%% |\n", name.c_str(),
                  (long long)r.n, (long long)r.st[0], (long long)r.st[1], (long long)r.st[2], (long long)r.st[3],
                  (long long)r.st[4], r.n ? 100.0 * double(r.st[0]) / double(r.n) : 0.0);
    out += buf;
  };
  for (auto& [name, r] : cats) line(name, r);
  line("TOTAL", all);
  Json j = to_json();
  auto pct = [&](const char* name) {
    const Json& p = j[name];
    std::snprintf(buf, sizeof buf, "%-8s mean %.1f  p50 %.1f  p75 %.1f  p90 %.1f  p95 %.1f  p99 %.1f  p999 %.1f  max %.1f\n",
                  name, p["mean"].get<double>(), p["p50"].get<double>(), p["p75"].get<double>(), p["p90"].get<double>(),
                  p["p95"].get<double>(), p["p99"].get<double>(), p["p999"].get<double>(), p["max"].get<double>());
    out += buf;
  };
  out += "\n";
  pct("tbm_us");
  pct("ttfm_us");
  std::snprintf(buf, sizeof buf, "tokens   %lld\n", (long long)j["tokens"].get<int64_t>());
  out += buf;
  return out;
}

MaskBenchReport run_maskbench(const std::vector<std::string>& files, const Tokenizer& tok, const MaskBenchOptions& opt,
                              const std::function<void(const MaskBenchReport&, size_t)>& on_progress) {
  auto vocab = grammar_vocabulary(tok);
  std::vector<std::optional<SchemaResult>> slots(files.size());
  std::atomic<size_t> next{0};
  std::mutex mu;
  size_t done = 0;
  auto last = Clock::now();
  auto worker = [&] {
    while (true) {
      size_t i = next.fetch_add(1);
      if (i >= files.size()) return;
      SchemaResult r;
      auto c = load_maskbench_case(files[i]);
      if (!c.ok()) {
        r.id = std::filesystem::path(files[i]).stem().string();
        r.category = category_of(r.id, Json());
        r.status = "compile_error";
        r.error = c.error();
      } else {
        r = run_maskbench_case(*c, vocab, tok, opt);
      }
      std::lock_guard<std::mutex> lock(mu);
      slots[i] = std::move(r);
      ++done;
      // Rebuilding the report copies every sample: at most every progress_ms.
      if (on_progress && (done == files.size() || Clock::now() - last >= std::chrono::milliseconds(opt.progress_ms))) {
        last = Clock::now();
        MaskBenchReport rep;
        for (auto& s : slots) {
          if (s) rep.results.push_back(*s);
        }
        on_progress(rep, done);
      }
    }
  };
  std::vector<std::thread> threads;
  int n = std::max(1, opt.threads);
  for (int t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  MaskBenchReport rep;
  for (auto& s : slots) {
    if (s) rep.results.push_back(std::move(*s));
  }
  return rep;
}

}  // namespace tmill::eval
