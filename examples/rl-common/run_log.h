// SPDX-License-Identifier: MIT OR Apache-2.0
// The RL examples' record of a run: runs/<name>/metrics.csv (one row per log point) and
// runs/<name>/metrics.png drawn with the Learner's chart writer (kiln::train::write_chart_png).
#pragma once
#include <kiln/error.h>
#include <kiln/train/renderer.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace rl_example {

/// A CSV of named columns, kept in memory for the chart.
class RunLog {
 public:
  RunLog(const std::string& dir, std::vector<std::string> columns) : dir_(dir), cols_(std::move(columns)) {
    std::filesystem::create_directories(dir_);
    csv_ = std::fopen((dir_ + "/metrics.csv").c_str(), "w");
    KILN_CHECK(csv_ != nullptr, "RunLog", "cannot write " + dir_ + "/metrics.csv");
    for (size_t i = 0; i < cols_.size(); ++i) std::fprintf(csv_, "%s%s", i ? "," : "", cols_[i].c_str());
    std::fprintf(csv_, "\n");
  }
  ~RunLog() {
    if (csv_) std::fclose(csv_);
  }
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;
  /// One row, a value per column (NaN: empty cell).
  void row(const std::vector<double>& v) {
    rows_.push_back(v);
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) std::fputc(',', csv_);
      if (!std::isnan(v[i])) std::fprintf(csv_, "%.6g", v[i]);
    }
    std::fputc('\n', csv_);
    std::fflush(csv_);
  }
  /// metrics.png: one panel per entry {title, columns}, each column against column `x`.
  void chart(const std::string& x, const std::vector<std::pair<std::string, std::vector<std::string>>>& panels) const {
    const size_t xi = index(x);
    std::vector<std::pair<std::string, std::vector<kiln::train::Series>>> out;
    for (const auto& [title, names] : panels) {
      std::vector<kiln::train::Series> series;
      for (const auto& n : names) {
        kiln::train::Series s{n, {}, {}};
        const size_t ci = index(n);
        for (const auto& r : rows_)
          if (!std::isnan(r[ci])) {
            s.x.push_back(r[xi]);
            s.y.push_back(r[ci]);
          }
        if (!s.x.empty()) series.push_back(std::move(s));
      }
      if (!series.empty()) out.emplace_back(title, std::move(series));
    }
    if (!out.empty()) kiln::train::write_chart_png(dir_ + "/metrics.png", out);
  }
  const std::string& dir() const { return dir_; }

 private:
  size_t index(const std::string& n) const {
    for (size_t i = 0; i < cols_.size(); ++i)
      if (cols_[i] == n) return i;
    KILN_CHECK(false, "RunLog", "no column " + n);
    return 0;
  }
  std::string dir_;
  std::vector<std::string> cols_;
  std::vector<std::vector<double>> rows_;
  std::FILE* csv_ = nullptr;
};

}  // namespace rl_example
