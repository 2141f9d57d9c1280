// SPDX-License-Identifier: MIT OR Apache-2.0
// TensorMap lookups and store::read (format chosen by magic bytes).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/file_util.h"
#include "kiln/error.h"
#include "kiln/store.h"

namespace kiln::store {

const Tensor* TensorMap::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

namespace {
/// The format of a file from its first bytes: a zip (PK\x03\x04, PyTorch >= 1.6) or a pickle
/// (protocol byte 0x80, the legacy torch.save format) is PyTorch's, anything else safetensors.
Format sniff(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "store.read", path << ": cannot open: " << errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    KILN_CHECK(false, "store.read", path << ": is a directory, not a file");
  }
  unsigned char b[9] = {};
  ssize_t got = 0;
  while (got < 9) {
    ssize_t r = ::read(fd, b + got, static_cast<size_t>(9 - got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += r;
  }
  ::close(fd);
  KILN_CHECK(got >= 2, "store.read",
             path << ": file of " << got << " bytes is too short to be a safetensors or PyTorch file");
  if (got >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) return Format::Torch;
  // A safetensors header is a JSON object right after its 8-byte length. Checked before the
  // pickle test: a header length whose low byte is 0x80 also starts with that byte.
  if (got >= 9 && b[8] == '{') return Format::Safetensors;
  // A legacy torch.save file is a pickle: PROTO (0x80) then a protocol number 2..5.
  if (b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return Format::Torch;
  KILN_CHECK(got >= 8, "store.read", path << ": file of " << got << " bytes is too short for a safetensors header");
  return Format::Safetensors;
}
}  // namespace

TensorMap read(const std::string& path, const ReadOptions& options) {
  Format f = options.format == Format::Auto ? sniff(path) : options.format;
  if (f == Format::Torch) return load_torch(path, options);
  return load_safetensors(path, options);
}

}  // namespace kiln::store
