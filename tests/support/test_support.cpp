#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tmill::test {
namespace fs = std::filesystem;

std::string source_path(const std::string& rel) {
  const char* e = std::getenv("TM_SOURCE_DIR");
  return (fs::path(e && *e ? e : TM_SOURCE_DIR) / rel).string();
}

std::string tokenmill_binary() {
  const char* e = std::getenv("TM_BINARY");
  return e && *e ? e : TM_BINARY_PATH;
}

namespace {
struct TempRoot {
  std::string path;
  TempRoot() {
    std::string tmpl = (fs::temp_directory_path() / "tokenmill-test-XXXXXX").string();
    if (mkdtemp(tmpl.data())) path = tmpl;
  }
  ~TempRoot() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};
std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

std::string temp_dir() {
  static TempRoot root;
  static int counter = 0;
  fs::path p = fs::path(root.path) / std::to_string(counter++);
  fs::create_directories(p);
  return p.string();
}

CommandOutput run_command(const std::string& cmdline) {
  std::string dir = temp_dir();
  std::string out = dir + "/stdout", err = dir + "/stderr";
  std::string full = "(" + cmdline + ") >'" + out + "' 2>'" + err + "'";
  int st = std::system(full.c_str());
  CommandOutput r;
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace tmill::test
