// SPDX-License-Identifier: MIT OR Apache-2.0
// The tool runner both C++ compilers use (core/cache_folder.h): input, log, exit status and the
// process group a caller ends a tool by.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/cache_folder.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Folder {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln-run-tool-" + std::to_string(getpid()));
  Folder() { std::filesystem::create_directories(dir); }
  ~Folder() { std::filesystem::remove_all(dir); }
  std::string at(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace

TEST(CacheFolder, RunToolGivesInputTakesOutputAndExitStatus) {
  Folder f;
  std::ofstream(f.at("in.txt")) << "from the input file\n";
  const std::string log = f.at("log.txt");
  int pid = 0;
  const int rc = kiln::cache_folder::run_tool({"sh", "-c", "cat; echo to-stderr >&2; exit 3"}, f.at("in.txt"), log,
                                              [&](int p) { pid = p; });
  EXPECT_EQ(rc, 3);
  EXPECT_GT(pid, 0);
  const std::string text = read(log);
  EXPECT_NE(text.find("from the input file"), std::string::npos) << text;
  EXPECT_NE(text.find("to-stderr"), std::string::npos) << text;
  // No input file: standard input is empty (cat ends at once).
  EXPECT_EQ(kiln::cache_folder::run_tool({"sh", "-c", "cat"}, "", log), 0);
  EXPECT_EQ(read(log), "");
}

TEST(CacheFolder, RunToolRunsInItsOwnProcessGroup) {
  Folder f;
  int group = -1, pid = 0;
  const int rc = kiln::cache_folder::run_tool({"sh", "-c", "sleep 0.2"}, "", f.at("log.txt"), [&](int p) {
    pid = p;
    group = getpgid(p);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(group, pid);
  EXPECT_NE(group, getpgrp());
}

TEST(CacheFolder, RunToolReportsToolsThatCannotStartOrDie) {
  Folder f;
  EXPECT_EQ(kiln::cache_folder::run_tool({"/nonexistent/kiln-tool"}, "", f.at("log.txt")), -1);
  EXPECT_EQ(kiln::cache_folder::run_tool({}, "", f.at("log.txt")), -1);
  EXPECT_EQ(kiln::cache_folder::run_tool({"sh", "-c", "kill -9 $$"}, "", f.at("log.txt")), -1);
}
