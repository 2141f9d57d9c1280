// SPDX-License-Identifier: MIT OR Apache-2.0
// The remote device's client (docs/remote.md): a backend whose buffers are ids of a session on a
// kiln-server. Ops, allocations, frees and writes are queued into Batch frames and sent when a
// batch is full, at a read, or at kiln::sync; reads and syncs wait for the server's reply.
// Errors of queued work come back in that reply and are thrown there as kiln::Error naming the
// device; a lost connection fails the device at the call that finds it.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "core/registry.h"
#include "kiln/error.h"
#include "remote/channel.h"
#include "remote/protocol.h"

namespace kiln::remote {

namespace {

/// Buffer ids travel as Storage::data: non-canonical addresses, so a stray dereference faults.
constexpr uint64_t kHandleBits = uint64_t{0x7e} << 56;
void* to_handle(uint64_t id) { return reinterpret_cast<void*>(static_cast<uintptr_t>(id | kHandleBits)); }
uint64_t to_id(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)) & ~kHandleBits; }

/// The parts of "ws://host:port/path" (or wss://; IPv6 hosts in brackets).
struct Url {
  bool tls = false;
  std::string host, port, path = "/";
};

Url parse_url(const std::string& url) {
  Url u;
  std::string rest;
  if (url.rfind("ws://", 0) == 0) {
    rest = url.substr(5);
  } else if (url.rfind("wss://", 0) == 0) {
    u.tls = true;
    rest = url.substr(6);
  } else {
    KILN_CHECK(false, "remote", "address '" << url << "' must start with ws:// or wss://");
  }
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    u.path = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  size_t colon;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    KILN_CHECK(close != std::string::npos, "remote", "address '" << url << "': unclosed '['");
    u.host = rest.substr(1, close - 1);
    colon = rest.find(':', close);
  } else {
    colon = rest.rfind(':');
    u.host = rest.substr(0, colon);
  }
  u.port = colon == std::string::npos ? (u.tls ? "443" : "80") : rest.substr(colon + 1);
  const bool digits =
      !u.port.empty() && u.port.size() <= 5 && u.port.find_first_not_of("0123456789") == std::string::npos;
  KILN_CHECK(!u.host.empty() && digits, "remote", "address '" << url << "' is not ws://host:port");
  return u;
}

class RemoteBackend final : public Backend {
 public:
  RemoteBackend(const std::string& url, const RemoteOptions& o) : url_(url), opt_(o) {
    if (opt_.token.empty())
      if (const char* t = std::getenv("KILN_REMOTE_TOKEN")) opt_.token = t;
    KILN_CHECK(opt_.batch_ops >= 1 && opt_.batch_bytes >= 1, "remote", "batch thresholds must be positive");
    connect();
  }

  DeviceType type() const override { return DeviceType::Remote; }
  std::string name() const override { return "remote:" + url_; }
  bool supports(const ir::Op&) override { return true; }  // the server falls back for its device
  void* host_data(Storage&) override { return nullptr; }
  std::shared_ptr<Storage> wrap_host(void*, size_t, std::shared_ptr<void>) override { return nullptr; }
  /// Whether the connection was lost (a new Device::remote connects again).
  bool broken() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return !failed_.empty();
  }

  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    check_alive();
    KILN_CHECK(nbytes <= limits_.max_tensor_bytes, name(),
               "a buffer of " << static_cast<long long>(nbytes) << " bytes exceeds the server's limit of "
                              << static_cast<long long>(limits_.max_tensor_bytes));
    const uint64_t id = next_id_++;
    batch_.alloc(id, nbytes);
    stats_.in_use += static_cast<int64_t>(nbytes);
    stats_.peak = std::max(stats_.peak, stats_.in_use);
    ++stats_.allocations;
    maybe_flush();
    return std::make_shared<Storage>(to_handle(id), nbytes, this);
  }

  void release(void* data, size_t nbytes) noexcept override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    stats_.in_use -= static_cast<int64_t>(nbytes);
    if (!failed_.empty()) return;
    batch_.free(to_id(data));
    try {
      maybe_flush();
    } catch (const std::exception&) {  // recorded in failed_: the next call reports it
    }
  }

  void execute(const ir::Op& op, Storage* const* inputs, Storage* const* outputs) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    check_alive();
    SmallVec<uint64_t, 4> in, out;
    for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(to_id(inputs[i]->data));
    for (size_t i = 0; i < op.outputs.size(); ++i) out.push_back(to_id(outputs[i]->data));
    batch_.exec(op, in.data(), in.size(), out.data(), out.size());
    maybe_flush();
  }

  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    check_alive();
    const uint64_t id = to_id(dst.data);
    if (n <= small_write_) {
      if (batch_.size() + n + 64 >= limits_.max_frame) flush();
      batch_.write(id, off, src, n);
      maybe_flush();
      return;
    }
    flush();  // large writes go in frames of their own, sent from the caller's memory
    const auto* p = static_cast<const uint8_t*>(src);
    for (size_t done = 0; done < n;) {
      const size_t k = std::min(n - done, chunk_);
      BatchWriter w;
      w.write_header(id, off + done, k);
      send({net::buffer(w.finish()), net::buffer(p + done, k)});
      done += k;
    }
  }

  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    check_alive();
    if (n == 0) return;
    const uint64_t id = to_id(src.data);
    size_t chunks = 0;
    for (size_t done = 0; done < n; done += chunk_, ++chunks) batch_.read(id, off + done, std::min(n - done, chunk_));
    flush();
    std::string error;
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t c = 0, done = 0; c < chunks; ++c) {
      const size_t k = std::min(n - done, chunk_);
      std::string e = read_data(p + done, k);
      if (error.empty()) error = std::move(e);
      done += k;
    }
    KILN_CHECK(error.empty(), name(), error);
  }

  void sync() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    check_alive();
    batch_.sync();
    flush();
    beast::flat_buffer buf;
    wait([&] { ch_->read(buf); });
    const auto* d = static_cast<const uint8_t*>(buf.data().data());
    std::string error;
    try {
      const FrameType t = frame_type(d, buf.size());
      if (t == FrameType::Refused) fail("the server refused the session: " + decode_message(d, buf.size()));
      KILN_CHECK(t == FrameType::Status, "remote", "expected a Status frame");
      error = decode_message(d, buf.size());
    } catch (const Error& e) {
      if (!failed_.empty()) throw;
      fail(std::string("bad reply from the server: ") + e.what());
    }
    KILN_CHECK(error.empty(), name(), error);
  }

  MemoryStats memory_stats() const override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return stats_;
  }
  void reset_peak_memory() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    stats_.peak = stats_.in_use;
  }

 private:
  size_t small_write_ = 64 << 10;  // writes up to this size are queued in the batch
  std::string url_;
  RemoteOptions opt_;
  Limits limits_;
  size_t chunk_ = 1 << 20;  // bytes of a large write's or a read's frame
  net::io_context ioc_;
  std::unique_ptr<net::ssl::context> ssl_;
  std::unique_ptr<Channel> ch_;
  std::unique_ptr<Watchdog> dog_;
  BatchWriter batch_;
  uint64_t next_id_ = 1;
  std::string failed_;  // why the connection is gone (empty while it works)
  mutable std::recursive_mutex mu_;
  MemoryStats stats_;

  [[noreturn]] void fail(const std::string& cause) {
    failed_ = cause;
    if (ch_) ch_->close(cause);
    detail::throw_error("[" + name() + "] " + cause);
  }
  void check_alive() { KILN_CHECK(failed_.empty(), name(), failed_ << " (open a new Device::remote to reconnect)"); }

  /// Runs a blocking network step under the reply timeout; a failure fails the device.
  template <class F>
  void wait(F&& f) {
    dog_->arm(opt_.timeout_s);
    try {
      f();
    } catch (const boost::system::system_error& e) {
      dog_->disarm();
      fail(describe(e));
    }
    dog_->disarm();
  }

  std::string describe(const boost::system::system_error& e) {
    if (dog_ && dog_->fired()) return "no reply from the server within " + std::to_string(opt_.timeout_s) + " s";
    if (e.code() == websocket::error::closed)
      return "the server closed the connection (" + ch_->peer_close_reason() + ")";
    return "connection to the server lost: " + e.code().message();
  }

  void send(const std::vector<net::const_buffer>& pieces) {
    wait([&] { ch_->write(pieces); });
  }

  void maybe_flush() {
    if (batch_.count() >= static_cast<uint32_t>(opt_.batch_ops) ||
        batch_.size() >= static_cast<size_t>(opt_.batch_bytes) ||
        batch_.size() + small_write_ + 64 >= limits_.max_frame)
      flush();
  }

  void flush() {
    if (batch_.count() == 0) return;
    std::vector<uint8_t>& f = batch_.finish();
    try {
      send({net::buffer(f)});
    } catch (...) {
      batch_.clear();
      throw;
    }
    batch_.clear();
  }

  /// Reads one Data frame into [dst, dst + n); returns its error ("" when ok).
  std::string read_data(uint8_t* dst, size_t n) {
    uint8_t head[kDataHeader];
    size_t got = 0;
    std::string error;
    wait([&] {
      // A message starts with the first read_some (message_done() still describes the last one).
      do got += ch_->read_some(head + got, kDataHeader - got);
      while (got < kDataHeader && !ch_->message_done());
      if (got < kDataHeader) return;
      if (head[5] == 1) {
        size_t body = 0;
        while (!ch_->message_done() && body < n) body += ch_->read_some(dst + body, n - body);
        got += body;
      } else {
        std::string rest;
        char tmp[4096];
        while (!ch_->message_done()) rest.append(tmp, ch_->read_some(tmp, sizeof tmp));
        std::vector<uint8_t> frame(head, head + kDataHeader);
        frame.insert(frame.end(), rest.begin(), rest.end());
        try {
          error = decode_message(frame.data(), frame.size());
        } catch (const Error& e) {
          error = e.what();
        }
        got = kDataHeader + n;
      }
    });
    bool ok = got == kDataHeader + n && ch_->message_done();
    if (ok) {
      try {
        ok = frame_type(head, kDataHeader) == FrameType::Data;
      } catch (const Error&) {
        ok = false;
      }
    }
    if (!ok) fail("bad reply from the server (a Data frame of the wrong size or type)");
    return error;
  }

  void connect() {
    const Url u = parse_url(url_);
    if (u.tls) {
      ssl_ = std::make_unique<net::ssl::context>(net::ssl::context::tls_client);
      ssl_->set_verify_mode(net::ssl::verify_peer);
      boost::system::error_code ec;
      if (opt_.ca_file.empty())
        ssl_->set_default_verify_paths(ec);
      else
        ssl_->load_verify_file(opt_.ca_file, ec);
      KILN_CHECK(!ec, name(), "cannot load the CA certificates " << opt_.ca_file << ": " << ec.message());
    }
    try {
      ch_ = connect_channel(ioc_, u.host, u.port, u.path, ssl_.get());
    } catch (const boost::system::system_error& e) {
      KILN_CHECK(false, name(), "cannot connect to " << u.host << ":" << u.port << ": " << e.code().message());
    }
    dog_ = std::make_unique<Watchdog>(ch_->native_handle());
    ch_->set_read_limit(uint64_t{1} << 40);
    send({net::buffer(encode_hello(Hello{kVersion, opt_.token, opt_.client_name}))});
    beast::flat_buffer buf;
    wait([&] { ch_->read(buf); });
    const auto* d = static_cast<const uint8_t*>(buf.data().data());
    const FrameType t = frame_type(d, buf.size());
    if (t == FrameType::Refused) fail("the server refused the connection: " + decode_message(d, buf.size()));
    KILN_CHECK(t == FrameType::Welcome, name(),
               "the server answered the handshake with frame type " << static_cast<int>(t));
    const Welcome w = decode_welcome(d, buf.size());
    limits_ = w.limits;
    chunk_ = static_cast<size_t>(std::min<uint64_t>(limits_.max_frame - 64, uint64_t{4} << 20));
    small_write_ = std::min<size_t>(small_write_, chunk_ / 4);
    ch_->set_read_limit(limits_.max_frame + 64);
  }
};

/// Every remote backend made, and the one per address of from_string. Backends are never
/// destroyed (storages may outlive every Device value naming them); the list keeps them reachable.
struct Backends {
  std::mutex mu;
  std::vector<std::unique_ptr<RemoteBackend>> all;
  std::unordered_map<std::string, RemoteBackend*> by_url;
};
Backends& backends() {
  static auto* b = new Backends();
  return *b;
}

/// from_string("remote:ws://..."): one backend per address, replaced once its connection is lost.
Device remote_at(const std::string& url) {
  Backends& bs = backends();
  std::lock_guard<std::mutex> lock(bs.mu);
  RemoteBackend*& b = bs.by_url[url];
  if (!b || b->broken()) {
    bs.all.push_back(std::make_unique<RemoteBackend>(url, RemoteOptions{}));
    b = bs.all.back().get();
  }
  return Device(b);
}

Device make_remote(const std::string& url, const RemoteOptions& options) {
  auto b = std::make_unique<RemoteBackend>(url, options);  // connects first: a refusal throws here
  Backends& bs = backends();
  std::lock_guard<std::mutex> lock(bs.mu);
  bs.all.push_back(std::move(b));
  return Device(bs.all.back().get());
}

}  // namespace

}  // namespace kiln::remote

namespace kiln {
void register_remote() {
  register_device_address("remote", remote::remote_at);
  register_remote_maker(remote::make_remote);
}
}  // namespace kiln
