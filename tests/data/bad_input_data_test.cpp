// SPDX-License-Identifier: MIT OR Apache-2.0
// Bad-input suite, data sources (kiln/data.h): missing, empty, corrupted and misplaced files and
// bad arguments; each must throw kiln::Error starting with the source's "[data::name]" (parse_csv
// reports as data::read_csv; harness: tests/unit/bad_input.h). Readers load onto the CPU, so
// each reader case runs once.
#include <kiln/data.h>

#include <filesystem>
#include <fstream>

#include "unit/bad_input.h"

using namespace kiln;
namespace kd = kiln::data;
namespace fs = std::filesystem;
using kiln::test::bad::Case;
using kiln::test::bad::Env;
using kiln::test::bad::kCpus;
using kiln::test::bad::kFused;

namespace {

/// A fresh, empty folder under the test temp dir.
fs::path scratch(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("kiln_bad_data_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string file_with(const std::string& name, const std::string& bytes) {
  fs::path f = scratch(name) / name;
  std::ofstream(f, std::ios::binary) << bytes;
  return f.string();
}

const std::vector<Case>& data_cases() {
  static const std::vector<Case> cases = {
      CASE(idx_missing, "data::read_idx", kFused, kd::read_idx((scratch("idx_missing") / "x.idx").string())),
      CASE(idx_directory, "data::read_idx", kFused, kd::read_idx(scratch("idx_dir").string())),
      CASE(idx_bad_magic, "data::read_idx", kFused, kd::read_idx(file_with("bad.idx", "\x01\x02\x08\x01"))),
      CASE(idx_truncated, "data::read_idx", kFused,
           kd::read_idx(file_with("short.idx", std::string("\0\0\x08\x01\0\0\0\x09", 8) + "abc"))),
      CASE(csv_missing, "data::read_csv", kFused, kd::read_csv((scratch("csv_missing") / "t.csv").string())),
      CASE(csv_directory, "data::read_csv", kFused, kd::read_csv(scratch("csv_dir").string())),
      CASE(csv_ragged_rows, "data::read_csv", kFused, kd::parse_csv("a,b\n1,2\n3\n")),
      CASE(csv_names_mismatch, "data::read_csv", kFused, kd::parse_csv("1,2\n", {.header = false, .names = {"a"}})),
      CASE(png_garbage, "data::decode_png", kFused, kd::decode_png({0x89, 'P', 'N', 'G', 1, 2, 3})),
      CASE(jpeg_garbage, "data::decode_jpeg", kFused, kd::decode_jpeg({0xFF, 0xD8, 0xFF, 0x00, 1})),
      CASE(image_directory, "data::read_image", kFused, kd::read_image(scratch("img_dir").string())),
      CASE(image_folder_missing_root, "data::image_folder", kFused,
           kd::image_folder((scratch("if") / "none").string())),
      CASE(write_png_missing_parent, "data::write_png", kFused,
           kd::write_png((scratch("png_out") / "no" / "x.png").string(), zeros({3, 2, 2}, {.dtype = DType::U8}))),
      CASE(write_png_bad_rank, "data::write_png", kFused,
           kd::write_png((scratch("png_rank") / "x.png").string(), zeros({2}, {.dtype = DType::U8}))),
      CASE(normalize_mean_size, "data::normalize", kCpus, kd::normalize(e.f({3, 2, 2}), {0.5, 0.5}, {1, 1, 1})),
      CASE(resize_negative, "data::resize", kCpus, kd::resize(e.f({3, 4, 4}), -1, 4)),
      CASE(to_tensor_bad_rank, "data::to_tensor", kCpus, kd::to_tensor(e.f({4}, DType::U8))),
  };
  return cases;
}

}  // namespace

KILN_BAD_INPUT_SUITE(BadInputData, data_cases);
