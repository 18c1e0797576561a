// Self-contained HTML report: the JSON report embedded in a <script type="application/json"> block
// and drawn into inline SVG charts by the inline script; no external assets (no CDN). The script and
// the style are real files, assets/report.js and assets/report.css, embedded at build time
// (tm_embed_assets in src/CMakeLists.txt) and copied into every report verbatim (so they carry no
// header comment). When the script finishes it sets <body data-render="ok" data-charts="N">, or
// data-render="error" plus data-render-error on any exception, which the headless-Chromium test checks.
#include <string>
#include <string_view>

#include "core/log.h"
#include "loadgen/embedded_assets.h"
#include "loadgen/loadgen.h"

namespace tmill::loadgen {

namespace {

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

std::string_view asset(std::string_view path) {
  const EmbeddedAsset* a = assets::find(path);
  TM_ASSERT(a, "report asset missing from tm_embed_assets(TARGET tm_loadgen ...)");
  return a->bytes;
}

}  // namespace

std::string render_html_report(const nlohmann::json& j) {
  std::string title = "tokenmill bench serve: " + j.value("model", std::string("?")) + " @ " +
                      j.value("base_url", std::string("?"));
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_escape(title) +
       "</title>\n<style>\n";
  o += asset("report.css");
  o += "</style></head>\n<body data-render=\"pending\">\n";
  o += "<h1>" + html_escape(title) + "</h1>\n<div class=\"meta\" id=\"meta\"></div>\n";
  o += "<noscript>This report draws its charts with JavaScript; the raw figures are in the JSON block "
       "of this file.</noscript>\n<div id=\"report\"></div>\n";
  o += "<script type=\"application/json\" id=\"bench-data\">" + script_safe_json(j) + "</script>\n";
  o += "<script>\n\n";
  o += asset("report.js");
  o += "\n</script>\n</body></html>\n";
  return o;
}

}  // namespace tmill::loadgen
