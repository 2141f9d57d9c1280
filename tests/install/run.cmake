# SPDX-License-Identifier: MIT OR Apache-2.0
# The test `install_find_package`: installs the current build of Kiln into a scratch prefix,
# then configures, builds and runs tests/install/ (an outside project using find_package(Kiln))
# against it. Variables (-D): KILN_BUILD_DIR, SOURCE_DIR, WORK_DIR, CXX, CXX_FLAGS, BUILD_TYPE,
# LAUNCHER (optional compiler launcher, e.g. ccache).
cmake_minimum_required(VERSION 3.22)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc})\n${out}\n${err}")
  endif()
  message(STATUS "install test: ${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
step("cmake --install" ${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${prefix})
foreach(f include/kiln/kiln.h include/kiln/tensor.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install test: ${f} was not installed")
  endif()
endforeach()

set(configure_args -S ${SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
if(LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
step("configure the outside project" ${CMAKE_COMMAND} ${configure_args})
step("build the outside project" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("run the outside project" ${WORK_DIR}/build/kiln_install_test)
message(STATUS "${step_output}")
