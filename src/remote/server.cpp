// SPDX-License-Identifier: MIT OR Apache-2.0
// The remote device's server (server.h): the accept loop, the handshake and one thread per
// session.
#include "remote/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "core/backend.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "remote/channel.h"
#include "remote/session.h"

namespace kiln::remote {

namespace {

constexpr const char* kOp = "kiln-server";

/// State the session threads share with the server (kept alive by each of them).
struct Shared {
  ServerOptions opt;
  net::io_context ioc;  // names the reactor of every socket (blocking operations do not run it)
  Backend* backend = nullptr;
  std::string device_name;
  std::mutex exec_mu;  // ops of all sessions run one at a time
  std::atomic<int> sessions{0};
  std::atomic<int> connections{0};  // sessions and handshakes in progress
  std::atomic<uint64_t> next_session{1};
  std::unique_ptr<net::ssl::context> ssl;
  std::mutex fail_mu;  // failed handshakes of the last 10 s, to slow down guessing
  std::deque<std::chrono::steady_clock::time_point> failures;

  void log(const std::string& line) {
    if (opt.log) std::fprintf(stderr, "kiln-server: %s\n", line.c_str());
  }
  /// Waits before refusing a handshake: 50 ms per failure in the last 10 s (at most 2 s).
  void delay_failure() {
    const auto now = std::chrono::steady_clock::now();
    size_t recent;
    {
      std::lock_guard<std::mutex> lock(fail_mu);
      while (!failures.empty() && now - failures.front() > std::chrono::seconds(10)) failures.pop_front();
      failures.push_back(now);
      recent = failures.size();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<size_t>(2000, 50 * recent)));
  }
};

void send_frame(Channel& ch, const std::vector<uint8_t>& f) { ch.write({net::buffer(f)}); }

/// Refuses a client: a Refused frame with the reason, then the close.
void refuse(Channel& ch, const std::string& reason) {
  try {
    send_frame(ch, encode_refused(reason));
  } catch (const std::exception&) {
  }
  ch.close(reason);
}

/// Reads one message into buf, except that the payload of a large single Write goes straight
/// into its buffer (Session::direct_write); returns true then, with nothing left to run.
bool read_frame(Channel& ch, Session& session, beast::flat_buffer& buf, uint64_t max_frame) {
  constexpr size_t kProbe = 64 << 10;
  buf.clear();
  auto* first = static_cast<uint8_t*>(buf.prepare(kProbe).data());
  size_t got = 0;
  do got += ch.read_some(first + got, kProbe - got);  // a message starts with the first read_some
  while (got < Session::kWriteHead && !ch.message_done());
  buf.commit(got);
  if (ch.message_done()) return false;
  uint64_t payload = 0;
  if (uint8_t* dst = session.direct_write(first, got, &payload)) {
    size_t have = got - Session::kWriteHead;
    std::memcpy(dst, first + Session::kWriteHead, have);
    while (have < payload && !ch.message_done()) have += ch.read_some(dst + have, payload - have);
    KILN_CHECK(have == payload && ch.message_done(), kOp, "a Write frame longer or shorter than its record");
    return true;
  }
  while (!ch.message_done()) {
    KILN_CHECK(buf.size() <= max_frame, kOp,
               "frame over the limit of " << static_cast<long long>(max_frame) << " bytes");
    auto more = buf.prepare(std::min<uint64_t>(1 << 20, max_frame + 1 - std::min<uint64_t>(buf.size(), max_frame)));
    buf.commit(ch.read_some(more.data(), more.size()));
  }
  return false;
}

/// One connection from accept to close.
void serve(std::shared_ptr<Shared> sh, tcp::socket socket) {
  struct Connection {
    Shared* s;
    ~Connection() { --s->connections; }
  } connection{sh.get()};
  const uint64_t id = sh->next_session++;
  std::string peer = "?";
  {
    boost::system::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    if (!ec) peer = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  const std::string who = "session " + std::to_string(id) + " from " + peer;
  Watchdog dog(socket.native_handle());
  dog.arm(sh->opt.handshake_timeout_s);
  std::unique_ptr<Channel> ch;
  std::string end = "closed by the client";
  std::unique_ptr<Session> session;
  try {
    ch = accept_channel(std::move(socket), sh->ssl.get());
    ch->set_read_limit(sh->opt.limits.max_frame);
    beast::flat_buffer buf;
    ch->read(buf);
    Hello hello;
    try {
      hello = decode_hello(static_cast<const uint8_t*>(buf.data().data()), buf.size());
    } catch (const Error& e) {
      sh->delay_failure();
      sh->log(who + " refused: " + e.what());
      return refuse(*ch, std::string("malformed Hello: ") + e.what());
    }
    if (hello.version != kVersion) {
      sh->delay_failure();
      sh->log(who + " refused: protocol version " + std::to_string(hello.version));
      return refuse(*ch, "protocol version " + std::to_string(hello.version) +
                             " is not supported (this server speaks " + std::to_string(kVersion) + ")");
    }
    if (!sh->opt.insecure_no_auth && !constant_time_equal(hello.token, sh->opt.token)) {
      sh->delay_failure();
      sh->log(who + " refused: " + (hello.token.empty() ? "no token" : "wrong token"));
      return refuse(*ch, hello.token.empty() ? "authentication failed: no token (set KILN_REMOTE_TOKEN)"
                                             : "authentication failed: wrong token");
    }
    if (++sh->sessions > sh->opt.max_sessions) {
      --sh->sessions;
      sh->log(who + " refused: too many sessions");
      return refuse(*ch, "the server is serving its maximum of " + std::to_string(sh->opt.max_sessions) + " sessions");
    }
    struct Count {
      Shared* s;
      ~Count() { --s->sessions; }
    } count{sh.get()};
    dog.disarm();
    session = std::make_unique<Session>(sh->backend, sh->opt.limits, &sh->exec_mu);
    send_frame(*ch, encode_welcome(Welcome{kVersion, id, sh->device_name, sh->opt.limits}));
    sh->log(who + " opened (client '" + hello.client + "')");
    // Replies go out as the batch reaches them, each under the write timeout.
    const Emit emit = [&](const Reply& r) {
      std::vector<net::const_buffer> pieces{net::buffer(r.head)};
      if (r.body_n) pieces.push_back(net::buffer(r.body, r.body_n));
      dog.arm(sh->opt.write_timeout_s);
      ch->write(pieces);
      dog.disarm();
    };
    for (;;) {
      try {
        dog.arm(sh->opt.idle_timeout_s);
        const bool done = read_frame(*ch, *session, buf, sh->opt.limits.max_frame);
        dog.disarm();
        if (done) continue;
        session->run_batch(static_cast<const uint8_t*>(buf.data().data()), buf.size(), emit);
      } catch (const Error& e) {  // a malformed frame: nothing of it ran
        end = std::string("refused a malformed frame: ") + e.what();
        refuse(*ch, e.what());
        break;
      }
    }
  } catch (const boost::system::system_error& e) {
    if (dog.fired())
      end = "timed out";
    else if (e.code() == websocket::error::closed || e.code() == net::error::eof)
      end = "closed by the client";
    else
      end = "connection lost: " + e.code().message();
  } catch (const std::exception& e) {
    end = std::string("ended by an error: ") + e.what();
  }
  if (ch) ch->close(end);
  if (session) {
    const size_t n = session->buffers();
    const uint64_t bytes = session->bytes_in_use();
    session.reset();
    sh->log(who + " " + end + "; freed " + std::to_string(n) + " buffers (" + std::to_string(bytes) + " bytes)");
  }
}

}  // namespace

struct Server::Impl {
  std::shared_ptr<Shared> sh = std::make_shared<Shared>();
  tcp::acceptor acceptor{sh->ioc};
  std::atomic<bool> stopping{false};
};

Server::Server(const ServerOptions& o) : impl_(std::make_unique<Impl>()) {
  Shared& sh = *impl_->sh;
  sh.opt = o;
  KILN_CHECK(!o.token.empty() || o.insecure_no_auth, kOp,
             "no token: give --token-file PATH (or --insecure-no-auth to accept any client)");
  KILN_CHECK(o.tls_cert.empty() == o.tls_key.empty(), kOp, "TLS needs both --tls-cert and --tls-key");
  KILN_CHECK(o.limits.max_frame >= 4096, kOp, "the frame limit must be at least 4096 bytes");
  KILN_CHECK(o.max_sessions >= 1, kOp, "--max-sessions must be at least 1, got " << o.max_sessions);
  const Device d = Device::from_string(o.device);
  sh.backend = d.backend();
  sh.device_name = d.str();
  if (!o.tls_cert.empty()) {
    sh.ssl = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
    sh.ssl->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                        net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    sh.ssl->use_certificate_chain_file(o.tls_cert, ec);
    KILN_CHECK(!ec, kOp, "cannot use the certificate " << o.tls_cert << ": " << ec.message());
    sh.ssl->use_private_key_file(o.tls_key, net::ssl::context::pem, ec);
    KILN_CHECK(!ec, kOp, "cannot use the private key " << o.tls_key << ": " << ec.message());
  }
  boost::system::error_code ec;
  const auto addr = net::ip::make_address(o.host, ec);
  KILN_CHECK(!ec, kOp, "bad listen address '" << o.host << "': " << ec.message());
  const tcp::endpoint ep(addr, o.port);
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  KILN_CHECK(!ec, kOp, "cannot listen on " << o.host << ":" << static_cast<int>(o.port) << ": " << ec.message());
}

Server::~Server() { stop(); }

uint16_t Server::port() const { return impl_->acceptor.local_endpoint().port(); }

void Server::run() {
  while (!impl_->stopping) {
    boost::system::error_code ec;
    tcp::socket s(impl_->sh->ioc);
    impl_->acceptor.accept(s, ec);
    if (ec) {
      if (impl_->stopping || ec == net::error::bad_descriptor) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // EMFILE and the like: retry
      continue;
    }
    // Connections past four times the session limit (handshakes that may never finish
    // included) are closed at once, so that a flood of them cannot exhaust the threads.
    if (impl_->sh->connections >= 4 * std::max(1, impl_->sh->opt.max_sessions)) {
      s.close(ec);
      continue;
    }
    ++impl_->sh->connections;
    s.set_option(tcp::no_delay(true), ec);
    // The socket moves to the session's thread (which keeps Shared, and so its io_context, alive).
    try {
      std::thread(serve, impl_->sh, std::move(s)).detach();
    } catch (const std::system_error&) {  // no thread to spare: the client is turned away
      --impl_->sh->connections;
    }
  }
}

void Server::stop() {
  impl_->stopping = true;
  if (impl_->acceptor.is_open()) ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);
}

}  // namespace kiln::remote
