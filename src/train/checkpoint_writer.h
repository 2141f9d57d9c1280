// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Learner's checkpoint writer: writes snapshots (copies) of the training state in order, on a
// background thread when asynchronous, and deletes files after the writes queued before.
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/store.h"
#include "kiln/train/learner.h"

namespace kiln::train::detail {

class CheckpointWriter {
 public:
  /// `write` empty: store::save_safetensors.
  CheckpointWriter(bool async, CheckpointWriteFn write);
  /// Waits for the queued work (errors are dropped: call wait() to see them).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  /// Writes `tensors` to `path` (now, or queued). Throws an earlier write's error.
  void save(const std::string& path, std::shared_ptr<const store::TensorMap> tensors);
  /// Deletes `path` once the writes queued before are done (a missing file is no error).
  void remove(const std::string& path);
  /// Waits until the queue is empty; throws the first error of a write (once).
  void wait();

 private:
  struct Job {
    std::string path;
    std::shared_ptr<const store::TensorMap> tensors;  // null: delete the file
  };
  void run(const Job& j);
  void loop();
  void push(Job j);

  bool async_;
  CheckpointWriteFn write_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool busy_ = false, closing_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace kiln::train::detail
