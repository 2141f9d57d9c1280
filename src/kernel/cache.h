// SPDX-License-Identifier: MIT OR Apache-2.0
// The disk cache of built kernels (shared objects for the CPU, SPIR-V for Vulkan): entries named
// by a hash of what went into them (source, tool, its version stamp and flags), each with a
// checksum beside it, written under a temporary name and renamed into place, so a reader never
// sees half a file and a damaged entry is built again. The folder sweeps temporaries of dead
// processes and keeps under KILN_KERNEL_CACHE_MB by removing the least recently used entries.
//
// The fused-program compiler (src/backends/cpu/program_jit.cpp) has its own cache ("programs",
// with a background thread and precompiled headers); it is to become a client of this one.
#pragma once
#include <string>
#include <vector>

#include "kernel/ir.h"

namespace kiln::kernel::cache {

std::string hash128(const std::string& s);
std::string read_all(const std::string& path);
bool write_all(const std::string& path, const std::string& text);
bool make_dirs(const std::string& path);
/// The path of an executable (a name looked up on PATH, or a path); "" when none.
std::string find_executable(const std::string& cmd);
/// Size and modification time of a file (a tool's upgrade changes the keys).
std::string stamp(const std::string& path);
/// The feature flags of this CPU (the first "flags" line of /proc/cpuinfo), "" where unknown.
const std::string& cpu_flags();
/// Writes a rendered source into $KILN_KERNEL_DUMP (when set) as <kernel>-<hash>.<ext>.
void dump_source(const ir::Kernel& k, const std::string& ext, const std::string& text);

struct Artifact {
  std::string path;    ///< the entry in the cache folder
  std::string bytes;   ///< its contents
  std::string origin;  ///< "compiled" or "disk"
};

/// The entry k<key><ext> of cache_dir(): read when present and its checksum holds, else built by
/// running `argv` with "{in}" replaced by a temporary file holding `source` (extension `src_ext`)
/// and "{out}" by the temporary output. Throws kiln::Error("[kernel 'name'] <tool> failed ...").
Artifact build(const ir::Kernel& k, const std::string& key, const std::string& source, const std::string& src_ext,
               const std::string& ext, const std::vector<std::string>& argv, const std::string& tool);

}  // namespace kiln::kernel::cache
