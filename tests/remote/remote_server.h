// SPDX-License-Identifier: MIT OR Apache-2.0
// A kiln-server process for the remote device's tests: started on 127.0.0.1:0 with a fresh
// token, its chosen port read from its first line, its log kept in a file, stopped (or killed)
// by the test.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"

extern char** environ;

namespace kiln::test {

/// Starts `argv` with stdout into a pipe (returned in out_fd) and stderr into err_path.
inline pid_t spawn_process(const std::vector<std::string>& argv, int* out_fd, const std::string& err_path) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  *out_fd = fds[0];
  return pid;
}

/// Reads one line from fd, waiting at most `seconds`; "" on timeout or end of file.
inline std::string read_line(int fd, double seconds) {
  std::string line;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char c;
    if (read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line += c;
  }
  return line;
}

/// Waits up to `seconds` until every thread of process `pid` is stopped (SIGSTOP takes effect
/// asynchronously); false on timeout.
inline bool wait_stopped(pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  while (std::chrono::steady_clock::now() < end) {
    bool all = true;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
      std::ifstream f(t.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const size_t paren = stat.rfind(')');  // "pid (name) S ...": the state follows the name
      all = all && paren != std::string::npos && paren + 2 < stat.size() &&
            (stat[paren + 2] == 'T' || stat[paren + 2] == 't');
    }
    if (all && !ec) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra = {}, const std::string& device = "cpu-plain") {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_remote_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    std::random_device rd;
    token_ = std::to_string(rd());  // (appended piece by piece: GCC 12's -Wrestrict misfires on a + b + c at -O3)
    token_ += std::to_string(rd());
    std::ofstream(dir_ / "token") << token_ << "\n";
    std::vector<std::string> argv{
        KILN_SERVER_TOOL, "--device", device, "--listen", "127.0.0.1:0", "--token-file", (dir_ / "token").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // KILN_REMOTE_SERVER_PREFIX="valgrind -q --log-file=/tmp/vg.%p" runs the server under a tool.
    if (const char* prefix = std::getenv("KILN_REMOTE_SERVER_PREFIX")) {
      std::vector<std::string> pre;
      std::istringstream words(prefix);
      for (std::string w; words >> w;) pre.push_back(w);
      argv.insert(argv.begin(), pre.begin(), pre.end());
    }
    pid_ = spawn_process(argv, &out_, log_path());
    const std::string line = read_line(out_, 60);
    const size_t colon = line.rfind(':'), space = line.find(' ', colon);
    if (pid_ > 0 && colon != std::string::npos) port_ = std::atoi(line.substr(colon + 1, space - colon - 1).c_str());
  }
  ~ServerProcess() {
    stop();
    if (out_ >= 0) close(out_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return pid_ > 0 && port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "ws://127.0.0.1:" + std::to_string(port_); }
  const std::string& token() const { return token_; }
  std::string log_path() const { return (dir_ / "log").string(); }
  std::string log() const {
    std::ifstream f(log_path());
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  /// Waits up to `seconds` for `text` to appear in the log.
  bool wait_log(const std::string& text, double seconds) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  /// Whether the process still runs.
  bool alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  void kill9() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  std::filesystem::path dir_;
  std::string token_;
  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
};

}  // namespace kiln::test
