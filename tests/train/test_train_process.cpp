// SPDX-License-Identifier: MIT OR Apache-2.0
// Stopping safely and the dashboard, in child processes: the test binary re-runs itself
// (/proc/self/exe) with a filter selecting TrainChild.DISABLED_Run, which trains a toy model
// slowly. SIGINT (once, then twice) and the dashboard's `q` are checked from outside; the
// dashboard runs in a pseudo-terminal (forkpty) whose screen bytes are read back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <kiln/store.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "train/toy.h"

using namespace kiln;
using namespace kiln::train;
namespace fs = std::filesystem;

namespace {

/// Slows each step down so a parent can interrupt the run.
void child_sleep() {
  const char* ms = std::getenv("KILN_TRAIN_CHILD_STEP_MS");
  std::this_thread::sleep_for(std::chrono::milliseconds(ms ? std::atoi(ms) : 20));
}

}  // namespace

// Not a test on its own (disabled): the body of the child processes below.
TEST(TrainChild, DISABLED_Run) {
  const char* dir = std::getenv("KILN_TRAIN_CHILD_DIR");
  if (!dir) GTEST_SKIP() << "run by the TrainProcess tests";
  Device d = Device::cpu().autodiff();
  manual_seed(1);
  test::ToyMlp net(d);
  optim::Adam opt(net.parameters(), {.lr = 1e-2});
  test::ToySource tr(400, 16, 1), va(64, 32, 2);
  bool dash = std::getenv("KILN_TRAIN_CHILD_DASH") != nullptr;
  Summary s = LearnerBuilder()
                  .model(net,
                         [&](const Tensor& x) {
                           if (net.is_training()) child_sleep();
                           return net.forward(x);
                         })
                  .optimizer(opt)
                  .metric(metrics::accuracy())
                  .device(d)
                  .train_data(tr)
                  .valid_data(va)
                  .epochs(40)
                  .name("child")
                  .runs_dir(dir)
                  .renderer(dash ? std::shared_ptr<Renderer>(dashboard_renderer())
                                 : std::shared_ptr<Renderer>(plain_renderer(stdout, 0)))
                  .build()
                  .fit();
  std::printf("CHILD-END stopped=%d\n", s.stopped ? 1 : 0);
  std::fflush(stdout);
  _exit(s.stopped ? 130 : 0);
}

namespace {

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of its output (a pipe or the pty master)
  std::string out;
  int status = -1;

  /// Reads what is available for up to `ms` milliseconds.
  void pump(int ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0)
          out.append(buf, static_cast<size_t>(n));
        else if (n <= 0)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (status < 0) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) status = st;
      }
      if (status >= 0 && poll(&p, 1, 0) <= 0) return;
    }
  }
  /// Reads until `text` appears (true) or `ms` pass (false).
  bool wait_for(const std::string& text, int ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (out.find(text) == std::string::npos && std::chrono::steady_clock::now() < end && status < 0) pump(50);
    return out.find(text) != std::string::npos;
  }
  /// Waits for the exit (kills the child after `ms`); returns the exit code or -1.
  int finish(int ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (status < 0 && std::chrono::steady_clock::now() < end) pump(50);
    pump(100);
    if (status < 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    close(fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

void exec_child(const std::string& dir, const std::string& step_ms, bool dash) {
  setenv("KILN_TRAIN_CHILD_DIR", dir.c_str(), 1);
  setenv("KILN_TRAIN_CHILD_STEP_MS", step_ms.c_str(), 1);
  if (dash) {
    setenv("KILN_TRAIN_CHILD_DASH", "1", 1);
    setenv("TERM", "xterm", 1);
  }
  setenv("KILN_NUM_THREADS", "1", 1);
  unsetenv("GTEST_TOTAL_SHARDS");  // the child runs its one test, whatever shard runs this one
  unsetenv("GTEST_SHARD_INDEX");
  const char* args[] = {"kiln_tests", "--gtest_filter=TrainChild.DISABLED_Run", "--gtest_also_run_disabled_tests",
                        nullptr};
  execv("/proc/self/exe", const_cast<char* const*>(args));
  _exit(127);
}

Child spawn_piped(const std::string& dir, const std::string& step_ms) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    close(p[0]);
    close(p[1]);
    exec_child(dir, step_ms, false);
  }
  close(p[1]);
  c.fd = p[0];
  return c;
}

std::string temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kiln_trainproc_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

/// The checkpoint loads into a model and optimizer of the same structure.
void expect_checkpoint_loads(const std::string& path, int64_t min_step) {
  ASSERT_TRUE(fs::exists(path)) << path;
  Device d = Device::cpu().autodiff();
  test::ToyMlp net(d);
  optim::Adam opt(net.parameters(), {.lr = 1e-2});
  store::Checkpoint ck;
  ck.model = &net;
  ck.optimizer = &opt;
  store::load_checkpoint(path, ck);
  EXPECT_GE(ck.step, min_step);
  EXPECT_EQ(ck.extra.at("run"), "child");
}

/// No temporary file of an atomic write is left in `dir`.
void expect_no_temp_files(const std::string& dir) {
  for (auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

}  // namespace

TEST(TrainProcess, SigintStopsAfterTheStepWithACompleteCheckpoint) {
  std::string dir = temp_dir("sigint");
  Child c = spawn_piped(dir, "20");
  ASSERT_TRUE(c.wait_for("epoch 2/40 train 3/25", 60000)) << c.out;
  kill(c.pid, SIGINT);
  int code = c.finish(60000);
  EXPECT_EQ(code, 130) << c.out;
  EXPECT_NE(c.out.find("Stopped at epoch 2/40, step "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("checkpoint written to"), std::string::npos);
  EXPECT_NE(c.out.find("CHILD-END stopped=1"), std::string::npos);
  expect_checkpoint_loads(dir + "/child/checkpoints/last.ckpt", 28);
  expect_no_temp_files(dir + "/child/checkpoints");
  fs::remove_all(dir);
}

TEST(TrainProcess, SecondSigintExitsAtOnce) {
  std::string dir = temp_dir("sigint2");
  Child c = spawn_piped(dir, "400");                           // slow steps: the second ^C lands inside a step
  ASSERT_TRUE(c.wait_for("epoch 1 valid:", 120000)) << c.out;  // epoch 1's checkpoints exist
  ASSERT_TRUE(c.wait_for("epoch 2/40 train 1/25", 60000)) << c.out;
  // Step 2 has begun (a signal right after the line could reach the child before it starts the
  // step, and a stop at that boundary exits before the second ^C): both land inside its 400 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(c.pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(c.pid, SIGINT);
  int code = c.finish(20000);
  EXPECT_EQ(code, 130) << c.out;
  EXPECT_NE(c.out.find("interrupted again, exiting now"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("CHILD-END"), std::string::npos) << c.out;  // it did not finish the run
  // What is on disk is complete: the end-of-epoch-1 checkpoint loads.
  expect_checkpoint_loads(dir + "/child/checkpoints/last.ckpt", 25);
  expect_checkpoint_loads(dir + "/child/checkpoints/epoch-1.ckpt", 25);
  fs::remove_all(dir);
}

TEST(TrainProcess, DashboardInAPseudoTerminal) {
  std::string dir = temp_dir("dash");
  winsize ws{};
  ws.ws_row = 30;
  ws.ws_col = 100;
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  ASSERT_GE(pid, 0);
  if (pid == 0) exec_child(dir, "15", true);
  Child c;
  c.pid = pid;
  c.fd = master;
  ASSERT_TRUE(c.wait_for("accuracy", 60000)) << c.out;
  auto bars = [&] { return std::count(c.out.begin(), c.out.end(), '#'); };
  c.pump(300);
  auto early = bars();
  c.pump(2500);
  ASSERT_LT(c.status, 0) << "the child ended early: " << c.out.substr(c.out.size() > 2000 ? c.out.size() - 2000 : 0);
  auto later = bars();
  EXPECT_GT(later, early) << "the progress bar did not move";
  // Resize: ncurses gets SIGWINCH and KEY_RESIZE and redraws.
  ws.ws_row = 40;
  ws.ws_col = 120;
  ioctl(master, TIOCSWINSZ, &ws);
  kill(pid, SIGWINCH);
  c.pump(300);
  // Switch metric, then ask to stop and confirm.
  ASSERT_EQ(write(master, "\x1b[C", 3), 3);  // right arrow
  c.pump(200);
  ASSERT_EQ(write(master, "q", 1), 1);
  EXPECT_TRUE(c.wait_for("Stop training now", 10000)) << c.out.substr(c.out.size() > 3000 ? c.out.size() - 3000 : 0);
  ASSERT_EQ(write(master, "y", 1), 1);
  int code = c.finish(30000);
  EXPECT_EQ(code, 130);
  for (const char* s : {"Kiln", "loss", "accuracy", "ETA", "train", "valid"})
    EXPECT_NE(c.out.find(s), std::string::npos) << s;
  EXPECT_NE(c.out.find("\x1b["), std::string::npos);  // it is a terminal UI
  // Mid-epoch ("Stopped at epoch 3/40, step ...") or, when the confirmation lands as an epoch
  // ends, at its boundary ("Stopped after epoch 8/40"): both stop safely with a checkpoint.
  EXPECT_TRUE(c.out.find("Stopped at epoch") != std::string::npos ||
              c.out.find("Stopped after epoch") != std::string::npos)
      << c.out.substr(c.out.size() > 2000 ? c.out.size() - 2000 : 0);
  expect_checkpoint_loads(dir + "/child/checkpoints/last.ckpt", 50);
  fs::remove_all(dir);
}
