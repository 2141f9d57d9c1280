// SPDX-License-Identifier: MIT OR Apache-2.0
// The disk cache of built kernels (shared objects for the CPU, SPIR-V for Vulkan): entries named
// by a hash of what went into them (source, tool, its version stamp and flags), each with a
// checksum beside it, written under a temporary name and renamed into place, so a reader never
// sees half a file and a damaged entry is built again. The folder sweeps temporaries of dead
// processes and keeps under KILN_KERNEL_CACHE_MB by removing the least recently used entries.
//
// The fused-program compiler (src/backends/cpu/program_jit.cpp) keeps its own folder
// ("programs", built by a background thread with precompiled headers) through the same
// housekeeping and tools below.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
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

// ---- a cache folder ----
/// The cache folder `sub`: under $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
/// ~/.cache/kiln, else fallback_folder(sub).
std::string folder(const std::string& sub);
/// /tmp/kiln-<uid>/<sub>: where a cache goes when its folder cannot be made (a read-only home).
std::string fallback_folder(const std::string& sub);
/// The name of this process's folder of temporaries in a cache folder: tmp-<pid>@<host>.
std::string temp_folder_name();
/// Whether a file or folder name is a temporary: a folder tmp-<pid>@<host>, or a file with a
/// "tmp" part beside its pid (<name>.<pid>.tmp.<ext>, store::write_atomic's .<name>.tmp.<pid>.<x>).
bool is_temporary(const std::string& name);
/// The size bound in bytes that environment variable `env` gives in MB (0: none), else default_mb.
uint64_t bound_bytes(const char* env, double default_mb);
/// Marks a file as used now (its entry's place in the eviction order).
void touch(const std::string& path);
/// Removes a file or a folder with what it holds.
void remove_tree(const std::string& path);
/// Removes the temporaries in dir that no process will finish: those of a process of this host
/// that is gone (killed while it compiled), and any older than an hour (another host's, or a
/// reused pid). This process's folder stays.
void remove_stale_temporaries(const std::string& dir);
/// When the entries of dir (its regular files grouped by entry_of(name); "" for none) take more
/// than `bound` bytes (0: no bound), deletes the least recently used entries (an entry's time:
/// its newest file's) until they take at most 80% of it. The entries in `keep` stay.
void evict(const std::string& dir, uint64_t bound, const std::function<std::string(const std::string&)>& entry_of,
           const std::set<std::string>& keep);

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
