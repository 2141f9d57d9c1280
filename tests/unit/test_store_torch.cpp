// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::store::load_torch / parse_torch: fixtures written by scripts/gen_torch_fixtures.py
// (PyTorch's own torch.save) load with exact values, views share storage, and hostile bytes
// built here raise kiln::Error instead of crashing, hanging or allocating without bound.
#include <gtest/gtest.h>
#include <kiln/ops.h>
#include <kiln/store.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/backend.h"
#include "store/zip.h"
#include "test_paths.h"
#include "test_util.h"

using namespace kiln;
using kiln::store::TensorMap;

namespace {

const std::string kDir = std::string(KILN_GOLDEN_DIR) + "/../fixtures/torch/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Expected {
  std::string file, name, dtype;
  Shape shape;
  std::vector<double> values;
};

struct ExpectedAll {
  std::vector<Expected> tensors;
  std::vector<std::tuple<std::string, std::string, std::string>> meta;    // file, name, text
  std::vector<std::tuple<std::string, std::string, std::string>> shared;  // file, a, b
};

const ExpectedAll& expected() {
  static ExpectedAll e = [] {
    ExpectedAll all;
    std::ifstream f(kDir + "expected.txt");
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      std::istringstream is(line);
      std::string kind, file;
      is >> kind >> file;
      if (kind == "T") {
        Expected x;
        x.file = file;
        int ndim = 0;
        is >> x.name >> x.dtype >> ndim;
        for (int d = 0; d < ndim; ++d) {
          int64_t s;
          is >> s;
          x.shape.push_back(s);
        }
        std::string v;
        while (is >> v) x.values.push_back(std::strtod(v.c_str(), nullptr));
        all.tensors.push_back(std::move(x));
      } else if (kind == "M") {
        std::string rest;
        std::getline(is, rest);
        auto tab = rest.find('\t');
        all.meta.emplace_back(file, rest.substr(1, tab - 1), rest.substr(tab + 1));
      } else if (kind == "S") {
        std::string a, b;
        is >> a >> b;
        all.shared.emplace_back(file, a, b);
      }
    }
    return all;
  }();
  return e;
}

void check_fixture(const std::string& file, const TensorMap& m) {
  size_t count = 0;
  for (const auto& x : expected().tensors) {
    if (x.file != file) continue;
    ++count;
    const Tensor* t = m.find(x.name);
    ASSERT_NE(t, nullptr) << file << ": missing " << x.name;
    EXPECT_EQ(std::string(dtype_name(t->dtype())), x.dtype) << file << " " << x.name;
    EXPECT_EQ(t->shape(), x.shape) << file << " " << x.name;
    EXPECT_EQ(t->to_vector<double>(), x.values) << file << " " << x.name;
  }
  EXPECT_GT(count, 0u) << file;
  EXPECT_EQ(m.tensors.size(), count) << file << ": unexpected extra tensors";
  for (const auto& [f, name, text] : expected().meta) {
    if (f != file) continue;
    auto it = m.metadata.find(name);
    ASSERT_NE(it, m.metadata.end()) << file << ": missing metadata " << name;
    EXPECT_EQ(it->second, text) << file << " " << name;
  }
  for (const auto& [f, a, b] : expected().shared) {
    if (f != file) continue;
    ASSERT_TRUE(m.find(a) && m.find(b));
    EXPECT_TRUE(m.find(a)->is_same_storage(*m.find(b))) << file << ": " << a << " and " << b;
  }
}

const char* kGood[] = {"state_dict.pt",
                       "state_dict_legacy.pt",
                       "state_dict_proto4.pt",
                       "checkpoint.pt",
                       "views.pt",
                       "views_legacy.pt",
                       "dtypes.pt",
                       "misc.pt",
                       "unsigned.pt"};

// ---- a tiny zip writer and pickle builder for hostile inputs ---------------------------------

void put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}
void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v));
  put32(s, static_cast<uint32_t>(v >> 32));
}

struct ZipMember {
  std::string name, data;
  bool deflate = false;
  int64_t declared_size = -1;  // overrides the uncompressed size in the directory
};

std::string deflate_raw(const std::string& in) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string make_zip(const std::vector<ZipMember>& members) {
  std::string out, cd;
  for (const auto& m : members) {
    std::string body = m.deflate ? deflate_raw(m.data) : m.data;
    uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size())));
    uint32_t usize =
        m.declared_size >= 0 ? static_cast<uint32_t>(m.declared_size) : static_cast<uint32_t>(m.data.size());
    uint32_t off = static_cast<uint32_t>(out.size());
    // Local header, padded so stored data is 64-byte aligned like torch's writer.
    size_t pad = (64 - (out.size() + 30 + m.name.size() + 4) % 64) % 64;
    put32(out, 0x04034b50);
    put16(out, 20), put16(out, 0), put16(out, m.deflate ? 8 : 0), put16(out, 0), put16(out, 0);
    put32(out, crc), put32(out, static_cast<uint32_t>(body.size())), put32(out, usize);
    put16(out, static_cast<uint32_t>(m.name.size())), put16(out, static_cast<uint32_t>(pad + 4));
    out += m.name;
    put16(out, 0x4246), put16(out, static_cast<uint32_t>(pad));
    out += std::string(pad, 'Z');
    out += body;
    put32(cd, 0x02014b50);
    put16(cd, 20), put16(cd, 20), put16(cd, 0), put16(cd, m.deflate ? 8 : 0), put16(cd, 0), put16(cd, 0);
    put32(cd, crc), put32(cd, static_cast<uint32_t>(body.size())), put32(cd, usize);
    put16(cd, static_cast<uint32_t>(m.name.size())), put16(cd, 0), put16(cd, 0), put16(cd, 0), put16(cd, 0);
    put32(cd, 0), put32(cd, off);
    cd += m.name;
  }
  uint32_t cd_off = static_cast<uint32_t>(out.size());
  out += cd;
  put32(out, 0x06054b50);
  put16(out, 0), put16(out, 0), put16(out, static_cast<uint32_t>(members.size())),
      put16(out, static_cast<uint32_t>(members.size()));
  put32(out, static_cast<uint32_t>(cd.size())), put32(out, cd_off), put16(out, 0);
  return out;
}

/// Pickle opcodes, written by hand.
struct P {
  std::string s = "\x80\x02";
  P& op(char c) {
    s.push_back(c);
    return *this;
  }
  P& str(const std::string& v) {
    s.push_back('X');
    put32(s, static_cast<uint32_t>(v.size()));
    s += v;
    return *this;
  }
  P& i(int64_t v) {
    s += "\x8a\x08";
    put64(s, static_cast<uint64_t>(v));
    return *this;
  }
  P& global(const std::string& m, const std::string& n) {
    s += "c" + m + "\n" + n + "\n";
    return *this;
  }
  P& ints(const std::vector<int64_t>& v) {
    op('(');
    for (auto x : v) i(x);
    return op('t');
  }
  /// _rebuild_tensor_v2(storage(key, type, numel), offset, size, stride, False, OrderedDict())
  P& tensor(const std::string& key, const std::string& type, int64_t numel, int64_t offset,
            const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", type).str(key).str("cpu").i(numel).op('t').op('Q');
    i(offset).ints(size).ints(stride).op('\x89').global("collections", "OrderedDict").op(')').op('R');
    return op('t').op('R');
  }
  std::string done() { return s + "."; }
};

std::string floats(std::vector<float> v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

/// A torch-style zip: archive/data.pkl plus archive/data/<key> storages.
std::string torch_zip(const std::string& pkl, const std::map<std::string, std::string>& storages = {}) {
  std::vector<ZipMember> m{{"archive/data.pkl", pkl}, {"archive/byteorder", "little"}};
  for (const auto& [k, v] : storages) m.push_back({"archive/data/" + k, v});
  return make_zip(m);
}

TensorMap parse(const std::string& bytes) { return store::parse_torch(bytes.data(), bytes.size(), "test.pt"); }

/// The kiln::Error text of parsing `bytes`, failing the test if it does not throw one.
std::string parse_error(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

std::string one_tensor_dict(const std::string& key, const std::string& type, int64_t numel, int64_t offset,
                            const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  P p;
  p.op('}').op('(').str("w").tensor(key, type, numel, offset, size, stride).op('u');
  return p.done();
}

}  // namespace

// ---- fixtures from PyTorch ----------------------------------------------------------------

TEST(StoreTorch, FixturesLoadWithExactValuesMmap) {
  for (const char* f : kGood) {
    SCOPED_TRACE(f);
    check_fixture(f, store::load_torch(kDir + f));
  }
}

TEST(StoreTorch, FixturesLoadWithExactValuesRead) {
  for (const char* f : kGood) {
    SCOPED_TRACE(f);
    check_fixture(f, store::load_torch(kDir + f, {.mmap = false}));
    auto bytes = read_bytes(kDir + f);
    check_fixture(f, store::parse_torch(bytes.data(), bytes.size(), f));
  }
}

TEST(StoreTorch, ReadDispatchesOnContent) {
  TensorMap m = store::read(kDir + "state_dict.pt");
  ASSERT_NE(m.find("fc.weight"), nullptr);
  EXPECT_EQ(m.find("fc.weight")->shape(), (Shape{2, 4}));
}

TEST(StoreTorch, StateDictKeepsFileOrder) {
  TensorMap m = store::load_torch(kDir + "state_dict.pt");
  std::vector<std::string> names;
  for (auto& [n, t] : m.tensors) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                             "bn.running_var", "bn.num_batches_tracked", "fc.weight", "fc.bias"}));
  EXPECT_EQ(m.find("bn.num_batches_tracked")->dim(), 0);
  EXPECT_EQ(m.find("bn.num_batches_tracked")->item<int64_t>(), 7);
}

TEST(StoreTorch, ZipStoragesAreZeroCopyOnCpu) {
  TensorMap m = store::load_torch(kDir + "views.pt", {.device = Device::cpu().without_fusion()});
  EXPECT_NE(m.find("base")->impl().storage->external, nullptr);  // points into the mapping
  TensorMap c = store::load_torch(kDir + "views.pt", {.mmap = false});
  ASSERT_NE(c.find("base"), nullptr);
  auto bytes = read_bytes(kDir + "views.pt");
  TensorMap p = store::parse_torch(bytes.data(), bytes.size());
  EXPECT_EQ(p.find("base")->impl().storage->external, nullptr);  // parse_torch copies
}

TEST(StoreTorch, ViewsShareStorageWritesShowThrough) {
  for (const char* f : {"views.pt", "views_legacy.pt"}) {
    for (bool mmap : {true, false}) {
      SCOPED_TRACE(std::string(f) + (mmap ? " mmap" : " read"));
      TensorMap m = store::load_torch(kDir + f, {.mmap = mmap});
      Tensor base = *m.find("base"), t = *m.find("t"), row = *m.find("row"), slice = *m.find("slice");
      EXPECT_TRUE(base.is_same_storage(t));
      EXPECT_FALSE(base.is_same_storage(*m.find("other")));
      EXPECT_EQ(t.strides(), (Strides{1, 4}));
      EXPECT_EQ(slice.storage_offset(), 6);
      row.copy_(full({4}, 42.0));  // base[2] = 42
      EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 42, 42, 42, 42}));
      EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 4, 42, 1, 5, 42, 2, 6, 42, 3, 7, 42}));
      EXPECT_EQ(slice.to_vector<float>(), (std::vector<float>{6, 7, 42, 42}));
    }
  }
  // The file itself is untouched (the mapping is private).
  EXPECT_EQ(store::load_torch(kDir + "views.pt").find("row")->to_vector<float>(), (std::vector<float>{8, 9, 10, 11}));
}

TEST(StoreTorch, LoadsOntoOtherDevices) {
  TensorMap m = store::load_torch(kDir + "views.pt", {.device = Device::cpu().autodiff()});
  EXPECT_EQ(m.find("t")->device(), Device::cpu().autodiff());
  EXPECT_EQ(m.find("t")->to_vector<float>(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

TEST(StoreTorch, RejectsWholeModelsAndCodeGlobals) {
  EXPECT_ERROR(store::load_torch(kDir + "module.pt"), "refusing to load global 'torch.nn.modules.linear.Linear'");
  EXPECT_ERROR(store::load_torch(kDir + "module.pt"), "state_dict");
  EXPECT_ERROR(store::load_torch(kDir + "evil_os_system.pt"), "refusing to load global 'os.system'");
  EXPECT_ERROR(store::load_torch(kDir + "evil_builtins_eval.pt"), "refusing to load global 'builtins.eval'");
  EXPECT_ERROR(store::load_torch(kDir + "evil_legacy.pt"), "refusing to load global 'posix.system'");
  test::expect_error([] { store::load_torch(kDir + "evil_os_system.pt"); }, "load_torch", "evil_os_system.pt");
  P p;
  p.global("subprocess", "check_output").op(')').op('R');
  EXPECT_NE(parse_error(torch_zip(p.done())).find("'subprocess.check_output'"), std::string::npos);
  P q;  // STACK_GLOBAL path (protocol 4)
  q.str("os").str("system").op('\x93');
  EXPECT_NE(parse_error(torch_zip(q.done())).find("'os.system'"), std::string::npos);
}

TEST(StoreTorch, MissingFileNamesThePath) { EXPECT_ERROR(store::load_torch("/nonexistent/x.pt"), "/nonexistent/x.pt"); }

// ---- hostile zips --------------------------------------------------------------------------

TEST(StoreTorch, EveryTruncationIsAnError) {
  auto bytes = read_bytes(kDir + "state_dict.pt");
  for (size_t n = 0; n < bytes.size(); n += 7) {
    std::string b(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(parse(b), Error) << n;
  }
  auto legacy = read_bytes(kDir + "state_dict_legacy.pt");
  for (size_t n = 0; n < legacy.size(); ++n) {
    std::string b(legacy.begin(), legacy.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(parse(b), Error) << n;
  }
}

TEST(StoreTorch, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(1234);
  for (const char* f : {"state_dict.pt", "state_dict_legacy.pt", "checkpoint.pt", "misc.pt"}) {
    auto bytes = read_bytes(kDir + f);
    for (int trial = 0; trial < 300; ++trial) {
      std::string b(bytes.begin(), bytes.end());
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng());
      try {
        TensorMap m = parse(b);
        for (auto& [n, t] : m.tensors) (void)t.to_vector<double>();  // views stay in bounds
      } catch (const Error&) {
      }
    }
  }
}

TEST(StoreTorch, BadEndOfCentralDirectory) {
  std::string z = torch_zip(one_tensor_dict("0", "FloatStorage", 2, 0, {2}, {1}), {{"0", floats({1, 2})}});
  EXPECT_EQ(parse(z).find("w")->to_vector<float>(), (std::vector<float>{1, 2}));
  std::string no_eocd = z;
  no_eocd[no_eocd.size() - 22] = 'X';
  EXPECT_NE(parse_error(no_eocd).find("end-of-central-directory"), std::string::npos);
  std::string bad_cd = z;  // central directory offset far past the end
  bad_cd[bad_cd.size() - 22 + 16] = '\xff', bad_cd[bad_cd.size() - 22 + 19] = '\x7f';
  EXPECT_NE(parse_error(bad_cd).find("central directory"), std::string::npos);
  std::string many = z;  // 65535 entries claimed
  many[many.size() - 22 + 8] = '\xff', many[many.size() - 22 + 9] = '\xfe';
  many[many.size() - 22 + 10] = '\xff', many[many.size() - 22 + 11] = '\xfe';
  EXPECT_NE(parse_error(many).find("entries"), std::string::npos);
  std::string zip64 = z;  // saturated fields without a zip64 locator
  zip64[zip64.size() - 22 + 16] = zip64[zip64.size() - 22 + 17] = zip64[zip64.size() - 22 + 18] =
      zip64[zip64.size() - 22 + 19] = '\xff';
  EXPECT_NE(parse_error(zip64).find("zip64"), std::string::npos);
  EXPECT_NE(parse_error("PK\x03\x04").find("not a valid zip"), std::string::npos);
  EXPECT_NE(parse_error("").find("not a PyTorch file"), std::string::npos);
  EXPECT_NE(parse_error("hello world, not torch").find("not a PyTorch file"), std::string::npos);
}

TEST(StoreTorch, EntryOffsetsPastTheEnd) {
  std::string z = torch_zip(one_tensor_dict("0", "FloatStorage", 2, 0, {2}, {1}), {{"0", floats({1, 2})}});
  // The first central directory entry's local-header offset (at cd + 42) points past the end.
  uint32_t cd = 0;
  std::memcpy(&cd, z.data() + z.size() - 22 + 16, 4);
  std::string b = z;
  b[cd + 42] = '\x00', b[cd + 43] = '\x00', b[cd + 44] = '\x00', b[cd + 45] = '\x70';
  EXPECT_NE(parse_error(b).find("local header"), std::string::npos);
  std::string c = z;  // compressed size past the end
  c[cd + 20] = '\xff', c[cd + 21] = '\xff', c[cd + 22] = '\xff', c[cd + 23] = '\x0f';
  EXPECT_NE(parse_error(c).find("past the end"), std::string::npos);
}

TEST(StoreTorch, DeflateSizesAreBounded) {
  std::string pkl = one_tensor_dict("0", "FloatStorage", 2, 0, {2}, {1});
  // Deflated members load (re-zipped checkpoints).
  std::vector<ZipMember> ok{{"a/data.pkl", pkl, true}, {"a/data/0", floats({3, 4}), true}};
  EXPECT_EQ(parse(make_zip(ok)).find("w")->to_vector<float>(), (std::vector<float>{3, 4}));
  // A declared size larger than deflate can produce from the compressed bytes.
  std::vector<ZipMember> huge{{"a/data.pkl", pkl}, {"a/data/0", floats({3, 4}), true, int64_t{0xFFFFFFF0}}};
  EXPECT_NE(parse_error(make_zip(huge)).find("more than deflate can produce"), std::string::npos);
  // A bomb: 8 MB of zeros declared as 8 bytes stops after the declared size.
  std::vector<ZipMember> bomb{{"a/data.pkl", pkl}, {"a/data/0", std::string(8 << 20, '\0'), true, 8}};
  EXPECT_NE(parse_error(make_zip(bomb)).find("more than its declared"), std::string::npos);
  // Declared larger than what it inflates to.
  std::vector<ZipMember> short_{{"a/data.pkl", pkl}, {"a/data/0", floats({3, 4}), true, 16}};
  EXPECT_NE(parse_error(make_zip(short_)).find("inflates to 8 bytes"), std::string::npos);
  // Corrupt deflate data and a CRC mismatch.
  std::string z = make_zip(ok);
  std::string bad = z;
  size_t at = bad.find(deflate_raw(floats({3, 4})));
  ASSERT_NE(at, std::string::npos);
  bad[at] = '\xff';
  EXPECT_THROW(parse(bad), Error);
  // The reader's own limit on declared sizes.
  std::string big = make_zip({{"x", std::string(1000, 'a'), true}});
  store::zip::Archive ar(big.data(), big.size(), "big.zip");
  EXPECT_ERROR(ar.read(ar.entries()[0], 100), "more than the limit");
  EXPECT_EQ(ar.read(ar.entries()[0], 1000).size(), 1000u);
}

TEST(StoreTorch, Zip64RecordsAreRead) {
  // Rewrite a small archive's EOCD as zip64: saturated fields, a zip64 record and a locator.
  std::string z = torch_zip(one_tensor_dict("0", "FloatStorage", 2, 0, {2}, {1}), {{"0", floats({5, 6})}});
  std::string eocd = z.substr(z.size() - 22);
  std::string body = z.substr(0, z.size() - 22);
  uint32_t cd_size, cd_off;
  std::memcpy(&cd_size, eocd.data() + 12, 4);
  std::memcpy(&cd_off, eocd.data() + 16, 4);
  uint64_t z64_off = body.size();
  put32(body, 0x06064b50), put64(body, 44), put16(body, 45), put16(body, 45), put32(body, 0), put32(body, 0);
  put64(body, 3), put64(body, 3), put64(body, cd_size), put64(body, cd_off);
  put32(body, 0x07064b50), put32(body, 0), put64(body, z64_off), put32(body, 1);
  put32(body, 0x06054b50), put16(body, 0), put16(body, 0), put16(body, 0xFFFF), put16(body, 0xFFFF);
  put32(body, 0xFFFFFFFF), put32(body, 0xFFFFFFFF), put16(body, 0);
  EXPECT_EQ(parse(body).find("w")->to_vector<float>(), (std::vector<float>{5, 6}));
  std::string bad = body;  // the locator points past the end
  bad[bad.size() - 22 - 20 + 8 + 5] = '\x40';
  EXPECT_NE(parse_error(bad).find("zip64"), std::string::npos);
}

// ---- hostile pickles -----------------------------------------------------------------------

TEST(StoreTorch, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string marks = "\x80\x02" + std::string(100000, '(') + "N.";
  EXPECT_NE(parse_error(torch_zip(marks)).find("nesting deeper"), std::string::npos);
  P lists;  // 100k nested lists: [[[[...]]]]
  for (int k = 0; k < 100000; ++k) lists.op(']');
  for (int k = 0; k < 99999; ++k) lists.op('a');
  EXPECT_NE(parse_error(torch_zip(lists.done())).find("nested deeper"), std::string::npos);
  P dicts;  // the same with dicts and string keys
  for (int k = 0; k < 100000; ++k) dicts.op('}').str("k");
  dicts.op('N');
  for (int k = 0; k < 100000; ++k) dicts.op('s');
  EXPECT_NE(parse_error(torch_zip(dicts.done())).find("nested deeper"), std::string::npos);
}

TEST(StoreTorch, CyclesAndSharedExplosionsAreBounded) {
  P cyc;  // l = []; l.append(l)
  cyc.op(']').op('q').s += '\0';
  cyc.op('h').s += '\0';
  cyc.op('a');
  EXPECT_NE(parse_error(torch_zip(cyc.done())).find("nested deeper"), std::string::npos);
  P dag;  // L_{k+1} = [L_k, L_k], 60 levels: 2^60 leaves if expanded
  dag.op('N');
  for (int k = 0; k < 60; ++k) {  // memo[0] = top; pop; push [memo[0], memo[0]]
    dag.op('q').op('\0').op('0').op(']');
    dag.op('h').op('\0').op('a').op('h').op('\0').op('a');
  }
  EXPECT_NE(parse_error(torch_zip(dag.done())).find("too large"), std::string::npos);
}

TEST(StoreTorch, MalformedPickles) {
  EXPECT_NE(parse_error(torch_zip("\x80\x02\xff")).find("unknown opcode 0xff"), std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02N")).find("truncated"), std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02X\xff\xff\xff\x7f")).find("truncated"), std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\xffN.")).find("truncated"),
            std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02h\x05.")).find("memo key 5"), std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02"
                                  "a."))
                .find("underflow"),
            std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02.")).find("empty stack"), std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x09N.")).find("protocol 9"), std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02NN"
                                  "b."))
                .find("BUILD on a None"),
            std::string::npos);
  EXPECT_NE(parse_error(torch_zip("\x80\x02"
                                  "ctorch\nSize\nN"
                                  "R."))
                .find("must be a tuple"),
            std::string::npos);
  P bad_pid;
  bad_pid.str("x").op('Q');
  EXPECT_NE(parse_error(torch_zip(bad_pid.done())).find("persistent id"), std::string::npos);
  std::string not_torch_zip = make_zip({{"hello.txt", "hi"}});
  EXPECT_NE(parse_error(not_torch_zip).find("no data.pkl"), std::string::npos);
  std::string big_endian = make_zip({{"a/data.pkl", "\x80\x02}."}, {"a/byteorder", "big"}});
  EXPECT_NE(parse_error(big_endian).find("byte order 'big'"), std::string::npos);
  std::string script = make_zip({{"a/data.pkl", "\x80\x02}."}, {"a/constants.pkl", "\x80\x02)."}});
  EXPECT_NE(parse_error(script).find("TorchScript"), std::string::npos);
}

TEST(StoreTorch, StorageAndViewChecks) {
  auto z = [](const std::string& pkl, std::map<std::string, std::string> st = {{"0", floats({1, 2, 3, 4})}}) {
    return torch_zip(pkl, st);
  };
  // A valid strided view for reference.
  EXPECT_EQ(parse(z(one_tensor_dict("0", "FloatStorage", 4, 1, {2}, {2}))).find("w")->to_vector<float>(),
            (std::vector<float>{2, 4}));
  EXPECT_NE(parse_error(z(one_tensor_dict("7", "FloatStorage", 4, 0, {2}, {1}))).find("storage '7' is missing"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 0, {5}, {1}))).find("extends past"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 3, {2}, {1}))).find("extends past"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 0, {2, 2}, {3, 1}))).find("extends past"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 8, 0, {8}, {1}))).find("declares 8 elements"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "DoubleStorage", 4, 0, {4}, {1}))).find("declares 4 elements"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 0, {-1}, {1}))).find("non-negative"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 0, {2}, {-1}))).find("non-negative"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, -1, {2}, {1}))).find("offset"), std::string::npos);
  int64_t big = int64_t{1} << 40;
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 0, {big, big}, {0, 0}))).find("overflows"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 0, {4, 2}, {INT64_MAX / 2, 1}))).find("overflow"),
            std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "FloatStorage", 4, 0, {2}, {1, 1}))).find("strides"), std::string::npos);
  EXPECT_NE(parse_error(z(one_tensor_dict("0", "ComplexFloatStorage", 2, 0, {2}, {1}))).find("complex64"),
            std::string::npos);
  EXPECT_NE(
      parse_error(z(one_tensor_dict("0", "BoolStorage", 4, 0, {4}, {1}), {{"0", std::string("\x01\x00\x02\x00", 4)}}))
          .find("only 0 and 1"),
      std::string::npos);
  // A stride-0 broadcast view is legal and stays small.
  EXPECT_EQ(parse(z(one_tensor_dict("0", "FloatStorage", 4, 0, {3, 2}, {0, 1}))).find("w")->to_vector<float>(),
            (std::vector<float>{1, 2, 1, 2, 1, 2}));
  // Two names for one tensor after flattening.
  P dup;
  dup.op('}').op('(').str("a.b").i(1).str("a").op('}').op('(').str("b").i(2).op('u').op('u');
  EXPECT_NE(parse_error(torch_zip(dup.done())).find("duplicate entry 'a.b'"), std::string::npos);
}

TEST(StoreTorch, LegacyStorageSizesAreChecked) {
  auto bytes = read_bytes(kDir + "views_legacy.pt");
  std::string b(bytes.begin(), bytes.end());
  // The base storage: its element count (12) followed by 0.0f, 1.0f, 2.0f.
  size_t at = b.find(std::string("\x0c\0\0\0\0\0\0\0", 8) + floats({0, 1, 2}));
  ASSERT_NE(at, std::string::npos);
  std::string huge = b;
  huge[at + 7] = '\x7f';
  EXPECT_NE(parse_error(huge).find("more than the"), std::string::npos);
  std::string neg = b;
  neg[at + 7] = '\x80';
  EXPECT_NE(parse_error(neg).find("declares"), std::string::npos);
}

TEST(StoreTorch, FuzzCrashersAndCorpusStaySafe) {
  // Inputs that once crashed fuzz_torch (tests/fuzz/crashers/fuzz_torch) and the seed corpus:
  // each loads or raises kiln::Error.
  size_t n = 0;
  for (const char* sub : {"crashers/fuzz_torch", "corpus/fuzz_torch"}) {
    std::filesystem::path dir = std::filesystem::path(KILN_GOLDEN_DIR) / ".." / "fuzz" / sub;
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      auto bytes = read_bytes(e.path().string());
      try {
        TensorMap m = store::parse_torch(bytes.data(), bytes.size(), e.path().filename().string());
        for (auto& [name, t] : m.tensors) (void)t.to_vector<double>();
      } catch (const Error&) {
      }
      ++n;
    }
  }
  EXPECT_GE(n, 5u);  // the seed corpus at least
}

TEST(StoreTorch, HugeIntegersBecomeTextInLinearTime) {
  P p;  // {"n": <a 1 MB integer>}: written in hex rather than converted to decimal
  p.op('}').str("n");
  p.op('\x8b');
  put32(p.s, 1 << 20);
  p.s += std::string((1 << 20) - 1, '\x11') + '\x01';
  p.op('s');
  TensorMap m = parse(torch_zip(p.done()));
  ASSERT_EQ(m.metadata.count("n"), 1u);
  EXPECT_EQ(m.metadata.at("n").substr(0, 6), "0x0111");
  EXPECT_EQ(m.metadata.at("n").size(), 2u + 2 * (1 << 20));
}
