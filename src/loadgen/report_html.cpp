// Self-contained HTML report: the JSON report embedded in a <script type="application/json"> block
// and drawn into inline SVG charts by the inline script (report_html_js.cpp); no external assets.
// When the script finishes it sets <body data-render="ok" data-charts="N"> (or data-render-error),
// which the headless-Chromium test checks.
#include <string>

#include "loadgen/loadgen.h"

namespace tmill::loadgen {

extern const char* const kReportScript;  // report_html_js.cpp

namespace {

const char* const kStyle = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1340px;color:#1d2430;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 4px;border-bottom:1px solid #d8dde6;padding-bottom:4px}
.meta{color:#5a6475;margin-bottom:12px}.verdict{margin:6px 0 10px}.sub{color:#5a6475;font-size:13px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}th,td{border:1px solid #d8dde6;padding:4px 8px;text-align:right}
th{background:#f2f4f8}td.l,th.l{text-align:left}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff}
.ok{background:#2e8b57}.warn{background:#d98b00}.fail{background:#c62828}.skipped{background:#8a94a6}
.charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{background:#fff;border:1px solid #e3e7ee;border-radius:4px}
svg text{font-family:system-ui,sans-serif}
)CSS";

// JSON inside <script>: '<' only occurs inside JSON strings, so "\u003c" keeps it valid JSON and
// rules out "</script>" or "<!--" in the data.
std::string script_safe_json(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size() + 64);
  for (char c : s) {
    if (c == '<') out += "\\u003c";
    else out.push_back(c);
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o.push_back(c);
    }
  }
  return o;
}

}  // namespace

std::string render_html_report(const nlohmann::json& j) {
  std::string title = "tokenmill bench serve: " + j.value("model", std::string("?")) + " @ " +
                      j.value("base_url", std::string("?"));
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_escape(title) +
       "</title>\n<style>" + kStyle + "</style></head>\n<body data-render=\"pending\">\n";
  o += "<h1>" + html_escape(title) + "</h1>\n<div class=\"meta\" id=\"meta\"></div>\n";
  o += "<noscript>This report draws its charts with JavaScript; the raw figures are in the JSON block "
       "of this file.</noscript>\n<div id=\"report\"></div>\n";
  o += "<script type=\"application/json\" id=\"bench-data\">" + script_safe_json(j) + "</script>\n";
  o += "<script>\n";
  o += kReportScript;
  o += "\n</script>\n</body></html>\n";
  return o;
}

}  // namespace tmill::loadgen
