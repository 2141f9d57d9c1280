// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A WebSocket connection carrying binary messages, plain (ws://) or over TLS (wss://), with
// blocking operations and a watchdog that cuts the connection when a deadline passes (idle
// sessions, unresponsive peers). Shared by the server (server.cpp) and the client (client.cpp);
// Boost.Beast stays inside src/remote.
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::remote {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using tcp = net::ip::tcp;

/// Shuts a socket down (both directions) when a deadline passes, which makes any blocking
/// operation on it return with an error. One thread per watchdog, asleep while disarmed.
class Watchdog {
 public:
  explicit Watchdog(int fd);
  ~Watchdog();
  /// Cut the connection if not disarmed within `seconds` (<= 0 or 1e8 and more: never).
  void arm(double seconds);
  void disarm();
  /// Whether the deadline passed (the connection was cut).
  bool fired() const;

 private:
  int fd_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false, stop_ = false, fired_ = false;
  std::thread thread_;
  void loop();
};

/// One WebSocket connection (binary messages only).
class Channel {
 public:
  virtual ~Channel() = default;
  /// Sends one message made of these pieces.
  virtual void write(const std::vector<net::const_buffer>& pieces) = 0;
  /// Reads one whole message into buf (cleared first).
  virtual void read(beast::flat_buffer& buf) = 0;
  /// Reads part of the current message into [p, p + n); message_done() says when it ended.
  virtual size_t read_some(void* p, size_t n) = 0;
  virtual bool message_done() const = 0;
  /// Sets the largest message read accepts (a larger one fails the connection, close code 1009).
  virtual void set_read_limit(uint64_t bytes) = 0;
  /// Closes the WebSocket (close frame when possible) and the socket; never throws.
  virtual void close(const std::string& reason) noexcept = 0;
  /// The close reason the peer sent, if any.
  virtual std::string peer_close_reason() const = 0;
  virtual int native_handle() = 0;
};

/// The server's end of an accepted socket: the WebSocket (and TLS when ssl is given) handshake
/// runs here; throws boost::system::system_error when it fails.
std::unique_ptr<Channel> accept_channel(tcp::socket socket, net::ssl::context* ssl);
/// The client's end: connects to host:port, TLS when ssl is given (verifying host), then the
/// WebSocket handshake on `path`. Throws boost::system::system_error.
std::unique_ptr<Channel> connect_channel(net::io_context& ioc, const std::string& host, const std::string& port,
                                         const std::string& path, net::ssl::context* ssl);

}  // namespace kiln::remote
