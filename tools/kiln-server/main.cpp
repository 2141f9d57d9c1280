// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln-server: runs the ops of Device::remote clients on one of this machine's devices
// (docs/remote.md).
//
//   kiln-server [--device cpu] [--listen 127.0.0.1:7410] (--token-file PATH | --insecure-no-auth)
//               [--tls-cert C --tls-key K] [--max-frame-mb N] [--max-tensor-mb N] [--quota-mb N]
//               [--max-ops-per-s N] [--idle-timeout S] [--max-sessions N] [--quiet]
//
// Prints "kiln-server: listening on ws://HOST:PORT (device NAME)" on stdout once it accepts
// clients (with --listen HOST:0 the port is the one the system chose).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "remote/server.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: kiln-server [--device cpu] [--listen 127.0.0.1:7410] (--token-file PATH | --insecure-no-auth)\n"
               "                   [--tls-cert CERT.pem --tls-key KEY.pem] [--max-frame-mb N] [--max-tensor-mb N]\n"
               "                   [--quota-mb N] [--max-ops-per-s N] [--idle-timeout SECONDS] [--max-sessions N]\n"
               "                   [--quiet]\n");
}

/// The token: the file's first line, without surrounding whitespace.
std::string read_token(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read the token file " + path);
  std::string line;
  std::getline(f, line);
  const size_t a = line.find_first_not_of(" \t\r\n"), b = line.find_last_not_of(" \t\r\n");
  if (a == std::string::npos) throw std::runtime_error("the token file " + path + " is empty");
  return line.substr(a, b - a + 1);
}

uint64_t megabytes(const char* s) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (!end || *end || !(v > 0) || v > 1e9) throw std::runtime_error(std::string("bad size in MB: ") + s);
  return static_cast<uint64_t>(v * 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a client that vanished is an error on its socket, not the end of the server
  kiln::remote::ServerOptions o;
  try {
    std::string token_file;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> const char* {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--device") {
        o.device = next();
      } else if (a == "--listen") {
        const std::string v = next();
        const size_t colon = v.rfind(':');
        if (colon == std::string::npos) throw std::runtime_error("--listen takes HOST:PORT, got " + v);
        o.host = v.substr(0, colon);
        if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']')
          o.host = o.host.substr(1, o.host.size() - 2);
        const long port = std::strtol(v.c_str() + colon + 1, nullptr, 10);
        if (port < 0 || port > 65535) throw std::runtime_error("bad port in " + v);
        o.port = static_cast<uint16_t>(port);
      } else if (a == "--token-file") {
        token_file = next();
      } else if (a == "--insecure-no-auth") {
        o.insecure_no_auth = true;
      } else if (a == "--tls-cert") {
        o.tls_cert = next();
      } else if (a == "--tls-key") {
        o.tls_key = next();
      } else if (a == "--max-frame-mb") {
        o.limits.max_frame = megabytes(next());
      } else if (a == "--max-tensor-mb") {
        o.limits.max_tensor_bytes = megabytes(next());
      } else if (a == "--quota-mb") {
        o.limits.quota_bytes = megabytes(next());
      } else if (a == "--max-ops-per-s") {
        o.limits.max_ops_per_s = static_cast<uint64_t>(std::strtoull(next(), nullptr, 10));
      } else if (a == "--idle-timeout") {
        o.idle_timeout_s = std::strtod(next(), nullptr);
      } else if (a == "--max-sessions") {
        o.max_sessions = std::atoi(next());
      } else if (a == "--quiet") {
        o.log = false;
      } else if (a == "--help" || a == "-h") {
        usage();
        return 0;
      } else {
        usage();
        throw std::runtime_error("unknown argument " + a);
      }
    }
    if (!token_file.empty()) o.token = read_token(token_file);
    if (o.insecure_no_auth && o.token.empty())
      std::fprintf(stderr,
                   "kiln-server: WARNING: --insecure-no-auth: any client that reaches this address can run code "
                   "on this machine's device and read its tensors\n");
    kiln::remote::Server server(o);
    std::printf("kiln-server: listening on %s://%s:%u (device %s)\n", o.tls_cert.empty() ? "ws" : "wss", o.host.c_str(),
                static_cast<unsigned>(server.port()), o.device.c_str());
    std::fflush(stdout);
    server.run();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-server: %s\n", e.what());
    return 2;
  }
}
