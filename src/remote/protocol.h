// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Note [Remote protocol]
// ~~~~~~~~~~~~~~~~~~~~~~
// The wire format of the remote device (docs/remote.md): one WebSocket binary message per frame,
// little-endian, every frame starting with kMagic and a FrameType byte.
//
//   client -> server   Hello   u16 version, str16 token, str16 client name
//                      Batch   u32 count, then count records, each a RecordTag byte and:
//                                Alloc  u64 id, u64 nbytes
//                                Free   u64 id
//                                Write  u64 id, u64 offset, u64 n, n raw bytes
//                                Exec   u32 n, n bytes of ir::serialize(op), u32 nin, nin u64 ids,
//                                       u32 nout, nout u64 ids
//                                Read   u64 id, u64 offset, u64 n    (answered by one Data frame)
//                                Sync                                (answered by one Status frame)
//   server -> client   Welcome u16 version, u64 session, str16 device, u64 max_frame,
//                              u64 max_tensor_bytes, u64 quota_bytes
//                      Data    u8 ok, then the n raw bytes (ok) or a str32 error
//                      Status  u8 ok, str32 error (empty when ok)
//                      Refused str32 reason; the server closes the connection after it
//
// Ids name buffers of one session only: the client picks them, the server keeps one table per
// session, so an id of another session is simply unknown. Buffers are raw bytes; their dtype and
// shape are those of the op descriptors that use them (checked against the buffer's size).
// decode_* validate everything a frame says about itself (lengths, counts, op records, limits)
// and throw kiln::Error("[remote] ...") otherwise; what depends on a session's state (ids,
// bounds, quota, shape inference) is checked by Session before anything runs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ir/op.h"

namespace kiln::remote {

inline constexpr uint32_t kMagic = 0x314d524b;  // "KRM1"
/// The protocol version this build speaks; a Hello with another one is refused.
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kMaxTokenBytes = 4096, kMaxNameBytes = 256;
/// Bytes of a Data frame before its payload (magic, type, ok).
inline constexpr size_t kDataHeader = 4 + 1 + 1;

enum class FrameType : uint8_t { Hello = 1, Welcome = 2, Batch = 3, Data = 4, Status = 5, Refused = 6 };
enum class RecordTag : uint8_t { Alloc = 1, Free = 2, Write = 3, Exec = 4, Read = 5, Sync = 6 };

/// Bounds a server enforces (also sent to the client in Welcome).
struct Limits {
  uint64_t max_frame = uint64_t{64} << 20;        ///< bytes of one WebSocket message
  uint64_t max_tensor_bytes = uint64_t{1} << 32;  ///< bytes of one buffer
  uint64_t quota_bytes = uint64_t{8} << 30;       ///< bytes of all live buffers of a session
  uint64_t max_records = uint64_t{1} << 20;       ///< records of one batch
  uint64_t max_ops_per_s = 0;                     ///< ops a session may run per second (0: no limit); the server's own
};

struct Hello {
  uint16_t version = 0;
  std::string token, client;
};
struct Welcome {
  uint16_t version = 0;
  uint64_t session = 0;
  std::string device;
  Limits limits;
};

/// One record of a Batch. `data` points into the frame (Write's bytes): valid while it lives.
struct Record {
  RecordTag tag{};
  uint64_t id = 0, offset = 0, n = 0;  ///< Alloc: n = nbytes; Write/Read: offset, n
  const uint8_t* data = nullptr;       ///< Write
  ir::Op op;                           ///< Exec
  InlineVec<uint64_t, 4> in, out;      ///< Exec: buffer ids of op.inputs / op.outputs
};

/// Appends little-endian values to a frame.
struct FrameWriter {
  std::vector<uint8_t> out;
  explicit FrameWriter(FrameType t) {
    put<uint32_t>(kMagic);
    put<uint8_t>(static_cast<uint8_t>(t));
  }
  template <class T>
  void put(T v) {
    put_bytes(&v, sizeof(T));
  }
  void put_str16(std::string_view s);
  void put_str32(std::string_view s);
  void put_bytes(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
  }
};

/// The type of a frame (after checking its magic); throws kiln::Error on a short or foreign frame.
FrameType frame_type(const uint8_t* data, size_t size);

std::vector<uint8_t> encode_hello(const Hello& h);
Hello decode_hello(const uint8_t* data, size_t size);
std::vector<uint8_t> encode_welcome(const Welcome& w);
Welcome decode_welcome(const uint8_t* data, size_t size);
/// Status and Refused frames carry one message (Status: ok when it is empty).
std::vector<uint8_t> encode_status(std::string_view error);
std::vector<uint8_t> encode_refused(std::string_view reason);
/// The message of a Status (empty: ok) or Refused frame.
std::string decode_message(const uint8_t* data, size_t size);
/// A Data frame's header, ok or not (the payload follows an ok header).
std::vector<uint8_t> encode_data_header(bool ok);
/// A failed Data frame (its error message).
std::vector<uint8_t> encode_data_error(std::string_view error);

/// Appends records to a Batch frame.
class BatchWriter {
 public:
  BatchWriter();
  void alloc(uint64_t id, uint64_t nbytes);
  void free(uint64_t id);
  /// A Write record with its bytes (write_header alone: the caller sends the bytes after it).
  void write(uint64_t id, uint64_t offset, const void* src, uint64_t n);
  void write_header(uint64_t id, uint64_t offset, uint64_t n);
  void exec(const ir::Op& op, const uint64_t* in, size_t nin, const uint64_t* out, size_t nout);
  void read(uint64_t id, uint64_t offset, uint64_t n);
  void sync();
  uint32_t count() const { return count_; }
  size_t size() const { return w_.out.size(); }
  /// The frame (count patched in); the writer is then empty again.
  std::vector<uint8_t>& finish();
  void clear();

 private:
  FrameWriter w_;
  uint32_t count_ = 0;
  void begin(RecordTag t);
};

/// The records of a Batch frame, every one validated (lengths, counts, op records, limits).
std::vector<Record> decode_batch(const uint8_t* data, size_t size, const Limits& limits);

/// Whether two secrets are equal, in time that depends only on their lengths (not on where they
/// differ).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace kiln::remote
