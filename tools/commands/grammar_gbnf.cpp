// tokenmill grammar gbnf (--json-schema FILE | --regex RE | --choice S... | --json-object) [--flexible-whitespace]
//   Prints the GBNF that a structured-output request compiles to (llama.cpp's json_schema_to_grammar
//   for our translator), or the clear error the request would get (exit status 1). With
//   --check, also compiles the GBNF (without a vocabulary) and prints the compile time; with
//   --validate FILE, says whether FILE's text is in the language (exit 0) or where it leaves it (exit 3).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.h"
#include "core/log.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace {

struct GrammarGbnfCli {
  std::string schema_file, regex;
  std::vector<std::string> choices;
  bool json_object = false;
  bool flexible = false;
  bool any_order = false;
  bool check = false;
  int repeat = 1;
  std::string validate;
};

int run(const GrammarGbnfCli& o) {
  using namespace tmill;
  int given = int(!o.schema_file.empty()) + int(!o.regex.empty()) + int(!o.choices.empty()) + int(o.json_object);
  if (given != 1) {
    log_error("give exactly one of --json-schema, --regex, --choice, --json-object");
    return 2;
  }
  grammar::JsonOptions jo;
  jo.flexible_whitespace = o.flexible;
  jo.any_order = o.any_order;
  Result<std::string> gbnf = std::string();
  if (!o.schema_file.empty()) {
    std::string text;
    if (o.schema_file == "-") {
      std::stringstream ss;
      ss << std::cin.rdbuf();
      text = ss.str();
    } else {
      std::ifstream f(o.schema_file, std::ios::binary);
      if (!f) {
        log_error("cannot read {}", o.schema_file);
        return 1;
      }
      std::stringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    }
    gbnf = grammar::json_schema_text_to_gbnf(text, jo);
  } else if (!o.regex.empty()) {
    gbnf = grammar::regex_to_gbnf(o.regex);
  } else if (!o.choices.empty()) {
    gbnf = grammar::choices_to_gbnf(o.choices);
  } else {
    gbnf = grammar::json_object_gbnf(jo);
  }
  if (!gbnf.ok()) {
    log_error("{}", gbnf.error());
    return 1;
  }
  if (o.validate.empty()) std::fwrite(gbnf->data(), 1, gbnf->size(), stdout);
  if (!o.validate.empty()) {
    // Where does a text leave the grammar? (llama.cpp's gbnf-validator.)
    std::ifstream f(o.validate, std::ios::binary);
    if (!f) {
      log_error("cannot read {}", o.validate);
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    auto g = grammar::compile_gbnf(*gbnf, grammar::Vocabulary::create({}));
    if (!g.ok()) {
      log_error("GBNF: {}", g.error());
      return 1;
    }
    grammar::Matcher m(*g);
    for (size_t i = 0; i < text.size(); ++i) {
      if (!m.accept_bytes(std::string_view(text).substr(i, 1))) {
        size_t from = i > 40 ? i - 40 : 0;
        std::fprintf(stderr, "rejected at byte %zu: ...%s[HERE]%s...\n", i, text.substr(from, i - from).c_str(),
                     text.substr(i, 40).c_str());
        return 3;
      }
    }
    if (!m.accepting()) {
      std::fprintf(stderr, "incomplete: the text is a prefix of the grammar's language, not a sentence\n");
      return 3;
    }
    std::fprintf(stderr, "valid\n");
    return 0;
  }
  if (o.check) {
    auto vocab = grammar::Vocabulary::create({});
    std::vector<double> ms;
    size_t rules = 0;
    for (int i = 0; i < std::max(1, o.repeat); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto g = grammar::compile_gbnf(*gbnf, vocab);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!g.ok()) {
        log_error("GBNF: {}", g.error());
        return 1;
      }
      rules = (*g)->num_rules();
    }
    std::sort(ms.begin(), ms.end());
    std::fprintf(stderr, "compiled in %.3f ms (median of %zu; min %.3f) to %zu rules\n", ms[ms.size() / 2], ms.size(),
                 ms[0], rules);
  }
  return 0;
}

TM_COMMAND("grammar gbnf", "print the GBNF a JSON Schema, regex or choice list compiles to",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<GrammarGbnfCli>();
             app.add_option("--json-schema", o->schema_file, "a JSON Schema file ('-': standard input)");
             app.add_option("--regex", o->regex, "a regular expression the whole output matches");
             app.add_option("--choice", o->choices, "one of these strings (repeat the option)");
             app.add_flag("--json-object", o->json_object, "any JSON object (response_format json_object)");
             app.add_flag("--flexible-whitespace", o->flexible,
                          "JSON whitespace as JSON allows it (default: compact, as generated)");
             app.add_flag("--any-order", o->any_order,
                          "optional properties anywhere among the others (for checking; default: schema order)");
             app.add_flag("--check", o->check, "also compile the GBNF and print the time it took (stderr)");
             app.add_option("--validate", o->validate,
                            "instead of printing the GBNF, check that this file's text is in the grammar's language "
                            "(exit 0), or say where it leaves it (exit 3)");
             app.add_option("--repeat", o->repeat, "with --check: compile this many times, print the median")
                 ->capture_default_str();
             return [o] { return run(*o); };
           });

}  // namespace
