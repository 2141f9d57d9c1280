// SPDX-License-Identifier: MIT OR Apache-2.0
// The remote device against a real kiln-server on 127.0.0.1 (port chosen by the system): values
// equal to the local CPU's, autodiff and fusion on top, a training run with identical losses,
// refused handshakes and hostile frames with the server serving the next client, and faults
// (the server killed during a batch, a client killed during a read, an idle session).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim/optimizer.h>

#include <cstdlib>
#include <filesystem>

#include "remote/channel.h"
#include "remote/protocol.h"
#include "remote_server.h"

namespace kiln {
namespace {

using test::ServerProcess;

RemoteOptions opts(const ServerProcess& s) {
  RemoteOptions o;
  o.token = s.token();
  o.client_name = "kiln_remote_tests";
  o.timeout_s = 30;
  return o;
}

/// The server still serves: a fresh client computes on it.
void expect_serves(const ServerProcess& s) {
  ASSERT_TRUE(s.alive());
  Device d = Device::remote(s.url(), opts(s));
  Tensor x = tensor<float>({1, 2, 3}, d);
  EXPECT_EQ((x * 2.f).sum().item<float>(), 12.f);
}

/// Values equal to the CPU's, bit for bit (both run the same kernels).
void expect_same(const Tensor& remote, const Tensor& local) {
  ASSERT_EQ(remote.shape(), local.shape());
  ASSERT_EQ(remote.dtype(), local.dtype());
  const Tensor r = remote.to(Device::cpu()), l = local;
  EXPECT_TRUE(kiln::equal(r, l) || (r.is_floating_point() && kiln::allclose(r, l, 0, 0, true)))
      << "remote " << r << "\nlocal " << l;
}

TEST(RemoteDevice, OpsMatchTheCpu) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  const Device d = Device::remote(s.url(), opts(s)), cpu = Device::cpu().without_fusion();
  EXPECT_EQ(d.type(), DeviceType::Remote);
  EXPECT_EQ(d.str(), "remote:" + s.url());
  manual_seed(3);
  const Tensor a = randn({5, 7}, {.device = cpu}), b = randn({7, 3}, {.device = cpu});
  const Tensor ra = a.to(d), rb = b.to(d);
  expect_same(ra.matmul(rb), a.matmul(b));
  expect_same(softmax(ra, 1), softmax(a, 1));
  expect_same(ra.t().contiguous(), a.t().contiguous());  // a non-contiguous view
  expect_same(ra.t() + 1.f, a.t() + 1.f);
  expect_same(ra.sum(), a.sum());                                  // 0-d
  expect_same(ra.narrow(0, 0, 0) * 2.f, a.narrow(0, 0, 0) * 2.f);  // empty
  expect_same(cat({ra, ra}, 0), cat({a, a}, 0));
  expect_same(ra.argmax(1), a.argmax(1));  // i64
  expect_same(ra > 0.f, a > 0.f);          // bool
  expect_same(ra.to(f64).exp(), a.to(f64).exp());
  expect_same(ra.index_select(0, tensor<int64_t>({4, 0}, d)), a.index_select(0, tensor<int64_t>({4, 0}, cpu)));
  // Random ops run on the server from the same seed as here.
  manual_seed(9);
  const Tensor rr = rand({4, 4}, {.device = d});
  manual_seed(9);
  expect_same(rr, rand({4, 4}, {.device = cpu}));
  // Data-dependent errors are found on the server and surface at the read.
  EXPECT_THROW(ra.index_select(0, tensor<int64_t>({9}, d)).to(Device::cpu()), Error);
  expect_same(ra + 0.f, a);  // the device works on after the error
  sync(d);
}

TEST(RemoteDevice, LargeTensorsRoundTripInChunks) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  const Device d = Device::remote(s.url(), opts(s));
  manual_seed(5);
  // 6,000,007 floats: several 4 MiB frames each way, the last one partial.
  const Tensor a = randn({6000007}, {.device = Device::cpu()});
  const Tensor r = a.to(d);
  EXPECT_TRUE(kiln::equal(r.to(Device::cpu()), a));
  EXPECT_TRUE(kiln::equal((r * 2.f).to(Device::cpu()), a * 2.f));
  EXPECT_EQ(r.narrow(0, 5999999, 8).to_vector<float>(), a.narrow(0, 5999999, 8).to_vector<float>());
}

TEST(RemoteDevice, ASmallFrameLimitIsRespected) {
  ServerProcess s({"--max-frame-mb", "0.01"});  // 10485 bytes
  ASSERT_TRUE(s.ok()) << s.log();
  const Device d = Device::remote(s.url(), opts(s));
  manual_seed(6);
  const Tensor a = randn({30001}, {.device = Device::cpu()}), b = randn({700}, {.device = Device::cpu()});
  Tensor r = a.to(d), rb = b.to(d);  // a large write, and a small one queued with others
  for (int i = 0; i < 600; ++i) rb = rb + 1.f;
  EXPECT_TRUE(kiln::equal(r.to(Device::cpu()), a));
  EXPECT_TRUE(kiln::allclose(rb.to(Device::cpu()), b + 600.f));
}

TEST(RemoteDevice, FromStringWithTheTokenOfTheEnvironment) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  setenv("KILN_REMOTE_TOKEN", s.token().c_str(), 1);
  const Device a = Device::from_string("remote:" + s.url()), b = Device::from_string("remote:" + s.url());
  EXPECT_EQ(a, b);  // one connection per address
  EXPECT_EQ(tensor<int32_t>({1, 2}, a).sum().item<int64_t>(), 3);
  unsetenv("KILN_REMOTE_TOKEN");
}

TEST(RemoteDevice, AutodiffAndFusionOnTop) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  for (const Device& d :
       {Device::remote(s.url(), opts(s)).autodiff(), Device::remote(s.url(), opts(s)).fusion().autodiff()}) {
    const Device cpu = Device::cpu().without_fusion().autodiff();
    manual_seed(1);
    const Tensor w0 = randn({4, 3}, {.device = Device::cpu()});
    Tensor w = w0.to(d).require_grad(), wl = w0.to(cpu).require_grad();
    const Tensor loss = (w.tanh() * w).sum(), lossl = (wl.tanh() * wl).sum();
    const auto g = loss.backward(), gl = lossl.backward();
    expect_same(g.get(w), gl.get(wl));
    EXPECT_TRUE(d.has_autodiff());
  }
}

TEST(RemoteDevice, ServerErrorsSurfaceAtSyncNamingTheDevice) {
  ServerProcess s({"--quota-mb", "1"});
  ASSERT_TRUE(s.ok()) << s.log();
  const Device d = Device::remote(s.url(), opts(s));
  Tensor big = zeros({1 << 19}, {.device = d});  // 2 MB: over the session's quota, queued
  try {
    sync(d);
    FAIL() << "no error at sync";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("remote:" + s.url()), std::string::npos) << m;
    EXPECT_NE(m.find("quota"), std::string::npos) << m;
  }
  big = Tensor();
  EXPECT_EQ(tensor<float>({2, 3}, d).sum().item<float>(), 5.f);  // the session goes on
}

/// A small MLP trained for `steps` steps on `device` from seed 0; the losses.
std::vector<float> train_mlp(const Device& device, int steps) {
  struct Mlp : nn::Module {
    nn::Linear fc1, fc2;
    explicit Mlp(const Device& d)
        : fc1({.in_features = 64, .out_features = 32}, d), fc2({.in_features = 32, .out_features = 10}, d) {}
    Tensor forward(const Tensor& x) { return fc2(relu(fc1(x))); }
    KILN_VISIT(Mlp, fc1, fc2)
  };
  manual_seed(0);
  Mlp net(device);
  optim::Adam opt(net.parameters(), {.lr = 1e-2});
  // Fixed data made on the CPU: 4 batches of 32 points whose class is the argmax of 10 of their features.
  const Tensor x = randn({4, 32, 64}, {.device = Device::cpu()});
  const Tensor y = x.narrow(2, 0, 10).argmax(2);
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    const Tensor xb = x.select(0, step % 4).to(device), yb = y.select(0, step % 4).to(device);
    const Tensor loss = nn::functional::cross_entropy(net.forward(xb), yb);
    opt.step(loss.backward());
    losses.push_back(loss.item<float>());
  }
  return losses;
}

TEST(RemoteTraining, MlpLossesEqualTheLocalCpu) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  const std::vector<float> local = train_mlp(Device::cpu().without_fusion().autodiff(), 100);
  const std::vector<float> remote = train_mlp(Device::remote(s.url(), opts(s)).autodiff(), 100);
  ASSERT_EQ(local.size(), remote.size());
  for (size_t i = 0; i < local.size(); ++i) ASSERT_EQ(local[i], remote[i]) << "step " << i;
  EXPECT_LT(local.back(), local.front() * 0.8f);  // it learned
}

// ---- security ------------------------------------------------------------------------------

std::string refusal(const ServerProcess& s, RemoteOptions o) {
  try {
    Device::remote(s.url(), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RemoteSecurity, NoTokenAndWrongTokenAreRefused) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  unsetenv("KILN_REMOTE_TOKEN");
  RemoteOptions o = opts(s);
  o.token = "";
  EXPECT_NE(refusal(s, o).find("no token"), std::string::npos) << refusal(s, o);
  expect_serves(s);
  o.token = s.token() + "x";
  EXPECT_NE(refusal(s, o).find("wrong token"), std::string::npos);
  expect_serves(s);
  EXPECT_NE(s.log().find("refused: wrong token"), std::string::npos) << s.log();
}

/// A raw connection to the server that speaks frames by hand.
struct RawClient {
  remote::net::io_context ioc;
  std::unique_ptr<remote::Channel> ch;
  explicit RawClient(const ServerProcess& s) {
    ch = remote::connect_channel(ioc, "127.0.0.1", std::to_string(s.port()), "/", nullptr);
  }
  void send(const std::vector<uint8_t>& f) { ch->write({remote::net::buffer(f)}); }
  std::vector<uint8_t> receive() {
    remote::beast::flat_buffer buf;
    ch->read(buf);
    const auto* p = static_cast<const uint8_t*>(buf.data().data());
    return std::vector<uint8_t>(p, p + buf.size());
  }
  /// Hello with the server's token; true when welcomed.
  bool hello(const ServerProcess& s, uint16_t version = remote::kVersion) {
    send(remote::encode_hello(remote::Hello{version, s.token(), "raw"}));
    const auto f = receive();
    return remote::frame_type(f.data(), f.size()) == remote::FrameType::Welcome;
  }
};

TEST(RemoteSecurity, AnOldProtocolVersionIsRefused) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  {
    RawClient c(s);
    c.send(remote::encode_hello(remote::Hello{0, s.token(), "old"}));
    const auto f = c.receive();
    ASSERT_EQ(remote::frame_type(f.data(), f.size()), remote::FrameType::Refused);
    EXPECT_NE(remote::decode_message(f.data(), f.size()).find("protocol version 0"), std::string::npos);
    EXPECT_THROW(c.receive(), boost::system::system_error);  // and closed
  }
  expect_serves(s);
}

TEST(RemoteSecurity, AFrameOverTheLimitClosesTheConnection) {
  ServerProcess s({"--max-frame-mb", "1"});
  ASSERT_TRUE(s.ok()) << s.log();
  {
    RawClient c(s);
    ASSERT_TRUE(c.hello(s));
    std::vector<uint8_t> big((1 << 20) + 1, 0);
    try {
      c.send(big);
    } catch (const boost::system::system_error&) {  // the server may close while we still send
    }
    EXPECT_THROW(c.receive(), boost::system::system_error);
  }
  // A malformed frame under the limit is refused with a reason, then closed.
  {
    RawClient c(s);
    ASSERT_TRUE(c.hello(s));
    c.send({1, 2, 3});
    const auto f = c.receive();
    ASSERT_EQ(remote::frame_type(f.data(), f.size()), remote::FrameType::Refused);
    EXPECT_NE(remote::decode_message(f.data(), f.size()).find("magic"), std::string::npos);
  }
  expect_serves(s);
}

TEST(RemoteSecurity, AWriteFrameThatLiesAboutItsLengthIsRefused) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  for (const size_t extra : {size_t{0}, size_t{100}}) {  // a payload 100 bytes short, then 100 long
    RawClient c(s);
    ASSERT_TRUE(c.hello(s));
    remote::BatchWriter b;
    b.alloc(1, 1 << 20);
    b.sync();
    c.send(b.finish());
    const auto st = c.receive();
    ASSERT_EQ(remote::decode_message(st.data(), st.size()), "");
    b.clear();
    b.write_header(1, 0, 512 << 10);
    std::vector<uint8_t> f = b.finish();
    f.resize(f.size() + (512 << 10) - 100 + 2 * extra, 7);
    c.send(f);
    const auto r = c.receive();
    ASSERT_EQ(remote::frame_type(r.data(), r.size()), remote::FrameType::Refused);
    EXPECT_NE(remote::decode_message(r.data(), r.size()).find("longer or shorter"), std::string::npos);
  }
  expect_serves(s);
}

TEST(RemoteSecurity, ASessionCannotReachAnotherSessionsTensors) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  const Device d = Device::remote(s.url(), opts(s));
  const Tensor secret = tensor<float>({42, 43}, d);
  sync(d);  // its buffer (id 1 of that session) exists on the server
  RawClient c(s);
  ASSERT_TRUE(c.hello(s));
  remote::BatchWriter b;
  for (uint64_t id = 1; id <= 4; ++id) b.read(id, 0, 8);
  b.free(1);
  b.sync();
  c.send(b.finish());
  for (int i = 0; i < 4; ++i) {
    const auto f = c.receive();
    ASSERT_EQ(remote::frame_type(f.data(), f.size()), remote::FrameType::Data);
    const std::string m = remote::decode_message(f.data(), f.size());
    EXPECT_NE(m.find("not one of this session's"), std::string::npos) << m;
  }
  const auto st = c.receive();
  EXPECT_EQ(remote::decode_message(st.data(), st.size()), "");         // the free reached nothing
  EXPECT_EQ(secret.to_vector<float>(), (std::vector<float>{42, 43}));  // untouched
  expect_serves(s);
}

TEST(RemoteSecurity, TlsWithTheServersCertificate) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln_tls_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost,IP:127.0.0.1 -days 1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "no openssl command to make a certificate";
  ServerProcess s({"--tls-cert", cert, "--tls-key", key});
  ASSERT_TRUE(s.ok()) << s.log();
  const std::string url = "wss://127.0.0.1:" + std::to_string(s.port());
  RemoteOptions o = opts(s);
  o.ca_file = cert;
  const Device d = Device::remote(url, o);
  EXPECT_EQ((tensor<float>({1, 2, 3}, d) * 3.f).sum().item<float>(), 18.f);
  EXPECT_EQ(ones({1 << 20}, {.device = d}).sum().item<float>(), static_cast<float>(1 << 20));  // large frames
  o.ca_file = "";  // the system's CAs do not know this certificate
  EXPECT_THROW(Device::remote(url, o), Error);
  EXPECT_THROW(Device::remote(s.url(), opts(s)), Error);  // ws:// to a wss:// server
  EXPECT_TRUE(s.alive());
  std::filesystem::remove_all(dir);
}

// ---- faults --------------------------------------------------------------------------------

TEST(RemoteFaults, ServerKilledDuringABatch) {
  auto s = std::make_unique<ServerProcess>();
  ASSERT_TRUE(s->ok()) << s->log();
  RemoteOptions o = opts(*s);
  o.batch_ops = 1 << 20;  // everything stays queued until the sync
  const Device d = Device::remote(s->url(), o);
  Tensor x = ones({256, 256}, {.device = d});
  for (int i = 0; i < 200; ++i) x = x * 1.0001f + 0.5f;
  const std::string name = d.str();
  s->kill9();
  for (int i = 0; i < 10; ++i) x = x + 1.f;
  try {
    sync(d);
    FAIL() << "no error at sync";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(name), std::string::npos) << m;
    EXPECT_TRUE(m.find("connection") != std::string::npos || m.find("closed") != std::string::npos) << m;
  }
  EXPECT_THROW(x.to(Device::cpu()), Error);  // the device stays failed, saying so
  x = Tensor();
  s = std::make_unique<ServerProcess>();  // a new server, a new Device::remote
  ASSERT_TRUE(s->ok());
  expect_serves(*s);
}

// The child of ClientKilledDuringARead: reads a large tensor from the server in a loop until killed.
TEST(RemoteChild, ReadsForever) {
  const char* url = std::getenv("KILN_REMOTE_CHILD_URL");
  if (!url) GTEST_SKIP() << "run by RemoteFaults.ClientKilledDuringARead";
  const Device d = Device::remote(url);
  const Tensor x = ones({8 << 20}, {.device = d});  // 32 MB
  (void)x.to_vector<float>();                       // the server holds the tensor before the parent is told
  std::printf("reading\n");
  std::fflush(stdout);
  for (;;) (void)x.to_vector<float>();
}

TEST(RemoteFaults, ClientKilledDuringARead) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  setenv("KILN_REMOTE_CHILD_URL", s.url().c_str(), 1);
  setenv("KILN_REMOTE_TOKEN", s.token().c_str(), 1);
  int out = -1;
  const pid_t child =
      test::spawn_process({"/proc/self/exe", "--gtest_filter=RemoteChild.ReadsForever"}, &out, "/dev/null");
  unsetenv("KILN_REMOTE_CHILD_URL");
  unsetenv("KILN_REMOTE_TOKEN");
  ASSERT_GT(child, 0);
  std::string line;
  for (int i = 0; i < 20 && line != "reading"; ++i) line = test::read_line(out, 30);  // after gtest's banner
  ASSERT_EQ(line, "reading");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(out);
  EXPECT_TRUE(s.wait_log("33554432 bytes", 10)) << s.log();  // its session ended and freed the 32 MB
  expect_serves(s);
}

TEST(RemoteFaults, AnUnresponsiveServerTimesOut) {
  ServerProcess s;
  ASSERT_TRUE(s.ok()) << s.log();
  RemoteOptions o = opts(s);
  o.timeout_s = 0.5;
  const Device d = Device::remote(s.url(), o);
  const Tensor x = tensor<float>({1, 2}, d);
  sync(d);
  kill(s.pid(), SIGSTOP);  // as if the network went quiet: no FIN, no reply
  ASSERT_TRUE(test::wait_stopped(s.pid(), 5));
  try {
    (void)(x + 1.f).to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no reply from the server within"), std::string::npos) << e.what();
  }
  kill(s.pid(), SIGCONT);
  expect_serves(s);
}

TEST(RemoteFaults, AnIdleSessionIsClosed) {
  ServerProcess s({"--idle-timeout", "0.3"});
  ASSERT_TRUE(s.ok()) << s.log();
  const Device d = Device::remote(s.url(), opts(s));
  const Tensor x = tensor<float>({1, 2}, d);
  sync(d);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_THROW((x + 1.f).to_vector<float>(), Error);
  EXPECT_TRUE(s.wait_log("timed out", 5)) << s.log();
  expect_serves(s);
}

}  // namespace
}  // namespace kiln
