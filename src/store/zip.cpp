// SPDX-License-Identifier: MIT OR Apache-2.0
#include "store/zip.h"

#if KILN_WITH_ZLIB
#include <zlib.h>
#endif

#include <algorithm>
#include <cstring>
#include <limits>

#include "kiln/error.h"

namespace kiln::store::zip {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEocdSize = 22;
constexpr size_t kCentralSize = 46;
constexpr size_t kLocalSize = 30;
constexpr size_t kZip64EocdSize = 56;
constexpr size_t kZip64LocatorSize = 20;
// deflate cannot expand data by more than about 1032:1.
constexpr uint64_t kMaxDeflateRatio = 1032;

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t rd32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t rd64(const uint8_t* p) { return static_cast<uint64_t>(rd32(p)) | (static_cast<uint64_t>(rd32(p + 4)) << 32); }

/// True when [off, off + len) lies within [0, size).
bool in_range(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

}  // namespace

bool looks_like_zip(const void* data, size_t size) {
  return size >= 4 && rd32(static_cast<const uint8_t*>(data)) == kLocalSig;
}

Archive::Archive(const void* data, size_t size, std::string file, std::string op)
    : data_(static_cast<const uint8_t*>(data)), size_(size), file_(std::move(file)), op_(std::move(op)) {
  parse();
}

void Archive::fail(const std::string& what) const {
  KILN_CHECK(false, op_, file_ << ": " << what);
  __builtin_unreachable();
}

void Archive::parse() {
  if (size_ < kEocdSize) fail("not a valid zip archive: too short for an end-of-central-directory record");
  // The EOCD record is at the end, followed by a comment of at most 65535 bytes.
  size_t lo = size_ - kEocdSize > 65535 ? size_ - kEocdSize - 65535 : 0;
  size_t eocd = SIZE_MAX;
  for (size_t p = size_ - kEocdSize + 1; p-- > lo;) {
    if (rd32(data_ + p) == kEocdSig && static_cast<uint64_t>(p) + kEocdSize + rd16(data_ + p + 20) == size_) {
      eocd = p;
      break;
    }
  }
  if (eocd == SIZE_MAX) {
    // Accept a record whose comment length disagrees (some writers pad), as a second chance.
    for (size_t p = size_ - kEocdSize + 1; p-- > lo;)
      if (rd32(data_ + p) == kEocdSig) {
        eocd = p;
        break;
      }
  }
  if (eocd == SIZE_MAX) fail("not a valid zip archive: no end-of-central-directory record (truncated file?)");
  const uint8_t* e = data_ + eocd;
  uint16_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
  uint64_t count = rd16(e + 10), cd_size = rd32(e + 12), cd_offset = rd32(e + 16);
  bool zip64 = count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu;
  if (eocd >= kZip64LocatorSize && rd32(data_ + eocd - kZip64LocatorSize) == kZip64LocatorSig) zip64 = true;
  if (zip64) {
    if (eocd < kZip64LocatorSize || rd32(data_ + eocd - kZip64LocatorSize) != kZip64LocatorSig)
      fail("zip64 archive without a zip64 end-of-central-directory locator");
    uint64_t z = rd64(data_ + eocd - kZip64LocatorSize + 8);
    if (!in_range(z, kZip64EocdSize, eocd - kZip64LocatorSize) || rd32(data_ + z) != kZip64EocdSig)
      fail("zip64 end-of-central-directory record at offset " + std::to_string(z) + " is missing or past the end");
    const uint8_t* r = data_ + z;
    disk = static_cast<uint16_t>(rd32(r + 16) != 0);
    cd_disk = static_cast<uint16_t>(rd32(r + 20) != 0);
    count = rd64(r + 32);
    cd_size = rd64(r + 40);
    cd_offset = rd64(r + 48);
  }
  if (disk != 0 || cd_disk != 0) fail("multi-disk zip archives are not supported");
  if (!in_range(cd_offset, cd_size, size_))
    fail("central directory (offset " + std::to_string(cd_offset) + ", size " + std::to_string(cd_size) +
         ") extends past the end of the file (" + std::to_string(size_) + " bytes)");
  if (count > cd_size / kCentralSize)
    fail("central directory claims " + std::to_string(count) + " entries but has room for at most " +
         std::to_string(cd_size / kCentralSize));
  entries_.reserve(static_cast<size_t>(count));
  uint64_t p = cd_offset, end = cd_offset + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (!in_range(p, kCentralSize, end) || rd32(data_ + p) != kCentralSig)
      fail("central directory entry " + std::to_string(i) + " is malformed (bad signature or truncated)");
    const uint8_t* c = data_ + p;
    Entry en;
    en.flags = rd16(c + 8);
    en.method = rd16(c + 10);
    en.crc32 = rd32(c + 16);
    en.compressed_size = rd32(c + 20);
    en.uncompressed_size = rd32(c + 24);
    uint16_t name_len = rd16(c + 28), extra_len = rd16(c + 30), comment_len = rd16(c + 32);
    uint16_t disk_start = rd16(c + 34);
    en.local_header_offset = rd32(c + 42);
    uint64_t var = static_cast<uint64_t>(name_len) + extra_len + comment_len;
    if (!in_range(p + kCentralSize, var, end)) fail("central directory entry " + std::to_string(i) + " is truncated");
    en.name.assign(reinterpret_cast<const char*>(c + kCentralSize), name_len);
    // zip64 extended information: the 64-bit values, present only for fields that are saturated.
    const uint8_t* x = c + kCentralSize + name_len;
    const uint8_t* xend = x + extra_len;
    while (xend - x >= 4) {
      uint16_t id = rd16(x), len = rd16(x + 2);
      if (len > xend - x - 4) fail("entry '" + en.name + "' has a truncated extra field");
      if (id == 0x0001) {
        const uint8_t* f = x + 4;
        const uint8_t* fend = f + len;
        auto take = [&](uint64_t& v) {
          if (fend - f < 8) fail("entry '" + en.name + "' has a truncated zip64 extra field");
          v = rd64(f);
          f += 8;
        };
        if (en.uncompressed_size == 0xFFFFFFFFu) take(en.uncompressed_size);
        if (en.compressed_size == 0xFFFFFFFFu) take(en.compressed_size);
        if (en.local_header_offset == 0xFFFFFFFFu) take(en.local_header_offset);
        if (disk_start == 0xFFFF) {
          if (fend - f < 4) fail("entry '" + en.name + "' has a truncated zip64 extra field");
          disk_start = rd32(f) != 0;
        }
      }
      x += 4 + len;
    }
    if (disk_start != 0) fail("entry '" + en.name + "' is on another disk (multi-disk archives are not supported)");
    // The local header gives the real start of the data (its extra field may differ in length).
    uint64_t lh = en.local_header_offset;
    if (!in_range(lh, kLocalSize, size_) || rd32(data_ + lh) != kLocalSig)
      fail("entry '" + en.name + "': local header at offset " + std::to_string(lh) + " is missing or past the end");
    uint64_t data_off = lh + kLocalSize + rd16(data_ + lh + 26) + rd16(data_ + lh + 28);
    if (!in_range(data_off, en.compressed_size, size_))
      fail("entry '" + en.name + "': data (offset " + std::to_string(data_off) + ", " +
           std::to_string(en.compressed_size) + " bytes) extends past the end of the file (" + std::to_string(size_) +
           " bytes)");
    en.data_offset = data_off;
    entries_.push_back(std::move(en));
    p += kCentralSize + var;
  }
  sorted_.resize(entries_.size());
  for (size_t i = 0; i < sorted_.size(); ++i) sorted_[i] = i;
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [&](size_t a, size_t b) { return entries_[a].name < entries_[b].name; });
}

const Entry* Archive::find(std::string_view name) const {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), name,
                             [&](size_t i, std::string_view n) { return std::string_view(entries_[i].name) < n; });
  if (it == sorted_.end() || entries_[*it].name != name) return nullptr;
  return &entries_[*it];
}

const uint8_t* Archive::stored_data(const Entry& e) const {
  if (e.method != 0) fail("entry '" + e.name + "' is compressed (method " + std::to_string(e.method) + ")");
  if (e.compressed_size != e.uncompressed_size)
    fail("stored entry '" + e.name + "' has compressed size " + std::to_string(e.compressed_size) +
         " != uncompressed size " + std::to_string(e.uncompressed_size));
  return data_ + e.data_offset;
}

std::vector<uint8_t> Archive::read(const Entry& e, uint64_t max_size) const {
  if (e.flags & 1) fail("entry '" + e.name + "' is encrypted");
  if (e.uncompressed_size > max_size)
    fail("entry '" + e.name + "' declares " + std::to_string(e.uncompressed_size) + " bytes, more than the limit of " +
         std::to_string(max_size));
  if (e.method == 0) {
    const uint8_t* p = stored_data(e);
    return std::vector<uint8_t>(p, p + e.uncompressed_size);
  }
  if (e.method != 8)
    fail("entry '" + e.name + "' uses unsupported compression method " + std::to_string(e.method) +
         " (only stored and deflate are supported)");
  if (e.compressed_size > (std::numeric_limits<uint64_t>::max() - 1024) / kMaxDeflateRatio ||
      e.uncompressed_size > e.compressed_size * kMaxDeflateRatio + 1024)
    fail("entry '" + e.name + "' declares " + std::to_string(e.uncompressed_size) + " bytes from " +
         std::to_string(e.compressed_size) + " compressed bytes, more than deflate can produce");
#if !KILN_WITH_ZLIB
  // The WebAssembly build has no zlib (CMakeLists.txt).
  fail("entry '" + e.name + "' is deflate-compressed, and this build of Kiln has no zlib (stored entries only)");
#else
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail("zlib initialisation failed");
  struct Guard {
    z_stream* z;
    ~Guard() { inflateEnd(z); }
  } guard{&zs};
  std::vector<uint8_t> out;
  // Grow with the real output rather than trusting the declared size up front.
  const uint64_t want = e.uncompressed_size;
  out.resize(static_cast<size_t>(std::min<uint64_t>(want, 1 << 20)));
  const uint8_t* in = data_ + e.data_offset;
  uint64_t in_left = e.compressed_size, produced = 0;
  int rc = Z_OK;
  while (true) {
    if (produced == out.size()) {
      if (out.size() == want) {
        // Everything declared was produced; the stream must end here.
        uint8_t probe;
        zs.next_out = &probe;
        zs.avail_out = 1;
        zs.next_in = const_cast<Bytef*>(in);
        uInt chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
        zs.avail_in = chunk;
        rc = inflate(&zs, Z_FINISH);
        if (zs.avail_out == 0)
          fail("entry '" + e.name + "' inflates to more than its declared " + std::to_string(want) + " bytes");
        if (rc != Z_STREAM_END) fail("entry '" + e.name + "' has truncated or corrupt deflate data");
        break;
      }
      out.resize(static_cast<size_t>(std::min<uint64_t>(want, out.size() * 2)));
    }
    zs.next_out = out.data() + produced;
    uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out.size() - produced, 1u << 30));
    zs.avail_out = out_chunk;
    zs.next_in = const_cast<Bytef*>(in);
    uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
    zs.avail_in = in_chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    uint64_t used = in_chunk - zs.avail_in;
    in += used;
    in_left -= used;
    produced += out_chunk - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) fail("entry '" + e.name + "' has corrupt deflate data");
    if (used == 0 && out_chunk == zs.avail_out) fail("entry '" + e.name + "' has truncated deflate data");
  }
  if (produced != want)
    fail("entry '" + e.name + "' inflates to " + std::to_string(produced) + " bytes, not the declared " +
         std::to_string(want));
  out.resize(static_cast<size_t>(produced));
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t off = 0; off < produced;) {
    uInt n = static_cast<uInt>(std::min<uint64_t>(produced - off, 1u << 30));
    crc = crc32(crc, out.data() + off, n);
    off += n;
  }
  if (static_cast<uint32_t>(crc) != e.crc32) fail("entry '" + e.name + "' fails its CRC-32 check (corrupt data)");
  return out;
#endif
}

}  // namespace kiln::store::zip
