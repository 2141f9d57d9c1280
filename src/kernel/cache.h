// SPDX-License-Identifier: MIT OR Apache-2.0
// The disk cache of built kernels (shared objects for the CPU, SPIR-V for Vulkan): entries named
// by a hash of what went into them (source, tool, its version stamp and flags), each with a
// checksum beside it, written under a temporary name and renamed into place, so a reader never
// sees half a file and a damaged entry is built again. The folder sweeps temporaries of dead
// processes and keeps under KILN_KERNEL_CACHE_MB by removing the least recently used entries.
//
// The folder's housekeeping is core/cache_folder.h, which the fused-program compiler
// (src/backends/cpu/program_jit.cpp, folder "programs") uses too.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/cache_folder.h"
#include "kernel/ir.h"

namespace kiln::kernel::cache {

std::string hash128(const std::string& s);
std::string read_all(const std::string& path);
bool write_all(const std::string& path, const std::string& text);
/// The feature flags of this CPU (the first "flags" line of /proc/cpuinfo), "" where unknown.
const std::string& cpu_flags();
/// Writes a rendered source into $KILN_KERNEL_DUMP (when set) as <kernel>-<hash>.<ext>.
void dump_source(const ir::Kernel& k, const std::string& ext, const std::string& text);

// The folder helpers (core/cache_folder.h), under this namespace's names.
using cache_folder::bound_bytes;
using cache_folder::evict;
using cache_folder::fallback_folder;
using cache_folder::find_executable;
using cache_folder::folder;
using cache_folder::is_temporary;
using cache_folder::make_dirs;
using cache_folder::remove_stale_temporaries;
using cache_folder::remove_tree;
using cache_folder::run_tool;
using cache_folder::stamp;
using cache_folder::temp_folder_name;
using cache_folder::touch;

struct Artifact {
  std::string path;    ///< the entry in the cache folder
  std::string bytes;   ///< its contents
  std::string origin;  ///< "compiled" or "disk"
};

/// The entry k<key><ext> of cache_dir(): read when present and its checksum holds, else made by
/// `produce`, which is given the entry's temporary stem (for any files of its own, removed
/// before it returns) and returns the built bytes or throws kiln::Error. An empty result is an
/// error. The entry is written under a temporary name and renamed into place.
Artifact build(const ir::Kernel& k, const std::string& key, const std::string& ext,
               const std::function<std::string(const std::string& tmp)>& produce);

/// build() by running `argv` with "{in}" replaced by a temporary file holding `source` (extension `src_ext`)
/// and "{out}" by the temporary output. Throws kiln::Error("[kernel 'name'] <tool> failed ...").
Artifact build(const ir::Kernel& k, const std::string& key, const std::string& source, const std::string& src_ext,
               const std::string& ext, const std::vector<std::string>& argv, const std::string& tool);

}  // namespace kiln::kernel::cache
