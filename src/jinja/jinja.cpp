// The public entry points (jinja.h): parse and render with every failure as a Result error, and the
// ISO time parser for RenderOptions::now. The interpreter raises JinjaError internally; this file is the
// one place that turns it (and std::bad_alloc) into messages.
#include "jinja/jinja.h"

#include <ctime>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "jinja/interp.h"
#include "jinja/parser.h"

namespace tmill::jinja {

namespace {

std::string describe(const JinjaError& e) {
  std::string msg = e.type + ": " + e.message;
  if (e.line > 0) msg += " (template line " + std::to_string(e.line) + ")";
  return msg;
}

int digits(std::string_view s, size_t pos, size_t n, bool& ok) {
  int v = 0;
  if (pos + n > s.size()) {
    ok = false;
    return 0;
  }
  for (size_t k = pos; k < pos + n; ++k) {
    if (s[k] < '0' || s[k] > '9') ok = false;
    v = v * 10 + (s[k] - '0');
  }
  return v;
}

}  // namespace

Result<std::chrono::system_clock::time_point> parse_iso_time(std::string_view iso) {
  bool ok = true;
  std::tm tm{};
  tm.tm_year = digits(iso, 0, 4, ok) - 1900;
  tm.tm_mon = digits(iso, 5, 2, ok) - 1;
  tm.tm_mday = digits(iso, 8, 2, ok);
  if (iso.size() < 10 || iso[4] != '-' || iso[7] != '-') ok = false;
  size_t pos = 10;
  long offset = 0;
  long micros = 0;
  if (ok && pos < iso.size()) {
    if (iso[pos] != 'T' && iso[pos] != ' ') ok = false;
    tm.tm_hour = digits(iso, pos + 1, 2, ok);
    if (pos + 3 >= iso.size() || iso[pos + 3] != ':') ok = false;
    tm.tm_min = digits(iso, pos + 4, 2, ok);
    pos += 6;
    if (ok && pos < iso.size() && iso[pos] == ':') {
      tm.tm_sec = digits(iso, pos + 1, 2, ok);
      pos += 3;
      if (ok && pos < iso.size() && iso[pos] == '.') {
        ++pos;
        long scale = 100000;
        while (pos < iso.size() && iso[pos] >= '0' && iso[pos] <= '9') {
          micros += (iso[pos++] - '0') * scale;
          scale /= 10;
        }
      }
    }
    if (ok && pos < iso.size()) {
      if (iso[pos] == 'Z' && pos + 1 == iso.size()) {
        ++pos;
      } else if ((iso[pos] == '+' || iso[pos] == '-') && pos + 6 == iso.size() && iso[pos + 3] == ':') {
        int sign = iso[pos] == '-' ? -1 : 1;
        offset = sign * (digits(iso, pos + 1, 2, ok) * 3600L + digits(iso, pos + 4, 2, ok) * 60L);
        pos += 6;
      } else {
        ok = false;
      }
    }
  }
  if (!ok || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return Error{"invalid ISO time '" + std::string(iso) + "' (expected e.g. 2026-01-15T09:30:00)"};
  std::time_t t = timegm(&tm) - offset;
  return std::chrono::system_clock::from_time_t(t) + std::chrono::microseconds(micros);
}

Result<std::shared_ptr<const Program>> parse(std::string_view source) {
  if (!is_valid_utf8(source)) return Error{"TemplateSyntaxError: chat template is not valid UTF-8"};
  try {
    return std::shared_ptr<const Program>(parse_template(source));
  } catch (const JinjaError& e) {
    return Error{describe(e)};
  } catch (const std::bad_alloc&) {
    return Error{"MemoryError: out of memory while parsing the chat template"};
  } catch (const std::exception& e) {
    return Error{std::string("TemplateSyntaxError: ") + e.what()};
  }
}

Result<std::string> render(const Program& program, const nlohmann::ordered_json& context,
                           const RenderOptions& opts) {
  if (!context.is_object()) return Error{"chat template context must be a JSON object"};
  try {
    std::tm tm{};
    if (opts.now) {
      std::time_t t = std::chrono::system_clock::to_time_t(*opts.now);
      gmtime_r(&t, &tm);
    } else {
      std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    std::vector<std::pair<std::string, Value>> vars;
    for (auto it = context.begin(); it != context.end(); ++it) vars.emplace_back(it.key(), from_json(it.value()));
    Interp in(program, opts, tm);
    return in.render(vars);
  } catch (const JinjaError& e) {
    return Error{describe(e)};
  } catch (const std::bad_alloc&) {
    return Error{"MemoryError: out of memory while rendering the chat template"};
  } catch (const std::exception& e) {
    return Error{std::string("error while rendering the chat template: ") + e.what()};
  }
}

}  // namespace tmill::jinja
