// SPDX-License-Identifier: MIT OR Apache-2.0
// store::write_atomic: the target holds the old file or the new one, never a torn one, even when
// the writer is killed (fork + SIGKILL) or throws.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/store.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kiln_atomic_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// Files in dir other than `keep`.
std::vector<std::string> others(const std::string& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != keep) out.push_back(e.path().filename().string());
  return out;
}

void write_string(int fd, const std::string& s, const std::string& path) {
  store::write_all(fd, s.data(), s.size(), path);
}

}  // namespace

TEST(StoreAtomic, CreatesAndReplacesLeavingNoTemporaryFile) {
  TempDir dir;
  std::string p = dir.file("f.txt");
  store::write_atomic(p, [&](int fd) { write_string(fd, "first", p); });
  EXPECT_EQ(slurp(p), "first");
  store::write_atomic(p, [&](int fd) { write_string(fd, "second, longer", p); });
  EXPECT_EQ(slurp(p), "second, longer");
  store::write_atomic(p, [&](int fd) {});
  EXPECT_EQ(slurp(p), "");
  EXPECT_TRUE(others(dir.path, "f.txt").empty());
}

TEST(StoreAtomic, KeepsTheModeOfTheReplacedFile) {
  TempDir dir;
  std::string p = dir.file("m");
  store::write_atomic(p, [&](int fd) { write_string(fd, "a", p); });
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  store::write_atomic(p, [&](int fd) { write_string(fd, "b", p); });
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST(StoreAtomic, ThrowingWriterLeavesTargetUntouched) {
  TempDir dir;
  std::string p = dir.file("keep.bin");
  store::write_atomic(p, [&](int fd) { write_string(fd, "old contents", p); });
  EXPECT_ERROR(store::write_atomic(p,
                                   [&](int fd) {
                                     write_string(fd, "new contents, half writ", p);
                                     KILN_CHECK(false, "test", "writer failed midway");
                                   }),
               "writer failed midway");
  EXPECT_EQ(slurp(p), "old contents");
  EXPECT_TRUE(others(dir.path, "keep.bin").empty()) << "the temporary file was removed";
  // Any exception type, and when the target did not exist yet.
  std::string q = dir.file("new.bin");
  EXPECT_THROW(store::write_atomic(q, [&](int fd) { throw std::runtime_error("boom"); }), std::runtime_error);
  EXPECT_FALSE(fs::exists(q));
  EXPECT_TRUE(others(dir.path, "keep.bin").empty());
}

TEST(StoreAtomic, ErrorsNameThePathAndTheReason) {
  std::string p = "/nonexistent_kiln_dir/sub/x.safetensors";
  std::string m = test::error_of([&] { store::write_atomic(p, [&](int) {}); });
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("No such file or directory"), std::string::npos) << m;
  // write_all on a closed descriptor
  m = test::error_of([&] { store::write_all(-1, "abc", 3, "some/path"); });
  EXPECT_NE(m.find("some/path"), std::string::npos) << m;
  EXPECT_NE(m.find("Bad file descriptor"), std::string::npos) << m;
}

TEST(StoreAtomic, SaveSafetensorsIsAtomicWhenATensorCannotBeRead) {
  TempDir dir;
  std::string p = dir.file("w.safetensors");
  store::save_safetensors(p, {{"a", ones({4})}});
  std::string before = slurp(p);
  // The second tensor lives on the null device: reading its values throws midway through the write.
  EXPECT_THROW(store::save_safetensors(p, {{"a", zeros({4})}, {"b", zeros({4}, {.device = Device::null()})}}), Error);
  EXPECT_EQ(slurp(p), before);
  EXPECT_TRUE(others(dir.path, "w.safetensors").empty());
}

// A child process rewrites a safetensors file slowly through write_atomic; the parent SIGKILLs
// it mid-write. The target must still hold the old file exactly (and load); only a stale
// temporary file may be left.
TEST(StoreAtomic, KilledWriterLeavesTheOldFile) {
  TempDir dir;
  const std::string name = "model.safetensors";
  const std::string p = dir.file(name);
  Tensor old_w = arange(1000, DType::F32);
  store::save_safetensors(p, {{"w", old_w}}, {{"version", "old"}});
  const std::string old_bytes = slurp(p);
  // The new contents: a different, larger file, prepared before fork (the child only writes).
  const std::string new_bytes(256 * 1024, 'N');
  for (int delay_ms : {5, 40, 120}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        store::write_atomic(p, [&](int fd) {
          for (size_t off = 0; off < new_bytes.size(); off += 512) {
            store::write_all(fd, new_bytes.data() + off, 512, p);
            usleep(2000);  // ~1 s for the whole file
          }
        });
      } catch (...) {
        _exit(2);
      }
      _exit(0);
    }
    // Wait until the child has started writing its temporary file, then a little more.
    auto t0 = std::chrono::steady_clock::now();
    bool started = false;
    while (!started && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
      for (auto& o : others(dir.path, name)) {
        std::error_code ec;
        if (o.rfind("." + name + ".tmp.", 0) == 0 && fs::file_size(dir.file(o), ec) > 0 && !ec) started = true;
      }
      if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(started) << "the child never started writing";
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child finished before it was killed";
    // The target is exactly the old file and loads.
    EXPECT_EQ(slurp(p), old_bytes) << "delay " << delay_ms;
    store::TensorMap m = store::load_safetensors(p);
    EXPECT_EQ(m.metadata.at("version"), "old");
    EXPECT_EQ(m.find("w")->to_vector<float>(), old_w.to_vector<float>());
    // What the kill left is a temporary file (partially written), never the target.
    for (auto& o : others(dir.path, name)) {
      EXPECT_EQ(o.rfind("." + name + ".tmp.", 0), 0u) << o;
      EXPECT_LT(fs::file_size(dir.file(o)), new_bytes.size()) << o;
      fs::remove(dir.file(o));
    }
  }
  // Unkilled, the same writer replaces the file completely.
  store::write_atomic(p, [&](int fd) { store::write_all(fd, new_bytes.data(), new_bytes.size(), p); });
  EXPECT_EQ(slurp(p), new_bytes);
}
