// SPDX-License-Identifier: MIT OR Apache-2.0
// Compiled elementwise programs (vec.h: compiled_program). The interpreter (program_hwy.cpp)
// runs each instruction over a chunk of 256 floats, so every instruction loads and stores its
// operands through L1; a program with a few cheap ops spends more time there than in its
// arithmetic. Here a program becomes C++ in which each vector of the output goes through every
// instruction in registers: the arithmetic is the interpreter's own (OpVector, PostStep from
// program_ops-inl.h, VisitUnary from vec_math-inl.h, compiled for the target the interpreter
// runs), so the results are the same bits. The system compiler builds it into a shared object
// in a background thread; the interpreter runs the program until it is loaded. Objects are
// cached on disk under a hash of the source, the flags and the headers it includes, and written
// to a temporary name first, so a crash or a concurrent process never leaves a half-written one.
// Temporaries live in a folder of their process (tmp-<pid>@<host>), which the next process to
// open the cache removes once its owner is gone; the cache is kept under a size bound
// (KILN_JIT_CACHE_MB) by deleting its least recently used entries.
// Built without KILN_WITH_JIT (WebAssembly, bare metal: no dlopen, no processes, no compiler),
// the stubs at the end of this file leave every program to the interpreter.
#ifndef KILN_WITH_JIT
#define KILN_WITH_JIT 1
#endif

#if KILN_WITH_JIT
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/cpu/vec.h"
#include "core/cache_folder.h"
#include "kiln/error.h"
#include "kiln/store.h"
#include "store/file_util.h"

#if KILN_WITH_HWY
#include "hwy/detect_targets.h"
#endif

// Configuration, baked in by CMake (KILN_JIT_CXX in the environment overrides the compiler).
#if KILN_JIT_CONFIG
#include "kiln_jit_config.h"
#endif
#ifndef KILN_JIT_CXX
#define KILN_JIT_CXX "c++"
#endif
#ifndef KILN_JIT_FLAGS
#define KILN_JIT_FLAGS "-O3 -DNDEBUG"
#endif
#ifndef KILN_JIT_INCLUDES
#define KILN_JIT_INCLUDES ""
#endif

namespace kiln::cpu::vec {

/// The C++ text of a program for Highway target `target`, which includes the header named
/// preamble first.
std::string source_for(const PInstr* prog, size_t count, const std::string& preamble, int64_t target);

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

/// The -m flags that make `target` Highway's static target (its HWY_TARGET_STR list).
std::string target_flags(int64_t target) {
#if KILN_WITH_HWY && HWY_ARCH_X86
  const std::string sse4 = "-msse2 -mssse3 -msse4.1 -msse4.2 -mpclmul -maes";
  const std::string avx2 = sse4 + " -mavx -mavx2 -mbmi -mbmi2 -mfma -mf16c";
  if (target == HWY_SSE4) return sse4;
  if (target == HWY_AVX2) return avx2;
  if (target == HWY_AVX3) return avx2 + " -mavx512f -mavx512vl -mavx512dq -mavx512bw";
#endif
  (void)target;
  return "";
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

/// The bytes of a file, "" when it cannot be read (a missing cache file or header).
std::string read_file(const std::string& path) {
  try {
    const std::vector<uint8_t> b = store::read_file(path, SIZE_MAX, "fusion.jit");
    return std::string(b.begin(), b.end());
  } catch (const Error&) {
    return "";
  }
}

/// Writes text to path through store::write_atomic (a temporary file, renamed); false on error.
bool write_file(const std::string& path, const std::string& text) {
  try {
    store::write_atomic(path, [&](int fd) { store::write_all(fd, text.data(), text.size(), path); });
    return true;
  } catch (const Error&) {
    return false;
  }
}

/// An object's checksum file: its size and hash.
std::string checksum(const std::string& bytes) { return std::to_string(bytes.size()) + " " + hex(fnv1a(bytes)) + "\n"; }

/// The nice value of the compile worker and of the compilers it starts.
constexpr int kCompileNice = 10;

/// Lowers the calling thread's priority to kCompileNice (never raises it). On Linux the nice
/// value is per thread and inherited by the processes it starts, so the worker's compiles take
/// idle cores first and a busy core about a tenth of its time: a compile never halves the speed
/// of the program it was started for (a header takes seconds; a short process would otherwise
/// share its cores with it until it exits).
void lower_compile_priority() {
#if defined(__linux__)
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && now < kCompileNice) setpriority(PRIO_PROCESS, tid, kCompileNice);
#endif
}

namespace cache = kiln::cache_folder;
using cache::find_executable;
using cache::make_dirs;
using cache::remove_stale_temporaries;
using cache::remove_tree;
using cache::temp_folder_name;
using cache::touch;

/// The folder of last resort, when the configured one cannot be made (a read-only home).
std::string tmp_cache_dir() { return cache::fallback_folder("programs"); }
std::string cache_dir() { return cache::folder("programs"); }

/// The entry a cache file belongs to (its name up to the first dot: p<32 hex digits> for a
/// kernel, kiln_program_<16 hex digits> for a header); "" for any other file.
std::string entry_of(const std::string& name) {
  const std::string stem = name.substr(0, name.find('.'));
  auto hex_from = [&](size_t from, size_t n) {
    return stem.size() == from + n && stem.find_first_not_of("0123456789abcdef", from) == std::string::npos;
  };
  if (cache::is_temporary(name)) return "";
  if ((stem.rfind('p', 0) == 0 && hex_from(1, 32)) || (stem.rfind("kiln_program_", 0) == 0 && hex_from(13, 16)))
    return stem;
  return "";
}

/// Keeps dir under bound (cache::evict over this folder's entries).
void evict(const std::string& dir, uint64_t bound, const std::set<std::string>& keep) {
  cache::evict(dir, bound, entry_of, keep);
}

// ---- the compiler and the cache ---------------------------------------------------------------

/// The text of the header every program includes first (precompiled once per cache folder).
const std::string& preamble_text() {
  static const std::string text =
      "// Kiln: the headers of every compiled elementwise program (src/backends/cpu/program_jit.cpp).\n"
      "#define HWY_COMPILE_ONLY_STATIC 1\n"
      "#include <cmath>\n#include <cstdint>\n#include <cstring>\n\n"
      "#include \"hwy/highway.h\"\n#include \"hwy/contrib/math/math-inl.h\"\n"
      "#include \"backends/cpu/vec_math-inl.h\"\n#include \"backends/cpu/program_ops-inl.h\"\n";
  return text;
}

constexpr const char* kHashDecl = "extern \"C\" const uint64_t kiln_program_source_hash";

/// What the kernels of one Highway target are built with (targets change only in tests, which
/// restrict the dispatch to each SIMD level in turn).
struct Target {
  std::string flags;     ///< the compiler's flags
  std::string salt;      ///< flags, compiler stamp and header texts: part of every cache key
  std::string preamble;  ///< the name of the header the programs include (salted)
  std::string why;       ///< why this target has no kernels ("" when it has)
  bool preamble_tried = false;
};

struct Entry {
  std::string source, base;  ///< the C++ text; the cache path without extension
  Target* target = nullptr;
  ProgramFn fn = nullptr;
  enum State { kQueued, kReady, kFailed } state = kQueued;
};

class Jit {
 public:
  Jit() {
    const char* m = std::getenv("KILN_FUSION_JIT");
    const std::string ms = m ? m : "";
    mode_ = ms == "0" || ms == "off" ? JitMode::kOff : ms == "sync" ? JitMode::kSync : JitMode::kAsync;
    const char* cxx = std::getenv("KILN_JIT_CXX");
    configure(cxx && *cxx ? cxx : KILN_JIT_CXX, cache_dir());
    // A forked child has no worker thread: it keeps the kernels loaded so far, and programs
    // that were queued or are new run in the interpreter (its lock is released, not left held).
    static Jit* self = this;
    pthread_atfork([] { self->mu_.lock(); }, [] { self->mu_.unlock(); },
                   [] {
                     self->worker_.release();  // the thread is the parent's
                     for (auto& [key, e] : self->entries_)
                       if (e->state == Entry::kQueued) e->state = Entry::kFailed;
                     self->queue_.clear();
                     self->busy_ = false;
                     self->child_ = -1;
                     self->forked_ = true;
                     // The parent's worker may be a waiter of these: a notify would wait for
                     // it forever. No thread of the child waits on them yet.
                     new (&self->cv_) std::condition_variable;
                     new (&self->done_cv_) std::condition_variable;
                     self->mu_.unlock();
                   });
  }
  /// Sets the compiler and the cache folder, and forgets every kernel (loaded ones stay mapped).
  void configure(const std::string& cxx, const std::string& dir) {
    wait();
    std::lock_guard<std::mutex> lk(mu_);
    if (!dir_.empty()) remove_tree(dir_ + "/" + temp_folder_name());
    for (auto& [key, e] : entries_) retired_.push_back(std::move(e));
    entries_.clear();
    targets_.clear();
    cxx_ = cxx;
    includes_ = split(KILN_JIT_INCLUDES, ':');
    dir_ = dir;
    bound_ = cache::bound_bytes("KILN_JIT_CACHE_MB", 1024);
    // The headers the kernels include (Kiln's and Highway's version and math) and the compiler's
    // stamp are part of every cache key, so a kernel built against other arithmetic or by
    // another compiler is never loaded.
    headers_.clear();
    for (const std::string& inc : includes_)
      for (const char* h : {"/backends/cpu/vec_math-inl.h", "/backends/cpu/program_ops-inl.h", "/backends/cpu/vec.h",
                            "/hwy/highway.h", "/hwy/contrib/math/math-inl.h"})
        headers_ += read_file(inc + h);
    const std::string compiler = find_executable(cxx_);
    stamp_ = compiler.empty() ? "" : cache::stamp(compiler);
    why_.clear();
    if (headers_.find("OpVector") == std::string::npos)
      why_ = "the Kiln source tree (" + std::string(KILN_JIT_INCLUDES) + ") is not readable";
    else if (compiler.empty())
      why_ = "no C++ compiler (" + cxx_ + "; KILN_JIT_CXX names another)";
    else if (!make_dirs(dir_)) {
      if (make_dirs(tmp_cache_dir()))
        dir_ = tmp_cache_dir();  // a read-only home: the temporary folder
      else
        why_ = "cannot create the cache folder " + dir_;
    }
    // What a process killed while it compiled left, and the entries past the bound.
    struct stat st {};
    if (stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      remove_stale_temporaries(dir_);
      evict(dir_, bound_, {});
    }
  }

  /// The settings of Highway target t (made at its first use).
  Target& target(int64_t t) {
    auto it = targets_.find(t);
    if (it != targets_.end()) return it->second;
    Target& tg = targets_[t];
    const std::string tflags = target_flags(t);
    if (tflags.empty()) tg.why = "no compiled-kernel flags for this CPU's Highway target";
    tg.flags = "-std=c++20 " + std::string(KILN_JIT_FLAGS) + " " + tflags + " -fPIC -w -DKILN_WITH_HWY=1";
    for (const std::string& inc : includes_) tg.flags += " -I" + inc;
    tg.salt = cxx_ + " " + stamp_ + "\n" + tg.flags + "\n" + headers_;
    tg.preamble = "kiln_program_" + hex(fnv1a(tg.salt)) + ".h";
    return tg;
  }
  ~Jit() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      queue_.clear();
      // The compiler and the programs it runs (cc1plus, as, ld): a compiler left running would
      // write its output after this process has removed its temporaries.
      if (child_ > 0) {
        kill(-child_, SIGKILL);
        kill(child_, SIGKILL);
      }
    }
    cv_.notify_all();
    if (worker_ && worker_->joinable()) worker_->join();
    std::lock_guard<std::mutex> lk(mu_);
    if (!dir_.empty()) remove_tree(dir_ + "/" + temp_folder_name());
  }

  JitMode mode() const { return mode_; }
  void set_mode(JitMode m) { mode_ = m; }
  std::string why() {
    std::lock_guard<std::mutex> lk(mu_);
    return why_.empty() ? target(program_target()).why : why_;
  }
  std::string dir() {
    std::lock_guard<std::mutex> lk(mu_);
    return dir_;
  }

  ProgramFn get(const PInstr* prog, size_t count) {
    if (mode_ == JitMode::kOff) return nullptr;
    const int64_t t = program_target();
    std::string key(reinterpret_cast<const char*>(&t), sizeof t);
    for (size_t k = 0; k < count; ++k) {  // field by field (PInstr has padding)
      const PInstr& in = prog[k];
      const int64_t f[] = {in.code, in.flags, in.post, static_cast<int64_t>(in.kind), in.dst, in.a, in.b,
                           in.c,    in.p,     in.slot};
      key.append(reinterpret_cast<const char*>(f), sizeof f);
      key.append(reinterpret_cast<const char*>(in.r), sizeof in.r);
    }
    std::unique_lock<std::mutex> lk(mu_);
    Target& tg = target(t);
    if (!why_.empty() || !tg.why.empty()) return nullptr;
    auto it = entries_.find(key);
    Entry* e = nullptr;
    if (it != entries_.end()) {
      e = it->second.get();
    } else {
      auto owned = std::make_unique<Entry>();
      e = owned.get();
      entries_.emplace(key, std::move(owned));
      e->target = &tg;
      e->source = source_for(prog, count, tg.preamble, t);
      const std::string h = hex(fnv1a(e->source + tg.salt)) + hex(fnv1a(tg.salt + e->source, 0x9e3779b97f4a7c15ull));
      e->base = dir_ + "/p" + h;
      if (load(e, e->base + ".so")) {
        ++stats_.from_disk;
        touch(e->base + ".so");  // recently used: evicted last
      } else {
        if (forked_) {
          e->state = Entry::kFailed;
          return nullptr;
        }
        queue_.push_back(e);
        if (!worker_) worker_ = std::make_unique<std::thread>([this] { work(); });
        cv_.notify_all();
      }
    }
    if (mode_ == JitMode::kSync) done_cv_.wait(lk, [&] { return e->state != Entry::kQueued || stop_; });
    return e->state == Entry::kReady ? e->fn : nullptr;
  }

  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return (queue_.empty() && !busy_) || stop_; });
  }

  JitStats stats() {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
  }

 private:
  /// Loads the object at path into e (true), after checking that it is the kernel of e's source.
  /// The object's bytes must match its checksum file first: the loader maps a cut-short or
  /// damaged object without checking it, and would crash.
  bool load(Entry* e, const std::string& path) {
    const std::string bytes = read_file(path);
    if (bytes.empty() || read_file(e->base + ".sum") != checksum(bytes)) return false;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    auto key = reinterpret_cast<const uint64_t*>(dlsym(h, "kiln_program_source_hash"));
    auto fn = reinterpret_cast<ProgramFn>(dlsym(h, "kiln_program"));
    const size_t cut = e->source.rfind(kHashDecl);
    if (!key || !fn || cut == std::string::npos || *key != fnv1a(e->source.substr(0, cut))) {
      dlclose(h);
      return false;
    }
    e->fn = fn;
    e->state = Entry::kReady;
    return true;  // never closed: kernels may run until the process ends
  }

  /// Runs the compiler with `args` after the flags, its output to log, the lock released
  /// meanwhile; true when it exits with 0. *secs: its wall time.
  bool run_compiler(const Target& tg, const std::vector<std::string>& extra, const std::string& log,
                    std::unique_lock<std::mutex>& lk, double* secs = nullptr, const std::string& input = "") {
    std::vector<std::string> args{cxx_};
    for (const std::string& a : split(tg.flags, ' ')) args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    if (stop_) return false;
    const auto t0 = std::chrono::steady_clock::now();
    // The lock is released while the compiler runs; child_ lets the destructor end it.
    const int status = cache::run_tool(args, input, log, [&](int pid) {
      child_ = pid;
      lk.unlock();
    });
    if (!lk.owns_lock()) lk.lock();
    child_ = -1;
    if (secs) *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return status == 0;
  }

  /// The header every program of tg includes (tg.preamble), once per cache folder and flags, and
  /// its precompiled form beside it, which takes a kernel's compile from about 1.2 s to 0.5 s.
  /// Without it (a failed build) the header is read as text.
  void ensure_preamble(Target& tg, std::unique_lock<std::mutex>& lk) {
    const std::string h = dir_ + "/" + tg.preamble, gch = h + ".gch";
    if (tg.preamble_tried) {
      if (access(h.c_str(), R_OK) != 0) write_file(h, preamble_text());  // evicted by another process
      touch(gch);
      return;
    }
    tg.preamble_tried = true;
    if (read_file(h) != preamble_text()) write_file(h, preamble_text());
    if (access(gch.c_str(), R_OK) == 0) return touch(gch);
    const std::string folder = temp_folder(), tmp = folder + "/" + tg.preamble + ".gch";
    double secs = 0;
    const bool ok = !folder.empty() && run_compiler(tg, {"-x", "c++-header", h, "-o", tmp}, h + ".log", lk, &secs);
    stats_.preamble_s += secs;
    if ((ok && std::rename(tmp.c_str(), gch.c_str()) == 0) || stop_) std::remove((h + ".log").c_str());
    std::remove(tmp.c_str());
  }

  /// The folder of this process's temporaries in the cache folder (made if missing: another
  /// process removes it when it is an hour old); "" when it cannot be made.
  std::string temp_folder() {
    const std::string t = dir_ + "/" + temp_folder_name();
    return make_dirs(t) ? t : "";
  }

  /// The entries a compile's eviction keeps: the headers of this process's targets, and `also`.
  std::set<std::string> in_use(const std::string& also) {
    std::set<std::string> keep{also};
    for (const auto& [t, tg] : targets_) keep.insert(tg.preamble.substr(0, tg.preamble.find('.')));
    return keep;
  }

  /// Runs the compiler on e's source; true when the object was built and loaded. The source and
  /// the object are written in this process's temporary folder, then renamed into the cache.
  bool compile(Entry* e, std::unique_lock<std::mutex>& lk) {
    Target& tg = *e->target;
    ensure_preamble(tg, lk);
    const std::string tmp = temp_folder(), name = e->base.substr(e->base.rfind('/') + 1);
    if (stop_ || tmp.empty()) return false;
    const std::string src = tmp + "/" + name + ".cpp", obj = tmp + "/" + name + ".so", log = e->base + ".log";
    if (!write_file(src, e->source)) return false;
    double secs = 0;
    // The source comes in on stdin, so no file name of this process goes into the object: two
    // processes compiling one program write the same bytes, and the object and checksum they
    // rename into place agree whichever renames last.
    const std::vector<std::string> args{"-shared", "-iquote", dir_, "-x", "c++", "-", "-o", obj};
    bool ok = run_compiler(tg, args, log, lk, &secs, src);
    const std::string gch = dir_ + "/" + tg.preamble + ".gch";
    if (!ok && !stop_ && access(gch.c_str(), R_OK) == 0) {  // a damaged precompiled header: without it
      std::remove(gch.c_str());
      ok = run_compiler(tg, args, log, lk, &secs, src);
    }
    if (ok) {
      stats_.compile_s += secs;
      stats_.last_compile_s = secs;
      ++stats_.compiled;
      // the source beside the object, for reading; the object and its checksum under their
      // final names
      std::rename(src.c_str(), (e->base + ".cpp").c_str());
      const std::string sum = checksum(read_file(obj));
      ok = std::rename(obj.c_str(), (e->base + ".so").c_str()) == 0 && write_file(e->base + ".sum", sum) &&
           load(e, e->base + ".so");
      if (ok) std::remove(log.c_str());
      evict(dir_, bound_, in_use(name));
    }
    if (stop_) std::remove(log.c_str());  // cut short by the end of the process: no failure to read
    std::remove(src.c_str());
    std::remove(obj.c_str());
    return ok;
  }

  void work() {
    lower_compile_priority();
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Entry* e = queue_.front();
      queue_.pop_front();
      busy_ = true;
      if (!compile(e, lk)) {
        e->state = Entry::kFailed;
        ++stats_.failed;
      }
      busy_ = false;
      done_cv_.notify_all();
    }
  }

  std::atomic<JitMode> mode_{JitMode::kAsync};
  std::string cxx_, dir_, why_, stamp_, headers_;
  uint64_t bound_ = 0;                 ///< the cache folder's size bound in bytes (0: none)
  std::map<int64_t, Target> targets_;  ///< by Highway target (nodes stay put: entries point in)
  std::vector<std::string> includes_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries_;
  std::vector<std::unique_ptr<Entry>> retired_;  ///< forgotten by configure
  std::deque<Entry*> queue_;
  std::unique_ptr<std::thread> worker_;
  bool forked_ = false;  ///< in a forked child: nothing is compiled
  pid_t child_ = -1;
  bool busy_ = false, stop_ = false;
  JitStats stats_;
};

Jit& jit() {
  static Jit j;
  return j;
}

// ---- the source --------------------------------------------------------------------------------

std::string real(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%a", v);
  if (std::strcmp(b, "inf") == 0) return "HUGE_VAL";
  if (std::strcmp(b, "-inf") == 0) return "-HUGE_VAL";
  if (std::strstr(b, "nan")) return "NAN";
  return b;
}

const char* post_name(PInstr::Post p) {
  static const char* const kNames[] = {"kNoPost", "kAdd", "kSub", "kRSub", "kMul", "kDiv", "kRDiv"};
  return kNames[p];
}

}  // namespace

std::string source_for(const PInstr* prog, size_t count, const std::string& preamble, int64_t target) {
  std::ostringstream o;
  o << "// A Kiln elementwise program, compiled by src/backends/cpu/program_jit.cpp.\n"
    << "#include \"" << preamble << "\"\n\n"
    << "static_assert(HWY_TARGET == " << target << "LL, \"the interpreter's target\");\n\n"
    << "namespace kiln::cpu::vec::HWY_NAMESPACE {\nnamespace {\n";
  for (size_t k = 0; k < count; ++k)
    if (prog[k].code == PInstr::Op)
      o << "constexpr double kR" << k << "[3] = {" << real(prog[k].r[0]) << ", " << real(prog[k].r[1]) << ", "
        << real(prog[k].r[2]) << "};\n";
  o << "\ntemplate <bool kStream>\nvoid Run(void* const* ptrs, int64_t n) {\n"
    << "  const D d;\n  const int64_t N = static_cast<int64_t>(hn::Lanes(d));\n"
    << "  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);\n";
  // pointers and splats, once
  std::map<int32_t, PInstr::Code> slots;
  for (size_t k = 0; k < count; ++k)
    if (prog[k].code != PInstr::Op) slots[prog[k].slot] = prog[k].code;
  for (const auto& [slot, code] : slots) {
    const std::string s = std::to_string(slot), p = "ptrs[" + s + "]";
    switch (code) {
      case PInstr::Load:
        o << "  const float* f" << s << " = static_cast<const float*>(" << p << ");\n";
        break;
      case PInstr::LoadBool:
        o << "  const uint8_t* b" << s << " = static_cast<const uint8_t*>(" << p << ");\n";
        break;
      case PInstr::Splat:
        o << "  const V s" << s << " = hn::Set(d, *static_cast<const float*>(" << p << "));\n";
        break;
      case PInstr::SplatBool:
        o << "  const V s" << s << " = hn::Set(d, *static_cast<const uint8_t*>(" << p << ") ? 1.0f : 0.0f);\n";
        break;
      case PInstr::Store:
        o << "  float* o" << s << " = static_cast<float*>(" << p << ");\n";
        break;
      case PInstr::StoreBool:
        o << "  uint8_t* ob" << s << " = static_cast<uint8_t*>(" << p << ");\n";
        break;
      case PInstr::Op:
        break;
    }
  }
  // The body over one vector at i (tail: the padded buffers t*, partial lanes len).
  auto body = [&](bool tail) {
    std::ostringstream b;
    std::map<int, std::string> reg;  // register -> the variable holding it now
    auto name = [&](int r, int fallback) { return reg.count(r) ? reg[r] : reg[fallback]; };
    // The memory of a slot: its padded buffer in the tail ("t" + prefix + slot), else the
    // pointer at i.
    auto at = [&](const char* prefix, const std::string& slot) {
      std::string r = tail ? "t" : "";
      r.append(prefix).append(slot);
      if (!tail) r.append(" + i");
      return r;
    };
    for (size_t k = 0; k < count; ++k) {
      const PInstr& in = prog[k];
      const std::string s = std::to_string(in.slot), v = std::string("x").append(std::to_string(k));
      switch (in.code) {
        case PInstr::Load:
          b << "    const V " << v << " = " << (tail ? "hn::Load(d, " : "hn::LoadU(d, ") << at("f", s) << ");\n";
          reg[in.dst] = v;
          break;
        case PInstr::LoadBool:
          b << "    const V " << v << " = LoadBoolVector(d, " << at("b", s) << ");\n";
          reg[in.dst] = v;
          break;
        case PInstr::Splat:
        case PInstr::SplatBool:
          reg[in.dst] = "s" + s;
          break;
        case PInstr::Op: {
          const std::string post = in.post == PInstr::kNoPost
                                       ? "PostStep<PInstr::kNoPost>{}"
                                       : "PostStep<PInstr::" + std::string(post_name(in.post)) + ">{" + reg[in.p] + "}";
          b << "    const V " << v << " = NoContract(OpVector(d, ir::OpKind::" << ir::op_name(in.kind) << ", kR" << k
            << ", " << post << ", " << reg[in.a] << ", " << name(in.b, in.a) << ", " << name(in.c, in.a) << ", "
            << (tail ? "len" : "0") << "));\n";
          reg[in.dst] = v;
          break;
        }
        case PInstr::Store:
          if (tail)
            b << "    hn::Store(" << reg[in.a] << ", d, to" << s << ");\n";
          else
            b << "    if constexpr (kStream) hn::Stream(" << reg[in.a] << ", d, o" << s << " + i);\n"
              << "    else hn::StoreU(" << reg[in.a] << ", d, o" << s << " + i);\n";
          break;
        case PInstr::StoreBool:
          b << "    StoreBoolVector(d, " << reg[in.a] << ", " << at("ob", s) << ");\n";
          break;
      }
    }
    return b.str();
  };
  o << "  int64_t i = 0;\n  for (; i + N <= n; i += N) {\n";
  for (const auto& [slot, code] : slots) {
    const std::string s = std::to_string(slot);
    if (code == PInstr::Load) o << "    __builtin_prefetch(f" << s << " + i + kPrefetch);\n";
    if (code == PInstr::Store)
      o << "    if constexpr (!kStream) __builtin_prefetch(o" << s << " + i + kPrefetch, 1);\n";
  }
  o << body(false) << "  }\n  if (i == n) return;\n  const int64_t len = n - i;\n";
  for (const auto& [slot, code] : slots) {
    const std::string s = std::to_string(slot);
    if (code == PInstr::Load)
      o << "  HWY_ALIGN float tf" << s << "[kMax] = {};\n  std::memcpy(tf" << s << ", f" << s
        << " + i, static_cast<size_t>(len) * 4);\n";
    if (code == PInstr::LoadBool)
      o << "  uint8_t tb" << s << "[kMax] = {};\n  std::memcpy(tb" << s << ", b" << s
        << " + i, static_cast<size_t>(len));\n";
    if (code == PInstr::Store) o << "  HWY_ALIGN float to" << s << "[kMax];\n";
    if (code == PInstr::StoreBool) o << "  uint8_t tob" << s << "[kMax];\n";
  }
  o << "  {\n" << body(true) << "  }\n";
  for (const auto& [slot, code] : slots) {
    const std::string s = std::to_string(slot);
    if (code == PInstr::Store) o << "  std::memcpy(o" << s << " + i, to" << s << ", static_cast<size_t>(len) * 4);\n";
    if (code == PInstr::StoreBool) o << "  std::memcpy(ob" << s << " + i, tob" << s << ", static_cast<size_t>(len));\n";
  }
  o << "}\n\n}  // namespace\n}  // namespace kiln::cpu::vec::HWY_NAMESPACE\n\n";
  std::string text = o.str();
  // The loader checks this hash: an object under a stale or colliding name is never run.
  std::ostringstream tail;
  tail << kHashDecl << " = 0x" << hex(fnv1a(text)) << "ull;\n"
       << "extern \"C\" void kiln_program(void* const* ptrs, int64_t n, int stream) {\n"
       << "  if (stream)\n    kiln::cpu::vec::HWY_NAMESPACE::Run<true>(ptrs, n);\n"
       << "  else\n    kiln::cpu::vec::HWY_NAMESPACE::Run<false>(ptrs, n);\n}\n";
  return text + tail.str();
}

JitMode jit_mode() { return jit().mode(); }
void set_jit_mode(JitMode mode) { jit().set_mode(mode); }
ProgramFn compiled_program(const PInstr* prog, size_t count) { return jit().get(prog, count); }
void wait_for_compiles() { jit().wait(); }
std::string jit_unavailable_reason() { return jit().why(); }
JitStats jit_stats() { return jit().stats(); }
std::string jit_cache_dir() { return jit().dir(); }
void set_jit_compiler(const std::string& cxx, const std::string& dir) {
  const char* env = std::getenv("KILN_JIT_CXX");
  jit().configure(!cxx.empty() ? cxx : env && *env ? env : KILN_JIT_CXX, dir.empty() ? cache_dir() : dir);
}

}  // namespace kiln::cpu::vec

#else  // !KILN_WITH_JIT

#include <atomic>
#include <cstdlib>
#include <string>

#include "backends/cpu/vec.h"
#include "core/cache_folder.h"

namespace kiln::cpu::vec {

namespace {
// The mode is kept (KILN_FUSION_JIT as with the compiler) so that the API behaves the same.
std::atomic<JitMode>& mode() {
  static std::atomic<JitMode> m{[] {
    const char* e = std::getenv("KILN_FUSION_JIT");
    const std::string v = e ? e : "";
    return v == "0" || v == "off" ? JitMode::kOff : v == "sync" ? JitMode::kSync : JitMode::kAsync;
  }()};
  return m;
}
}  // namespace

JitMode jit_mode() { return mode().load(); }
void set_jit_mode(JitMode m) { mode().store(m); }
ProgramFn compiled_program(const PInstr*, size_t) { return nullptr; }
void wait_for_compiles() {}
std::string jit_unavailable_reason() { return "built without KILN_WITH_JIT"; }
JitStats jit_stats() { return {}; }
std::string jit_cache_dir() { return ""; }
void set_jit_compiler(const std::string&, const std::string&) {}

}  // namespace kiln::cpu::vec

#endif  // KILN_WITH_JIT
