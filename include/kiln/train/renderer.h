// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Renderers receive the Learner's metric events: the ncurses dashboard, plain lines for logs,
// or your own (derive from Renderer; examples/custom-renderer does).
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::train {

/// Which loop an event comes from.
enum class Split { Train, Valid };
/// "train" or "valid".
const char* split_name(Split s);

/// Named values, in a fixed order for a run ("loss", "accuracy", ...).
using MetricValues = std::vector<std::pair<std::string, double>>;

/// Sent once before the first step.
struct RunInfo {
  std::string name;                       ///< the run's name (runs/<name>/)
  std::string dir;                        ///< the run's folder
  int64_t epochs = 0;                     ///< total epochs
  int64_t start_epoch = 0;                ///< first epoch run (> 0 after resume)
  int64_t train_iterations = 0;           ///< training batches per epoch
  int64_t valid_iterations = 0;           ///< validation batches per epoch (0: none)
  std::vector<std::string> metric_names;  ///< the names every event carries, loss first
};

/// Sent after every step of the training loop and every batch of the validation loop.
struct MetricEvent {
  Split split = Split::Train;
  int64_t epoch = 0;  ///< 0-based
  int64_t epochs = 0;
  int64_t iteration = 0;   ///< 1-based within this split of this epoch
  int64_t iterations = 0;  ///< batches in this split of this epoch
  double progress = 0;     ///< fraction of the whole run done, in [0, 1]
  MetricValues values;     ///< running values over this epoch so far (loss first)
  double lr = 0;           ///< learning rate of the first parameter group
  double items_per_second = 0;
  double eta_seconds = 0;  ///< estimate for the rest of the run
  double cpu_percent = 0;  ///< process CPU use since the previous event (100 = one core)
  int64_t rss_bytes = 0;   ///< resident memory
  int64_t kiln_bytes = 0;  ///< kiln::memory_stats(cpu).in_use
};

/// Sent after each epoch with the final values of both splits.
struct EpochEnd {
  int64_t epoch = 0;
  MetricValues train, valid;  ///< valid is empty without validation data
  double lr = 0;
  double seconds = 0;
  bool best = false;  ///< this epoch is the best so far by the monitored metric
};

/// Receives events from the Learner (all calls come from the training thread).
class Renderer {
 public:
  virtual ~Renderer() = default;
  virtual void on_start(const RunInfo& /*info*/) {}
  virtual void on_event(const MetricEvent& e) = 0;
  virtual void on_epoch_end(const EpochEnd& /*e*/) {}
  /// A line to show to the user (checkpoint written, stop requested...).
  virtual void on_message(const std::string& /*text*/) {}
  /// The run is over; `message` says why (finished, stopped, early stopping).
  virtual void on_end(const std::string& /*message*/) {}
  /// Polled after each step: true when the user asked to stop (the dashboard's `q`).
  virtual bool stop_requested() { return false; }
};

/// Plain lines on `out` (no escape codes): one line per epoch and split, plus a progress line
/// at most every `every_seconds` seconds (0: every event).
std::unique_ptr<Renderer> plain_renderer(std::FILE* out = stdout, double every_seconds = 2.0);
/// The ncurses dashboard on the terminal: curves of each metric for both splits, progress bar
/// with ETA, left/right to switch metric, `h` to toggle recent / full history, `q` to stop.
std::unique_ptr<Renderer> dashboard_renderer();
/// The dashboard when stdin and stdout are terminals and TERM is set (not "dumb"), plain lines
/// on stdout otherwise.
std::unique_ptr<Renderer> default_renderer();
/// Forwards every event to each renderer in turn (stop is requested when any requests it).
std::unique_ptr<Renderer> tee_renderer(std::vector<std::unique_ptr<Renderer>> renderers);
/// The same for renderers given one by one, built-in or your own:
/// `tee_renderer(plain_renderer(), std::make_unique<MyRenderer>())`.
template <class... R>
requires(sizeof...(R) > 0 && (std::is_convertible_v<R&&, std::unique_ptr<Renderer>> &&
                              ...)) std::unique_ptr<Renderer> tee_renderer(R&&... renderers) {
  std::vector<std::unique_ptr<Renderer>> v;
  v.reserve(sizeof...(R));
  (v.push_back(std::unique_ptr<Renderer>(std::forward<R>(renderers))), ...);
  return tee_renderer(std::move(v));
}

/// One renderer of a braced list given to tee_renderer; holds it until the tee takes it.
class RendererArg {
 public:
  template <class R>
  requires std::is_convertible_v<R&&, std::unique_ptr<Renderer>> RendererArg(R&& r)
      : p_(std::forward<R>(r)) {}  // NOLINT(google-explicit-constructor)
  std::unique_ptr<Renderer> take() const { return std::move(p_); }

 private:
  mutable std::unique_ptr<Renderer> p_;  // a list's elements are const: taking moves out
};
/// The same for a braced list: `tee_renderer({plain_renderer(), std::make_unique<MyRenderer>()})`.
inline std::unique_ptr<Renderer> tee_renderer(std::initializer_list<RendererArg> renderers) {
  std::vector<std::unique_ptr<Renderer>> v;
  v.reserve(renderers.size());
  for (const RendererArg& r : renderers) v.push_back(r.take());
  return tee_renderer(std::move(v));
}

/// One curve of a chart.
struct Series {
  std::string label;
  std::vector<double> x, y;
};
/// Writes a PNG line chart (axes, ticks, one coloured curve per series, a legend) of the given
/// panels, one panel per metric laid out in a grid. Throws kiln::Error when it cannot write.
void write_chart_png(const std::string& path, const std::vector<std::pair<std::string, std::vector<Series>>>& panels,
                     int panel_width = 480, int panel_height = 300);
/// Renders a chart of runs/<name>/metrics.csv (as the Learner writes it) to `png_path`: one
/// panel per metric, train and valid epoch values against the epoch.
void chart_from_csv(const std::string& csv_path, const std::string& png_path);

}  // namespace kiln::train
