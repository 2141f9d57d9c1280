// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Learner: training and validation loops with metrics, checkpoints, resume, early stopping,
// safe stopping (SIGINT or `q`) and a renderer (the dashboard). docs/training.md is the chapter.
//
//   auto learner = train::LearnerBuilder()
//                      .model(net)                      // any nn::Module with forward(x)
//                      .optimizer(opt)
//                      .scheduler(sched, train::SchedulerStep::Step)
//                      .metric(train::metrics::accuracy())
//                      .train_data(train_loader)        // data::BatchSource
//                      .valid_data(valid_loader)
//                      .epochs(5)
//                      .name("fashion")                 // runs/fashion/
//                      .build();
//   train::Summary s = learner.fit();
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/data/batch.h"
#include "kiln/nn/module.h"
#include "kiln/train/metrics.h"
#include "kiln/train/renderer.h"

namespace kiln::optim {
class Optimizer;
namespace lr_scheduler {
class LRScheduler;
}
}  // namespace kiln::optim

namespace kiln::store {
struct TensorMap;
}

namespace kiln::train {

/// The model's forward pass: input batch -> output.
using ForwardFn = std::function<Tensor(const Tensor&)>;
/// The loss: (output, target) -> a scalar tensor to minimise.
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

/// What a training or validation step returns: the loss (a scalar; in training the Learner
/// differentiates it), and the output and target the metrics see (an undefined output: the
/// metrics skip the batch).
struct StepOutput {
  Tensor loss;
  Tensor output;
  Tensor target;
};
/// A step of one's own over a batch (its input and target already on the Learner's device):
/// anything beyond forward + loss (several forwards, extra penalties, teacher forcing). In
/// validation it runs in eval mode under NoGradGuard.
using StepFn = std::function<StepOutput(const data::Batch& batch)>;

/// How a checkpoint's tensors reach the disk (default: store::save_safetensors, atomic).
using CheckpointWriteFn = std::function<void(const std::string& path, const store::TensorMap& tensors)>;

/// When the scheduler's step() is called.
enum class SchedulerStep { Epoch, Step };
/// Whether a monitored metric should go down or up.
enum class Mode { Min, Max };

/// A metric to watch: "valid_loss", "valid_accuracy", "train_loss", ... (split_name).
struct Monitor {
  std::string metric = "valid_loss";
  Mode mode = Mode::Min;
};

/// One epoch's final values.
struct EpochRecord {
  int64_t epoch = 0;
  std::map<std::string, double> train, valid;
  double lr = 0;
  double seconds = 0;
};

/// The value of a monitored metric ("valid_accuracy", "train_loss"; valid_ falls back to the
/// training values when there was no validation) in a record; NaN when absent.
double monitored_value(const EpochRecord& r, const std::string& metric);

/// Which epoch checkpoints (<dir>/checkpoints/epoch-<N>.ckpt) a run keeps. After each epoch's
/// checkpoint is written, every kept epoch file the strategy no longer keeps is deleted.
/// Compose with `|`: `keep_last(2) | keep_best({"valid_accuracy", Mode::Max})` keeps a file
/// that either keeps.
class CheckpointStrategy {
 public:
  virtual ~CheckpointStrategy() = default;
  /// Whether the checkpoint of `epoch` (0-based, a record in `history`) stays, given the
  /// records of every epoch so far (history.back() is the newest).
  virtual bool keep(int64_t epoch, const std::vector<EpochRecord>& history) const = 0;
};
/// The newest n epochs.
std::shared_ptr<CheckpointStrategy> keep_last(int64_t n);
/// The n epochs with the best values of `m` (ties: the earlier epoch); epochs without a value
/// (NaN) are not kept.
std::shared_ptr<CheckpointStrategy> keep_best(Monitor m, int64_t n = 1);
/// Keeps an epoch when any of `parts` keeps it.
std::shared_ptr<CheckpointStrategy> keep_any(std::vector<std::shared_ptr<CheckpointStrategy>> parts);
inline std::shared_ptr<CheckpointStrategy> operator|(std::shared_ptr<CheckpointStrategy> a,
                                                     std::shared_ptr<CheckpointStrategy> b) {
  return keep_any({std::move(a), std::move(b)});
}

/// Everything the Learner needs; LearnerBuilder fills it.
struct LearnerConfig {
  nn::Module* model = nullptr;
  ForwardFn forward;
  optim::Optimizer* optimizer = nullptr;
  optim::lr_scheduler::LRScheduler* scheduler = nullptr;
  SchedulerStep scheduler_step = SchedulerStep::Epoch;
  LossFn loss;  ///< default: nn::functional::cross_entropy
  std::vector<std::shared_ptr<Metric>> metrics;
  /// Inputs and targets are moved here when they are elsewhere. Training runs on it (give
  /// Device::cpu().autodiff() for a CPU model); validation runs under NoGradGuard and eval().
  std::optional<Device> device;
  int64_t epochs = 1;
  data::BatchSource* train = nullptr;
  data::BatchSource* valid = nullptr;
  /// The run's name and the folder runs go in: files land in <runs_dir>/<name>/.
  std::string name = "run";
  std::string runs_dir = "runs";
  /// Checkpoints: <dir>/checkpoints/epoch-<N>.ckpt (the last keep_last kept, or those
  /// `checkpointing` keeps), last.ckpt and best.ckpt (by `best`), each the model with its
  /// optimizer state (about 3x the model's size with Adam). keep_last = 0 disables checkpoints.
  int64_t keep_last = 2;
  Monitor best;
  /// Which epoch files stay (null: keep_last(keep_last)). last.ckpt and best.ckpt are kept
  /// besides.
  std::shared_ptr<CheckpointStrategy> checkpointing;
  /// Checkpoints are written by a background thread: the model and optimizer state are copied at
  /// the epoch's end, training goes on while the copy is written, and fit() waits for the writes
  /// before it returns (an error of a write is thrown there). Every file is written to a
  /// temporary name and renamed, so a crash during a write leaves the previous file intact.
  bool async_checkpoints = true;
  /// How checkpoint files are written (empty: store::save_safetensors).
  CheckpointWriteFn checkpoint_write;
  /// Gradient accumulation: the optimizer steps once every `accumulate` batches (and at the
  /// end of an epoch), with the gradients of those batches averaged by their items: the update
  /// of one step on their concatenation when the loss is a mean over the batch. Losses, metrics,
  /// max_steps and resume count batches; schedulers stepped per Step count optimizer steps. A
  /// stop in the middle of a window applies the window's gradients first. Data parallel, the
  /// ranks average a window's gradients once, when it ends, not after each batch (unless batch
  /// norm is synchronised, whose backward itself crosses the ranks).
  int64_t accumulate = 1;
  /// Steps of one's own (empty: forward then loss). train_step's loss is differentiated;
  /// valid_step (default: train_step when given, else forward + loss) runs in eval mode
  /// without gradients.
  StepFn train_step, valid_step;
  /// Early stopping: stop after `patience` epochs without an improvement of `min_delta` in
  /// `early_stop.metric` (patience 0: off).
  Monitor early_stop;
  int64_t patience = 0;
  double min_delta = 0;
  /// Resume from this checkpoint ("" : start fresh; "last": <dir>/checkpoints/last.ckpt when it
  /// exists).
  std::string resume;
  /// Renderer (default: default_renderer()). A CSV file and a PNG chart are always written.
  std::shared_ptr<Renderer> renderer;
  /// Install a SIGINT handler during fit(): the first ^C stops after the current step with a
  /// checkpoint, the second exits at once (status 130).
  bool handle_sigint = true;
  /// Stop after this many training steps in total (tests; 0: no limit), like a stop request.
  int64_t max_steps = 0;
  /// Rows of running training values written to metrics.csv per epoch (besides epoch rows).
  int64_t csv_rows_per_epoch = 20;
  /// Data-parallel training over the processes of a job (docs/distributed.md): every process runs
  /// the same program (`mpirun -np 2 ./train`, `srun ./train`). The parameters and buffers start as
  /// rank 0's; the training data is sharded (its BatchSource must support shard(), as DataLoader
  /// does; each batch is cut across the ranks, so the global batch is one process's batch); the
  /// gradients are averaged over the ranks during backward (kiln::dist::DistributedDataParallel),
  /// weighted by each rank's share of the batch; the reported training loss is the global batch's.
  /// Every rank validates on the whole validation set. Only rank 0 writes the run folder
  /// (checkpoints, metrics, chart) and renders; the others show nothing. A checkpoint resumes on
  /// any number of processes. Without a launcher this is plain training; on several processes it
  /// needs Kiln built with MPI (KILN_WITH_MPI).
  bool data_parallel = false;
  /// Gradient bytes per all-reduce bucket under data_parallel (dist::DDPOptions::bucket_bytes).
  size_t ddp_bucket_bytes = size_t{1} << 20;
  /// Under data_parallel, the model's batch norms normalise with the statistics of the global
  /// batch (dist::convert_sync_batch_norm), so training matches one process on the whole batch.
  bool sync_batch_norm = false;
};

/// What fit() returns.
struct Summary {
  std::vector<EpochRecord> epochs;  ///< every completed epoch, including those before a resume
  int64_t best_epoch = -1;          ///< by config.best (-1: none)
  double best_value = 0;
  bool stopped = false;  ///< stopped by SIGINT, `q` or max_steps
  bool early_stopped = false;
  int64_t steps = 0;                             ///< training steps done in total
  std::string message;                           ///< why the run ended
  std::string dir;                               ///< the run's folder
  std::string last_checkpoint, best_checkpoint;  ///< paths ("" when none)
  std::vector<double> step_losses;               ///< loss of every training step of this fit() call
};

/// Runs training. The model is trained in place: after fit() it holds the final weights
/// (load best_checkpoint with store::load_checkpoint for the best ones).
class Learner {
 public:
  explicit Learner(LearnerConfig config);
  Summary fit();
  const LearnerConfig& config() const { return config_; }
  /// An Evaluator with this Learner's model, steps, loss, metrics (the same objects) and device.
  class Evaluator evaluator() const;
  /// Asks a running fit() to stop after the current step (thread- and signal-safe).
  static void request_stop();
  /// True once a stop was requested (cleared when fit() starts).
  static bool stop_pending();

 private:
  LearnerConfig config_;
};

/// This process's rank in a job started by a launcher (mpirun, srun), read from the environment;
/// 0 without one. Programs that train with data_parallel print only on rank 0.
int process_rank();

/// Fluent construction of a Learner.
class LearnerBuilder {
 public:
  /// A module with `Tensor forward(const Tensor&)` (const or not); the module must outlive
  /// the Learner.
  template <class M>
  requires requires(M& m, const Tensor& x) {
    { m.forward(x) } -> std::convertible_to<Tensor>;
  }
  LearnerBuilder& model(M& m) {
    c_.model = &m;
    c_.forward = [&m](const Tensor& x) -> Tensor { return m.forward(x); };
    return *this;
  }
  /// A module and a separate forward function.
  LearnerBuilder& model(nn::Module& m, ForwardFn forward) {
    c_.model = &m;
    c_.forward = std::move(forward);
    return *this;
  }
  LearnerBuilder& optimizer(optim::Optimizer& o) {
    c_.optimizer = &o;
    return *this;
  }
  LearnerBuilder& scheduler(optim::lr_scheduler::LRScheduler& s, SchedulerStep when = SchedulerStep::Epoch) {
    c_.scheduler = &s;
    c_.scheduler_step = when;
    return *this;
  }
  LearnerBuilder& loss(LossFn f) {
    c_.loss = std::move(f);
    return *this;
  }
  LearnerBuilder& metric(std::shared_ptr<Metric> m) {
    c_.metrics.push_back(std::move(m));
    return *this;
  }
  LearnerBuilder& device(const Device& d) {
    c_.device = d;
    return *this;
  }
  LearnerBuilder& epochs(int64_t n) {
    c_.epochs = n;
    return *this;
  }
  LearnerBuilder& train_data(data::BatchSource& s) {
    c_.train = &s;
    return *this;
  }
  LearnerBuilder& valid_data(data::BatchSource& s) {
    c_.valid = &s;
    return *this;
  }
  LearnerBuilder& name(std::string n) {
    c_.name = std::move(n);
    return *this;
  }
  LearnerBuilder& runs_dir(std::string d) {
    c_.runs_dir = std::move(d);
    return *this;
  }
  LearnerBuilder& checkpoints(int64_t keep_last, Monitor best = {}) {
    c_.keep_last = keep_last;
    c_.best = std::move(best);
    return *this;
  }
  /// LearnerConfig::checkpointing (checkpoints(keep_last) must be > 0 for any to be written).
  LearnerBuilder& checkpointing(std::shared_ptr<CheckpointStrategy> s) {
    c_.checkpointing = std::move(s);
    return *this;
  }
  /// LearnerConfig::async_checkpoints.
  LearnerBuilder& async_checkpoints(bool on) {
    c_.async_checkpoints = on;
    return *this;
  }
  /// LearnerConfig::accumulate: one optimizer step every n batches.
  LearnerBuilder& accumulate(int64_t n) {
    c_.accumulate = n;
    return *this;
  }
  /// LearnerConfig::train_step / valid_step.
  LearnerBuilder& train_step(StepFn f) {
    c_.train_step = std::move(f);
    return *this;
  }
  LearnerBuilder& valid_step(StepFn f) {
    c_.valid_step = std::move(f);
    return *this;
  }
  LearnerBuilder& early_stopping(Monitor m, int64_t patience, double min_delta = 0) {
    c_.early_stop = std::move(m);
    c_.patience = patience;
    c_.min_delta = min_delta;
    return *this;
  }
  LearnerBuilder& resume(std::string path = "last") {
    c_.resume = std::move(path);
    return *this;
  }
  LearnerBuilder& renderer(std::shared_ptr<Renderer> r) {
    c_.renderer = std::move(r);
    return *this;
  }
  LearnerBuilder& handle_sigint(bool on) {
    c_.handle_sigint = on;
    return *this;
  }
  LearnerBuilder& max_steps(int64_t n) {
    c_.max_steps = n;
    return *this;
  }
  /// LearnerConfig::data_parallel.
  LearnerBuilder& data_parallel(bool on = true) {
    c_.data_parallel = on;
    return *this;
  }
  /// LearnerConfig::sync_batch_norm.
  LearnerBuilder& sync_batch_norm(bool on = true) {
    c_.sync_batch_norm = on;
    return *this;
  }
  /// The configuration so far (to adjust fields without a builder method).
  LearnerConfig& config() { return c_; }
  Learner build() { return Learner(c_); }

 private:
  LearnerConfig c_;
};

}  // namespace kiln::train
