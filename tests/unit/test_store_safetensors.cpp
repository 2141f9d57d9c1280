// SPDX-License-Identifier: MIT OR Apache-2.0
// safetensors: round trips of every dtype, zero-copy loading, files written by Python's
// safetensors (tests/fixtures/safetensors, made by scripts/gen_safetensors_fixtures.py), and one
// test per malformed-header case.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/store.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/file_util.h"
#include "test_paths.h"
#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(KILN_GOLDEN_DIR) + "/../fixtures/safetensors/";

/// A fresh folder under /tmp, removed with the object.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kiln_st_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> b(static_cast<size_t>(t.numel()) * t.element_size());
  t.copy_to_host(b.data(), t.dtype());
  return b;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// Expects the two tensors to have the same dtype, shape and bytes.
void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  EXPECT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(bytes_of(a), bytes_of(b)) << what;
}

/// A tensor of `dtype` and `shape` with varied values (bit patterns for f16/bf16).
Tensor sample(DType dtype, const Shape& shape) {
  int64_t n = shape_numel(shape);
  if (dtype == DType::F16 || dtype == DType::BF16) {
    // Raw bit patterns: zero, -0, subnormals, inf, NaN with a payload, ordinary values.
    const uint16_t pat[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e01, 0x3c00, 0xc0a0, 0x7bff, 0x1234};
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = pat[i % 11];
    return from_blob_copy(v.data(), shape, dtype, Device::cpu());
  }
  Tensor t = arange(n, DType::F64).sub(static_cast<double>(n) / 3).mul(1.37);
  if (dtype == DType::Bool) t = t.gt(0);
  return t.to(dtype).reshape(shape);
}

std::vector<uint8_t> st_bytes(const std::string& header, size_t data_bytes = 0, uint8_t fill = 0) {
  std::vector<uint8_t> b(8);
  uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data_bytes, fill);
  return b;
}

std::string parse_error(const std::vector<uint8_t>& b) {
  return test::error_of([&] { store::parse_safetensors(b.data(), b.size(), "evil.safetensors"); });
}

}  // namespace

#define EXPECT_BAD(bytes, needle)                                                   \
  do {                                                                              \
    std::string m_ = parse_error(bytes);                                            \
    EXPECT_NE(m_.find(needle), std::string::npos) << "message: " << m_;             \
    EXPECT_NE(m_.find("evil.safetensors"), std::string::npos) << "message: " << m_; \
  } while (0)

// ---- round trips ----------------------------------------------------------------------------

TEST(Safetensors, RoundTripEveryDtypeAndShape) {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> ts;
  const DType all[] = {DType::Bool, DType::U8,  DType::I8,   DType::I16, DType::I32,
                       DType::I64,  DType::F16, DType::BF16, DType::F32, DType::F64};
  for (DType d : all) {
    std::string n(dtype_name(d));
    ts.emplace_back(n + ".2x3", sample(d, {2, 3}));
    ts.emplace_back(n + ".scalar", sample(d, {}));
    ts.emplace_back(n + ".empty", sample(d, {0, 4}));
    ts.emplace_back(n + ".3d", sample(d, {2, 1, 5}));
  }
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"epoch", "3"}, {"note", "a \"quoted\" \xc3\xa9"}};
  std::string path = dir.file("all.safetensors");
  store::save_safetensors(path, ts, meta);
  for (bool mmap : {true, false}) {
    store::TensorMap m = store::load_safetensors(path, {.mmap = mmap});
    ASSERT_EQ(m.tensors.size(), ts.size());
    EXPECT_EQ(m.metadata, meta);
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(m.tensors[i].first, ts[i].first) << "file order";
      expect_identical(m.tensors[i].second, ts[i].second, ts[i].first + (mmap ? " mmap" : " read"));
    }
    const Tensor* f = m.find("f32.2x3");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->shape(), (Shape{2, 3}));
    EXPECT_EQ(m.find("nope"), nullptr);
  }
  // The data section starts 8-byte aligned like the Python writer's.
  auto b = file_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(b[8 + n - 1] == ' ' || b[8 + n - 1] == '}', true);
}

TEST(Safetensors, NonContiguousAndViewTensorsAreSavedAsTheirValues) {
  TempDir dir;
  Tensor base = arange(24, DType::F32).reshape({4, 6});
  Tensor tr = base.t();                                   // transposed
  Tensor sl = base.index({Slice{1, 3}, Slice{0, 6, 2}});  // strided, offset
  Tensor bc = tensor<int32_t>({1, 2, 3}).expand({2, 3});  // stride 0
  std::string path = dir.file("views.safetensors");
  store::save_safetensors(path, {{"tr", tr}, {"sl", sl}, {"bc", bc}});
  store::TensorMap m = store::load_safetensors(path);
  expect_identical(*m.find("tr"), tr.contiguous(), "tr");
  expect_identical(*m.find("sl"), sl.contiguous(), "sl");
  expect_identical(*m.find("bc"), bc.contiguous(), "bc");
  EXPECT_TRUE(m.find("tr")->is_contiguous());
}

TEST(Safetensors, AutodiffDeviceTensorsSaveAndLoad) {
  TempDir dir;
  Device ad = Device::cpu().autodiff();
  Tensor w = randn({3, 2}, {.device = ad}).require_grad();
  std::string path = dir.file("ad.safetensors");
  store::save_safetensors(path, {{"w", w}});
  store::TensorMap m = store::load_safetensors(path, {.device = ad});
  EXPECT_EQ(m.find("w")->device(), ad);
  expect_identical(*m.find("w"), w.detach(), "w");
}

TEST(Safetensors, NullDeviceLoadsShapesOnly) {
  TempDir dir;
  std::string path = dir.file("n.safetensors");
  store::save_safetensors(path, {{"a", ones({2, 5})}});
  for (bool mmap : {true, false}) {
    store::TensorMap m = store::load_safetensors(path, {.device = Device::null(), .mmap = mmap});
    EXPECT_EQ(m.find("a")->shape(), (Shape{2, 5}));
    EXPECT_TRUE(m.find("a")->device().is_null());
  }
}

TEST(Safetensors, SaveRejectsBadNames) {
  TempDir dir;
  std::string p = dir.file("x.safetensors");
  Tensor t = ones({2});
  EXPECT_ERROR(store::save_safetensors(p, {{"a", t}, {"a", t}}), "used twice");
  EXPECT_ERROR(store::save_safetensors(p, {{"", t}}), "must not be empty");
  EXPECT_ERROR(store::save_safetensors(p, {{"__metadata__", t}}), "cannot name a tensor");
  EXPECT_ERROR(store::save_safetensors(p, {{"u", Tensor()}}), "undefined");
  EXPECT_ERROR(store::save_safetensors(p, {{"bad\xff", t}}), "UTF-8");
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(fs::is_empty(dir.path)) << "no temporary file left behind";
}

// ---- zero copy --------------------------------------------------------------------------------

TEST(Safetensors, MmapLoadPointsIntoTheMapping) {
  TempDir dir;
  std::string path = dir.file("z.safetensors");
  Tensor a = randn({64, 32}), b = arange(100, DType::I64), h = randn({7}).to(DType::F16);
  store::save_safetensors(path, {{"a", a}, {"b", b}, {"h", h}});
  // On the plain CPU the storages are the mapping's own (external) memory.
  store::TensorMap m = store::load_safetensors(path, {.device = Device::cpu().without_fusion()});
  const Storage* first = nullptr;
  for (auto& [name, t] : m.tensors) {
    const auto& s = t.impl().storage;
    // The storage's owner is the file mapping and its data pointer lies inside it: no copy.
    ASSERT_NE(s->external, nullptr) << name;
    auto map = std::static_pointer_cast<store::MappedFile>(s->external);
    EXPECT_EQ(map->path(), path);
    EXPECT_TRUE(map->contains(s->data)) << name;
    EXPECT_TRUE(map->contains(static_cast<uint8_t*>(s->data) + s->nbytes - 1)) << name;
    // And it holds exactly the file's bytes at that position.
    auto fb = file_bytes(path);
    size_t off = static_cast<size_t>(static_cast<uint8_t*>(s->data) - map->data());
    EXPECT_EQ(std::memcmp(fb.data() + off, s->data, s->nbytes), 0) << name;
    if (!first) first = s.get();
  }
  {
    // On the fused CPU too: the tensors' host memory lies in a mapping of the file (the
    // distance between two tensors is their distance in the file).
    store::TensorMap f = store::load_safetensors(path, {.device = Device::cpu().without_fusion().fusion()});
    auto* pa = static_cast<uint8_t*>(host_storage_data(*f.find("a")));
    auto* ph = static_cast<uint8_t*>(host_storage_data(*f.find("h")));
    auto* qa = static_cast<uint8_t*>(m.find("a")->impl().storage->data);
    auto* qh = static_cast<uint8_t*>(m.find("h")->impl().storage->data);
    ASSERT_NE(pa, nullptr);
    EXPECT_EQ(ph - pa, qh - qa);
    expect_identical(*f.find("a"), a, "a on the fused CPU");
    expect_identical(*f.find("h"), h, "h on the fused CPU");
  }
  expect_identical(*m.find("a"), a, "a");
  expect_identical(*m.find("h"), h, "h");
  // With mmap = false the data is copied into buffers of the backend.
  store::TensorMap c = store::load_safetensors(path, {.mmap = false});
  EXPECT_EQ(c.find("a")->impl().storage->external, nullptr);
  expect_identical(*c.find("a"), a, "a copied");
  // Tensors keep the mapping alive after the map is gone.
  Tensor keep = *m.find("b");
  m = {};
  expect_identical(keep, b, "b after the TensorMap is gone");
}

TEST(Safetensors, InPlaceOpOnMappedTensorDoesNotChangeTheFile) {
  TempDir dir;
  std::string path = dir.file("cow.safetensors");
  Tensor a = arange(1000, DType::F32);
  store::save_safetensors(path, {{"a", a}});
  auto before = file_bytes(path);
  {
    store::TensorMap m = store::load_safetensors(path, {.device = Device::cpu().without_fusion()});
    Tensor t = *m.find("a");
    ASSERT_NE(t.impl().storage->external, nullptr);
    t.mul_(2.0).add_(1.0);
    t.index({Slice{0, 10}}).fill_(-5.0);
    EXPECT_EQ(t.to_vector<float>()[0], -5.0f);
    EXPECT_EQ(t.to_vector<float>()[500], 1001.0f);
    // A second load still sees the file's values.
    store::TensorMap m2 = store::load_safetensors(path);
    expect_identical(*m2.find("a"), a, "fresh mmap load");
  }
  EXPECT_EQ(file_bytes(path), before);
}

TEST(Safetensors, UnalignedDataIsCopied) {
  // A hand-made file whose F32 tensor starts at an odd address: loads by copying.
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )";  // 8 + 57 bytes: odd
  ASSERT_EQ((8 + header.size()) % 4 != 0, true);
  auto b = st_bytes(header);
  float v[2] = {1.5f, -2.25f};
  b.insert(b.end(), reinterpret_cast<uint8_t*>(v), reinterpret_cast<uint8_t*>(v) + 8);
  TempDir dir;
  std::string path = dir.file("odd.safetensors");
  write_bytes(path, b);
  store::TensorMap m = store::load_safetensors(path);
  EXPECT_EQ(m.find("x")->impl().storage->external, nullptr);
  EXPECT_EQ(m.find("x")->to_vector<float>(), (std::vector<float>{1.5f, -2.25f}));
}

// ---- files written by Python ------------------------------------------------------------------

TEST(Safetensors, PythonFixtureLoadsAndKilnWritesTheSameFile) {
  std::ifstream jf(kFixtures + "py_all_dtypes.json");
  ASSERT_TRUE(jf.good()) << kFixtures;
  nlohmann::json want = nlohmann::json::parse(jf);
  for (bool mmap : {true, false}) {
    store::TensorMap m = store::load_safetensors(kFixtures + "py_all_dtypes.safetensors", {.mmap = mmap});
    EXPECT_EQ(m.metadata, want["metadata"].get<decltype(m.metadata)>());
    ASSERT_EQ(m.tensors.size(), want["tensors"].size());
    for (auto& [name, e] : want["tensors"].items()) {
      const Tensor* t = m.find(name);
      ASSERT_NE(t, nullptr) << name;
      std::string dt = e["dtype"];
      std::string kd(dtype_name(t->dtype()));
      for (auto& c : kd) c = static_cast<char>(std::toupper(c));
      EXPECT_EQ(kd, dt) << name;
      auto sv = e["shape"].get<std::vector<int64_t>>();
      EXPECT_EQ(t->shape(), Shape(sv.begin(), sv.end())) << name;
      std::string hex;
      for (uint8_t byte : bytes_of(*t)) {
        static const char* h = "0123456789abcdef";
        hex += h[byte >> 4];
        hex += h[byte & 15];
      }
      EXPECT_EQ(hex, e["hex"].get<std::string>()) << name;
    }
  }
  // Saving what we loaded gives the checked-in kiln_written.safetensors byte for byte; the
  // script's --check mode loads that file in Python safetensors and PyTorch.
  store::TensorMap m = store::load_safetensors(kFixtures + "py_all_dtypes.safetensors");
  TempDir dir;
  std::string out = getenv("KILN_REGEN_FIXTURES") ? kFixtures + "kiln_written.safetensors" : dir.file("k.safetensors");
  store::save_safetensors(out, m.tensors, m.metadata);
  EXPECT_EQ(file_bytes(out), file_bytes(kFixtures + "kiln_written.safetensors"));
  // And Kiln reads its own file back identically.
  store::TensorMap back = store::load_safetensors(out);
  for (size_t i = 0; i < m.tensors.size(); ++i)
    expect_identical(back.tensors[i].second, m.tensors[i].second, m.tensors[i].first);
}

// ---- store::read ------------------------------------------------------------------------------

TEST(Safetensors, ReadDispatchesByContent) {
  TempDir dir;
  std::string p = dir.file("weights.bin");  // the extension does not matter
  store::save_safetensors(p, {{"a", ones({3})}});
  EXPECT_EQ(store::read(p).find("a")->shape(), (Shape{3}));
  write_bytes(dir.file("short"), {'{'});
  EXPECT_ERROR(store::read(dir.file("short")), "too short");
  write_bytes(dir.file("seven"), {1, 0, 0, 0, 0, 0, 0});
  EXPECT_ERROR(store::read(dir.file("seven")), "too short");
  // A zip or a pickle goes to the PyTorch reader, which rejects this junk with a kiln::Error.
  write_bytes(dir.file("zip"), {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0});
  EXPECT_NE(test::error_of([&] { store::read(dir.file("zip")); }), "");
  write_bytes(dir.file("pkl"), {0x80, 2, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_NE(test::error_of([&] { store::read(dir.file("pkl")); }), "");
  EXPECT_ERROR(store::read(dir.file("missing")), "cannot open");
}

// A safetensors header length whose low byte is 0x80 (one file in 32) starts like a pickle;
// read() must still pick safetensors.
TEST(Safetensors, ReadDispatchesHeaderLengthEndingIn0x80) {
  TempDir dir;
  std::string p = dir.file("w.safetensors");
  bool hit = false;
  for (int n = 0; n < 64 && !hit; ++n) {
    store::save_safetensors(p, {{"a", ones({3})}}, {{"note", std::string(static_cast<size_t>(n), 'x')}});
    std::ifstream f(p, std::ios::binary);
    hit = f.get() == 0x80;
  }
  ASSERT_TRUE(hit);
  store::TensorMap tm = store::read(p);
  EXPECT_EQ(tm.find("a")->shape(), (Shape{3}));
}

// ---- hostile files ----------------------------------------------------------------------------

TEST(SafetensorsHostile, TooShort) {
  EXPECT_BAD(std::vector<uint8_t>{}, "too short");
  EXPECT_BAD(std::vector<uint8_t>(7, 0), "too short");
}

TEST(SafetensorsHostile, HeaderLength) {
  auto b = st_bytes("{}");
  uint64_t n = 100;
  std::memcpy(b.data(), &n, 8);
  EXPECT_BAD(b, "runs past the end");
  n = 200'000'000;
  std::memcpy(b.data(), &n, 8);
  EXPECT_BAD(b, "larger than the limit");
  n = UINT64_MAX;
  std::memcpy(b.data(), &n, 8);
  EXPECT_BAD(b, "larger than the limit");
  EXPECT_BAD(st_bytes(""), "cannot hold a JSON object");
  // 99 MB claimed, 10 bytes present: rejected before anything is allocated.
  n = 99'000'000;
  std::memcpy(b.data(), &n, 8);
  EXPECT_BAD(b, "runs past the end");
}

TEST(SafetensorsHostile, NotJsonOrNotAnObject) {
  EXPECT_BAD(st_bytes("{abc"), "not valid JSON");
  EXPECT_BAD(st_bytes("{\"a\":1} trailing"), "not valid JSON");
  EXPECT_BAD(st_bytes("[1, 2]"), "must be a JSON object");
  EXPECT_BAD(st_bytes("\"str\""), "must be a JSON object");
  EXPECT_BAD(st_bytes("{\"bad\xff\":1}"), "not valid JSON");
  EXPECT_BAD(st_bytes(std::string(100000, '[')), "nested deeper");
  EXPECT_BAD(st_bytes("{\"a\":" + std::string(50, '{')), "nested deeper");
  EXPECT_BAD(st_bytes("{\"a\": 3}"), "entry must be an object");
  EXPECT_EQ(parse_error(st_bytes("{}")), "");  // an empty file is fine
  EXPECT_EQ(parse_error(st_bytes("{}      ")), "");
}

TEST(SafetensorsHostile, WrongValueTypes) {
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":5,"shape":[1],"data_offsets":[0,4]}})", 4), "dtype must be a string");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":7,"data_offsets":[0,4]}})", 4), "shape must be an array");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}})", 4), "must be an integer");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4), "must be an integer");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":{"b":0}}})", 4), "[begin, end]");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4), "[begin, end]");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,null]}})", 4), "must be an integer");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "missing \"data_offsets\"");
  EXPECT_BAD(st_bytes(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4), "missing \"dtype\"");
}

TEST(SafetensorsHostile, UnknownDtype) {
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", 4), "unknown dtype 'Q7'");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1),
             "'F8_E4M3' is not supported");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4), "unknown dtype 'f32'");
}

TEST(SafetensorsHostile, BadShapes) {
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "negative");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
             "overflows 64 bits");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4), "byte size");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,4]}})", 4), "too large");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"U8","shape":[1e300],"data_offsets":[0,4]}})", 4), "must be an integer");
  // A zero dim makes an otherwise huge shape empty: fine.
  EXPECT_EQ(parse_error(st_bytes(R"({"a":{"dtype":"F64","shape":[0,9223372036854775807],"data_offsets":[0,0]}})")), "");
}

TEST(SafetensorsHostile, BadOffsets) {
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4), "end before they begin");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", 4), "run past the end");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", 4),
             "run past the end");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4), "negative");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4), "needs 8");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      12),
             "overlap");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                      4),
             "overlap");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                      12),
             "hole");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "hole");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8), "trailing bytes");
  // Out of order in the header but covering the data exactly: fine, loaded in data order.
  auto ok = st_bytes(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                     R"("a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
                     4, 7);
  store::TensorMap m = store::parse_safetensors(ok.data(), ok.size());
  EXPECT_EQ(m.tensors[0].first, "a");
  EXPECT_EQ(m.find("b")->to_vector<uint8_t>(), (std::vector<uint8_t>{7, 7}));
}

TEST(SafetensorsHostile, DuplicateNamesAndMetadata) {
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                      R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                      2),
             "'a' twice");
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1), "twice");
  EXPECT_BAD(st_bytes(R"({"__metadata__":3})"), "__metadata__ must be an object");
  EXPECT_BAD(st_bytes(R"({"__metadata__":{"k":1}})"), "entry 'k' must be a string");
  EXPECT_BAD(st_bytes(R"({"__metadata__":{"k":{"x":"y"}}})"), "must be a string");
  auto ok = st_bytes(R"({"__metadata__":{"k":"v"}})");
  EXPECT_EQ(store::parse_safetensors(ok.data(), ok.size()).metadata.at("k"), "v");
}

TEST(SafetensorsHostile, BoolBytesMustBeZeroOrOne) {
  EXPECT_BAD(st_bytes(R"({"a":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", 3, 2), "only 0 and 1");
}

TEST(SafetensorsHostile, TruncatedAndMissingFiles) {
  TempDir dir;
  std::string p = dir.file("t.safetensors");
  store::save_safetensors(p, {{"a", randn({100})}});
  auto b = file_bytes(p);
  for (size_t cut : {size_t{3}, size_t{8}, size_t{20}, b.size() - 1}) {
    write_bytes(p, std::vector<uint8_t>(b.begin(), b.begin() + static_cast<long>(cut)));
    for (bool mmap : {true, false}) {
      std::string m = test::error_of([&] { store::load_safetensors(p, {.mmap = mmap}); });
      EXPECT_NE(m.find(p), std::string::npos) << cut << ": " << m;
      EXPECT_NE(m.find("[safetensors]"), std::string::npos) << cut << ": " << m;
    }
  }
  EXPECT_ERROR(store::load_safetensors(dir.file("none.safetensors")), "cannot open");
  EXPECT_ERROR(store::load_safetensors(dir.path), "is a directory");
  EXPECT_ERROR(store::load_safetensors(dir.path, {.mmap = false}), "safetensors");
}
