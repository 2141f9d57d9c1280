// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// kiln::store: weights and checkpoints.
//
//   store::save(model, "model.safetensors");                    // PyTorch's state_dict names
//   auto report = store::load(model, "resnet.pth");            // .pt/.pth or .safetensors
//   auto report = store::load(model, "ckpt.pt", {.strict = false,
//                                                .remap = {{"^module\\.", ""}}});
//   store::save_checkpoint("run/last.ckpt", {.model = &model, .optimizer = &opt, .epoch = 3});
//
// Every write goes to a temporary file in the target's folder, is synced, then renamed over the
// target: a crash leaves the old file or the new one, never a torn file. Readers treat files as
// hostile: any malformed input raises kiln::Error naming the file and the problem.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::nn {
class Module;
}
namespace kiln::optim {
class Optimizer;
namespace lr_scheduler {
class LRScheduler;
class ReduceLROnPlateau;
}  // namespace lr_scheduler
}  // namespace kiln::optim

namespace kiln::store {

/// Named tensors in file order, plus string metadata: what a weights file holds.
struct TensorMap {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  /// The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
};

/// File formats, chosen from the content (magic bytes) when Auto.
enum class Format { Auto, Safetensors, Torch };

/// Options for reading a weights file into a TensorMap.
struct ReadOptions {
  Device device = Device::cpu();  ///< where the tensors go
  /// Memory-map the file and use its bytes as tensor storage without a copy where the device
  /// uses host memory in place (the CPU; a GPU with unified memory that imports it: lavapipe,
  /// integrated GPUs) and alignment allows (safetensors). The mapping lives as long as any tensor.
  bool mmap = true;
  Format format = Format::Auto;
};

// ---- safetensors (read and write, every dtype, metadata) ---------------------------------

/// Writes `tensors` (any device, dtype, strides) and string metadata as a safetensors file,
/// atomically. Names must be unique and non-empty.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
/// Reads a safetensors file.
TensorMap load_safetensors(const std::string& path, const ReadOptions& options = {});
/// Parses safetensors bytes held in memory (`name` is used in error messages). Copies the data.
TensorMap parse_safetensors(const void* data, size_t size, const std::string& name = "<memory>",
                            const Device& device = Device::cpu());

// ---- PyTorch .pt / .pth (read) -----------------------------------------------------------

/// Reads a file written by torch.save: the zip format (PyTorch >= 1.6) or the legacy format,
/// through a restricted unpickler that accepts only what state dicts need. Nested containers
/// are flattened with dotted names: {"model": {"fc.weight": t}, "epoch": 3} gives the tensor
/// "model.fc.weight" and the metadata entry "epoch" = "3" (numbers, strings, bools and None as
/// text). List elements are named by their index. Tensors that share a storage stay views of
/// one buffer.
TensorMap load_torch(const std::string& path, const ReadOptions& options = {});
/// The same from bytes held in memory.
TensorMap parse_torch(const void* data, size_t size, const std::string& name = "<memory>",
                      const Device& device = Device::cpu());

/// Reads either format (by content).
TensorMap read(const std::string& path, const ReadOptions& options = {});

// ---- loading into a module ---------------------------------------------------------------

/// Options of load(model, ...).
struct LoadOptions {
  /// Throw (with the whole report) unless every parameter and buffer of the model was filled
  /// and every tensor in the file was used.
  bool strict = true;
  /// Regex rewrites applied in order to each file key before matching: {"^module\\.", ""}.
  std::vector<std::pair<std::string, std::string>> remap;
  /// Regexes on the (remapped) key: when `include` is non-empty a key must match one of them;
  /// a key matching any `exclude` is skipped (reported as skipped, not unexpected). The model's
  /// keys are filtered the same way: one filtered out is left as it is and not reported as
  /// missing, so `{.exclude = {"^fc\\."}}` loads a backbone strictly and keeps a fresh head.
  std::vector<std::string> include, exclude;
  /// Convert a tensor whose dtype differs from the parameter's (an f16 file into an f32 model).
  /// When false such a tensor is reported as a dtype mismatch.
  bool convert_dtype = true;
  Format format = Format::Auto;
};

/// What load() did, key by key.
struct LoadReport {
  struct Mismatch {
    std::string key;
    std::string expected;  ///< the model's shape/dtype, e.g. "[64, 3, 7, 7] f32"
    std::string found;     ///< the file's
  };
  std::vector<std::string> applied;     ///< model keys filled
  std::vector<std::string> missing;     ///< model keys the file did not provide
  std::vector<std::string> unexpected;  ///< file keys (after remap) the model does not have
  std::vector<std::string> skipped;     ///< file keys filtered out by include/exclude
  std::vector<Mismatch> mismatched;     ///< present in both with another shape (or dtype)
  /// True when nothing is missing, unexpected or mismatched.
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  /// A readable multi-line summary.
  std::string str() const;
};

/// Fills the model's parameters and buffers by name (PyTorch's state_dict names) from a
/// .safetensors or .pt/.pth file. Values are copied into the existing tensors, so they stay on
/// the model's device and keep their gradient tracking.
LoadReport load(nn::Module& model, const std::string& path, const LoadOptions& options = {});
/// The same from tensors already read.
LoadReport load(nn::Module& model, const TensorMap& tensors, const LoadOptions& options = {});
/// Saves the model's parameters and buffers (state()) as safetensors, atomically.
void save(nn::Module& model, const std::string& path, const std::map<std::string, std::string>& metadata = {});

// ---- checkpoints -------------------------------------------------------------------------

/// What a training checkpoint holds. Pointers left null are neither saved nor restored.
struct Checkpoint {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  optim::lr_scheduler::LRScheduler* scheduler = nullptr;
  optim::lr_scheduler::ReduceLROnPlateau* plateau = nullptr;
  int64_t epoch = 0;
  int64_t step = 0;
  /// Free-form entries (best metric so far, run name...), saved and restored.
  std::map<std::string, std::string> extra;
  /// Save and restore the global random generator (kiln::rng_state()).
  bool rng = true;
};

/// Writes model, optimizer, scheduler, RNG state, epoch/step and `extra` to one file,
/// atomically. The format is safetensors (tensors "model.<name>", "optimizer.<name>") with the
/// rest as JSON in its metadata, so Python's safetensors can read it.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);
/// Restores what save_checkpoint wrote into the objects `ckpt` points to and fills epoch, step
/// and extra. The model and optimizer must have the same structure as when saved. Everything
/// is checked before anything is modified: a checkpoint of another model (or one lacking a part
/// that `ckpt` asks for) throws kiln::Error naming the missing or mismatched keys and leaves
/// the model, optimizer, schedulers and RNG as they were.
void load_checkpoint(const std::string& path, Checkpoint& ckpt);
/// What save_checkpoint writes, as tensors (copies) and metadata: a checkpoint kept in memory.
TensorMap checkpoint_to_tensors(const Checkpoint& ckpt);
/// What load_checkpoint does once the file is read (`name` is used in error messages).
void checkpoint_from_tensors(const TensorMap& tensors, Checkpoint& ckpt, const std::string& name = "<memory>");

// ---- atomic files ------------------------------------------------------------------------

/// Writes a file atomically: `write(fd)` writes the contents to a temporary file in the same
/// folder (a POSIX file descriptor); it is then flushed, fsynced and renamed over `path`, and
/// the folder is fsynced. If `write` throws, the temporary file is removed and `path` is left
/// untouched.
void write_atomic(const std::string& path, const std::function<void(int fd)>& write);
/// Writes all of [data, data + n) to fd (retrying short writes); throws on error.
void write_all(int fd, const void* data, size_t n, const std::string& path);

}  // namespace kiln::store
