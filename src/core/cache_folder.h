// SPDX-License-Identifier: MIT OR Apache-2.0
// A cache folder of built artifacts (the kernel compiler's "kernels", the fused-program
// compiler's "programs"): where it lives, the tools that fill it, and its housekeeping. A
// process writes its temporaries under names that say whose they are (a folder
// tmp-<pid>@<host>, or files <name>.<pid>.tmp.<ext>); the next process to open the folder
// removes those of processes that are gone, and a folder keeps under a size bound by deleting
// its least recently used entries.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace kiln::cache_folder {

/// Makes a folder and its parents; whether it exists afterwards.
bool make_dirs(const std::string& path);
/// The path of an executable (a name looked up on PATH, or a path); "" when none.
std::string find_executable(const std::string& cmd);
/// Size and modification time of a file (a tool's upgrade changes the keys).
std::string stamp(const std::string& path);
/// Runs the tool argv[0] (looked up on PATH) with `argv`, its standard input from `input`
/// (/dev/null when ""), its output and errors to the file `log`, in a process group of its own
/// (so a caller can end it and its children with kill(-pid)). `started`, when given, receives
/// its pid before the wait (and may release a lock meanwhile). The tool's exit status; -1 when
/// it could not start or did not exit normally.
int run_tool(const std::vector<std::string>& argv, const std::string& input, const std::string& log,
             const std::function<void(int pid)>& started = nullptr);

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

}  // namespace kiln::cache_folder
