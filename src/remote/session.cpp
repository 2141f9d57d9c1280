// SPDX-License-Identifier: MIT OR Apache-2.0
// The server side of a remote session (session.h): every record checked against the session's
// own buffers before it runs.
#include "remote/session.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <thread>

#include "core/checked.h"
#include "kiln/error.h"

namespace kiln::remote {

namespace {
constexpr const char* kOp = "remote";
}

Session::Session(Backend* backend, const Limits& limits, std::mutex* exec_mu)
    : backend_(backend), limits_(limits), exec_mu_(exec_mu) {}

Session::~Session() {
  std::lock_guard<std::mutex> lock(*exec_mu_);
  bufs_.clear();
}

Storage& Session::find(uint64_t id, const char* what) {
  auto it = bufs_.find(id);
  KILN_CHECK(it != bufs_.end(), kOp,
             what << ": buffer id " << static_cast<long long>(id) << " is not one of this session's");
  return *it->second;
}

void Session::check_range(const Storage& s, uint64_t id, uint64_t offset, uint64_t n, const char* what) {
  KILN_CHECK(offset <= s.nbytes && n <= s.nbytes - offset, kOp,
             what << ": bytes [" << static_cast<long long>(offset) << ", +" << static_cast<long long>(n)
                  << ") outside buffer " << static_cast<long long>(id) << " of " << static_cast<long long>(s.nbytes)
                  << " bytes");
}

void Session::run_batch(const uint8_t* data, size_t size, const Emit& emit) {
  const std::vector<Record> records = decode_batch(data, size, limits_);  // throws: fatal
  for (const Record& r : records) {
    // Replies go out from here, outside the handlers of record errors: a failed send ends the batch.
    if (r.tag == RecordTag::Read) {
      read(r, emit);
      continue;
    }
    if (r.tag == RecordTag::Sync) {
      sync(emit);
      continue;
    }
    // After an error, work is skipped until it is reported; allocations and frees still run so
    // that the session's ids stay the client's.
    if (!error_.empty() && (r.tag == RecordTag::Write || r.tag == RecordTag::Exec)) continue;
    try {
      apply(r);
    } catch (const std::bad_alloc&) {
      if (error_.empty()) error_ = "[remote] the server is out of memory";
    } catch (const std::exception& e) {
      if (error_.empty()) error_ = e.what();
    }
  }
}

void Session::run_batch(const uint8_t* data, size_t size, std::vector<Reply>& replies) {
  run_batch(data, size, [&](const Reply& r) {
    Reply c(r.head);
    c.owned.assign(static_cast<const uint8_t*>(r.body), static_cast<const uint8_t*>(r.body) + r.body_n);
    c.body = c.owned.data();
    c.body_n = r.body_n;
    replies.push_back(std::move(c));
  });
}

uint8_t* Session::direct_write(const uint8_t* head, size_t n, uint64_t* payload) {
  if (n < kWriteHead || !error_.empty()) return nullptr;
  uint32_t magic, count;
  uint64_t id, offset, len;
  std::memcpy(&magic, head, 4);
  std::memcpy(&count, head + 5, 4);
  std::memcpy(&id, head + 10, 8);
  std::memcpy(&offset, head + 18, 8);
  std::memcpy(&len, head + 26, 8);
  if (magic != kMagic || head[4] != static_cast<uint8_t>(FrameType::Batch) || count != 1 ||
      head[9] != static_cast<uint8_t>(RecordTag::Write) || len < kDirectWriteMin || len > limits_.max_tensor_bytes ||
      len > limits_.max_frame - kWriteHead || n - kWriteHead > len)
    return nullptr;
  auto it = bufs_.find(id);
  if (it == bufs_.end()) return nullptr;
  Storage& s = *it->second;
  if (offset > s.nbytes || len > s.nbytes - offset) return nullptr;
  std::lock_guard<std::mutex> lock(*exec_mu_);
  auto* host = static_cast<uint8_t*>(backend_->host_data(s));
  if (!host) return nullptr;
  *payload = len;
  return host + offset;
}

void Session::apply(const Record& r) {
  switch (r.tag) {
    case RecordTag::Alloc:
      return alloc(r);
    case RecordTag::Free: {
      // Freeing an id the session does not hold does nothing: it may be one whose allocation
      // failed (and was reported), and no other session's ids are reachable from here.
      auto it = bufs_.find(r.id);
      if (it == bufs_.end()) return;
      used_ -= it->second->nbytes;
      std::lock_guard<std::mutex> lock(*exec_mu_);
      bufs_.erase(it);
      return;
    }
    case RecordTag::Write: {
      Storage& s = find(r.id, "write");
      check_range(s, r.id, r.offset, r.n, "write");
      std::lock_guard<std::mutex> lock(*exec_mu_);
      if (r.n) backend_->write(s, r.offset, r.data, r.n);
      return;
    }
    case RecordTag::Exec:
      return exec(r);
    case RecordTag::Read:
    case RecordTag::Sync:
      return;  // run_batch answers them
  }
}

void Session::sync(const Emit& emit) {
  if (error_.empty()) {
    try {
      std::lock_guard<std::mutex> lock(*exec_mu_);
      backend_->sync();
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  const Reply rep(encode_status(error_));
  error_.clear();
  emit(rep);
}

void Session::alloc(const Record& r) {
  KILN_CHECK(!bufs_.count(r.id), kOp, "alloc: buffer id " << static_cast<long long>(r.id) << " is already in use");
  KILN_CHECK(r.n <= limits_.quota_bytes - used_, kOp,
             "alloc of " << static_cast<long long>(r.n) << " bytes exceeds the session's memory quota ("
                         << static_cast<long long>(used_) << " of " << static_cast<long long>(limits_.quota_bytes)
                         << " bytes in use)");
  std::shared_ptr<Storage> s;
  {
    std::lock_guard<std::mutex> lock(*exec_mu_);
    s = backend_->allocate(r.n);
  }
  used_ += r.n;
  bufs_.emplace(r.id, std::move(s));
}

// Ops are counted in windows of 100 ms; a session past its share of a window waits for the next.
void Session::throttle() {
  if (limits_.max_ops_per_s == 0) return;
  const uint64_t per_window = std::max<uint64_t>(1, limits_.max_ops_per_s / 10);
  const auto now = std::chrono::steady_clock::now();
  if (now - window_ >= std::chrono::milliseconds(100)) {
    window_ = now;
    window_ops_ = 0;
  }
  if (++window_ops_ > per_window) {
    std::this_thread::sleep_until(window_ + std::chrono::milliseconds(100));
    window_ = std::chrono::steady_clock::now();
    window_ops_ = 1;
  }
}

void Session::exec(const Record& r) {
  throttle();
  const ir::Op& op = r.op;
  const std::string_view name = ir::op_name(op.kind);
  const int nin = ir::op_num_inputs(op.kind), nout = ir::op_num_outputs(op.kind);
  KILN_CHECK(
      (nin < 0 || static_cast<size_t>(nin) == op.inputs.size()) && static_cast<size_t>(nout) == op.outputs.size(), name,
      "op record with " << static_cast<long long>(op.inputs.size()) << " inputs and "
                        << static_cast<long long>(op.outputs.size()) << " outputs");
  SmallVec<Storage*, 4> in, out;
  const std::string sname(name);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Storage& s = find(r.in[i], "exec");
    const ir::TensorDesc& d = op.inputs[i];
    detail::check_view_in_storage(d.shape, d.strides, d.offset, d.dtype, s.nbytes, sname.c_str());
    in.push_back(&s);
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    Storage& s = find(r.out[i], "exec");
    const ir::TensorDesc& d = op.outputs[i];
    detail::check_view_in_storage(d.shape, d.strides, d.offset, d.dtype, s.nbytes, sname.c_str());
    out.push_back(&s);
  }
  // The outputs the op declares must be the ones its inputs and attributes give: kernels trust
  // them. Copy is the exception: its input is broadcast to its output (a view being written).
  if (op.kind == ir::OpKind::Copy) {
    const ir::TensorDesc &x = op.inputs[0], &y = op.outputs[0];
    bool fits = x.dtype == y.dtype && x.shape.size() <= y.shape.size();
    for (size_t i = 1; fits && i <= x.shape.size(); ++i) {
      const int64_t a = x.shape[x.shape.size() - i], b = y.shape[y.shape.size() - i];
      fits = a == b || a == 1;
    }
    KILN_CHECK(
        fits, name,
        "input " << x.shape << " " << x.dtype << " does not broadcast to the output " << y.shape << " " << y.dtype);
    std::lock_guard<std::mutex> lock(*exec_mu_);
    execute_op(backend_, op, in.data(), out.data());
    return;
  }
  ir::Op check = op;
  check.outputs.clear();
  ir::infer(check);
  KILN_CHECK(check.outputs.size() == op.outputs.size(), name, "op record declares the wrong number of outputs");
  for (size_t i = 0; i < op.outputs.size(); ++i)
    KILN_CHECK(check.outputs[i].shape == op.outputs[i].shape && check.outputs[i].dtype == op.outputs[i].dtype, name,
               "output " << static_cast<long long>(i) << " declared as " << op.outputs[i].shape << " "
                         << op.outputs[i].dtype << ", inferred " << check.outputs[i].shape << " "
                         << check.outputs[i].dtype);
  std::lock_guard<std::mutex> lock(*exec_mu_);
  execute_op(backend_, op, in.data(), out.data());
}

void Session::read(const Record& r, const Emit& emit) {
  Reply rep;
  if (error_.empty()) {
    try {
      Storage& s = find(r.id, "read");
      check_range(s, r.id, r.offset, r.n, "read");
      rep.head = encode_data_header(true);
      // The buffer's memory is read after the lock is released: only this session's thread
      // changes this session's buffers, and it is here until the reply is sent.
      std::lock_guard<std::mutex> lock(*exec_mu_);
      if (void* host = r.n ? backend_->host_data(s) : nullptr) {
        rep.body = static_cast<const char*>(host) + r.offset;
      } else {
        rep.owned.resize(r.n);
        if (r.n) backend_->read(s, r.offset, rep.owned.data(), r.n);
        rep.body = rep.owned.data();
      }
      rep.body_n = r.n;
    } catch (const std::bad_alloc&) {
      error_ = "[remote] the server is out of memory";
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  if (!error_.empty()) {
    rep = Reply(encode_data_error(error_));
    error_.clear();
  }
  emit(rep);
}

}  // namespace kiln::remote
