// SPDX-License-Identifier: MIT OR Apache-2.0
// The Learner: training and validation loops, checkpoints, resume, early stopping, safe stop.
#include "kiln/train/learner.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "checkpoint_writer.h"
#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/nn/loss.h"
#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/optimizer.h"
#include "kiln/store.h"
#if KILN_WITH_MPI
#include "kiln/dist.h"
#include "kiln/ops.h"
#endif

namespace kiln::train {
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};
volatile sig_atomic_t g_sigints = 0;

// First ^C: ask the loop to stop after the current step. Second: leave at once. Files are only
// ever written atomically (store::write_atomic), so an exit at any moment leaves no torn file.
void on_sigint(int) {
  if (g_sigints > 0) {
    static const char restore[] = "\x1b[?1049l\x1b[?25h";  // leave the dashboard's screen
    if (isatty(1)) (void)!write(1, restore, sizeof restore - 1);
    static const char msg[] = "\nkiln: interrupted again, exiting now (checkpoints on disk are complete)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(130);
  }
  g_sigints = 1;
  g_stop.store(true);
}

struct SigintScope {
  bool on;
  struct sigaction old {};
  explicit SigintScope(bool install) : on(install) {
    if (!on) return;
    g_sigints = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old);
  }
  ~SigintScope() {
    if (on) sigaction(SIGINT, &old, nullptr);
  }
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Running loss and metric values over one split of one epoch.
struct Accumulator {
  std::vector<std::shared_ptr<Metric>>* metrics;
  double loss_sum = 0;
  int64_t items = 0;
  void reset() {
    loss_sum = 0;
    items = 0;
    for (auto& m : *metrics) m->reset();
  }
  void add(double loss, const Tensor& out, const Tensor& target, int64_t n) {
    loss_sum += loss * static_cast<double>(n);
    items += n;
    if (out.defined())
      for (auto& m : *metrics) m->update(out, target);
  }
  MetricValues values() const {
    MetricValues v;
    v.emplace_back("loss", items ? loss_sum / static_cast<double>(items) : std::numeric_limits<double>::quiet_NaN());
    for (auto& m : *metrics) v.emplace_back(m->name(), m->value());
    return v;
  }
};

std::map<std::string, double> to_map(const MetricValues& v) { return {v.begin(), v.end()}; }

nlohmann::json history_json(const std::vector<EpochRecord>& h) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : h) {
    nlohmann::json e;
    e["epoch"] = r.epoch;
    e["train"] = r.train;
    e["valid"] = r.valid;
    e["lr"] = r.lr;
    e["seconds"] = r.seconds;
    j.push_back(e);
  }
  return j;
}

std::vector<EpochRecord> history_from(const std::string& s) {
  std::vector<EpochRecord> h;
  if (s.empty()) return h;
  nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
  if (!j.is_array()) return h;
  for (const auto& e : j) {
    EpochRecord r;
    r.epoch = e.value("epoch", int64_t{0});
    if (e.contains("train")) r.train = e["train"].get<std::map<std::string, double>>();
    if (e.contains("valid")) r.valid = e["valid"].get<std::map<std::string, double>>();
    r.lr = e.value("lr", 0.0);
    r.seconds = e.value("seconds", 0.0);
    h.push_back(std::move(r));
  }
  return h;
}

bool improves(double v, double best, Mode mode, double min_delta) {
  if (std::isnan(v)) return false;
  if (std::isnan(best)) return true;
  return mode == Mode::Min ? v < best - min_delta : v > best + min_delta;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double rate(double items, double secs) { return secs > 0 ? items / secs : 0.0; }
void ema(double& a, double x) { a = a == 0 ? x : 0.9 * a + 0.1 * x; }

/// The renderer of the ranks other than 0 under data parallelism: shows nothing.
class QuietRenderer final : public Renderer {
 public:
  void on_event(const MetricEvent&) override {}
};

/// Data parallelism of one fit() (LearnerConfig::data_parallel): the process group, the
/// gradient averaging, and the values the ranks must agree on. Inactive (one process) it does
/// nothing, and a build without MPI (KILN_WITH_MPI) is always one process.
struct Parallel {
  int rank = 0, world = 1;
#if KILN_WITH_MPI
  dist::ProcessGroup* pg = nullptr;
  std::unique_ptr<dist::DistributedDataParallel> ddp;
#endif
  bool active() const { return world > 1; }
  bool writer() const { return rank == 0; }

  /// Joins the job and shards the training data.
  void start(LearnerConfig& c) {
    if (!c.data_parallel) return;
#if KILN_WITH_MPI
    pg = &dist::init();
    rank = pg->rank();
    world = pg->size();
    if (active())
      KILN_CHECK(c.train->shard(static_cast<size_t>(rank), static_cast<size_t>(world)), "Learner",
                 "data_parallel: the training data cannot be sharded across the ranks (BatchSource::shard "
                 "returned false); use a data::DataLoader or implement shard()");
#else
    const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = std::getenv("PMI_SIZE");
    KILN_CHECK(!n || std::atoi(n) <= 1, "Learner",
               "data_parallel on " << n << " processes needs Kiln built with MPI (KILN_WITH_MPI=ON, libopenmpi-dev)");
#endif
  }
  /// After resume: every rank starts from rank 0's parameters and buffers.
  void make_ddp(LearnerConfig& c) {
#if KILN_WITH_MPI
    if (active())
      ddp = std::make_unique<dist::DistributedDataParallel>(
          *c.model, *pg, dist::DDPOptions{.bucket_bytes = c.ddp_bucket_bytes, .sync_batch_norm = c.sync_batch_norm});
#endif
  }
  /// Rank 0's buffers (batch-norm statistics) on every rank: before each step, before validation
  /// (every rank validates alike) and at the end (the replicas end equal).
  void sync_buffers() {
#if KILN_WITH_MPI
    if (ddp) ddp->sync_buffers();
#endif
  }
  /// Whether an accumulation window's gradients are averaged across the ranks once, when it
  /// ends (as PyTorch's no_sync), instead of after every batch. Not with synchronised batch norm,
  /// whose backward itself crosses the ranks.
  bool defer_averaging(const LearnerConfig& c) const {
#if KILN_WITH_MPI
    return ddp && c.accumulate > 1 && !c.sync_batch_norm;
#else
    (void)c;
    return false;
#endif
  }
  /// The gradients of the global batch (this rank holds n of its items); with `local`, this
  /// rank's own gradients (averaged later by average_window).
  Gradients backward(const Tensor& loss, int64_t n, bool local) {
#if KILN_WITH_MPI
    if (ddp && !local) return ddp->backward(loss, static_cast<double>(n));
#endif
    (void)n;
    return loss.backward();
  }
  /// A window's mean gradients of this rank's `items` items made the mean over every rank's.
  Gradients average_window(Gradients g, double items) {
#if KILN_WITH_MPI
    if (ddp) return ddp->average(std::move(g), items);
#endif
    (void)items;
    return g;
  }
  /// The global batch's loss from each rank's (over n items), and whether any rank wants to stop.
  /// Returns the global batch's items (n on one process).
  double agree_step(double& loss, int64_t n, bool& stop) {
#if KILN_WITH_MPI
    if (!active()) return static_cast<double>(n);
    std::vector<double> v{loss * static_cast<double>(n), static_cast<double>(n), stop ? 1.0 : 0.0};
    Tensor t = tensor(v, {3}, Device::cpu());
    pg->all_reduce(t, dist::ReduceOp::Sum);
    v = t.to_vector<double>();
    loss = v[1] > 0 ? v[0] / v[1] : loss;
    stop = v[2] > 0;
    return v[1];
#else
    (void)loss;
    (void)stop;
    return static_cast<double>(n);
#endif
  }
  /// Rank 0's values of per-epoch decisions (metrics of its shard could differ on the others).
  void agree(bool& a, bool& b) {
#if KILN_WITH_MPI
    if (!active()) return;
    Tensor t = tensor(std::vector<int32_t>{a ? 1 : 0, b ? 1 : 0}, {2}, Device::cpu());
    pg->broadcast(t, 0);
    std::vector<int32_t> v = t.to_vector<int32_t>();
    a = v[0] != 0;
    b = v[1] != 0;
#endif
  }
};

/// One fit() of a Learner: the run's folder and files, the state a checkpoint resumes (epoch,
/// steps, best and early-stopping values, history) and the loop's rates, shared by its phases:
/// resume, the CSV, then per epoch training, validation and the epoch's end.
struct FitRun {
  LearnerConfig& c;
  Parallel& par;
  Renderer& r;
  Summary s;
  fs::path ckdir;
  std::string last_path, best_path, csv_path, resume;
  std::error_code ec;
  // resumed state
  int64_t start_epoch = 0, skip_batches = 0, total_steps = 0, bad_epochs = 0;
  double best_value = std::numeric_limits<double>::quiet_NaN(), stop_best = best_value;
  std::vector<EpochRecord> history;
  // the CSV
  std::vector<std::string> names{"loss"};
  std::FILE* csv = nullptr;
  // the loop
  int64_t ntrain = 0, nvalid = 0, csv_every = 0;
  Accumulator acc;
  double t_train = 0, t_valid = 0;  // EMA of seconds per batch
  double total_batches = 0, last_ips = 0;
  ProcessStats prev_ps;
  Clock::time_point prev_ps_time;
  std::string end_message;
  // checkpoints: the writer, and the epochs (0-based) whose epoch-<N>.ckpt files exist
  detail::CheckpointWriter writer;
  std::vector<int64_t> saved_epochs;
  std::shared_ptr<CheckpointStrategy> strategy;
  // gradient accumulation: the window's weighted gradient sums, its batches and items
  std::optional<optim::GradientsAccumulator> grad_acc;
  int64_t window_batches = 0;
  double window_items = 0;
  double local_items = 0;  ///< this rank's items in the window (deferred averaging)
  bool deferred = false;   ///< Parallel::defer_averaging

  /// What one epoch's training left for its end: items, the last batch's rate and the rates.
  struct TrainEnd {
    MetricValues vals;
    double lr = 0, ips = 0, epoch_ips = 0;
  };
  /// What one epoch's validation left: its values, the last batch's rate and the epoch's rate.
  struct ValidEnd {
    MetricValues vals;
    double ips = 0, epoch_ips = 0;
  };

  /// Creates the run's folder (and its checkpoints folder) on the writing rank; throws when it
  /// cannot. `renderer`: the config's, or a quiet one on the other ranks.
  FitRun(LearnerConfig& config, Parallel& parallel, Renderer& renderer);
  ~FitRun() {
    if (csv) std::fclose(csv);
  }
  /// Loads the checkpoint named by c.resume ("last": the run's own, when present) and the state
  /// its extra fields hold.
  void load_resume();
  /// Opens metrics.csv (appended to on resume) and writes its header when new.
  void open_csv();
  /// One CSV row. batch_ips: the last batch's rate; epoch_ips: items of the split so far over
  /// its wall time.
  void csv_row(const char* split, int64_t epoch, int64_t it, double ep, const MetricValues& v, double lr,
               double batch_ips, double epoch_ips, double secs);
  /// The extra fields of a checkpoint: the state resume needs.
  std::map<std::string, std::string> extra_for(int64_t step_in_epoch) const;
  /// A copy of the state a checkpoint holds (model, optimizer, scheduler, RNG, resume fields).
  std::shared_ptr<const store::TensorMap> snapshot(int64_t epoch, int64_t step_in_epoch) const;
  /// Writes a checkpoint (atomically; in the background when asynchronous) at `path`.
  void save(const std::string& path, int64_t epoch, int64_t step_in_epoch);
  /// The epoch's checkpoint files: epoch-<N>.ckpt, last.ckpt, best.ckpt when `is_best`, then
  /// deletes the epoch files the strategy no longer keeps.
  void save_epoch(int64_t epoch, bool is_best);
  /// The epoch files already in the checkpoints folder (on resume).
  void scan_saved_epochs();
  /// The step of one batch (c.train_step, or forward then loss).
  StepOutput train_step(const data::Batch& b) const;
  /// An optimizer step with `grads`, then the scheduler when it steps per Step.
  void optimizer_step(const Gradients& grads);
  /// Steps the optimizer with the accumulated window's gradients (no-op when the window is empty).
  void flush_window();
  /// Tells the renderer the run starts; sets the loop's counts.
  void start();
  double lr_now() const { return c.optimizer->param_groups().empty() ? 0.0 : c.optimizer->lr(0); }
  Tensor to_device(const Tensor& t) const { return c.device && t.device() != *c.device ? t.to(*c.device) : t; }
  /// The renderer's event after batch `it` of `its`: values, rate, ETA and process stats.
  MetricEvent make_event(Split sp, int64_t epoch, int64_t it, int64_t its, double batch_items, double dt);
  /// Runs every epoch from start_epoch, until the last, a stop or early stopping.
  void run_epochs();
  /// One epoch; false when the loop ends after it.
  bool run_epoch(int64_t epoch);
  /// The training steps of one epoch (after the batches a mid-epoch resume skips); sets `it` to
  /// the batches done and returns true when a stop was requested.
  bool train_epoch(int64_t epoch, Clock::time_point epoch_start, int64_t& it, double& epoch_items);
  /// The validation pass of one epoch (none without validation data).
  ValidEnd validate(int64_t epoch);
  /// The epoch's record, CSV rows, best value, early stopping and checkpoints; false when the
  /// loop ends after it.
  bool end_epoch(int64_t epoch, Clock::time_point epoch_start, const TrainEnd& t, const ValidEnd& v);
  /// The closing message, the chart; returns the summary.
  Summary finish();
};

FitRun::FitRun(LearnerConfig& config, Parallel& parallel, Renderer& renderer)
    : c(config),
      par(parallel),
      r(renderer),
      acc{&config.metrics},
      writer(config.async_checkpoints, config.checkpoint_write),
      strategy(config.checkpointing ? config.checkpointing : keep_last(std::max<int64_t>(1, config.keep_last))) {
  if (c.accumulate > 1) grad_acc.emplace(c.model->parameters());
  s.dir = (fs::path(c.runs_dir) / c.name).string();
  ckdir = fs::path(s.dir) / "checkpoints";
  if (par.writer()) {
    fs::create_directories(ckdir, ec);
    KILN_CHECK(!ec, "Learner", "cannot create the run folder " + ckdir.string() + ": " + ec.message());
  }
  last_path = (ckdir / "last.ckpt").string();
  best_path = (ckdir / "best.ckpt").string();
}

void FitRun::load_resume() {
  resume = c.resume;
  if (resume == "last") resume = fs::exists(last_path) ? last_path : "";
  if (!resume.empty()) {
    store::Checkpoint ck;
    ck.model = c.model;
    ck.optimizer = c.optimizer;
    ck.scheduler = c.scheduler;
    store::load_checkpoint(resume, ck);
    start_epoch = ck.epoch;
    total_steps = ck.step;
    auto get = [&](const char* k) {
      auto it = ck.extra.find(k);
      return it == ck.extra.end() ? std::string() : it->second;
    };
    if (!get("step_in_epoch").empty()) skip_batches = std::stoll(get("step_in_epoch"));
    if (!get("best_value").empty()) best_value = std::stod(get("best_value"));
    if (!get("best_epoch").empty()) s.best_epoch = std::stoll(get("best_epoch"));
    if (!get("stop_best").empty()) stop_best = std::stod(get("stop_best"));
    if (!get("bad_epochs").empty()) bad_epochs = std::stoll(get("bad_epochs"));
    history = history_from(get("history"));
    if (fs::exists(best_path)) s.best_checkpoint = best_path;
    if (par.writer()) scan_saved_epochs();
  }
  s.epochs = history;
}

void FitRun::open_csv() {
  csv_path = (fs::path(s.dir) / "metrics.csv").string();
  for (auto& m : c.metrics) names.push_back(m->name());
  if (!par.writer()) return;
  bool append = !resume.empty() && fs::exists(csv_path);
  csv = std::fopen(csv_path.c_str(), append ? "a" : "w");
  KILN_CHECK(csv != nullptr, "Learner", "cannot write " + csv_path);
  if (!append) {
    std::fprintf(csv, "split,epoch,iteration,epoch_progress");
    for (auto& n : names) std::fprintf(csv, ",%s", n.c_str());
    std::fprintf(csv, ",lr,batch_items_per_second,epoch_items_per_second,seconds\n");
  }
}

void FitRun::csv_row(const char* split, int64_t epoch, int64_t it, double ep, const MetricValues& v, double lr,
                     double batch_ips, double epoch_ips, double secs) {
  if (!csv) return;
  std::fprintf(csv, "%s,%lld,%lld,%.6f", split, static_cast<long long>(epoch), static_cast<long long>(it), ep);
  for (auto& [n, x] : v) std::fprintf(csv, ",%.9g", x);
  std::fprintf(csv, ",%.9g,%.6g,%.6g,%.3f\n", lr, batch_ips, epoch_ips, secs);
  std::fflush(csv);
}

std::map<std::string, std::string> FitRun::extra_for(int64_t step_in_epoch) const {
  std::map<std::string, std::string> x;
  x["run"] = c.name;
  x["step_in_epoch"] = std::to_string(step_in_epoch);
  x["best_value"] = fmt("%.17g", best_value);
  x["best_epoch"] = std::to_string(s.best_epoch);
  x["stop_best"] = fmt("%.17g", stop_best);
  x["bad_epochs"] = std::to_string(bad_epochs);
  x["history"] = history_json(history).dump();
  return x;
}

std::shared_ptr<const store::TensorMap> FitRun::snapshot(int64_t epoch, int64_t step_in_epoch) const {
  store::Checkpoint ck;
  ck.model = c.model;
  ck.optimizer = c.optimizer;
  ck.scheduler = c.scheduler;
  ck.epoch = epoch;
  ck.step = total_steps;
  ck.extra = extra_for(step_in_epoch);
  return std::make_shared<const store::TensorMap>(store::checkpoint_to_tensors(ck));
}

void FitRun::save(const std::string& path, int64_t epoch, int64_t step_in_epoch) {
  if (!par.writer()) return;
  writer.save(path, snapshot(epoch, step_in_epoch));
}

void FitRun::save_epoch(int64_t epoch, bool is_best) {
  if (!par.writer()) return;
  auto snap = snapshot(epoch + 1, 0);
  writer.save(last_path, snap);
  writer.save((ckdir / ("epoch-" + std::to_string(epoch + 1) + ".ckpt")).string(), snap);
  if (is_best) writer.save(best_path, snap);
  saved_epochs.push_back(epoch);
  std::vector<int64_t> kept;
  for (int64_t e : saved_epochs) {
    if (strategy->keep(e, history))
      kept.push_back(e);
    else
      writer.remove((ckdir / ("epoch-" + std::to_string(e + 1) + ".ckpt")).string());
  }
  saved_epochs = std::move(kept);
}

void FitRun::scan_saved_epochs() {
  for (const auto& f : fs::directory_iterator(ckdir, ec)) {
    const std::string n = f.path().filename().string();
    if (n.rfind("epoch-", 0) != 0 || f.path().extension() != ".ckpt") continue;
    const std::string num = n.substr(6, n.size() - 11);
    if (!num.empty() && num.find_first_not_of("0123456789") == std::string::npos)
      saved_epochs.push_back(std::stoll(num) - 1);
  }
  std::sort(saved_epochs.begin(), saved_epochs.end());
}

StepOutput FitRun::train_step(const data::Batch& b) const {
  if (c.train_step) return c.train_step(b);
  StepOutput so{Tensor(), c.forward(b.input), b.target};
  so.loss = c.loss(so.output, so.target);
  return so;
}

void FitRun::optimizer_step(const Gradients& grads) {
  c.optimizer->step(grads);
  if (c.scheduler && c.scheduler_step == SchedulerStep::Step) c.scheduler->step();
}

void FitRun::flush_window() {
  if (!grad_acc || window_batches == 0) return;
  if (deferred)  // this rank's sums: one average across the ranks for the whole window
    optimizer_step(par.average_window(grad_acc->gradients(local_items > 0 ? 1.0 / local_items : 0.0), local_items));
  else
    optimizer_step(grad_acc->gradients(1.0 / window_items));
  grad_acc->reset();
  window_batches = 0;
  window_items = 0;
  local_items = 0;
}

void FitRun::start() {
  ntrain = static_cast<int64_t>(c.train->num_batches());
  nvalid = c.valid ? static_cast<int64_t>(c.valid->num_batches()) : 0;
  RunInfo info{c.name, s.dir, c.epochs, start_epoch, ntrain, nvalid, names};
  r.on_start(info);
  total_batches = static_cast<double>((ntrain + nvalid) * c.epochs);
  prev_ps = process_stats();
  prev_ps_time = Clock::now();
  csv_every = c.csv_rows_per_epoch > 0 ? std::max<int64_t>(1, ntrain / c.csv_rows_per_epoch) : 0;
}

MetricEvent FitRun::make_event(Split sp, int64_t epoch, int64_t it, int64_t its, double batch_items, double dt) {
  MetricEvent e;
  e.split = sp;
  e.epoch = epoch;
  e.epochs = c.epochs;
  e.iteration = it;
  e.iterations = its;
  double done = static_cast<double>(epoch * (ntrain + nvalid) + (sp == Split::Train ? it : ntrain + it));
  e.progress = total_batches > 0 ? std::min(1.0, done / total_batches) : 1.0;
  e.values = acc.values();
  e.lr = lr_now();
  e.items_per_second = dt > 0 ? batch_items / dt : 0;
  if (sp == Split::Train) last_ips = e.items_per_second;
  int64_t train_left = (c.epochs - epoch - 1) * ntrain + (sp == Split::Train ? ntrain - it : 0);
  int64_t valid_left = (c.epochs - epoch - 1) * nvalid + (sp == Split::Train ? nvalid : nvalid - it);
  e.eta_seconds = static_cast<double>(train_left) * t_train +
                  static_cast<double>(valid_left) * (t_valid > 0 ? t_valid : t_train * 0.4);
  ProcessStats ps = process_stats();
  double wall = seconds_since(prev_ps_time);
  e.cpu_percent = wall > 0 ? 100.0 * (ps.cpu_seconds - prev_ps.cpu_seconds) / wall : 0;
  prev_ps = ps;
  prev_ps_time = Clock::now();
  e.rss_bytes = ps.rss_bytes;
  e.kiln_bytes = ps.kiln_in_use;
  return e;
}

void FitRun::run_epochs() {
  for (int64_t epoch = start_epoch; epoch < c.epochs; ++epoch)
    if (!run_epoch(epoch)) break;
}

bool FitRun::run_epoch(int64_t epoch) {
  auto epoch_start = Clock::now();
  int64_t it = 0;
  double epoch_items = 0;  // training items of this epoch, for its rate
  if (train_epoch(epoch, epoch_start, it, epoch_items)) {
    s.stopped = true;
    bool at_end = it >= ntrain;
    // A stop on the epoch's last step still runs validation below; otherwise save mid-epoch.
    if (!at_end) {
      save(last_path, epoch, it);
      s.last_checkpoint = last_path;
      end_message = "Stopped at epoch " + std::to_string(epoch + 1) + "/" + std::to_string(c.epochs) + ", step " +
                    std::to_string(it) + "/" + std::to_string(ntrain) + ": checkpoint written to " + last_path +
                    " (resume to continue)";
      return false;
    }
  }
  TrainEnd t;
  t.vals = acc.values();
  t.lr = lr_now();
  t.ips = last_ips;
  t.epoch_ips = rate(epoch_items, seconds_since(epoch_start));
  par.sync_buffers();
  const ValidEnd v = validate(epoch);
  if (c.scheduler && c.scheduler_step == SchedulerStep::Epoch) c.scheduler->step();
  return end_epoch(epoch, epoch_start, t, v);
}

bool FitRun::train_epoch(int64_t epoch, Clock::time_point epoch_start, int64_t& it, double& epoch_items) {
  c.model->train();
  acc.reset();
  c.train->start_epoch(static_cast<uint64_t>(epoch));
  for (; it < skip_batches; ++it)
    if (!c.train->next()) break;
  skip_batches = 0;
  while (auto batch = c.train->next()) {
    auto t0 = Clock::now();
    data::Batch b{to_device(batch->input), to_device(batch->target)};
    int64_t n = b.input.dim() > 0 ? b.input.size(0) : 1;
    par.sync_buffers();
    StepOutput so = train_step(b);
    KILN_CHECK(so.loss.defined() && so.loss.numel() == 1, "Learner",
               "the training step must return a scalar loss, got "
                   << (so.loss.defined() ? to_string(so.loss.shape()) : std::string("undefined")));
    Gradients grads = par.backward(so.loss, n, deferred);
    double lv = so.loss.item<double>();
    // Data parallel: the global batch's loss and items, and a stop only when the ranks agree on it.
    bool stop_request = par.active() && (g_stop.load() || r.stop_requested());
    const double global_items = par.agree_step(lv, n, stop_request);
    if (grad_acc) {  // weighted by the batch's items, so every rank steps alike
      grad_acc->add(grads, deferred ? static_cast<double>(n) : global_items);
      window_items += global_items;
      local_items += static_cast<double>(n);
      if (++window_batches == c.accumulate) flush_window();
    } else {
      optimizer_step(grads);
    }
    acc.add(lv, so.output.defined() ? so.output.detach() : so.output, so.target, n);
    epoch_items += static_cast<double>(n);
    s.step_losses.push_back(lv);
    ++it;
    ++total_steps;
    ++s.steps;
    double dt = seconds_since(t0);
    ema(t_train, dt);
    MetricEvent e = make_event(Split::Train, epoch, it, ntrain, static_cast<double>(n), dt);
    r.on_event(e);
    if (csv_every > 0 && it % csv_every == 0 && it < ntrain)
      csv_row("train_step", epoch, it,
              static_cast<double>(epoch) + static_cast<double>(it) / std::max<int64_t>(1, ntrain), e.values, e.lr,
              e.items_per_second, rate(epoch_items, seconds_since(epoch_start)), seconds_since(epoch_start));
    const bool stop = par.active() ? stop_request : g_stop.load() || r.stop_requested();
    if (stop || (c.max_steps > 0 && s.steps >= c.max_steps)) {
      flush_window();
      return true;
    }
  }
  flush_window();
  return false;
}

FitRun::ValidEnd FitRun::validate(int64_t epoch) {
  ValidEnd v;
  if (!c.valid) return v;
  double valid_items = 0;
  c.model->eval();
  NoGradGuard ng;
  acc.reset();
  c.valid->start_epoch(static_cast<uint64_t>(epoch));
  int64_t vit = 0;
  const auto valid_start = Clock::now();
  while (auto batch = c.valid->next()) {
    auto t0 = Clock::now();
    data::Batch b{to_device(batch->input), to_device(batch->target)};
    StepOutput so = c.valid_step ? c.valid_step(b) : train_step(b);
    KILN_CHECK(so.loss.defined() && so.loss.numel() == 1, "Learner", "the validation step must return a scalar loss");
    double lv = so.loss.item<double>();
    int64_t n = b.input.dim() > 0 ? b.input.size(0) : 1;
    acc.add(lv, so.output, so.target, n);
    valid_items += static_cast<double>(n);
    ++vit;
    double dt = seconds_since(t0);
    ema(t_valid, dt);
    MetricEvent ve = make_event(Split::Valid, epoch, vit, nvalid, static_cast<double>(n), dt);
    v.ips = ve.items_per_second;
    r.on_event(ve);
  }
  v.epoch_ips = rate(valid_items, seconds_since(valid_start));
  v.vals = acc.values();
  c.model->train();
  return v;
}

bool FitRun::end_epoch(int64_t epoch, Clock::time_point epoch_start, const TrainEnd& t, const ValidEnd& v) {
  EpochRecord rec{epoch, to_map(t.vals), to_map(v.vals), t.lr, seconds_since(epoch_start)};
  history.push_back(rec);
  s.epochs.push_back(rec);
  csv_row("train", epoch, ntrain, static_cast<double>(epoch + 1), t.vals, t.lr, t.ips, t.epoch_ips, rec.seconds);
  if (c.valid)
    csv_row("valid", epoch, nvalid, static_cast<double>(epoch + 1), v.vals, t.lr, v.ips, v.epoch_ips, rec.seconds);
  double bv = monitored_value(rec, c.best.metric);
  bool is_best = improves(bv, best_value, c.best.mode, 0);
  bool early = false;
  if (c.patience > 0) {
    double sv = monitored_value(rec, c.early_stop.metric);
    if (improves(sv, stop_best, c.early_stop.mode, c.min_delta)) {
      stop_best = sv;
      bad_epochs = 0;
    } else if (++bad_epochs >= c.patience) {
      early = true;
    }
  }
  par.agree(is_best, early);
  if (is_best) {
    best_value = bv;
    s.best_epoch = epoch;
  }
  r.on_epoch_end(EpochEnd{epoch, t.vals, v.vals, t.lr, rec.seconds, is_best});
  if (c.keep_last > 0) {
    save_epoch(epoch, is_best);
    s.last_checkpoint = last_path;
    if (is_best) s.best_checkpoint = best_path;
    r.on_message("epoch " + std::to_string(epoch + 1) + ": checkpoint " +
                 (ckdir / ("epoch-" + std::to_string(epoch + 1) + ".ckpt")).string() + (is_best ? " (best)" : ""));
  } else if (s.stopped) {
    save(last_path, epoch + 1, 0);
    s.last_checkpoint = last_path;
  }
  if (s.stopped) {
    end_message = "Stopped after epoch " + std::to_string(epoch + 1) + "/" + std::to_string(c.epochs) +
                  ": checkpoint written to " + last_path + " (resume to continue)";
    return false;
  }
  if (early) {
    s.early_stopped = true;
    end_message = "Early stopping after epoch " + std::to_string(epoch + 1) + ": " + c.early_stop.metric +
                  " did not improve for " + std::to_string(c.patience) + " epochs";
    return false;
  }
  return true;
}

Summary FitRun::finish() {
  if (end_message.empty())
    end_message = "Finished " + std::to_string(c.epochs) + " epochs" +
                  (s.best_epoch >= 0 ? "; best " + c.best.metric + " " + fmt("%.4f", best_value) + " at epoch " +
                                           std::to_string(s.best_epoch + 1)
                                     : std::string());
  writer.wait();  // the checkpoints are on disk when fit() returns
  s.best_value = best_value;
  s.message = end_message;
  if (csv) {
    std::fflush(csv);
    try {
      chart_from_csv(csv_path, (fs::path(s.dir) / "metrics.png").string());
    } catch (const std::exception& ex) {
      r.on_message(std::string("could not write the chart: ") + ex.what());
    }
  }
  r.on_end(end_message);
  return s;
}

}  // namespace

int process_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

void Learner::request_stop() { g_stop.store(true); }
bool Learner::stop_pending() { return g_stop.load(); }

Learner::Learner(LearnerConfig config) : config_(std::move(config)) {
  KILN_CHECK(config_.model != nullptr && (config_.forward || config_.train_step), "Learner",
             "a model (and its forward, or a train_step) is required");
  KILN_CHECK(config_.accumulate >= 1, "Learner", "accumulate must be >= 1, got " << config_.accumulate);
  KILN_CHECK(config_.optimizer != nullptr, "Learner", "an optimizer is required");
  KILN_CHECK(config_.train != nullptr, "Learner", "training data (a data::BatchSource) is required");
  KILN_CHECK(config_.epochs >= 1, "Learner", "epochs must be >= 1, got " + std::to_string(config_.epochs));
  KILN_CHECK(config_.keep_last >= 0 && config_.patience >= 0 && config_.max_steps >= 0, "Learner",
             "keep_last, patience and max_steps must be >= 0");
  KILN_CHECK(!config_.name.empty() && config_.name.find('/') == std::string::npos && config_.name != "." &&
                 config_.name != "..",
             "Learner", "the run name must be a plain folder name, got '" + config_.name + "'");
  if (!config_.loss)
    config_.loss = [](const Tensor& out, const Tensor& t) { return nn::functional::cross_entropy(out, t); };
  if (!config_.renderer) config_.renderer = default_renderer();
}

Summary Learner::fit() {
  Parallel par;
  par.start(config_);
  QuietRenderer quiet;
  FitRun run(config_, par, par.writer() ? *config_.renderer : quiet);
  run.load_resume();
  par.make_ddp(config_);
  run.deferred = par.defer_averaging(config_);
  run.open_csv();
  SigintScope sigint(config_.handle_sigint);
  g_stop.store(false);
  run.start();
  try {
    run.run_epochs();
    par.sync_buffers();
  } catch (const std::exception& ex) {
    run.r.on_end(std::string("Training failed: ") + ex.what());
    throw;
  }
  return run.finish();
}

}  // namespace kiln::train
