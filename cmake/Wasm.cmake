# SPDX-License-Identifier: MIT OR Apache-2.0
# The WebAssembly build (emscripten 3.1.6; the preset `wasm`, `make wasm`, docs/web.md), included
# by CMakeLists.txt when the toolchain is emscripten's. Kiln's portable path: Highway's WASM
# SIMD128 target (one static target, no run-time dispatch), no oneDNN, no OpenMP, no background
# compiler of fused programs, no Vulkan, MPI or remote device; C++ exceptions on, as WebAssembly
# exceptions (-fwasm-exceptions at compile and link time: without it a `throw` aborts, and
# emscripten's JavaScript exceptions would put JavaScript frames between an export and the
# WebGPU device's waits, which JSPI cannot suspend). The libraries built are core (with ops and
# autodiff), fusion, cpu, kernel and webgpu (the page's WebGPU device), nn (with optim), store,
# and vision and onnx for ONNX import.
option(KILN_WASM_THREADS "WebAssembly: build with -pthread (shared memory; pages then need COOP/COEP headers)" OFF)

add_compile_options(-fwasm-exceptions -msimd128)
add_link_options(-fwasm-exceptions -sALLOW_MEMORY_GROWTH=1)
if(KILN_WASM_THREADS)
  add_compile_options(-pthread)
  add_link_options(-pthread)
endif()
# One Highway target (WASM, 4 f32 lanes): HWY_DYNAMIC_DISPATCH becomes a direct call, so no
# libhwy (its target detection) is needed.
add_compile_definitions(HWY_COMPILE_ONLY_STATIC=1)

# Header-only packages of the host (Highway, nlohmann/json) are reached through a folder holding
# only their symlinks: -I/usr/include would put glibc's headers before emscripten's.
set(KILN_WASM_HOST_HEADERS ${PROJECT_BINARY_DIR}/wasm-host-include)
file(MAKE_DIRECTORY ${KILN_WASM_HOST_HEADERS})
foreach(dir hwy nlohmann)
  if(NOT EXISTS /usr/include/${dir})
    message(FATAL_ERROR "The WebAssembly build needs /usr/include/${dir} (scripts/install-deps.sh --wasm)")
  endif()
  file(CREATE_LINK /usr/include/${dir} ${KILN_WASM_HOST_HEADERS}/${dir} SYMBOLIC)
endforeach()
foreach(target hwy::hwy hwy::hwy_contrib nlohmann_json::nlohmann_json)
  add_library(${target} INTERFACE IMPORTED)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${KILN_WASM_HOST_HEADERS})
endforeach()

# Forced settings: what the portable path leaves out.
foreach(opt KILN_WITH_ONEDNN KILN_WITH_JIT KILN_WITH_OPENMP KILN_WITH_VULKAN KILN_WITH_MPI KILN_WITH_REMOTE
            KILN_WITH_DATA KILN_WITH_SENTENCEPIECE KILN_BUILD_BENCH KILN_BUILD_EXAMPLES KILN_BUILD_FUZZ)
  set(${opt} OFF CACHE BOOL "" FORCE)
endforeach()
