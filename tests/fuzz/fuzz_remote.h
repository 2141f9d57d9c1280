// SPDX-License-Identifier: MIT OR Apache-2.0
// The body of the fuzz_remote libFuzzer target, shared with the test that runs its seeds
// (tests/remote/test_remote_protocol.cpp, RemoteFuzzCorpus): the input is one frame as a server
// receives it. A Hello is decoded; a Batch runs in a fresh session on the plain CPU with small
// limits (64 KiB buffers, a 256 KiB quota), so every record the decoder lets through is checked
// against the session and, when it passes, executed. Every frame must be refused with a
// kiln::Error or run; anything else (a crash, another exception, a sanitizer report) is a bug.
#pragma once
#include <kiln/kiln.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "remote/protocol.h"
#include "remote/session.h"

namespace kiln::fuzz {

inline void run_remote_frame(const uint8_t* data, size_t size) {
  static std::mutex exec_mu;
  remote::Limits limits;
  limits.max_frame = 1 << 20;
  limits.max_tensor_bytes = 64 << 10;
  limits.quota_bytes = 256 << 10;
  limits.max_records = 4096;
  try {
    switch (remote::frame_type(data, size)) {
      case remote::FrameType::Hello:
        (void)remote::decode_hello(data, size);
        return;
      case remote::FrameType::Batch: {
        remote::Session s(Device::cpu().without_fusion().backend(), limits, &exec_mu);
        std::vector<remote::Reply> replies;
        s.run_batch(data, size, replies);
        return;
      }
      case remote::FrameType::Welcome:
        (void)remote::decode_welcome(data, size);
        return;
      default:
        (void)remote::decode_message(data, size);
        return;
    }
  } catch (const Error&) {
  }
}

}  // namespace kiln::fuzz
