# SPDX-License-Identifier: MIT OR Apache-2.0
# Include rules between layers (docs/architecture.md, "Layers"), run by CTest (include_rules):
#   cmake -DSOURCE_DIR=<repository> -P tests/layering/include_rules.cmake
# 1. The backend-neutral layers include no header of src/backends.
# 2. No file of src/backends includes kiln/store.h (kernels know nothing of files).
# 3. No public header (include/kiln) includes a backend header.
# 4. src/core includes no header of the layers above it.
# A violation not in the allow-list fails, and so does an allow-list entry that no longer
# occurs: the list only shrinks (delete its line when the include goes).
cmake_minimum_required(VERSION 3.22)
if(NOT SOURCE_DIR)
  get_filename_component(SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
endif()

set(NEUTRAL_LAYERS autodiff capture core data fusion ir nn onnx ops optim rl store tensor train vision)

# Existing violations, "file|included header"; each entry goes with its include.
set(ALLOWED
  # the compiled-programs cache writes through store::write_atomic
  "src/backends/cpu/program_jit.cpp|kiln/store.h"
)

set(FOUND "")
# Appends "file|header" to FOUND for each include in `dir` of a header matching `pattern`.
function(scan dir pattern)
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}"
       "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.hpp" "${SOURCE_DIR}/${dir}/*.cpp"
       "${SOURCE_DIR}/${dir}/*.cc" "${SOURCE_DIR}/${dir}/*.inl" "${SOURCE_DIR}/${dir}/*.in")
  set(found ${FOUND})
  foreach(f IN LISTS files)
    file(STRINGS "${SOURCE_DIR}/${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*$" "\\1" header "${line}")
      string(REGEX REPLACE "^(\\.\\./)+" "" header "${header}")
      if(header MATCHES "${pattern}")
        list(APPEND found "${f}|${header}")
      endif()
    endforeach()
  endforeach()
  set(FOUND ${found} PARENT_SCOPE)
endfunction()

foreach(layer IN LISTS NEUTRAL_LAYERS)
  scan("src/${layer}" "^backends/")
endforeach()
scan("src/backends" "^kiln/store\\.h$")
# src/core is the ground floor: nothing above it (the Tensor frontend is src/tensor).
scan("src/core" "^(ops|tensor|autodiff|fusion|nn|optim|store|data|train|onnx|capture|vision|rl)/")
scan("include/kiln" "^backends/")

set(errors "")
foreach(v IN LISTS FOUND)
  if(NOT v IN_LIST ALLOWED)
    string(REPLACE "|" " includes " msg "${v}")
    string(APPEND errors "  new layering violation: ${msg}\n")
  endif()
endforeach()
foreach(a IN LISTS ALLOWED)
  if(NOT a IN_LIST FOUND)
    string(REPLACE "|" " no longer includes " msg "${a}")
    string(APPEND errors "  ${msg}: delete its entry from ALLOWED in tests/layering/include_rules.cmake\n")
  endif()
endforeach()
if(errors)
  message(FATAL_ERROR "Include rules (tests/layering/include_rules.cmake):\n${errors}")
endif()
list(LENGTH FOUND n)
message(STATUS "Include rules hold (${n} allowed violations left)")
