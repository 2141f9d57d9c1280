// Helpers shared by the tests of kiln::data.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace kiln::test {

/// tests/fixtures/data.
inline std::string data_fixture(const std::string& name) {
  return std::string(KILN_GOLDEN_DIR) + "/../fixtures/data/" + name;
}

/// A fresh temporary directory removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("kiln_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// Whitespace-separated numbers of line `line` (0-based) of a text file.
inline std::vector<double> read_numbers(const std::string& path, int line = 0) {
  std::ifstream f(path);
  std::string s;
  for (int i = 0; i <= line; ++i) std::getline(f, s);
  std::istringstream is(s);
  std::vector<double> v;
  double x;
  while (is >> x) v.push_back(x);
  return v;
}

}  // namespace kiln::test
