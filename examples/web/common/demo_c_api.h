// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// What the demos' WebAssembly modules share: every C function a page calls returns 0 on success
// and -1 on an exception, whose text the module's demo_error() then gives (last_error()).
#include <emscripten/emscripten.h>

#include <exception>
#include <string>

namespace kiln::web_demo {

inline std::string& last_error() {
  static std::string e;
  return e;
}

/// Runs f; 0, or -1 with the exception's text kept for demo_error().
template <class F>
int guarded(F&& f) {
  try {
    f();
    last_error().clear();
    return 0;
  } catch (const std::exception& e) {
    last_error() = e.what();
    return -1;
  }
}

}  // namespace kiln::web_demo
