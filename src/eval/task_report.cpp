#include "eval/task_report.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

namespace tmill::eval {

using ojson = nlohmann::ordered_json;

namespace {

std::string expected_text(const TaskCase& c) {
  if (c.expected.is_string()) return c.expected.get<std::string>();
  if (c.expected.is_array()) {
    std::string s;
    for (const auto& e : c.expected) s += (s.empty() ? "" : " | ") + (e.is_string() ? e.get<std::string>() : e.dump());
    return s;
  }
  return c.expected.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ojson summary_json(const SampleSummary& s) {
  return ojson{{"p50", s.median}, {"p95", s.p95}, {"mean", s.mean}, {"max", s.max}};
}

// Answers may hold invalid UTF-8 only in theory (the engine emits complete characters); dump replaces it.
std::string md_cell(const std::string& s, size_t max_len = 160) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += "<br>";
    else if (c == '\r') continue;
    else out += c;
    if (out.size() >= max_len) {
      // do not cut a UTF-8 sequence in half
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
      if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
      out += "…";
      break;
    }
  }
  return out;
}

// An inline code span that survives backticks in the text (CommonMark: a longer fence).
std::string md_code(const std::string& s) {
  if (s.find('`') == std::string::npos) return "`" + s + "`";
  return "`` " + s + " ``";
}

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

// Horizontal bar chart: one group per label, one bar per series. Values >= 0; `fmt_value` formats labels.
struct Series {
  std::string name;
  std::string color;
  std::vector<double> values;  // one per group
};

std::string bar_chart(const std::string& title, const std::vector<std::string>& groups, const std::vector<Series>& series,
                      double max_value, const std::string& unit) {
  const int label_w = 220, bar_w = 420, bar_h = 16, gap = 10, top = 28;
  const int per_group = static_cast<int>(series.size()) * (bar_h + 2) + gap;
  const int height = top + static_cast<int>(groups.size()) * per_group + 24;
  const int width = label_w + bar_w + 110;
  if (max_value <= 0) max_value = 1;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">"
      "<text x=\"0\" y=\"16\" class=\"ct\">{}</text>",
      width, height, html_escape(title), html_escape(title));
  for (size_t g = 0; g < groups.size(); ++g) {
    const int y0 = top + static_cast<int>(g) * per_group;
    std::string label = groups[g].size() > 32 ? groups[g].substr(0, 30) + "…" : groups[g];
    s += fmt::format("<text x=\"0\" y=\"{}\" class=\"cl\">{}</text>", y0 + bar_h - 3, html_escape(label));
    for (size_t k = 0; k < series.size(); ++k) {
      const double v = series[k].values[g];
      const int w = static_cast<int>(bar_w * std::clamp(v / max_value, 0.0, 1.0));
      const int y = y0 + static_cast<int>(k) * (bar_h + 2);
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {:.4g}{}</title></rect>",
                       label_w, y, std::max(w, 1), bar_h, series[k].color, html_escape(series[k].name), v, unit);
      s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"cv\">{:.4g}{}</text>", label_w + std::max(w, 1) + 4,
                       y + bar_h - 3, v, unit);
    }
  }
  // legend
  int lx = label_w;
  const int ly = height - 8;
  for (const Series& se : series) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>", lx, ly - 9, se.color);
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"cl\">{}</text>", lx + 14, ly, html_escape(se.name));
    lx += 24 + static_cast<int>(se.name.size()) * 7;
  }
  return s + "</svg>";
}

const char* kCss = R"(body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:12px 0;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}
th{background:#f3f3f3}
td.pass{background:#e6f6e6}td.fail{background:#fbe4e4}
td pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font-family:ui-monospace,monospace;max-width:420px}
tr.diff td.id{border-left:4px solid #e0a000}
.ct{font:bold 14px sans-serif}.cl{font:12px sans-serif}.cv{font:11px sans-serif;fill:#444}
.small{color:#666;font-size:12px})";

}  // namespace

std::vector<std::string> display_names(const TaskReport& r) {
  auto dedupe = [](std::vector<std::string>& names, const auto& fix) {
    std::map<std::string, int> count;
    for (const auto& n : names) ++count[n];
    for (size_t i = 0; i < names.size(); ++i)
      if (count[names[i]] > 1) names[i] = fix(i, names[i]);
  };
  std::vector<std::string> names;
  for (const ModelRun& m : r.runs) names.push_back(m.model_name);
  dedupe(names, [&](size_t i, const std::string& n) {
    return n + " (" + std::filesystem::path(r.runs[i].model).filename().string() + ")";
  });
  dedupe(names, [](size_t i, const std::string& n) { return n + " #" + std::to_string(i + 1); });
  return names;
}

bool case_differs(const TaskReport& r, size_t i) {
  for (size_t m = 1; m < r.runs.size(); ++m) {
    const CaseResult& a = r.runs[0].cases[i];
    const CaseResult& b = r.runs[m].cases[i];
    if (a.pass != b.pass || a.answer != b.answer) return true;
  }
  return false;
}

ojson report_json(const TaskReport& r) {
  ojson j;
  j["tasks_file"] = r.tasks_file;
  j["cases"] = r.cases.size();
  ojson models = ojson::array();
  const std::vector<std::string> labels = display_names(r);
  for (size_t k = 0; k < r.runs.size(); ++k) {
    const ModelRun& m = r.runs[k];
    ojson cases = ojson::array();
    for (const CaseResult& c : m.cases) {
      ojson cj{{"id", c.id}, {"pass", c.pass}, {"answer", c.answer}, {"detail", c.detail}};
      if (!c.error.empty()) cj["error"] = c.error;
      cj["finish_reason"] = c.finish_reason;
      cj["prompt_tokens"] = c.prompt_tokens;
      cj["completion_tokens"] = c.completion_tokens;
      cj["latency_s"] = c.latency_s;
      cj["ttft_s"] = c.ttft_s;
      cases.push_back(std::move(cj));
    }
    ojson mj{{"model", m.model},
             {"name", m.model_name},
             {"label", labels[k]},
             {"accuracy", m.accuracy},
             {"passed", m.passed},
             {"total", m.cases.size()},
             {"latency_s", summary_json(m.latency_s)},
             {"ttft_s", summary_json(m.ttft_s)},
             {"tokens_per_s", m.tokens_per_s},
             {"wall_s", m.wall_s},
             {"load_s", m.load_s},
             {"prompt_tokens", m.prompt_tokens},
             {"completion_tokens", m.completion_tokens}};
    if (!m.chat_template.empty()) mj["chat_template"] = m.chat_template;
    mj["cases"] = std::move(cases);
    models.push_back(std::move(mj));
  }
  j["models"] = std::move(models);
  ojson per = ojson::array();
  for (size_t i = 0; i < r.cases.size(); ++i) {
    ojson res = ojson::array();
    for (const ModelRun& m : r.runs)
      res.push_back({{"pass", m.cases[i].pass}, {"answer", m.cases[i].answer}, {"detail", m.cases[i].detail}});
    per.push_back({{"id", r.cases[i].id},
                   {"metric", metric_name(r.cases[i].metric)},
                   {"expected", r.cases[i].expected},
                   {"differs", case_differs(r, i)},
                   {"results", std::move(res)}});
  }
  j["per_case"] = std::move(per);
  return j;
}

std::string report_markdown(const TaskReport& r) {
  std::string s = fmt::format("# tokenmill eval tasks: {}\n\n{} cases, greedy decoding.\n\n", r.tasks_file, r.cases.size());
  s += "| model | accuracy | passed | latency p50 (s) | latency p95 (s) | TTFT p50 (s) | tokens/s |\n";
  s += "|---|---:|---:|---:|---:|---:|---:|\n";
  const std::vector<std::string> names = display_names(r);
  for (size_t k = 0; k < r.runs.size(); ++k) {
    const ModelRun& m = r.runs[k];
    s += fmt::format("| {} | {:.1f}% | {}/{} | {:.3f} | {:.3f} | {:.3f} | {:.1f} |\n", md_cell(names[k]),
                     100.0 * m.accuracy, m.passed, m.cases.size(), m.latency_s.median, m.latency_s.p95,
                     m.ttft_s.median, m.tokens_per_s);
  }
  s += "\n## Cases\n\n| id | metric | expected |";
  for (const std::string& n : names) s += " " + md_cell(n) + " |";
  if (r.runs.size() > 1) s += " differs |";
  s += "\n|---|---|---|";
  for (size_t m = 0; m < r.runs.size(); ++m) s += "---|";
  if (r.runs.size() > 1) s += ":---:|";
  s += "\n";
  for (size_t i = 0; i < r.cases.size(); ++i) {
    const TaskCase& c = r.cases[i];
    s += fmt::format("| {} | {} | {} |", md_cell(c.id), metric_name(c.metric), md_cell(expected_text(c), 80));
    for (const ModelRun& m : r.runs) {
      const CaseResult& cr = m.cases[i];
      s += fmt::format(" {} {} |", cr.pass ? "PASS" : "FAIL",
                       md_code(md_cell(cr.error.empty() ? cr.answer : "error: " + cr.error)));
    }
    if (r.runs.size() > 1) s += case_differs(r, i) ? " ≠ |" : " |";
    s += "\n";
  }
  return s;
}

std::string report_html(const TaskReport& r) {
  static const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  const std::vector<std::string> names = display_names(r);
  std::string s = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tokenmill eval tasks</title><style>";
  s += kCss;
  s += "</style></head><body>\n";
  s += fmt::format("<h1>tokenmill eval tasks</h1><p class=\"small\">{} &middot; {} cases &middot; greedy decoding</p>\n",
                   html_escape(r.tasks_file), r.cases.size());
  // summary table
  s += "<table><tr><th>model</th><th>file</th><th>accuracy</th><th>passed</th><th>latency p50 (s)</th>"
       "<th>latency p95 (s)</th><th>TTFT p50 (s)</th><th>tokens/s</th><th>completion tokens</th></tr>\n";
  for (size_t k = 0; k < r.runs.size(); ++k) {
    const ModelRun& m = r.runs[k];
    s += fmt::format("<tr><td>{}</td><td class=\"small\">{}</td><td>{:.1f}%</td><td>{}/{}</td><td>{:.3f}</td><td>{:.3f}</td>"
                     "<td>{:.3f}</td><td>{:.1f}</td><td>{}</td></tr>\n",
                     html_escape(names[k]), html_escape(m.model), 100.0 * m.accuracy, m.passed, m.cases.size(),
                     m.latency_s.median, m.latency_s.p95, m.ttft_s.median, m.tokens_per_s, m.completion_tokens);
  }
  s += "</table>\n<div>";
  // charts
  Series acc{"accuracy", colors[0], {}};
  Series p50{"p50", colors[0], {}}, p95{"p95", colors[1], {}};
  Series tps{"tokens/s", colors[2], {}};
  double max_lat = 0, max_tps = 0;
  for (const ModelRun& m : r.runs) {
    acc.values.push_back(100.0 * m.accuracy);
    p50.values.push_back(m.latency_s.median);
    p95.values.push_back(m.latency_s.p95);
    tps.values.push_back(m.tokens_per_s);
    max_lat = std::max(max_lat, m.latency_s.p95);
    max_tps = std::max(max_tps, m.tokens_per_s);
  }
  s += bar_chart("Accuracy per model", names, {acc}, 100.0, "%");
  s += bar_chart("Latency per case (s)", names, {p50, p95}, max_lat, " s");
  s += bar_chart("Throughput (completion tokens/s)", names, {tps}, max_tps, "");
  s += "</div>\n";
  // per-case table
  s += "<h2>Cases</h2>";
  if (r.runs.size() > 1) s += "<p class=\"small\">Rows with an orange edge: the models' answers or results differ.</p>";
  s += "<table><tr><th>id</th><th>metric</th><th>expected</th>";
  for (const std::string& n : names) s += "<th>" + html_escape(n) + "</th>";
  s += "</tr>\n";
  for (size_t i = 0; i < r.cases.size(); ++i) {
    const TaskCase& c = r.cases[i];
    s += fmt::format("<tr{}><td class=\"id\">{}</td><td>{}</td><td><pre>{}</pre></td>",
                     case_differs(r, i) ? " class=\"diff\"" : "", html_escape(c.id), metric_name(c.metric),
                     html_escape(expected_text(c)));
    for (const ModelRun& m : r.runs) {
      const CaseResult& cr = m.cases[i];
      s += fmt::format("<td class=\"{}\"><b>{}</b> <span class=\"small\">{} &middot; {:.3f} s &middot; {} tok</span>"
                       "<pre>{}</pre></td>",
                       cr.pass ? "pass" : "fail", cr.pass ? "PASS" : "FAIL", html_escape(cr.detail), cr.latency_s,
                       cr.completion_tokens, html_escape(cr.error.empty() ? cr.answer : "error: " + cr.error));
    }
    s += "</tr>\n";
  }
  s += "</table></body></html>\n";
  return s;
}

}  // namespace tmill::eval
