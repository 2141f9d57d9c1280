// Random corruptions of every parser's input: each must either parse or throw kiln::Error,
// never crash, hang or throw anything else (docs/architecture.md, Testing: hostile input).
#include <gtest/gtest.h>
#include <kiln/data.h>

#include "data/data_test_util.h"

namespace kd = kiln::data;
using kiln::test::data_fixture;
using kiln::test::TempDir;

namespace {

// Calls parse(bytes) on `rounds` mutations of `seed_bytes` (flipped bytes, truncations,
// insertions); returns how many parsed successfully. Fails on any non-kiln::Error exception.
template <class F>
int fuzz(const std::vector<uint8_t>& seed_bytes, int rounds, uint64_t seed, F parse) {
  kd::Rng rng(seed);
  int ok = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<uint8_t> b = seed_bytes;
    switch (rng.below(3)) {
      case 0:
        for (uint64_t k = 0, n = 1 + rng.below(4); k < n && !b.empty(); ++k)
          b[rng.below(b.size())] = static_cast<uint8_t>(rng.below(256));
        break;
      case 1:
        b.resize(rng.below(b.size() + 1));
        break;
      default:
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(b.size() + 1)),
                 static_cast<uint8_t>(rng.below(256)));
    }
    try {
      parse(b);
      ++ok;
    } catch (const kiln::Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "round " << r << ": a non-kiln exception: " << e.what();
    }
  }
  return ok;
}

}  // namespace

TEST(DataFuzz, ImagesNeverCrash) {
  for (const char* name : {"gray.png", "rgb.png", "palette.png"})
    fuzz(kiln::test::read_bytes(data_fixture(name)), 300, 1,
         [&](const std::vector<uint8_t>& b) { kd::decode_png(b, name); });
  fuzz(kiln::test::read_bytes(data_fixture("rgb.jpg")), 300, 2,
       [](const std::vector<uint8_t>& b) { kd::decode_jpeg(b, "rgb.jpg"); });
}

TEST(DataFuzz, IdxAndCsvNeverCrash) {
  TempDir dir;
  std::vector<uint8_t> idx = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};
  int ok = fuzz(idx, 400, 3, [&](const std::vector<uint8_t>& b) {
    kiln::test::write_bytes(dir.file("f.idx"), b);
    kd::read_idx(dir.file("f.idx"));
  });
  EXPECT_LT(ok, 400);  // most corruptions are caught
  std::vector<uint8_t> csv = kiln::test::read_bytes(data_fixture("small.csv"));
  fuzz(csv, 400, 4, [](const std::vector<uint8_t>& b) {
    kd::parse_csv(std::string(b.begin(), b.end()), {.types = {{"id", kd::ColumnType::Int64}}});
  });
}
