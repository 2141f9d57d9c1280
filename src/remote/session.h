// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A remote client's session on the server (docs/remote.md): its own table of buffers on the
// server's device, its memory quota and its pending error. Knows nothing of the network: the
// server hands it each Batch frame and sends the replies it returns, so the fuzz target and the
// tests drive it directly.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "remote/protocol.h"

namespace kiln::remote {

/// One frame to send back: `head`, then `body_n` bytes at `body` (the buffer's memory, or `owned`).
struct Reply {
  Reply() = default;
  explicit Reply(std::vector<uint8_t> h) : head(std::move(h)) {}
  std::vector<uint8_t> head;
  const void* body = nullptr;
  size_t body_n = 0;
  std::vector<uint8_t> owned;  ///< the body when it had to be copied out of device memory
};
/// Sends a reply at once (the server writes it to the connection); its body is valid only
/// during the call. An exception it throws (the connection is gone) ends run_batch.
using Emit = std::function<void(const Reply&)>;

class Session {
 public:
  /// A session on `backend`; ops of all sessions run one at a time under `exec_mu`.
  Session(Backend* backend, const Limits& limits, std::mutex* exec_mu);
  /// Frees every buffer the session still holds.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs one Batch frame, emitting one reply per Read and Sync record as it gets there (so a
  /// reply holds at most one frame's bytes, and shows the buffer as it is at that record). A
  /// malformed frame throws kiln::Error before anything of it runs (the server then closes the
  /// connection); a record that fails its checks (an unknown id, a range past its buffer, the
  /// quota, an op whose shapes do not infer) or its execution sets the session's error instead:
  /// the work after it is skipped (allocations and frees still run) until a Read or Sync reports it.
  void run_batch(const uint8_t* data, size_t size, const Emit& emit);
  /// The same, collecting the replies (each body copied into Reply::owned).
  void run_batch(const uint8_t* data, size_t size, std::vector<Reply>& replies);

  /// A Batch frame that is one Write record of at least kDirectWriteMin bytes may have its
  /// payload read straight into the buffer: given the frame's first `n` bytes (at least
  /// kWriteHead), returns where the payload's first byte goes and sets *payload to its length
  /// when the record passes every check run_batch would make, no error is pending and the
  /// buffer is host memory; otherwise nullptr, and the frame takes the usual path. The caller
  /// must then fill exactly *payload bytes and refuse a frame that holds more or fewer.
  uint8_t* direct_write(const uint8_t* head, size_t n, uint64_t* payload);
  static constexpr size_t kWriteHead = 4 + 1 + 4 + 1 + 8 + 8 + 8;  ///< magic, type, count, tag, id, offset, n
  static constexpr uint64_t kDirectWriteMin = 256 << 10;

  uint64_t bytes_in_use() const { return used_; }
  size_t buffers() const { return bufs_.size(); }
  /// The error waiting for the client's next Read or Sync (empty: none).
  const std::string& pending_error() const { return error_; }

 private:
  Backend* backend_;
  Limits limits_;
  std::mutex* exec_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Storage>> bufs_;
  uint64_t used_ = 0;
  std::chrono::steady_clock::time_point window_{};  // the op-rate window (Limits::max_ops_per_s)
  uint64_t window_ops_ = 0;
  void throttle();
  std::string error_;

  Storage& find(uint64_t id, const char* what);
  void check_range(const Storage& s, uint64_t id, uint64_t offset, uint64_t n, const char* what);
  void apply(const Record& r);
  void alloc(const Record& r);
  void exec(const Record& r);
  void read(const Record& r, const Emit& emit);
  void sync(const Emit& emit);
};

}  // namespace kiln::remote
