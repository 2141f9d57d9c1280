// SPDX-License-Identifier: MIT OR Apache-2.0
// GridWorld: FrozenLake-v1's rules (gymnasium/envs/toy_text/frozen_lake.py) on any map.
#include "kiln/error.h"
#include "kiln/rl/envs.h"

namespace kiln::rl {

GridWorld::GridWorld(GridWorldConfig c) : c_(std::move(c)), act_(Space::make_discrete(4)) {
  KILN_CHECK(!c_.map.empty() && !c_.map[0].empty(), "GridWorld", "empty map");
  rows_ = static_cast<int64_t>(c_.map.size());
  cols_ = static_cast<int64_t>(c_.map[0].size());
  int starts = 0;
  for (int64_t r = 0; r < rows_; ++r) {
    const std::string& row = c_.map[static_cast<size_t>(r)];
    KILN_CHECK(static_cast<int64_t>(row.size()) == cols_, "GridWorld",
               "row " << r << " has " << row.size() << " cells, row 0 has " << cols_);
    for (int64_t col = 0; col < cols_; ++col) {
      const char ch = row[static_cast<size_t>(col)];
      KILN_CHECK(ch == 'S' || ch == 'F' || ch == 'H' || ch == 'G', "GridWorld",
                 "cell (" << r << ", " << col << ") is '" << ch << "', expected one of S F H G");
      if (ch == 'S') {
        ++starts;
        start_ = r * cols_ + col;
      }
    }
  }
  KILN_CHECK(starts == 1, "GridWorld", "the map needs exactly one S, has " << starts);
  KILN_CHECK(c_.success_rate >= 0 && c_.success_rate <= 1, "GridWorld",
             "success_rate " << c_.success_rate << " is not in [0, 1]");
  obs_ = c_.one_hot ? Space::make_box(rows_ * cols_, 0.0f, 1.0f)
                    : Space::make_box(1, 0.0f, static_cast<float>(rows_ * cols_ - 1));
}

std::vector<float> GridWorld::observe() const {
  if (!c_.one_hot) return {static_cast<float>(cell_)};
  std::vector<float> o(static_cast<size_t>(rows_ * cols_), 0.0f);
  o[static_cast<size_t>(cell_)] = 1.0f;
  return o;
}

std::vector<float> GridWorld::do_reset(std::optional<uint64_t> seed) {
  if (seed) rng_.seed_with(*seed);
  cell_ = start_;
  return observe();
}

StepResult GridWorld::do_step(const std::vector<float>& action) {
  auto letter = [&](int64_t cell) {
    return c_.map[static_cast<size_t>(cell / cols_)][static_cast<size_t>(cell % cols_)];
  };
  StepResult r;
  const char here = letter(cell_);
  if (here == 'G' || here == 'H') {  // stepping on after the end: stays, reward 0
    r.terminated = true;
    r.observation = observe();
    return r;
  }
  int64_t a = static_cast<int64_t>(action[0]);
  if (c_.slippery) {
    const double u = rng_.uniform(), fail = (1.0 - c_.success_rate) / 2.0;
    if (u < fail)
      a = (a + 3) % 4;
    else if (u >= fail + c_.success_rate)
      a = (a + 1) % 4;
  }
  int64_t row = cell_ / cols_, col = cell_ % cols_;
  if (a == 0) col = std::max<int64_t>(col - 1, 0);
  if (a == 1) row = std::min(row + 1, rows_ - 1);
  if (a == 2) col = std::min(col + 1, cols_ - 1);
  if (a == 3) row = std::max<int64_t>(row - 1, 0);
  cell_ = row * cols_ + col;
  const char now = letter(cell_);
  r.terminated = now == 'G' || now == 'H';
  r.reward = now == 'G' ? 1.0 : 0.0;
  r.info["cell"] = static_cast<double>(cell_);
  r.observation = observe();
  return r;
}

}  // namespace kiln::rl
