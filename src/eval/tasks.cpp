// Task-file parsing and the metric functions. Definitions in docs/eval.md.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "eval/tasks.h"

#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "core/mmap.h"

namespace tmill::eval {

using nlohmann::json;

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::Exact: return "exact";
    case Metric::Contains: return "contains";
    case Metric::Regex: return "regex";
    case Metric::JsonFields: return "json_fields";
    case Metric::Choice: return "choice";
  }
  return "?";
}

std::optional<Metric> metric_from_name(std::string_view n) {
  for (Metric m : {Metric::Exact, Metric::Contains, Metric::Regex, Metric::JsonFields, Metric::Choice})
    if (n == metric_name(m)) return m;
  return std::nullopt;
}

// ---- helpers ----------------------------------------------------------------------------------

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool eq_ci(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

size_t find_ci(std::string_view hay, std::string_view needle, size_t from = 0) {
  if (needle.empty()) return from <= hay.size() ? from : std::string_view::npos;
  for (size_t i = from; i + needle.size() <= hay.size(); ++i)
    if (eq_ci(hay.substr(i, needle.size()), needle)) return i;
  return std::string_view::npos;
}

// ASCII letters, digits and '_' ("word" characters for label and option boundaries).
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

struct Pcre2Code {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
using CodePtr = std::unique_ptr<pcre2_code, Pcre2Code>;

Result<CodePtr> compile_regex(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return Error{fmt::format("invalid regex at offset {}: {}", off, reinterpret_cast<const char*>(buf))};
  }
  return CodePtr(code);
}

Result<std::vector<std::string>> string_list(const json& j, const char* what) {
  std::vector<std::string> out;
  if (j.is_string()) {
    out.push_back(j.get<std::string>());
  } else if (j.is_array() && !j.empty()) {
    for (const json& e : j) {
      if (!e.is_string()) return Error{fmt::format("\"{}\" must be a string or an array of strings", what)};
      out.push_back(e.get<std::string>());
    }
  } else {
    return Error{fmt::format("\"{}\" must be a string or a non-empty array of strings", what)};
  }
  return out;
}

// Field `path` of object `o`: the literal key first, else a dotted path through nested objects.
const json* field_at(const json& o, const std::string& path) {
  if (!o.is_object()) return nullptr;
  if (auto it = o.find(path); it != o.end()) return &*it;
  const size_t dot = path.find('.');
  if (dot == std::string::npos) return nullptr;
  auto it = o.find(path.substr(0, dot));
  return it == o.end() ? nullptr : field_at(*it, path.substr(dot + 1));
}

std::vector<std::string> default_labels(size_t n) {
  std::vector<std::string> l;
  for (size_t i = 0; i < n; ++i) l.push_back(std::string(1, static_cast<char>('A' + i)));
  return l;
}

}  // namespace

// ---- metrics ----------------------------------------------------------------------------------

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string strip_think(std::string_view a) {
  const size_t close = a.find("</think>");
  if (close != std::string_view::npos) return std::string(a.substr(close + 8));
  if (trim(a).rfind("<think>", 0) == 0) return {};  // unterminated reasoning: no answer
  return std::string(a);
}

bool metric_exact(std::string_view answer, std::string_view expected, bool ic) {
  return ic ? eq_ci(trim(answer), trim(expected)) : trim(answer) == trim(expected);
}

bool metric_contains(std::string_view answer, std::string_view expected, bool ic) {
  return ic ? find_ci(answer, expected) != std::string_view::npos : answer.find(expected) != std::string_view::npos;
}

Result<bool> metric_regex(std::string_view answer, const std::string& pattern) {
  TM_ASSIGN_OR_RETURN(CodePtr code, compile_regex(pattern));
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code.get(), nullptr);
  const int rc = pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(answer.data()), answer.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  if (rc >= 0) return true;
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(rc, buf, sizeof buf);
  return Error{fmt::format("regex match failed: {}", reinterpret_cast<const char*>(buf))};
}

std::vector<json> find_json_objects(std::string_view a) {
  std::vector<json> out;
  size_t i = 0;
  while ((i = a.find('{', i)) != std::string_view::npos) {
    // The matching '}' by depth counting outside strings; then let the JSON parser judge the span.
    int depth = 0;
    bool in_str = false, esc = false;
    size_t end = std::string_view::npos;
    for (size_t k = i; k < a.size(); ++k) {
      const char c = a[k];
      if (in_str) {
        if (esc) esc = false;
        else if (c == '\\') esc = true;
        else if (c == '"') in_str = false;
      } else if (c == '"') {
        in_str = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) {
          end = k;
          break;
        }
      }
    }
    if (end != std::string_view::npos) {
      json j = json::parse(a.substr(i, end - i + 1), nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) {
        out.push_back(std::move(j));
        i = end + 1;
        continue;
      }
    }
    ++i;
  }
  return out;
}

bool metric_json_fields(std::string_view answer, const json& expected, std::string* detail) {
  const std::vector<json> objs = find_json_objects(answer);
  if (objs.empty()) {
    if (detail) *detail = "no JSON object in the answer";
    return false;
  }
  std::string first_miss;
  for (const json& o : objs) {
    std::string miss;
    for (const auto& [key, want] : expected.items()) {
      const json* got = field_at(o, key);
      if (!got) miss = fmt::format("field \"{}\" missing", key);
      else if (*got != want) miss = fmt::format("field \"{}\" is {}, expected {}", key, got->dump(), want.dump());
      if (!miss.empty()) break;
    }
    if (miss.empty()) {
      if (detail) *detail = "fields match";
      return true;
    }
    if (first_miss.empty()) first_miss = miss;
  }
  if (detail) *detail = first_miss;
  return false;
}

int pick_choice(std::string_view a, const std::vector<std::string>& choices, const std::vector<std::string>& labels_in,
                bool /*ignore_case: option texts are always matched case-insensitively*/) {
  const std::vector<std::string> labels = labels_in.empty() ? default_labels(choices.size()) : labels_in;
  size_t best_pos = std::string_view::npos, best_len = 0;
  int best = -1;
  auto consider = [&](size_t pos, size_t len, int idx) {
    if (pos < best_pos || (pos == best_pos && len > best_len)) {
      best_pos = pos;
      best_len = len;
      best = idx;
    }
  };
  auto bounded = [&](size_t pos, size_t len, std::string_view needle) {
    const bool left_ok = pos == 0 || !is_word(needle.front()) || !is_word(a[pos - 1]);
    const bool right_ok = pos + len >= a.size() || !is_word(needle.back()) || !is_word(a[pos + len]);
    return left_ok && right_ok;
  };
  for (size_t i = 0; i < labels.size() && i < choices.size(); ++i) {
    const std::string& L = labels[i];
    if (L.empty()) continue;
    for (size_t p = a.find(L); p != std::string_view::npos; p = a.find(L, p + 1)) {
      if (!bounded(p, L.size(), L)) continue;
      // "A dog", "I think": a label followed by one space and a lowercase word is prose, not a pick.
      const size_t e = p + L.size();
      if (e + 1 < a.size() && a[e] == ' ' && std::islower(static_cast<unsigned char>(a[e + 1]))) continue;
      consider(p, L.size(), static_cast<int>(i));
      break;
    }
  }
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string_view t = trim(choices[i]);
    if (t.empty()) continue;
    for (size_t p = find_ci(a, t); p != std::string_view::npos; p = find_ci(a, t, p + 1)) {
      if (!bounded(p, t.size(), t)) continue;
      consider(p, t.size(), static_cast<int>(i));
      break;
    }
  }
  return best;
}

int expected_choice(std::string_view expected, const std::vector<std::string>& choices,
                    const std::vector<std::string>& labels_in, bool) {
  const std::vector<std::string> labels = labels_in.empty() ? default_labels(choices.size()) : labels_in;
  const std::string_view e = trim(expected);
  for (size_t i = 0; i < labels.size() && i < choices.size(); ++i)
    if (e == labels[i]) return static_cast<int>(i);
  for (size_t i = 0; i < choices.size(); ++i)
    if (eq_ci(e, trim(choices[i]))) return static_cast<int>(i);
  return -1;
}

MetricResult score_answer(const TaskCase& c, std::string_view raw) {
  const std::string answer = strip_think(raw);
  MetricResult r;
  switch (c.metric) {
    case Metric::Exact:
    case Metric::Contains:
    case Metric::Regex: {
      auto wants = string_list(c.expected, "expected");
      if (!wants.ok()) return {false, wants.error()};
      for (const std::string& w : *wants) {
        bool hit = false;
        if (c.metric == Metric::Exact) hit = metric_exact(answer, w, c.ignore_case);
        else if (c.metric == Metric::Contains) hit = metric_contains(answer, w, c.ignore_case);
        else {
          auto m = metric_regex(answer, w);
          if (!m.ok()) return {false, m.error()};
          hit = *m;
        }
        if (hit) return {true, fmt::format("{} \"{}\"", c.metric == Metric::Regex ? "matches" : "has", w)};
      }
      r.detail = wants->size() == 1 ? fmt::format("expected {} \"{}\"", metric_name(c.metric), wants->front())
                                    : fmt::format("none of {} expected values", wants->size());
      return r;
    }
    case Metric::JsonFields:
      r.pass = metric_json_fields(answer, c.expected, &r.detail);
      return r;
    case Metric::Choice: {
      const int want = expected_choice(c.expected.is_string() ? c.expected.get<std::string>() : "", c.choices, c.labels);
      const int got = pick_choice(answer, c.choices, c.labels);
      const auto name = [&](int i) {
        const auto labels = c.labels.empty() ? default_labels(c.choices.size()) : c.labels;
        return i < 0 ? std::string("no option") : fmt::format("{} ({})", labels[static_cast<size_t>(i)], c.choices[static_cast<size_t>(i)]);
      };
      r.pass = got >= 0 && got == want;
      r.detail = r.pass ? "picked " + name(got) : fmt::format("picked {}, expected {}", name(got), name(want));
      return r;
    }
  }
  return r;
}

// ---- parsing ----------------------------------------------------------------------------------

Result<TaskCase> parse_task_case(std::string_view line, int line_no) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"invalid JSON"};
  if (!j.is_object()) return Error{"each line must be a JSON object"};
  TaskCase c;
  c.line = line_no;
  try {
    if (j.contains("id")) c.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    else c.id = fmt::format("line-{}", line_no);
    const bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
    if (has_prompt == has_messages) return Error{"give exactly one of \"prompt\" or \"messages\""};
    if (has_prompt) {
      if (!j["prompt"].is_string()) return Error{"\"prompt\" must be a string"};
      c.prompt = j["prompt"].get<std::string>();
    } else {
      nlohmann::ordered_json m = nlohmann::ordered_json::parse(j["messages"].dump());
      if (!m.is_array() || m.empty()) return Error{"\"messages\" must be a non-empty array"};
      for (const auto& msg : m)
        if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
          return Error{"each message needs a string \"role\""};
      c.messages = std::move(m);
    }
    if (!j.contains("metric") || !j["metric"].is_string()) return Error{"missing string \"metric\""};
    auto m = metric_from_name(j["metric"].get<std::string>());
    if (!m) return Error{fmt::format("unknown metric \"{}\" (exact, contains, regex, json_fields, choice)",
                                     j["metric"].get<std::string>())};
    c.metric = *m;
    if (!j.contains("expected")) return Error{"missing \"expected\""};
    c.expected = j["expected"];
    c.ignore_case = j.value("ignore_case", false);
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1)
        return Error{"\"max_tokens\" must be a positive integer"};
      c.max_tokens = static_cast<int32_t>(std::min<int64_t>(j["max_tokens"].get<int64_t>(), INT32_MAX));
    }
    if (j.contains("stop")) {
      TM_ASSIGN_OR_RETURN(c.stop, string_list(j["stop"], "stop"));
    }
    switch (c.metric) {
      case Metric::Exact:
      case Metric::Contains: {
        TM_TRY(string_list(c.expected, "expected"));
        break;
      }
      case Metric::Regex: {
        TM_ASSIGN_OR_RETURN(auto pats, string_list(c.expected, "expected"));
        for (const auto& p : pats) TM_TRY(compile_regex(p));
        break;
      }
      case Metric::JsonFields:
        if (!c.expected.is_object() || c.expected.empty())
          return Error{"json_fields: \"expected\" must be a non-empty object of field -> value"};
        break;
      case Metric::Choice: {
        if (!j.contains("choices")) return Error{"choice: missing \"choices\""};
        TM_ASSIGN_OR_RETURN(c.choices, string_list(j["choices"], "choices"));
        if (c.choices.size() < 2) return Error{"choice: give at least two choices"};
        if (j.contains("labels")) {
          TM_ASSIGN_OR_RETURN(c.labels, string_list(j["labels"], "labels"));
          if (c.labels.size() != c.choices.size()) return Error{"choice: \"labels\" must have one label per choice"};
        } else if (c.choices.size() > 26) {
          return Error{"choice: more than 26 choices need explicit \"labels\""};
        }
        if (!c.expected.is_string() || expected_choice(c.expected.get<std::string>(), c.choices, c.labels) < 0)
          return Error{"choice: \"expected\" must be one of the labels or one of the choices"};
        break;
      }
    }
  } catch (const std::exception& e) {
    return Error{std::string("bad field: ") + e.what()};
  }
  return c;
}

Result<std::vector<TaskCase>> parse_task_text(std::string_view text) {
  std::vector<TaskCase> out;
  std::set<std::string> ids;
  int line_no = 0;
  size_t at = 0;
  while (at <= text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(at, nl - at);
    ++line_no;
    at = nl + 1;
    if (trim(line).empty()) continue;
    auto c = parse_task_case(line, line_no);
    if (!c.ok()) return Error{fmt::format("line {}: {}", line_no, c.error())};
    if (!ids.insert(c->id).second) return Error{fmt::format("line {}: duplicate id \"{}\"", line_no, c->id)};
    out.push_back(std::move(c).value());
  }
  if (out.empty()) return Error{"the task file has no cases"};
  return out;
}

Result<std::vector<TaskCase>> parse_task_file(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return Error{fmt::format("{}: {}", path, text.error())};
  auto cases = parse_task_text(*text);
  if (!cases.ok()) return Error{fmt::format("{}: {}", path, cases.error())};
  return cases;
}

}  // namespace tmill::eval
