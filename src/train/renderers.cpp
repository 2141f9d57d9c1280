// SPDX-License-Identifier: MIT OR Apache-2.0
// Plain-line renderer, tee renderer and the choice between plain lines and the dashboard.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "kiln/train/renderer.h"

namespace kiln::train {

const char* split_name(Split s) { return s == Split::Train ? "train" : "valid"; }

namespace {

std::string format_duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

std::string values_text(const MetricValues& v) {
  std::string s;
  char buf[96];
  for (auto& [n, x] : v) {
    std::snprintf(buf, sizeof buf, "%s%s %.4f", s.empty() ? "" : "  ", n.c_str(), x);
    s += buf;
  }
  return s;
}

class PlainRenderer : public Renderer {
 public:
  PlainRenderer(std::FILE* out, double every) : out_(out), every_(every) {}
  void on_start(const RunInfo& i) override {
    std::fprintf(out_, "run %s: epochs %lld to %lld, %lld training batches per epoch, %lld validation batches (%s)\n",
                 i.name.c_str(), static_cast<long long>(i.start_epoch + 1), static_cast<long long>(i.epochs),
                 static_cast<long long>(i.train_iterations), static_cast<long long>(i.valid_iterations), i.dir.c_str());
    std::fflush(out_);
    last_ = std::chrono::steady_clock::now();
  }
  void on_event(const MetricEvent& e) override {
    auto now = std::chrono::steady_clock::now();
    // The first step's line comes at once (the run is alive), then one line every `every_` seconds.
    bool due = first_ || std::chrono::duration<double>(now - last_).count() >= every_;
    if (!due || e.iteration == e.iterations) return;  // epoch ends are printed by on_epoch_end
    first_ = false;
    last_ = now;
    std::fprintf(out_,
                 "epoch %lld/%lld %s %lld/%lld %3.0f%%  %s  lr %.3g  %.0f items/s  cpu %.0f%%  rss %.0f MB  ETA %s\n",
                 static_cast<long long>(e.epoch + 1), static_cast<long long>(e.epochs), split_name(e.split),
                 static_cast<long long>(e.iteration), static_cast<long long>(e.iterations), 100.0 * e.progress,
                 values_text(e.values).c_str(), e.lr, e.items_per_second, e.cpu_percent,
                 static_cast<double>(e.rss_bytes) / 1e6, format_duration(e.eta_seconds).c_str());
    std::fflush(out_);
  }
  void on_epoch_end(const EpochEnd& e) override {
    std::fprintf(out_, "epoch %lld train: %s  (%.1fs, lr %.3g)\n", static_cast<long long>(e.epoch + 1),
                 values_text(e.train).c_str(), e.seconds, e.lr);
    if (!e.valid.empty())
      std::fprintf(out_, "epoch %lld valid: %s%s\n", static_cast<long long>(e.epoch + 1), values_text(e.valid).c_str(),
                   e.best ? "  (best)" : "");
    std::fflush(out_);
  }
  void on_message(const std::string& t) override {
    std::fprintf(out_, "%s\n", t.c_str());
    std::fflush(out_);
  }
  void on_end(const std::string& m) override {
    std::fprintf(out_, "%s\n", m.c_str());
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  double every_;
  bool first_ = true;
  std::chrono::steady_clock::time_point last_;
};

class TeeRenderer : public Renderer {
 public:
  explicit TeeRenderer(std::vector<std::unique_ptr<Renderer>> r) : r_(std::move(r)) {}
  void on_start(const RunInfo& i) override {
    for (auto& r : r_) r->on_start(i);
  }
  void on_event(const MetricEvent& e) override {
    for (auto& r : r_) r->on_event(e);
  }
  void on_epoch_end(const EpochEnd& e) override {
    for (auto& r : r_) r->on_epoch_end(e);
  }
  void on_message(const std::string& t) override {
    for (auto& r : r_) r->on_message(t);
  }
  void on_end(const std::string& m) override {
    for (auto& r : r_) r->on_end(m);
  }
  bool stop_requested() override {
    bool any = false;
    for (auto& r : r_) any = r->stop_requested() || any;
    return any;
  }

 private:
  std::vector<std::unique_ptr<Renderer>> r_;
};

}  // namespace

std::string format_duration_for_dashboard(double s) { return format_duration(s); }

std::unique_ptr<Renderer> plain_renderer(std::FILE* out, double every_seconds) {
  return std::make_unique<PlainRenderer>(out ? out : stdout, every_seconds);
}

std::unique_ptr<Renderer> tee_renderer(std::vector<std::unique_ptr<Renderer>> renderers) {
  return std::make_unique<TeeRenderer>(std::move(renderers));
}

std::unique_ptr<Renderer> default_renderer() {
  const char* term = std::getenv("TERM");
  bool tty = isatty(0) && isatty(1) && term && *term && std::string(term) != "dumb";
  return tty ? dashboard_renderer() : plain_renderer(stdout);
}

}  // namespace kiln::train
