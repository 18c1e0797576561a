// ProgressBar: plain lines when not on a terminal (every 10% and the end), a bar redrawn in place on one.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/progress.h"

using namespace tmill;

namespace {

std::string read_all(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

}  // namespace

TEST(ProgressBar, LinesAtEveryTenthAndTheEnd) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar("quantize", 40, "tensors", ProgressBar::Mode::Lines, f);
    for (uint64_t i = 1; i <= 40; ++i) bar.update(i, "blk.0.attn_q.weight");
  }
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find("blk.0"), std::string::npos) << "details are for the bar only: " << out;
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 11u) << out;  // deciles 0 (2.5%) .. 9, then 100%
  EXPECT_EQ(lines[0], "quantize:   2% (1/40 tensors)");
  EXPECT_EQ(lines[1], "quantize:  10% (4/40 tensors)");
  EXPECT_EQ(lines[10].rfind("quantize: 100% (40/40 tensors) in ", 0), 0u) << lines[10];
  EXPECT_EQ(lines[10].substr(lines[10].size() - 2), " s");
}

TEST(ProgressBar, UnfinishedLinesStopWhereTheyWere) {
  FILE* f = std::tmpfile();
  {
    ProgressBar bar("load: convert", 10, "tensors", ProgressBar::Mode::Lines, f);
    bar.update(3);
  }  // an error stopped the work: no 100% line
  const auto lines = lines_of(read_all(f));
  std::fclose(f);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "load: convert:  30% (3/10 tensors)");
}

TEST(ProgressBar, BarIsRedrawnInPlaceAndEndsItsLine) {
  FILE* f = std::tmpfile();
  {
    ProgressBar bar("imatrix", 4, "chunks", ProgressBar::Mode::Bar, f);
    bar.update(1);
    bar.update(4, "last");
  }
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_EQ(out.front(), '\r');
  EXPECT_NE(out.find("imatrix [######..................]  25%  1/4 chunks"), std::string::npos) << out;
  EXPECT_NE(out.find("imatrix [########################] 100%  4/4 chunks  last"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(lines_of(out).size(), 1u);  // one terminal line, redrawn
}

TEST(ProgressBar, OffPrintsNothingAndModeComesFromTheEnvironment) {
  FILE* f = std::tmpfile();
  {
    ProgressBar bar("x", 2, "runs", ProgressBar::Mode::Off, f);
    bar.update(2);
  }
  EXPECT_EQ(read_all(f), "");
  std::fclose(f);
  EXPECT_EQ(ProgressBar::bar(0.5, 4), "[##..]");
  FILE* g = std::tmpfile();  // a file is not a terminal
  unsetenv("TOKENMILL_PROGRESS");
  EXPECT_EQ(ProgressBar::resolve(ProgressBar::Mode::Auto, g), ProgressBar::Mode::Lines);
  setenv("TOKENMILL_PROGRESS", "bar", 1);
  EXPECT_EQ(ProgressBar::resolve(ProgressBar::Mode::Auto, g), ProgressBar::Mode::Bar);
  setenv("TOKENMILL_PROGRESS", "off", 1);
  EXPECT_EQ(ProgressBar::resolve(ProgressBar::Mode::Auto, g), ProgressBar::Mode::Off);
  unsetenv("TOKENMILL_PROGRESS");
  std::fclose(g);
}
