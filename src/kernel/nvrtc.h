// SPDX-License-Identifier: MIT OR Apache-2.0
// NVRTC, loaded at run time (never linked): compiles the CUDA C rendering of a kernel to CUBIN
// for an architecture. NVRTC needs no GPU, so generated CUDA is checked on any machine with the
// toolkit.
#pragma once
#include <dlfcn.h>

#include <string>

namespace kiln::kernel {

/// Sets f to the entry point `name` of a library opened with dlopen; whether it exists.
template <class F>
bool bind_symbol(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

}  // namespace kiln::kernel

namespace kiln::kernel::nvrtc {

/// True when libnvrtc could be loaded; otherwise `why` says what was tried.
bool available(std::string* why = nullptr);
/// "13.0".
std::string version();
/// The CUBIN of `source` for sm_<arch> (80, 90, ...). Throws kiln::Error with NVRTC's log,
/// naming `kernel`.
std::string compile_cubin(const std::string& source, const std::string& kernel, int arch);

}  // namespace kiln::kernel::nvrtc
