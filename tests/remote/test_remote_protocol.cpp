// SPDX-License-Identifier: MIT OR Apache-2.0
// The remote device's frames and the server's session, without a network (src/remote/protocol.h,
// session.h): round trips, hostile frames refused, session checks, and the fuzz target's seeds.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "../fuzz/fuzz_remote.h"
#include "remote/protocol.h"
#include "remote/session.h"
#include "test_paths.h"

namespace kiln::remote {
namespace {

std::vector<uint8_t> copy(const std::vector<uint8_t>& v) { return v; }

TEST(RemoteProtocol, HelloAndWelcomeRoundTrip) {
  const auto f = encode_hello(Hello{kVersion, "s3cret", "test client"});
  EXPECT_EQ(frame_type(f.data(), f.size()), FrameType::Hello);
  const Hello h = decode_hello(f.data(), f.size());
  EXPECT_EQ(h.version, kVersion);
  EXPECT_EQ(h.token, "s3cret");
  EXPECT_EQ(h.client, "test client");
  Limits l;
  l.max_frame = 1 << 20;
  const auto w = encode_welcome(Welcome{kVersion, 42, "cpu", l});
  const Welcome got = decode_welcome(w.data(), w.size());
  EXPECT_EQ(got.session, 42u);
  EXPECT_EQ(got.device, "cpu");
  EXPECT_EQ(got.limits.max_frame, uint64_t{1} << 20);
}

TEST(RemoteProtocol, EveryTruncationOfAFrameIsRefused) {
  BatchWriter b;
  b.alloc(1, 16);
  const float x[4] = {1, 2, 3, 4};
  b.write(1, 0, x, sizeof x);
  ir::Op op;
  op.kind = ir::OpKind::Neg;
  op.inputs.push_back(ir::contiguous_desc({4}, DType::F32));
  ir::infer(op);
  const uint64_t in[1] = {1}, out[1] = {1};
  b.exec(op, in, 1, out, 1);
  b.read(1, 0, 16);
  b.sync();
  const std::vector<uint8_t> frame = copy(b.finish());
  EXPECT_EQ(decode_batch(frame.data(), frame.size(), Limits{}).size(), 5u);
  for (size_t n = 0; n < frame.size(); ++n)
    EXPECT_THROW(decode_batch(frame.data(), n, Limits{}), Error) << "prefix of " << n << " bytes";
  std::vector<uint8_t> longer = frame;
  longer.push_back(0);
  EXPECT_THROW(decode_batch(longer.data(), longer.size(), Limits{}), Error);
  const auto hello = encode_hello(Hello{kVersion, "t", "c"});
  for (size_t n = 0; n < hello.size(); ++n) EXPECT_THROW(decode_hello(hello.data(), n), Error);
}

TEST(RemoteProtocol, HostileFieldsAreRefused) {
  Limits small;
  small.max_frame = 4096;
  small.max_tensor_bytes = 1024;
  {
    BatchWriter b;
    b.alloc(1, 4096);  // over the buffer limit
    auto& f = b.finish();
    EXPECT_THROW(decode_batch(f.data(), f.size(), small), Error);
  }
  {
    BatchWriter b;
    b.read(1, 0, 8192);  // a reply that would not fit in a frame
    auto& f = b.finish();
    EXPECT_THROW(decode_batch(f.data(), f.size(), small), Error);
  }
  {
    BatchWriter b;
    b.sync();
    std::vector<uint8_t> f = copy(b.finish());
    const uint32_t lie = 0xffffffffu;  // a record count past the frame
    std::memcpy(f.data() + 5, &lie, 4);
    EXPECT_THROW(decode_batch(f.data(), f.size(), small), Error);
    f[0] ^= 1;  // bad magic
    EXPECT_THROW(frame_type(f.data(), f.size()), Error);
  }
  {
    std::vector<uint8_t> big(small.max_frame + 1, 0);
    BatchWriter b;
    auto& f = b.finish();
    std::memcpy(big.data(), f.data(), f.size());
    EXPECT_THROW(decode_batch(big.data(), big.size(), small), Error);  // over the frame limit
  }
  {
    BatchWriter b;  // an op record whose id count disagrees with its inputs
    ir::Op op;
    op.kind = ir::OpKind::Neg;
    op.inputs.push_back(ir::contiguous_desc({4}, DType::F32));
    ir::infer(op);
    const uint64_t ids[2] = {1, 2};
    b.exec(op, ids, 2, ids, 1);
    auto& f = b.finish();
    EXPECT_THROW(decode_batch(f.data(), f.size(), Limits{}), Error);
  }
}

TEST(RemoteProtocol, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcabc"));  // the cycled shorter one must not match
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal("a", ""));
  EXPECT_TRUE(constant_time_equal("", ""));
}

/// A session on the plain CPU and the replies of its last batch.
struct Fixture {
  std::mutex mu;
  Limits limits;
  std::unique_ptr<Session> s;
  std::vector<Reply> replies;
  Fixture() {
    limits.quota_bytes = 1 << 20;
    s = std::make_unique<Session>(Device::cpu().without_fusion().backend(), limits, &mu);
  }
  void run(BatchWriter& b) {
    replies.clear();
    auto& f = b.finish();
    s->run_batch(f.data(), f.size(), replies);
    b.clear();
  }
  std::string status(size_t i = 0) { return decode_message(replies.at(i).head.data(), replies.at(i).head.size()); }
};

ir::Op unary(ir::OpKind k, const Shape& shape) {
  ir::Op op;
  op.kind = k;
  op.inputs.push_back(ir::contiguous_desc(shape, DType::F32));
  ir::infer(op);
  return op;
}

TEST(RemoteSession, RunsOpsAndAnswersReads) {
  Fixture fx;
  BatchWriter b;
  const float x[4] = {1, -2, 3, -4};
  b.alloc(1, 16);
  b.alloc(2, 16);
  b.write(1, 0, x, 16);
  const uint64_t in[1] = {1}, out[1] = {2};
  b.exec(unary(ir::OpKind::Neg, {4}), in, 1, out, 1);
  b.read(2, 0, 16);
  fx.run(b);
  ASSERT_EQ(fx.replies.size(), 1u);
  ASSERT_EQ(fx.replies[0].body_n, 16u);
  float y[4];
  std::memcpy(y, fx.replies[0].body, 16);
  EXPECT_EQ(y[0], -1.f);
  EXPECT_EQ(y[3], 4.f);
  EXPECT_EQ(fx.s->buffers(), 2u);
  b.free(1);
  b.free(2);
  b.sync();
  fx.run(b);
  EXPECT_EQ(fx.status(), "");
  EXPECT_EQ(fx.s->buffers(), 0u);
  EXPECT_EQ(fx.s->bytes_in_use(), 0u);
}

TEST(RemoteSession, BadRecordsSetTheErrorAndSkipWork) {
  Fixture fx;
  BatchWriter b;
  b.read(7, 0, 4);  // an id this session never allocated (another session's, say)
  fx.run(b);
  ASSERT_EQ(fx.replies.size(), 1u);
  EXPECT_NE(fx.status().find("not one of this session's"), std::string::npos) << fx.status();

  b.alloc(1, 16);
  b.alloc(1, 16);  // twice
  b.sync();
  fx.run(b);
  EXPECT_NE(fx.status().find("already in use"), std::string::npos) << fx.status();

  const float x[8] = {};
  b.write(1, 8, x, 16);  // past the buffer's end
  b.sync();
  fx.run(b);
  EXPECT_NE(fx.status().find("outside buffer"), std::string::npos) << fx.status();

  b.alloc(2, fx.limits.quota_bytes);  // over the quota (16 bytes are in use)
  b.sync();
  fx.run(b);
  EXPECT_NE(fx.status().find("quota"), std::string::npos) << fx.status();

  // An op whose descriptor reaches past its buffer, then one whose declared output is not the
  // inferred one: both refused before running.
  ir::Op big = unary(ir::OpKind::Neg, {64});
  const uint64_t ids[1] = {1};
  b.exec(big, ids, 1, ids, 1);
  b.sync();
  fx.run(b);
  EXPECT_NE(fx.status().find("outside its storage"), std::string::npos) << fx.status();
  ir::Op lie = unary(ir::OpKind::Neg, {4});
  lie.outputs[0].shape = {2};
  lie.outputs[0].strides = {1};
  b.exec(lie, ids, 1, ids, 1);
  b.sync();
  fx.run(b);
  EXPECT_NE(fx.status().find("inferred"), std::string::npos) << fx.status();

  // Copy broadcasts its input to its output: a [1] input into [4] runs, a [3] one into [4] does not.
  ir::Op copy_op;
  copy_op.kind = ir::OpKind::Copy;
  copy_op.inputs.push_back(ir::contiguous_desc({1}, DType::F32));
  copy_op.outputs.push_back(ir::contiguous_desc({4}, DType::F32));
  b.exec(copy_op, ids, 1, ids, 1);
  b.sync();
  fx.run(b);
  EXPECT_EQ(fx.status(), "");
  copy_op.inputs[0] = ir::contiguous_desc({3}, DType::F32);
  b.exec(copy_op, ids, 1, ids, 1);
  b.sync();
  fx.run(b);
  EXPECT_NE(fx.status().find("does not broadcast"), std::string::npos) << fx.status();

  // After an error, work is skipped until reported; the session then runs normally again.
  b.read(9, 0, 4);
  b.write(1, 0, x, 16);
  b.sync();
  fx.run(b);
  ASSERT_EQ(fx.replies.size(), 2u);
  EXPECT_EQ(fx.status(1), "");
  EXPECT_EQ(fx.s->buffers(), 1u);
}

TEST(RemoteSession, OpRateIsLimited) {
  Fixture fx;
  fx.limits.max_ops_per_s = 100;  // 10 per 100 ms window
  fx.s = std::make_unique<Session>(Device::cpu().without_fusion().backend(), fx.limits, &fx.mu);
  BatchWriter b;
  b.alloc(1, 16);
  const uint64_t ids[1] = {1};
  for (int i = 0; i < 25; ++i) b.exec(unary(ir::OpKind::Neg, {4}), ids, 1, ids, 1);
  b.sync();
  const auto t = std::chrono::steady_clock::now();
  fx.run(b);
  EXPECT_EQ(fx.status(), "");
  EXPECT_GE(std::chrono::steady_clock::now() - t, std::chrono::milliseconds(190));  // two windows waited
}

// The seeds of the fuzz target: each is refused with kiln::Error or runs. KILN_REMOTE_WRITE_SEEDS=dir
// writes them (how tests/fuzz/corpus/fuzz_remote/ was made).
std::vector<std::pair<std::string, std::vector<uint8_t>>> seed_frames() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  out.push_back({"hello", encode_hello(Hello{kVersion, "token", "seed"})});
  out.push_back({"hello_old_version", encode_hello(Hello{0, "token", "seed"})});
  Limits l;
  out.push_back({"welcome", encode_welcome(Welcome{kVersion, 1, "cpu", l})});
  out.push_back({"status_error", encode_status("[Add] shapes differ")});
  BatchWriter b;
  const float x[4] = {1, 2, 3, 4};
  b.alloc(1, 16);
  b.alloc(2, 16);
  b.write(1, 0, x, 16);
  const uint64_t in[2] = {1, 1}, out1[1] = {2};
  ir::Op add;
  add.kind = ir::OpKind::Add;
  add.inputs.push_back(ir::contiguous_desc({4}, DType::F32));
  add.inputs.push_back(ir::contiguous_desc({4}, DType::F32));
  ir::infer(add);
  b.exec(add, in, 2, out1, 1);
  b.read(2, 0, 16);
  b.free(1);
  b.sync();
  out.push_back({"batch_add", copy(b.finish())});
  b.clear();
  ir::Op mm;
  mm.kind = ir::OpKind::MatMul;
  mm.inputs.push_back(ir::contiguous_desc({1, 2, 2}, DType::F32));
  mm.inputs.push_back(ir::contiguous_desc({1, 2, 2}, DType::F32));
  ir::infer(mm);
  b.alloc(1, 16);
  b.write(1, 0, x, 16);
  b.alloc(2, 16);
  b.exec(mm, in, 2, out1, 1);
  b.read(2, 4, 8);
  out.push_back({"batch_matmul", copy(b.finish())});
  b.clear();
  ir::Op sum;
  sum.kind = ir::OpKind::Sum;
  sum.inputs.push_back(ir::contiguous_desc({4}, DType::F32));
  sum.attrs.ints = {0, 0};
  sum.attrs.dtype = DType::F32;
  ir::infer(sum);
  b.alloc(1, 16);
  b.alloc(2, 4);
  b.exec(sum, in, 1, out1, 1);
  b.sync();
  out.push_back({"batch_sum", copy(b.finish())});
  return out;
}

TEST(RemoteFuzzCorpus, SeedsAreRefusedOrRun) {
  if (const char* dir = std::getenv("KILN_REMOTE_WRITE_SEEDS")) {
    for (const auto& [name, f] : seed_frames()) {
      std::ofstream o(std::filesystem::path(dir) / name, std::ios::binary);
      o.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
    }
  }
  const std::filesystem::path dir = std::filesystem::path(KILN_FUZZ_CORPUS_DIR) / "fuzz_remote";
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NO_THROW(fuzz::run_remote_frame(bytes.data(), bytes.size())) << e.path();
    // Every prefix and every single-byte corruption of a seed too.
    for (size_t k = 0; k < bytes.size(); ++k) {
      EXPECT_NO_THROW(fuzz::run_remote_frame(bytes.data(), k)) << e.path() << " prefix " << k;
      std::vector<uint8_t> bad = bytes;
      bad[k] ^= 0xff;
      EXPECT_NO_THROW(fuzz::run_remote_frame(bad.data(), bad.size())) << e.path() << " byte " << k;
    }
    ++n;
  }
  EXPECT_GE(n, 7u) << "seeds missing in " << dir;
}

// KILN_REMOTE_STRESS=N: N random mutations of the seeds (bytes overwritten with hostile values,
// pieces of two seeds spliced) through the fuzz target's body, for machines without libFuzzer.
TEST(RemoteFuzzCorpus, RandomMutationsWhenAsked) {
  const char* env = std::getenv("KILN_REMOTE_STRESS");
  if (!env) GTEST_SKIP() << "set KILN_REMOTE_STRESS=N to run N mutations";
  const auto seeds = seed_frames();
  std::mt19937_64 rng(1);
  const uint8_t hostile[] = {0, 1, 2, 3, 4, 5, 6, 7, 0x7f, 0x80, 0xfe, 0xff};
  const long n = std::atol(env);
  for (long i = 0; i < n; ++i) {
    std::vector<uint8_t> f = seeds[rng() % seeds.size()].second;
    if (rng() % 4 == 0) {  // splice the tail of another seed
      const auto& g = seeds[rng() % seeds.size()].second;
      const size_t at = rng() % (f.size() + 1), from = rng() % (g.size() + 1);
      f.resize(at);
      f.insert(f.end(), g.begin() + static_cast<std::ptrdiff_t>(from), g.end());
    }
    for (int k = static_cast<int>(rng() % 4); k >= 0 && !f.empty(); --k)
      f[rng() % f.size()] = rng() % 2 ? hostile[rng() % sizeof hostile] : static_cast<uint8_t>(rng());
    if (rng() % 8 == 0 && !f.empty()) f.resize(rng() % f.size());
    ASSERT_NO_THROW(fuzz::run_remote_frame(f.data(), f.size())) << "mutation " << i;
  }
}

}  // namespace
}  // namespace kiln::remote
