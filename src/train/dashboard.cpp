// SPDX-License-Identifier: MIT OR Apache-2.0
// The ncurses dashboard: text plots of each metric (train and valid), a progress bar with ETA,
// left/right to switch metric, `h` for recent / full history, `q` to stop (asks first).
#include <curses.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kiln/train/renderer.h"

namespace kiln::train {

std::string format_duration_for_dashboard(double s);  // renderers.cpp

namespace {

struct Point {
  double x, y;
};

class Dashboard : public Renderer {
 public:
  ~Dashboard() override { close(); }

  void on_start(const RunInfo& info) override {
    info_ = info;
    screen_ = newterm(nullptr, stdout, stdin);
    if (!screen_) {  // no usable terminal: plain lines instead
      fallback_ = plain_renderer(stdout);
      fallback_->on_start(info);
      return;
    }
    set_term(screen_);
    cbreak();  // ^C still raises SIGINT
    noecho();
    keypad(stdscr, TRUE);
    timeout(0);
    curs_set(0);
    if (has_colors()) {
      start_color();
      use_default_colors();
      init_pair(1, COLOR_GREEN, -1);
      init_pair(2, COLOR_CYAN, -1);
      init_pair(3, COLOR_YELLOW, -1);
    }
    names_ = info.metric_names;
    draw();
  }

  void on_event(const MetricEvent& e) override {
    if (fallback_) return fallback_->on_event(e);
    last_ = e;
    have_event_ = true;
    if (e.split == Split::Train) {
      double x = static_cast<double>(e.epoch) + static_cast<double>(e.iteration) / std::max<int64_t>(1, e.iterations);
      for (auto& [n, v] : e.values)
        if (std::isfinite(v)) train_[n].push_back({x, v});
    }
    poll_keys();
    auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - drawn_).count() >= 0.1 || e.iteration == e.iterations) draw();
  }

  void on_epoch_end(const EpochEnd& e) override {
    if (fallback_) return fallback_->on_epoch_end(e);
    for (auto& [n, v] : e.valid)
      if (std::isfinite(v)) valid_[n].push_back({static_cast<double>(e.epoch + 1), v});
    char buf[160];
    std::snprintf(buf, sizeof buf, "epoch %lld done in %.1fs%s", static_cast<long long>(e.epoch + 1), e.seconds,
                  e.best ? " (best so far)" : "");
    message_ = buf;
    epochs_.push_back(e);
    draw();
  }

  void on_message(const std::string& text) override {
    if (fallback_) return fallback_->on_message(text);
    message_ = text;
    draw();
  }

  void on_end(const std::string& message) override {
    if (fallback_) return fallback_->on_end(message);
    close();
    // Back on the normal screen: a summary that stays in the scrollback.
    for (auto& e : epochs_) {
      std::printf("epoch %lld:", static_cast<long long>(e.epoch + 1));
      for (auto& [n, v] : e.train) std::printf(" train_%s %.4f", n.c_str(), v);
      for (auto& [n, v] : e.valid) std::printf(" valid_%s %.4f", n.c_str(), v);
      std::printf("\n");
    }
    std::printf("%s\n", message.c_str());
    std::fflush(stdout);
  }

  bool stop_requested() override { return fallback_ ? fallback_->stop_requested() : stop_; }

 private:
  void close() {
    if (screen_) {
      endwin();
      delscreen(screen_);
      screen_ = nullptr;
    }
  }

  void poll_keys() {
    int ch;
    while ((ch = getch()) != ERR) {
      if (asking_) {
        if (ch == 'y' || ch == 'Y') {
          stop_ = true;
          message_ = "stopping after the current step; a checkpoint will be written";
        } else {
          message_ = "continuing";
        }
        asking_ = false;
      } else if (ch == 'q' || ch == 'Q') {
        asking_ = true;
      } else if (ch == KEY_RIGHT || ch == '\t') {
        metric_ = (metric_ + 1) % std::max<size_t>(1, names_.size());
      } else if (ch == KEY_LEFT) {
        metric_ = (metric_ + names_.size() - 1) % std::max<size_t>(1, names_.size());
      } else if (ch == 'h' || ch == KEY_UP || ch == KEY_DOWN) {
        recent_ = !recent_;
      } else if (ch == KEY_RESIZE) {
        clear();
      }
      draw();
    }
  }

  void draw() {
    if (!screen_) return;
    drawn_ = std::chrono::steady_clock::now();
    erase();
    int H = LINES, W = COLS;
    if (H < 12 || W < 40) {
      mvprintw(0, 0, "terminal too small (%dx%d)", W, H);
      refresh();
      return;
    }
    // Title and metric tabs.
    attron(A_BOLD);
    mvprintw(0, 0, "Kiln  run %s", info_.name.c_str());
    attroff(A_BOLD);
    if (have_event_)
      printw("   epoch %lld/%lld  %s %lld/%lld", static_cast<long long>(last_.epoch + 1),
             static_cast<long long>(last_.epochs), split_name(last_.split), static_cast<long long>(last_.iteration),
             static_cast<long long>(last_.iterations));
    move(1, 0);
    for (size_t i = 0; i < names_.size(); ++i) {
      if (i == metric_) attron(A_REVERSE);
      printw(" %s ", names_[i].c_str());
      if (i == metric_) attroff(A_REVERSE);
      printw(" ");
    }
    printw(" [%s]", recent_ ? "recent" : "full history");
    draw_plot(2, H - 7, W);
    // Progress bar with ETA.
    int bw = W - 32;
    double p = have_event_ ? last_.progress : 0.0;
    int fill = static_cast<int>(p * bw + 0.5);
    mvprintw(H - 5, 0, "[");
    attron(COLOR_PAIR(1));
    for (int i = 0; i < bw; ++i) addch(i < fill ? '#' : ' ');
    attroff(COLOR_PAIR(1));
    printw("] %3.0f%%  ETA %s", 100.0 * p, format_duration_for_dashboard(have_event_ ? last_.eta_seconds : 0).c_str());
    // Current values and resources.
    move(H - 4, 0);
    if (have_event_) {
      printw("%s:", split_name(last_.split));
      for (auto& [n, v] : last_.values) printw(" %s %.4f", n.c_str(), v);
      mvprintw(H - 3, 0, "lr %.3g  %.0f items/s  cpu %.0f%%  rss %.0f MB  tensors %.0f MB", last_.lr,
               last_.items_per_second, last_.cpu_percent, static_cast<double>(last_.rss_bytes) / 1e6,
               static_cast<double>(last_.kiln_bytes) / 1e6);
    }
    attron(COLOR_PAIR(3));
    mvprintw(H - 2, 0, "%.*s", W - 1, message_.c_str());
    attroff(COLOR_PAIR(3));
    if (asking_) {
      attron(A_BOLD);
      mvprintw(H - 1, 0, "Stop training now (a checkpoint is written)? [y/n]");
      attroff(A_BOLD);
    } else {
      mvprintw(H - 1, 0, "<-/-> metric   h recent/full   q stop");
    }
    refresh();
  }

  void draw_plot(int top, int bottom, int W) {
    if (names_.empty() || bottom - top < 3) return;
    const std::string& name = names_[metric_ % names_.size()];
    const std::vector<Point>& tr = train_[name];
    const std::vector<Point>& va = valid_[name];
    size_t first = recent_ && tr.size() > 400 ? tr.size() - 400 : 0;
    double x0 = first < tr.size() ? tr[first].x : 0, x1 = std::max(1e-9, x0);
    double y0 = INFINITY, y1 = -INFINITY;
    for (size_t i = first; i < tr.size(); ++i) {
      x1 = std::max(x1, tr[i].x);
      y0 = std::min(y0, tr[i].y);
      y1 = std::max(y1, tr[i].y);
    }
    for (auto& pt : va)
      if (pt.x >= x0) {
        x1 = std::max(x1, pt.x);
        y0 = std::min(y0, pt.y);
        y1 = std::max(y1, pt.y);
      }
    mvprintw(top, 0, "%s  (", name.c_str());
    attron(COLOR_PAIR(1));
    printw("* train");
    attroff(COLOR_PAIR(1));
    printw(", ");
    attron(COLOR_PAIR(2));
    printw("o valid");
    attroff(COLOR_PAIR(2));
    printw(")");
    if (!(y1 >= y0)) return;
    if (y1 - y0 < 1e-12) {
      y0 -= 0.5;
      y1 += 0.5;
    }
    if (x1 <= x0) x1 = x0 + 1;
    int rows = bottom - top - 1, left = 10, cols = W - left - 1;
    int r0 = top + 1;
    for (int r = 0; r < rows; ++r) {
      double yv = y1 - (y1 - y0) * r / std::max(1, rows - 1);
      if (r == 0 || r == rows - 1 || r == rows / 2) mvprintw(r0 + r, 0, "%9.4g", yv);
      mvaddch(r0 + r, left - 1, '|');
    }
    auto col_of = [&](double x) { return left + static_cast<int>((x - x0) / (x1 - x0) * (cols - 1) + 0.5); };
    auto row_of = [&](double y) { return r0 + static_cast<int>((y1 - y) / (y1 - y0) * (rows - 1) + 0.5); };
    attron(COLOR_PAIR(1));
    for (size_t i = first; i < tr.size(); ++i) mvaddch(row_of(tr[i].y), col_of(tr[i].x), '*');
    attroff(COLOR_PAIR(1));
    attron(COLOR_PAIR(2) | A_BOLD);
    for (auto& pt : va)
      if (pt.x >= x0) mvaddch(row_of(pt.y), col_of(pt.x), 'o');
    attroff(COLOR_PAIR(2) | A_BOLD);
    mvprintw(bottom, left, "epoch %.2f", x0);
    mvprintw(bottom, std::max(left + 12, W - 12), "%.2f", x1);
  }

  RunInfo info_;
  SCREEN* screen_ = nullptr;
  std::unique_ptr<Renderer> fallback_;
  std::vector<std::string> names_;
  std::map<std::string, std::vector<Point>> train_, valid_;
  std::vector<EpochEnd> epochs_;
  MetricEvent last_;
  bool have_event_ = false, recent_ = false, asking_ = false, stop_ = false;
  size_t metric_ = 0;
  std::string message_;
  std::chrono::steady_clock::time_point drawn_{};
};

}  // namespace

std::unique_ptr<Renderer> dashboard_renderer() { return std::make_unique<Dashboard>(); }

}  // namespace kiln::train
