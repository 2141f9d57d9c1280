// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The remote device's server (tools/kiln-server, docs/remote.md): accepts WebSocket clients, one
// session per connection (session.h), each on its own thread, with its own buffers, freed when
// the connection ends for any reason.
#include <cstdint>
#include <memory>
#include <string>

#include "remote/protocol.h"

namespace kiln::remote {

struct ServerOptions {
  std::string device = "cpu";      ///< a name of Device::list(): where the sessions' ops run
  std::string host = "127.0.0.1";  ///< address to bind: loopback unless told otherwise
  uint16_t port = 7410;            ///< 0: a free port chosen by the system (see Server::port)
  std::string token;               ///< the secret clients must present; empty needs insecure_no_auth
  bool insecure_no_auth = false;   ///< accept any client without a token
  std::string tls_cert, tls_key;   ///< PEM files: serve wss:// (both or neither)
  Limits limits;
  double handshake_timeout_s = 10;  ///< from accept to a valid Hello
  double idle_timeout_s = 3600;     ///< a session with no message for this long is closed
  double write_timeout_s = 120;     ///< a client that takes no reply for this long is cut off
  int max_sessions = 64;
  bool log = true;  ///< one line per session opened and closed, on stderr
};

class Server {
 public:
  /// Opens the device and listens; throws kiln::Error (no token without insecure_no_auth, a bad
  /// device, an address in use, unreadable TLS files).
  explicit Server(const ServerOptions& options);
  ~Server();
  /// The port listened on (the chosen one when options.port was 0).
  uint16_t port() const;
  /// Serves until stop() (from another thread or a signal handler's thread).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::remote
