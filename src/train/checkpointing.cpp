// SPDX-License-Identifier: MIT OR Apache-2.0
// Checkpoint strategies (which epoch files a run keeps) and the checkpoint writer.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "checkpoint_writer.h"
#include "kiln/error.h"

namespace kiln::train {

double monitored_value(const EpochRecord& r, const std::string& metric) {
  auto find = [&](const std::map<std::string, double>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
  };
  if (metric.rfind("valid_", 0) == 0) {
    std::string k = metric.substr(6);
    return r.valid.empty() ? find(r.train, k) : find(r.valid, k);
  }
  if (metric.rfind("train_", 0) == 0) return find(r.train, metric.substr(6));
  return find(r.valid.empty() ? r.train : r.valid, metric);
}

namespace {

class KeepLast final : public CheckpointStrategy {
 public:
  explicit KeepLast(int64_t n) : n_(n) {}
  bool keep(int64_t epoch, const std::vector<EpochRecord>& h) const override {
    return !h.empty() && epoch > h.back().epoch - n_;
  }

 private:
  int64_t n_;
};

class KeepBest final : public CheckpointStrategy {
 public:
  KeepBest(Monitor m, int64_t n) : m_(std::move(m)), n_(n) {}
  bool keep(int64_t epoch, const std::vector<EpochRecord>& h) const override {
    double v = std::numeric_limits<double>::quiet_NaN();
    for (const auto& r : h)
      if (r.epoch == epoch) v = monitored_value(r, m_.metric);
    if (std::isnan(v)) return false;
    int64_t better = 0;  // epochs ranked before this one
    for (const auto& r : h) {
      double w = monitored_value(r, m_.metric);
      if (std::isnan(w) || r.epoch == epoch) continue;
      bool b = m_.mode == Mode::Min ? w < v : w > v;
      if (b || (w == v && r.epoch < epoch)) ++better;
    }
    return better < n_;
  }

 private:
  Monitor m_;
  int64_t n_;
};

class KeepAny final : public CheckpointStrategy {
 public:
  explicit KeepAny(std::vector<std::shared_ptr<CheckpointStrategy>> p) : parts_(std::move(p)) {}
  bool keep(int64_t epoch, const std::vector<EpochRecord>& h) const override {
    return std::any_of(parts_.begin(), parts_.end(), [&](const auto& s) { return s->keep(epoch, h); });
  }

 private:
  std::vector<std::shared_ptr<CheckpointStrategy>> parts_;
};

}  // namespace

std::shared_ptr<CheckpointStrategy> keep_last(int64_t n) {
  KILN_CHECK(n >= 1, "keep_last", "keep_last needs n >= 1, got " << n);
  return std::make_shared<KeepLast>(n);
}

std::shared_ptr<CheckpointStrategy> keep_best(Monitor m, int64_t n) {
  KILN_CHECK(n >= 1, "keep_best", "keep_best needs n >= 1, got " << n);
  KILN_CHECK(!m.metric.empty(), "keep_best", "keep_best needs a metric name");
  return std::make_shared<KeepBest>(std::move(m), n);
}

std::shared_ptr<CheckpointStrategy> keep_any(std::vector<std::shared_ptr<CheckpointStrategy>> parts) {
  for (const auto& p : parts) KILN_CHECK(p != nullptr, "keep_any", "keep_any got a null strategy");
  return std::make_shared<KeepAny>(std::move(parts));
}

namespace detail {

CheckpointWriter::CheckpointWriter(bool async, CheckpointWriteFn write) : async_(async), write_(std::move(write)) {
  if (!write_)
    write_ = [](const std::string& path, const store::TensorMap& t) {
      store::save_safetensors(path, t.tensors, t.metadata);
    };
  if (async_) thread_ = std::thread([this] { loop(); });
}

CheckpointWriter::~CheckpointWriter() {
  if (!async_) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CheckpointWriter::run(const Job& j) {
  if (j.tensors) {
    write_(j.path, *j.tensors);
  } else {
    std::error_code ec;
    std::filesystem::remove(j.path, ec);
  }
}

void CheckpointWriter::loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closing, nothing left
    Job j = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    l.unlock();
    try {
      run(j);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      if (!error_) error_ = std::current_exception();
    }
    l.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void CheckpointWriter::push(Job j) {
  if (!async_) {
    run(j);
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (error_) {
      auto e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
    queue_.push_back(std::move(j));
  }
  cv_.notify_all();
}

void CheckpointWriter::save(const std::string& path, std::shared_ptr<const store::TensorMap> tensors) {
  push(Job{path, std::move(tensors)});
}

void CheckpointWriter::remove(const std::string& path) { push(Job{path, nullptr}); }

void CheckpointWriter::wait() {
  if (!async_) return;
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return queue_.empty() && !busy_; });
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace detail
}  // namespace kiln::train
