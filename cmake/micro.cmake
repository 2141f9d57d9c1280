# Kiln on microcontrollers (docs/micro.md): the cross toolchain and QEMU, generated micro models
# and bare-metal programs for the QEMU boards.
#
# kiln_add_onnx_micro_model(<target> <model.onnx> [NAME <c_name>] [OUTPUT_DIR <dir>]
#                           [DIMS <param=N>...] [SHAPES <input=AxBx...>...]
#                           [CONSTANTS <input=tensor.pb>...])
#   Runs `kiln-onnx --target micro` at build time and adds the generated <c_name>.cpp and the
#   kernels (kiln_micro.cpp) to <target> (a host target: tests, simulators), with the folder on
#   its include path. Also the form kiln_add_onnx_model(<target> <model> MICRO ...).
#   <target> may be "" (generate only). Sets <c_name>_MICRO_DIR (the generated folder) and
#   <c_name>_MICRO_TARGET (the target that generates it) in the caller's scope. CONSTANTS binds
#   graph inputs to the tensors of TensorProto files (weights a model takes as inputs).
#
# kiln_add_micro_program(<name> BOARD <mps2-an385|mps3-an547|mps3-an547-scalar>
#                        SOURCES <files...> [INCLUDES <dirs...>] [DEFINES <defs...>] [DEPENDS <files...>]
#                        [AFTER <target>])
#   Cross-compiles a bare-metal program <name>.elf (target <name>, built with ALL) with
#   arm-none-eabi-g++ for the board: the board's startup (micro/boards) and linker script are
#   added. KILN_MICRO_RUN_<BOARD> (a list) is the QEMU command line that runs an ELF given last.
#   mps3-an547-scalar: the Cortex-M55 without Helium (+nomve), to measure Helium's speedup.
#
# KILN_MICRO_TOOLCHAIN is ON when arm-none-eabi-g++ and qemu-system-arm are found.

set(KILN_MICRO_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/../micro)
get_filename_component(KILN_MICRO_SOURCE_DIR ${KILN_MICRO_SOURCE_DIR} ABSOLUTE)
find_program(KILN_ARM_CXX arm-none-eabi-g++)
find_program(KILN_ARM_SIZE arm-none-eabi-size)
find_program(KILN_QEMU_ARM qemu-system-arm)
if(KILN_ARM_CXX AND KILN_ARM_SIZE AND KILN_QEMU_ARM)
  set(KILN_MICRO_TOOLCHAIN ON)
else()
  set(KILN_MICRO_TOOLCHAIN OFF)
endif()

set(KILN_MICRO_QEMU_COMMON -nographic -monitor none -serial none -semihosting-config enable=on,target=native
                           -icount shift=0 -kernel)
set(KILN_MICRO_RUN_mps2-an385 ${KILN_QEMU_ARM} -M mps2-an385 -cpu cortex-m3 ${KILN_MICRO_QEMU_COMMON})
set(KILN_MICRO_RUN_mps3-an547 ${KILN_QEMU_ARM} -M mps3-an547 -cpu cortex-m55 ${KILN_MICRO_QEMU_COMMON})
set(KILN_MICRO_RUN_mps3-an547-scalar ${KILN_MICRO_RUN_mps3-an547})

# Compiler flags per board: freestanding C++17, -O3; the M55 contracts a*b+c to FMA as the M3's
# soft float cannot.
set(KILN_MICRO_CXXFLAGS -std=c++17 -ffreestanding -fno-exceptions -fno-rtti -fno-threadsafe-statics
                        -fno-use-cxa-atexit -O3 -ffunction-sections -fdata-sections -Wall -Wextra)
set(KILN_MICRO_FLAGS_mps2-an385 -mcpu=cortex-m3 -mthumb -mfloat-abi=soft)
set(KILN_MICRO_FLAGS_mps3-an547 -mcpu=cortex-m55 -mthumb -mfloat-abi=hard -ffp-contract=fast
                               )
set(KILN_MICRO_FLAGS_mps3-an547-scalar -mcpu=cortex-m55+nomve -mthumb -mfloat-abi=hard -ffp-contract=fast
                                      )
set(KILN_MICRO_LD_mps2-an385 mps2_an385.ld)
set(KILN_MICRO_LD_mps3-an547 mps3_an547.ld)
set(KILN_MICRO_LD_mps3-an547-scalar mps3_an547.ld)

function(kiln_add_onnx_micro_model target model)
  cmake_parse_arguments(ARG "MICRO" "NAME;OUTPUT_DIR" "DIMS;SHAPES;CONSTANTS" ${ARGN})
  get_filename_component(model_abs "${model}" ABSOLUTE)
  if(NOT ARG_NAME)
    get_filename_component(ARG_NAME "${model}" NAME_WE)
    string(TOLOWER "${ARG_NAME}" ARG_NAME)
    string(REGEX REPLACE "[^a-z0-9]" "_" ARG_NAME "${ARG_NAME}")
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/kiln_micro/${ARG_NAME}")
  endif()
  _kiln_onnx_tool(kiln_add_onnx_micro_model)
  set(extra "")
  foreach(d IN LISTS ARG_DIMS)
    list(APPEND extra --dim ${d})
  endforeach()
  foreach(s IN LISTS ARG_SHAPES)
    list(APPEND extra --shape ${s})
  endforeach()
  set(const_files "")
  foreach(c IN LISTS ARG_CONSTANTS)
    list(APPEND extra --constant ${c})
    string(REGEX REPLACE "^[^=]*=" "" f "${c}")
    list(APPEND const_files "${f}")
  endforeach()
  set(outs "${ARG_OUTPUT_DIR}/${ARG_NAME}.h" "${ARG_OUTPUT_DIR}/${ARG_NAME}.cpp" "${ARG_OUTPUT_DIR}/kiln_micro.h"
           "${ARG_OUTPUT_DIR}/kiln_micro.cpp")
  # Several targets may share one folder: generate it once (one generating target per folder).
  string(MD5 dir_hash "${ARG_OUTPUT_DIR}")
  string(SUBSTRING "${dir_hash}" 0 8 dir_hash)
  set(gen_target kiln_micro_gen_${ARG_NAME}_${dir_hash})
  if(NOT TARGET ${gen_target})
    add_custom_command(
      OUTPUT ${outs}
      COMMAND ${tool} "${model_abs}" --target micro --out "${ARG_OUTPUT_DIR}" --name "${ARG_NAME}" ${extra}
      DEPENDS "${model_abs}" ${tool_dep} ${const_files}
      COMMENT "kiln-onnx --target micro: generating ${ARG_NAME} from ${model}"
      VERBATIM)
    add_custom_target(${gen_target} DEPENDS ${outs})
  endif()
  if(target)
    target_sources(${target} PRIVATE "${ARG_OUTPUT_DIR}/${ARG_NAME}.cpp" "${ARG_OUTPUT_DIR}/kiln_micro.cpp")
    target_include_directories(${target} PRIVATE "${ARG_OUTPUT_DIR}")
    add_dependencies(${target} ${gen_target})
  endif()
  set(${ARG_NAME}_MICRO_DIR "${ARG_OUTPUT_DIR}" PARENT_SCOPE)
  set(${ARG_NAME}_MICRO_TARGET ${gen_target} PARENT_SCOPE)
endfunction()

function(kiln_add_micro_program name)
  cmake_parse_arguments(ARG "" "BOARD;AFTER" "SOURCES;INCLUDES;DEFINES;DEPENDS" ${ARGN})
  if(NOT KILN_MICRO_TOOLCHAIN)
    message(FATAL_ERROR "kiln_add_micro_program: arm-none-eabi-g++ or qemu-system-arm not found")
  endif()
  set(boards ${KILN_MICRO_SOURCE_DIR}/boards)
  if(NOT EXISTS ${boards}/startup.cpp)
    message(FATAL_ERROR "kiln_add_micro_program: the board files (micro/boards of Kiln's source tree) are not "
                        "at ${boards}")
  endif()
  set(elf ${CMAKE_CURRENT_BINARY_DIR}/${name}.elf)
  set(incs "")
  foreach(i IN LISTS ARG_INCLUDES)
    list(APPEND incs -I${i})
  endforeach()
  set(defs "")
  foreach(d IN LISTS ARG_DEFINES)
    list(APPEND defs -D${d})
  endforeach()
  add_custom_command(
    OUTPUT ${elf}
    COMMAND ${KILN_ARM_CXX} ${KILN_MICRO_CXXFLAGS} ${KILN_MICRO_FLAGS_${ARG_BOARD}} -I${boards} ${incs} ${defs}
            ${ARG_SOURCES} ${boards}/startup.cpp ${boards}/board_common.cpp -nostdlib -Wl,--gc-sections
            -L${boards} -T ${KILN_MICRO_LD_${ARG_BOARD}} -lgcc -o ${elf}
    DEPENDS ${ARG_SOURCES} ${ARG_DEPENDS} ${boards}/startup.cpp ${boards}/board_common.cpp ${boards}/board.h
            ${boards}/${KILN_MICRO_LD_${ARG_BOARD}} ${boards}/micro_sections.ld
    COMMENT "arm-none-eabi-g++: ${name}.elf (${ARG_BOARD})"
    COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${elf})
  if(ARG_AFTER)
    add_dependencies(${name} ${ARG_AFTER})
  endif()
endfunction()
