# SPDX-License-Identifier: MIT OR Apache-2.0
# The test `docs_layer_reference`: every module type declared in include/kiln/nn/*.h (each
# KILN_VISIT(Name, ...), KILN_NN_NO_FIELDS_(Name), KILN_NN_CONFIGURED_ACTIVATION_(Name),
# KILN_NN_PLAIN_ACTIVATION_(Name), `type_name() ... return "Name"; }` and
# `using NameNd = ...Nd<N>;`)
# must appear, in backquotes, in a table row of the Book's layer reference (docs/modules.md)
# or loss table (docs/losses.md), so the reference cannot drift from the headers. A row may
# name several sizes at once: `Conv1d/2d/3d` stands for Conv1d, Conv2d and Conv3d.
# Variable (-D): SOURCE_DIR, the root of the source tree.
cmake_minimum_required(VERSION 3.22)

file(GLOB headers ${SOURCE_DIR}/include/kiln/nn/*.h)
set(names "")
set(patterns "KILN_VISIT\\(([A-Za-z0-9_]+)" "KILN_NN_NO_FIELDS_\\(([A-Za-z0-9_]+)\\)"
    "KILN_NN_CONFIGURED_ACTIVATION_\\(([A-Za-z0-9_]+)\\)" "KILN_NN_PLAIN_ACTIVATION_\\(([A-Za-z0-9_]+)\\)"
    "type_name\\(\\) const override { return \"([A-Za-z0-9_]+)\" }" "using ([A-Za-z0-9_]+) = [A-Za-z0-9_]+<[0-9]>")
foreach(h ${headers})
  file(READ ${h} text)
  string(REPLACE ";" "" text "${text}")  # CMake lists split at semicolons
  foreach(p ${patterns})
    string(REGEX MATCHALL "${p}" found "${text}")
    foreach(m ${found})
      string(REGEX MATCH "${p}" unused "${m}")
      list(APPEND names ${CMAKE_MATCH_1})
    endforeach()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES names)
# Internal bases and the example in module.h's comment are not layers of the reference.
list(REMOVE_ITEM names Type TypeName Mlp)

set(table "")
foreach(doc modules.md losses.md)
  file(STRINGS ${SOURCE_DIR}/docs/${doc} lines ENCODING UTF-8 REGEX "^\\|")
  foreach(line ${lines})
    # Expand `Conv1d/2d/3d` into `Conv1d` `Conv2d` `Conv3d`.
    string(REGEX MATCHALL "`[A-Za-z]+[0-9]d(/[0-9]d)+`" groups "${line}")
    foreach(g ${groups})
      string(REGEX MATCH "^`([A-Za-z]+)[0-9]d" base "${g}")
      set(base "${CMAKE_MATCH_1}")
      string(REGEX MATCHALL "[0-9]d" dims "${g}")
      foreach(d ${dims})
        string(APPEND line " `${base}${d}`")
      endforeach()
    endforeach()
    string(APPEND table "${line}\n")
  endforeach()
endforeach()

set(missing "")
foreach(n ${names})
  string(FIND "${table}" "`${n}`" at)
  if(at EQUAL -1)
    list(APPEND missing ${n})
  endif()
endforeach()
list(LENGTH names count)
if(missing)
  string(REPLACE ";" ", " missing "${missing}")
  message(FATAL_ERROR "docs_layer_reference: ${count} module types in include/kiln/nn; not in the layer "
                      "reference of docs/modules.md (or the loss table of docs/losses.md): ${missing}")
endif()
message(STATUS "docs_layer_reference: all ${count} module types of include/kiln/nn are in the reference")
