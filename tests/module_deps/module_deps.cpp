// The module graph check (ctest: module_deps). Reads the modules and their DEPS from
// src/CMakeLists.txt (`tm_module(NAME DEPS a b ... LIBS ...)`, in declaration order = layer order)
// and fails when:
//  - a source file includes "<module>/..." of a module its own module does not declare (or itself);
//  - a module declares a dependency it never includes (DEPS are exactly what the code includes);
//  - a dependency points upward: declared later than the module, or the module itself (no cycles);
//  - a folder under src/ is not a declared module;
//  - a public header includes more than it may (engine/engine.h: api and core only; api/: api only);
//  - a unit test folder tests/unit/<module> includes a module that neither <module> reaches through
//    its DEPS nor its declared fixtures (tests/CMakeLists.txt, TM_TEST_FIXTURES) provide: each test
//    binary links its own module and those fixtures only;
//  - docs/ARCHITECTURE.md's dependency list (between the module-deps markers) differs from the one
//    the DEPS give (`module_deps SRC_DIR --print` prints it).
// Usage: module_deps SOURCE_DIR [--print]
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Module {
  std::string name;
  std::vector<std::string> deps;
  size_t order = 0;
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// tm_module(...) calls, comments stripped, in order.
std::vector<Module> parse_modules(const std::string& cmake) {
  std::vector<Module> mods;
  std::string text;
  for (std::istringstream in(cmake); !in.eof();) {
    std::string line;
    std::getline(in, line);
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    text += line + "\n";
  }
  for (size_t at = text.find("tm_module("); at != std::string::npos; at = text.find("tm_module(", at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) continue;
    const size_t close = text.find(')', at);
    std::vector<std::string> w = words(text.substr(at + 10, close - at - 10));
    if (w.empty()) continue;
    Module m;
    m.name = w[0];
    m.order = mods.size();
    bool in_deps = false;
    for (size_t i = 1; i < w.size(); ++i) {
      if (w[i] == "DEPS") in_deps = true;
      else if (w[i] == "LIBS") in_deps = false;
      else if (in_deps) m.deps.push_back(w[i]);
    }
    mods.push_back(m);
  }
  return mods;
}

// The modules named by `#include "<module>/..."` lines of a file.
std::set<std::string> included_modules(const fs::path& file, const std::set<std::string>& known) {
  std::set<std::string> out;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line.compare(i, 8, "#include") != 0) continue;
    const size_t q = line.find('"', i);
    const size_t slash = q == std::string::npos ? q : line.find('/', q);
    if (slash == std::string::npos) continue;
    const std::string mod = line.substr(q + 1, slash - q - 1);
    if (known.count(mod)) out.insert(mod);
  }
  return out;
}

std::vector<fs::path> sources(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "TM_TEST_FIXTURES engine:convert model:convert ..." in tests/CMakeLists.txt.
std::map<std::string, std::set<std::string>> parse_fixtures(const std::string& cmake) {
  std::map<std::string, std::set<std::string>> out;
  const size_t at = cmake.find("set(TM_TEST_FIXTURES");
  if (at == std::string::npos) return out;
  const size_t close = cmake.find(')', at);
  for (const std::string& w : words(cmake.substr(at + 21, close - at - 21))) {
    const size_t c = w.find(':');
    if (c != std::string::npos) out[w.substr(0, c)].insert(w.substr(c + 1));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: module_deps SOURCE_DIR [--print]\n");
    return 2;
  }
  const fs::path root = argv[1];
  const bool print = argc > 2 && std::string(argv[2]) == "--print";
  const std::vector<Module> mods = parse_modules(read_file(root / "src/CMakeLists.txt"));
  std::map<std::string, const Module*> by_name;
  std::set<std::string> known;
  for (const Module& m : mods) {
    by_name[m.name] = &m;
    known.insert(m.name);
  }
  // The generated dependency list: one line per module, in layer order.
  std::string doc;
  for (const Module& m : mods) doc += "- `" + m.name + "` → " + (m.deps.empty() ? "(nothing)" : join(m.deps, ", ")) + "\n";
  if (print) {
    std::fputs(doc.c_str(), stdout);
    return 0;
  }

  int errors = 0;
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "module_deps: %s\n", msg.c_str());
    ++errors;
  };
  if (mods.empty()) fail("no tm_module(...) found in src/CMakeLists.txt");

  // Declared graph: known, earlier, no duplicates.
  for (const Module& m : mods) {
    std::set<std::string> seen;
    for (const std::string& d : m.deps) {
      auto it = by_name.find(d);
      if (it == by_name.end()) fail(m.name + " declares unknown module '" + d + "'");
      else if (it->second->order >= m.order)
        fail(m.name + " depends on " + d + ", which is declared after it (a dependency pointing upward)");
      if (!seen.insert(d).second) fail(m.name + " declares " + d + " twice");
    }
  }
  // Every folder under src/ is a module.
  for (const auto& e : fs::directory_iterator(root / "src"))
    if (e.is_directory() && !known.count(e.path().filename().string()))
      fail("src/" + e.path().filename().string() + " is not declared with tm_module in src/CMakeLists.txt");

  // What each module's code includes: exactly its DEPS.
  for (const Module& m : mods) {
    const std::set<std::string> allowed(m.deps.begin(), m.deps.end());
    std::set<std::string> used;
    for (const fs::path& f : sources(root / "src" / m.name)) {
      const std::string rel = fs::relative(f, root).string();
      for (const std::string& inc : included_modules(f, known)) {
        if (inc == m.name) continue;
        used.insert(inc);
        if (!allowed.count(inc)) fail(rel + " includes " + inc + "/, which module " + m.name + " does not declare");
      }
    }
    for (const std::string& d : m.deps)
      if (!used.count(d)) fail(m.name + " declares " + d + " but none of its files includes " + d + "/");
  }

  // Public headers include only what the API promises.
  auto check_header_only = [&](const fs::path& f, const std::set<std::string>& may) {
    if (!fs::exists(f)) return fail(fs::relative(f, root).string() + " is missing");
    for (const std::string& inc : included_modules(f, known))
      if (!may.count(inc))
        fail(fs::relative(f, root).string() + " is public API and may include only " +
             join(std::vector<std::string>(may.begin(), may.end()), ", ") + "; it includes " + inc + "/");
  };
  check_header_only(root / "src/engine/engine.h", {"api", "core", "engine"});
  for (const fs::path& f : sources(root / "src/api")) check_header_only(f, {"api"});

  // Unit tests: a test binary links its module (and what that reaches) plus declared fixtures.
  const auto fixtures = parse_fixtures(read_file(root / "tests/CMakeLists.txt"));
  for (const auto& e : fs::directory_iterator(root / "tests/unit")) {
    if (!e.is_directory()) continue;
    const std::string t = e.path().filename().string();
    std::set<std::string> reach;
    std::vector<std::string> todo;
    if (known.count(t)) todo.push_back(t);
    if (auto it = fixtures.find(t); it != fixtures.end())
      for (const std::string& fx : it->second) {
        if (!known.count(fx)) fail("tests/CMakeLists.txt: fixture " + fx + " of " + t + " is not a module");
        todo.push_back(fx);
      }
    while (!todo.empty()) {
      const std::string x = todo.back();
      todo.pop_back();
      if (!reach.insert(x).second) continue;
      for (const std::string& d : by_name.at(x)->deps) todo.push_back(d);
    }
    for (const fs::path& f : sources(e.path()))
      for (const std::string& inc : included_modules(f, known))
        if (!reach.count(inc))
          fail(fs::relative(f, root).string() + " includes " + inc + "/, which test_" + t +
               " does not link (its module's DEPS and its TM_TEST_FIXTURES)");
  }

  // The architecture document's list is this one.
  const std::string arch = read_file(root / "docs/ARCHITECTURE.md");
  const std::string begin = "<!-- module-deps:begin -->\n", end = "<!-- module-deps:end -->";
  const size_t b = arch.find(begin), en = arch.find(end);
  if (b == std::string::npos || en == std::string::npos || en < b) {
    fail("docs/ARCHITECTURE.md has no <!-- module-deps:begin --> ... <!-- module-deps:end --> block");
  } else if (arch.substr(b + begin.size(), en - b - begin.size()) != doc) {
    fail("docs/ARCHITECTURE.md's dependency list differs from src/CMakeLists.txt; replace it with the output of "
         "`module_deps . --print`:\n" + doc);
  }
  if (errors == 0) std::printf("module_deps: %zu modules, every include declared, graph one-way\n", mods.size());
  return errors == 0 ? 0 : 1;
}
