// SPDX-License-Identifier: MIT OR Apache-2.0
// WebSocket channels over Boost.Beast (channel.h).
#include "remote/channel.h"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>

namespace kiln::remote {

Watchdog::Watchdog(int fd) : fd_(fd), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(double seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = seconds > 0 && seconds < 1e8;  // past three years: never (and no duration overflow)
    if (armed_)
      deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                         std::chrono::duration<double>(seconds));
  }
  cv_.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

bool Watchdog::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      fired_ = true;
      armed_ = false;
      ::shutdown(fd_, SHUT_RDWR);
    }
  }
}

namespace {

template <class Next>
class WsChannel final : public Channel {
 public:
  template <class... Args>
  explicit WsChannel(Args&&... args) : ws_(std::forward<Args>(args)...) {
    ws_.binary(true);
    ws_.auto_fragment(false);
    // Client frames are masked through this buffer (RFC 6455): the 4 KiB default would send a
    // large tensor in 4 KiB writes.
    ws_.write_buffer_bytes(1 << 20);
  }
  websocket::stream<Next>& ws() { return ws_; }
  void write(const std::vector<net::const_buffer>& pieces) override { ws_.write(pieces); }
  void read(beast::flat_buffer& buf) override {
    buf.clear();
    ws_.read(buf);
  }
  size_t read_some(void* p, size_t n) override { return ws_.read_some(net::buffer(p, n)); }
  bool message_done() const override { return ws_.is_message_done(); }
  void set_read_limit(uint64_t bytes) override { ws_.read_message_max(bytes); }
  void close(const std::string& reason) noexcept override {
    beast::error_code ec;
    if (ws_.is_open()) ws_.close(websocket::close_reason(websocket::close_code::normal, reason.substr(0, 120)), ec);
    beast::get_lowest_layer(ws_).shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).close(ec);
  }
  std::string peer_close_reason() const override {
    const auto& r = ws_.reason();
    std::string s = std::to_string(static_cast<unsigned>(r.code));
    if (!r.reason.empty()) s += " " + std::string(r.reason.data(), r.reason.size());
    return s;
  }
  int native_handle() override { return beast::get_lowest_layer(ws_).native_handle(); }

 private:
  websocket::stream<Next> ws_;
};

using Plain = WsChannel<tcp::socket>;
using Tls = WsChannel<net::ssl::stream<tcp::socket>>;

template <class Ws>
void server_options(Ws& ws) {
  ws.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(beast::http::field::server, "kiln-server"); }));
}

}  // namespace

std::unique_ptr<Channel> accept_channel(tcp::socket socket, net::ssl::context* ssl) {
  if (ssl) {
    auto c = std::make_unique<Tls>(std::move(socket), *ssl);
    c->ws().next_layer().handshake(net::ssl::stream_base::server);
    server_options(c->ws());
    c->ws().accept();
    return c;
  }
  auto c = std::make_unique<Plain>(std::move(socket));
  server_options(c->ws());
  c->ws().accept();
  return c;
}

std::unique_ptr<Channel> connect_channel(net::io_context& ioc, const std::string& host, const std::string& port,
                                         const std::string& path, net::ssl::context* ssl) {
  tcp::resolver resolver(ioc);
  const auto endpoints = resolver.resolve(host, port);
  const std::string host_header = host + ":" + port;
  if (ssl) {
    auto c = std::make_unique<Tls>(ioc, *ssl);
    net::connect(beast::get_lowest_layer(c->ws()), endpoints);
    beast::get_lowest_layer(c->ws()).set_option(tcp::no_delay(true));
    if (!SSL_set_tlsext_host_name(c->ws().next_layer().native_handle(), host.c_str()))
      throw boost::system::system_error(
          beast::error_code(static_cast<int>(::ERR_get_error()), net::error::get_ssl_category()));
    c->ws().next_layer().set_verify_callback(net::ssl::host_name_verification(host));
    c->ws().next_layer().handshake(net::ssl::stream_base::client);
    c->ws().handshake(host_header, path);
    return c;
  }
  auto c = std::make_unique<Plain>(ioc);
  net::connect(c->ws().next_layer(), endpoints);
  c->ws().next_layer().set_option(tcp::no_delay(true));
  c->ws().handshake(host_header, path);
  return c;
}

}  // namespace kiln::remote
