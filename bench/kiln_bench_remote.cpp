// SPDX-License-Identifier: MIT OR Apache-2.0
// The remote device on loopback (docs/remote.md): a kiln-server with the plain CPU behind it,
// started here, against the plain CPU in this process, and against a plain TCP socket copy of the
// same bytes measured in the same run.
//
//   kiln_bench_remote [--smoke] [--mb N] [--server-device NAME (default cpu-plain)]
//
// Prints one tab-separated line per measurement: <id> \t <value> \t <unit>
//   remote_op_local_us / remote_op_remote_us / remote_op_added_us   a queued elementwise op on a
//                                                                   16-element tensor (batched)
//   remote_read_rtt_us                                              item() of a 0-d tensor
//   remote_upload_mbps / remote_download_mbps / socket_copy_mbps    a N MB tensor (256 by default)
//   remote_upload_share / remote_download_share                     of the socket copy
//   remote_cnn_step_local_ms / remote_cnn_step_remote_ms            a training step of the
//                                                                   Fashion-MNIST CNN, batch 64
#include <kiln/kiln.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../examples/fashion-mnist/net.h"
#include "remote/remote_server.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Seconds to run n queued `x = x + 1` on a 16-element tensor of d, with the final sync.
double chain(const kiln::Device& d, int n) {
  kiln::Tensor x = kiln::zeros({16}, {.device = d});
  kiln::sync(d);
  const auto t = Clock::now();
  for (int i = 0; i < n; ++i) x = x + 1.f;
  kiln::sync(d);
  const double s = seconds_since(t);
  if (x.to(kiln::Device::cpu()).to_vector<float>()[0] != static_cast<float>(n)) std::fprintf(stderr, "wrong sum\n");
  return s;
}

/// Bytes per second of sending `bytes` over a loopback TCP connection to a thread that reads them.
double socket_copy(size_t bytes) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(ls, 1) != 0 ||
      getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 0;
  std::vector<char> src(bytes, 1), dst(bytes);
  std::thread reader([&] {
    const int c = accept(ls, nullptr, nullptr);
    size_t got = 0;
    while (got < bytes) {
      const ssize_t k = recv(c, dst.data() + got, bytes - got, 0);
      if (k <= 0) break;
      got += static_cast<size_t>(k);
    }
    close(c);
  });
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const auto t = Clock::now();
  size_t sent = 0;
  while (sent < bytes) {
    const ssize_t k = send(s, src.data() + sent, bytes - sent, 0);
    if (k <= 0) break;
    sent += static_cast<size_t>(k);
  }
  reader.join();
  const double sec = seconds_since(t);
  close(s);
  close(ls);
  return static_cast<double>(bytes) / sec;
}

/// Milliseconds of one training step of the Fashion-MNIST CNN on d (batch 64, Adam), best of `steps`.
double cnn_step(const kiln::Device& d, int steps) {
  kiln::manual_seed(0);
  kiln::examples::Net net(d);
  kiln::optim::Adam opt(net.parameters(), {.lr = 1e-3});
  const kiln::Tensor x = kiln::rand({64, 1, 28, 28}, {.device = d});
  const kiln::Tensor y = kiln::randint(0, 10, {64}, {.dtype = kiln::i64, .device = d});
  double best = 1e30;
  for (int i = 0; i < steps + 1; ++i) {
    const auto t = Clock::now();
    const kiln::Tensor loss = kiln::nn::functional::cross_entropy(net.forward(x), y);
    opt.step(loss.backward());
    (void)loss.item<float>();
    if (i > 0) best = std::min(best, seconds_since(t));  // the first step warms caches up
  }
  return best * 1e3;
}

void row(const char* id, double v, const char* unit) { std::printf("%s\t%.3f\t%s\n", id, v, unit); }

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  size_t mb = 256;
  std::string server_device = "cpu-plain";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) smoke = true;
    if (std::strcmp(argv[i], "--mb") == 0 && i + 1 < argc) mb = static_cast<size_t>(std::atoi(argv[++i]));
    if (std::strcmp(argv[i], "--server-device") == 0 && i + 1 < argc) server_device = argv[++i];
  }
  if (smoke) mb = 4;
  try {
    kiln::test::ServerProcess server({"--quiet"}, server_device);
    if (!server.ok()) {
      std::fprintf(stderr, "kiln_bench_remote: the server did not start\n");
      return 1;
    }
    kiln::RemoteOptions o;
    o.token = server.token();
    const kiln::Device remote = kiln::Device::remote(server.url(), o), local = kiln::Device::cpu().without_fusion();
    const int n = smoke ? 200 : 20000, reps = smoke ? 1 : 5;
    double tl = 1e30, tr = 1e30;
    for (int r = 0; r < reps; ++r) {
      tl = std::min(tl, chain(local, n));
      tr = std::min(tr, chain(remote, n));
    }
    row("remote_op_local_us", tl / n * 1e6, "us/op");
    row("remote_op_remote_us", tr / n * 1e6, "us/op");
    row("remote_op_added_us", (tr - tl) / n * 1e6, "us/op");

    const kiln::Tensor s = kiln::scalar_tensor(1.5, kiln::f32, remote);
    const int reads = smoke ? 20 : 2000;
    (void)s.item<float>();
    auto t = Clock::now();
    for (int i = 0; i < reads; ++i) (void)s.item<float>();
    row("remote_read_rtt_us", seconds_since(t) / reads * 1e6, "us");

    const size_t bytes = mb << 20;
    const kiln::Tensor host = kiln::ones({static_cast<int64_t>(bytes / 4)}, {.device = local});
    double up = 0, down = 0, sock = 0;
    for (int r = 0; r < (smoke ? 1 : 3); ++r) {
      t = Clock::now();
      kiln::Tensor dev = host.to(remote);
      kiln::sync(remote);
      up = std::max(up, static_cast<double>(bytes) / seconds_since(t));
      t = Clock::now();
      kiln::Tensor back = dev.to(local);
      down = std::max(down, static_cast<double>(bytes) / seconds_since(t));
      sock = std::max(sock, socket_copy(bytes));
    }
    row("remote_upload_mbps", up / 1e6, "MB/s");
    row("remote_download_mbps", down / 1e6, "MB/s");
    row("socket_copy_mbps", sock / 1e6, "MB/s");
    row("remote_upload_share", up / sock, "of socket copy");
    row("remote_download_share", down / sock, "of socket copy");

    const int steps = smoke ? 1 : 10;
    row("remote_cnn_step_local_ms", cnn_step(local.autodiff(), steps), "ms");
    row("remote_cnn_step_remote_ms", cnn_step(remote.autodiff(), steps), "ms");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench_remote: %s\n", e.what());
    return 1;
  }
}
