// SPDX-License-Identifier: MIT OR Apache-2.0
// The remote device's frames (Note [Remote protocol], protocol.h): encoders, and decoders that
// treat every byte as hostile.
#include "remote/protocol.h"

#include <cstring>

#include "kiln/error.h"

namespace kiln::remote {

namespace {

constexpr const char* kOp = "remote";

/// Reads little-endian values from a frame; every read is bounds-checked.
struct FrameReader {
  const uint8_t* p;
  const uint8_t* end;
  size_t left() const { return static_cast<size_t>(end - p); }
  template <class T>
  T get(const char* what) {
    KILN_CHECK(left() >= sizeof(T), kOp, "truncated frame (reading " << what << ")");
    T v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  const uint8_t* take(uint64_t n, const char* what) {
    KILN_CHECK(n <= left(), kOp,
               "truncated frame: " << what << " of " << static_cast<long long>(n) << " bytes, "
                                   << static_cast<long long>(left()) << " left");
    const uint8_t* q = p;
    p += n;
    return q;
  }
  std::string str16(size_t max, const char* what) {
    const uint16_t n = get<uint16_t>(what);
    KILN_CHECK(n <= max, kOp,
               what << " of " << static_cast<int>(n) << " bytes exceeds " << static_cast<long long>(max));
    const uint8_t* q = take(n, what);
    return std::string(reinterpret_cast<const char*>(q), n);
  }
  std::string str32(const char* what) {
    const uint32_t n = get<uint32_t>(what);
    const uint8_t* q = take(n, what);
    return std::string(reinterpret_cast<const char*>(q), n);
  }
  void done(const char* what) {
    KILN_CHECK(p == end, kOp, static_cast<long long>(left()) << " trailing bytes after " << what);
  }
};

FrameReader open(const uint8_t* data, size_t size, FrameType want, const char* what) {
  const FrameType t = frame_type(data, size);
  KILN_CHECK(t == want, kOp,
             "expected a " << what << " frame, got frame type " << static_cast<int>(static_cast<uint8_t>(t)));
  return FrameReader{data + 5, data + size};
}

}  // namespace

void FrameWriter::put_str16(std::string_view s) {
  KILN_ASSERT(s.size() <= 0xffff);
  put<uint16_t>(static_cast<uint16_t>(s.size()));
  put_bytes(s.data(), s.size());
}

void FrameWriter::put_str32(std::string_view s) {
  const size_t n = s.size() > 0xffffffffu ? 0xffffffffu : s.size();
  put<uint32_t>(static_cast<uint32_t>(n));
  put_bytes(s.data(), n);
}

FrameType frame_type(const uint8_t* data, size_t size) {
  FrameReader r{data, data + size};
  KILN_CHECK(r.get<uint32_t>("magic") == kMagic, kOp, "not a Kiln remote frame (bad magic)");
  const uint8_t t = r.get<uint8_t>("frame type");
  KILN_CHECK(t >= 1 && t <= 6, kOp, "unknown frame type " << static_cast<int>(t));
  return static_cast<FrameType>(t);
}

std::vector<uint8_t> encode_hello(const Hello& h) {
  KILN_CHECK(h.token.size() <= kMaxTokenBytes, kOp,
             "token longer than " << static_cast<long long>(kMaxTokenBytes) << " bytes");
  FrameWriter w(FrameType::Hello);
  w.put<uint16_t>(h.version);
  w.put_str16(h.token);
  w.put_str16(h.client.substr(0, kMaxNameBytes));
  return std::move(w.out);
}

Hello decode_hello(const uint8_t* data, size_t size) {
  FrameReader r = open(data, size, FrameType::Hello, "Hello");
  Hello h;
  h.version = r.get<uint16_t>("version");
  h.token = r.str16(kMaxTokenBytes, "token");
  h.client = r.str16(kMaxNameBytes, "client name");
  r.done("Hello");
  return h;
}

std::vector<uint8_t> encode_welcome(const Welcome& w) {
  FrameWriter f(FrameType::Welcome);
  f.put<uint16_t>(w.version);
  f.put<uint64_t>(w.session);
  f.put_str16(w.device.substr(0, kMaxNameBytes));
  f.put<uint64_t>(w.limits.max_frame);
  f.put<uint64_t>(w.limits.max_tensor_bytes);
  f.put<uint64_t>(w.limits.quota_bytes);
  return std::move(f.out);
}

Welcome decode_welcome(const uint8_t* data, size_t size) {
  FrameReader r = open(data, size, FrameType::Welcome, "Welcome");
  Welcome w;
  w.version = r.get<uint16_t>("version");
  w.session = r.get<uint64_t>("session");
  w.device = r.str16(kMaxNameBytes, "device name");
  w.limits.max_frame = r.get<uint64_t>("max_frame");
  w.limits.max_tensor_bytes = r.get<uint64_t>("max_tensor_bytes");
  w.limits.quota_bytes = r.get<uint64_t>("quota_bytes");
  r.done("Welcome");
  KILN_CHECK(w.limits.max_frame >= 4096, kOp,
             "server's frame limit " << static_cast<long long>(w.limits.max_frame) << " is too small");
  return w;
}

std::vector<uint8_t> encode_status(std::string_view error) {
  FrameWriter w(FrameType::Status);
  w.put<uint8_t>(error.empty() ? 1 : 0);
  w.put_str32(error);
  return std::move(w.out);
}

std::vector<uint8_t> encode_refused(std::string_view reason) {
  FrameWriter w(FrameType::Refused);
  w.put_str32(reason);
  return std::move(w.out);
}

std::string decode_message(const uint8_t* data, size_t size) {
  const FrameType t = frame_type(data, size);
  KILN_CHECK(t == FrameType::Status || t == FrameType::Refused || t == FrameType::Data, kOp,
             "expected a Status, Refused or Data frame, got type " << static_cast<int>(static_cast<uint8_t>(t)));
  FrameReader r{data + 5, data + size};
  if (t != FrameType::Refused) {
    const uint8_t ok = r.get<uint8_t>("ok");
    if (t == FrameType::Data) KILN_CHECK(ok == 0, kOp, "a Data frame with data has no message");
  }
  std::string s = r.str32("message");
  r.done("message frame");
  return s;
}

std::vector<uint8_t> encode_data_header(bool ok) {
  FrameWriter w(FrameType::Data);
  w.put<uint8_t>(ok ? 1 : 0);
  return std::move(w.out);
}

std::vector<uint8_t> encode_data_error(std::string_view error) {
  FrameWriter w(FrameType::Data);
  w.put<uint8_t>(0);
  w.put_str32(error.empty() ? std::string_view("failed") : error);
  return std::move(w.out);
}

// ---- batches --------------------------------------------------------------------------------

BatchWriter::BatchWriter() : w_(FrameType::Batch) { w_.put<uint32_t>(0); }

void BatchWriter::begin(RecordTag t) {
  w_.put<uint8_t>(static_cast<uint8_t>(t));
  ++count_;
}
void BatchWriter::alloc(uint64_t id, uint64_t nbytes) {
  begin(RecordTag::Alloc);
  w_.put<uint64_t>(id);
  w_.put<uint64_t>(nbytes);
}
void BatchWriter::free(uint64_t id) {
  begin(RecordTag::Free);
  w_.put<uint64_t>(id);
}
void BatchWriter::write_header(uint64_t id, uint64_t offset, uint64_t n) {
  begin(RecordTag::Write);
  w_.put<uint64_t>(id);
  w_.put<uint64_t>(offset);
  w_.put<uint64_t>(n);
}
void BatchWriter::write(uint64_t id, uint64_t offset, const void* src, uint64_t n) {
  write_header(id, offset, n);
  w_.put_bytes(src, n);
}
void BatchWriter::exec(const ir::Op& op, const uint64_t* in, size_t nin, const uint64_t* out, size_t nout) {
  begin(RecordTag::Exec);
  const std::vector<uint8_t> rec = ir::serialize(op);
  w_.put<uint32_t>(static_cast<uint32_t>(rec.size()));
  w_.put_bytes(rec.data(), rec.size());
  w_.put<uint32_t>(static_cast<uint32_t>(nin));
  for (size_t i = 0; i < nin; ++i) w_.put<uint64_t>(in[i]);
  w_.put<uint32_t>(static_cast<uint32_t>(nout));
  for (size_t i = 0; i < nout; ++i) w_.put<uint64_t>(out[i]);
}
void BatchWriter::read(uint64_t id, uint64_t offset, uint64_t n) {
  begin(RecordTag::Read);
  w_.put<uint64_t>(id);
  w_.put<uint64_t>(offset);
  w_.put<uint64_t>(n);
}
void BatchWriter::sync() { begin(RecordTag::Sync); }

std::vector<uint8_t>& BatchWriter::finish() {
  std::memcpy(w_.out.data() + 5, &count_, sizeof(count_));
  return w_.out;
}

void BatchWriter::clear() {
  w_.out.resize(5);
  w_.put<uint32_t>(0);
  count_ = 0;
}

std::vector<Record> decode_batch(const uint8_t* data, size_t size, const Limits& limits) {
  KILN_CHECK(size <= limits.max_frame, kOp,
             "frame of " << static_cast<long long>(size) << " bytes exceeds the limit of "
                         << static_cast<long long>(limits.max_frame));
  FrameReader r = open(data, size, FrameType::Batch, "Batch");
  const uint32_t count = r.get<uint32_t>("record count");
  // Every record takes at least its tag byte: a count past the bytes left is a lie.
  KILN_CHECK(count <= r.left() && count <= limits.max_records, kOp,
             "batch of " << static_cast<long long>(count) << " records in " << static_cast<long long>(r.left())
                         << " bytes (limit " << static_cast<long long>(limits.max_records) << " records)");
  std::vector<Record> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Record rec;
    const uint8_t tag = r.get<uint8_t>("record tag");
    KILN_CHECK(tag >= 1 && tag <= 6, kOp,
               "record " << static_cast<long long>(i) << ": unknown tag " << static_cast<int>(tag));
    rec.tag = static_cast<RecordTag>(tag);
    switch (rec.tag) {
      case RecordTag::Alloc:
        rec.id = r.get<uint64_t>("id");
        rec.n = r.get<uint64_t>("nbytes");
        KILN_CHECK(rec.n <= limits.max_tensor_bytes, kOp,
                   "buffer of " << static_cast<long long>(rec.n) << " bytes exceeds the limit of "
                                << static_cast<long long>(limits.max_tensor_bytes));
        break;
      case RecordTag::Free:
        rec.id = r.get<uint64_t>("id");
        break;
      case RecordTag::Write:
      case RecordTag::Read:
        rec.id = r.get<uint64_t>("id");
        rec.offset = r.get<uint64_t>("offset");
        rec.n = r.get<uint64_t>("length");
        KILN_CHECK(rec.offset <= limits.max_tensor_bytes && rec.n <= limits.max_tensor_bytes, kOp,
                   "record " << static_cast<long long>(i) << ": range past the buffer limit");
        if (rec.tag == RecordTag::Write) rec.data = r.take(rec.n, "write data");
        KILN_CHECK(rec.tag == RecordTag::Write || rec.n + kDataHeader <= limits.max_frame, kOp,
                   "read of " << static_cast<long long>(rec.n) << " bytes exceeds the frame limit");
        break;
      case RecordTag::Exec: {
        const uint32_t n = r.get<uint32_t>("op record length");
        const uint8_t* q = r.take(n, "op record");
        rec.op = ir::deserialize(q, n);
        const uint32_t nin = r.get<uint32_t>("input count");
        KILN_CHECK(nin == rec.op.inputs.size() && nin <= r.left() / 8, kOp,
                   "op " << ir::op_name(rec.op.kind) << ": " << static_cast<long long>(nin) << " input ids for "
                         << static_cast<long long>(rec.op.inputs.size()) << " inputs");
        for (uint32_t k = 0; k < nin; ++k) rec.in.push_back(r.get<uint64_t>("input id"));
        const uint32_t nout = r.get<uint32_t>("output count");
        KILN_CHECK(nout == rec.op.outputs.size() && nout <= r.left() / 8, kOp,
                   "op " << ir::op_name(rec.op.kind) << ": " << static_cast<long long>(nout) << " output ids for "
                         << static_cast<long long>(rec.op.outputs.size()) << " outputs");
        for (uint32_t k = 0; k < nout; ++k) rec.out.push_back(r.get<uint64_t>("output id"));
        break;
      }
      case RecordTag::Sync:
        break;
    }
    out.push_back(std::move(rec));
  }
  r.done("Batch");
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer one is compared (cycling the shorter), so the time depends on the
  // lengths only; the lengths themselves enter the result without a branch.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = a.empty() ? 0 : static_cast<unsigned char>(a[i % a.size()]);
    const unsigned char y = b.empty() ? 0 : static_cast<unsigned char>(b[i % b.size()]);
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0 && (n > 0 || a.size() == b.size());
}

}  // namespace kiln::remote
