# kiln_add_onnx_model(<target> <model.onnx> [NAME <StructName>] [STEM <file_stem>] [OUTPUT_DIR <dir>])
#
# Runs kiln-onnx at build time on <model.onnx> and adds the generated sources (a kiln::nn::Module
# named <StructName>, header <file_stem>.h) to <target>; the generated folder is added to the
# target's include path and the weights file <file_stem>.safetensors is written beside the sources
# (<StructName>::weights_path() returns its path). Regenerated when the model or kiln-onnx changes.
#
# kiln_add_onnx_model(<target> <model.onnx> MICRO [NAME <c_name>] ...): the micro target instead
# (freestanding C++ for microcontrollers; cmake/micro.cmake, docs/micro.md).
include(${CMAKE_CURRENT_LIST_DIR}/micro.cmake OPTIONAL)
# _kiln_onnx_tool(<caller>): sets `tool` and `tool_dep` in the caller to the kiln-onnx tool of
# this build or of an installed Kiln (a macro, so the variables land in the calling function).
# A cross build (WebAssembly, ARM) cannot run its own kiln-onnx: KILN_ONNX_TOOL names a host one.
set(KILN_ONNX_TOOL "" CACHE FILEPATH "kiln-onnx of the host, for cross builds (empty: this build's or the package's)")
macro(_kiln_onnx_tool caller)
  if(KILN_ONNX_TOOL)
    set(tool ${KILN_ONNX_TOOL})
    set(tool_dep ${KILN_ONNX_TOOL})
  elseif(TARGET kiln-onnx AND NOT CMAKE_CROSSCOMPILING)
    set(tool $<TARGET_FILE:kiln-onnx>)
    set(tool_dep kiln-onnx)
  elseif(TARGET kiln::kiln-onnx)
    set(tool $<TARGET_FILE:kiln::kiln-onnx>)
    set(tool_dep kiln::kiln-onnx)
  else()
    message(FATAL_ERROR "${caller}: the kiln-onnx tool is not available")
  endif()
endmacro()

function(kiln_add_onnx_model target model)
  if("MICRO" IN_LIST ARGN)
    kiln_add_onnx_micro_model(${target} ${model} ${ARGN})
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME;STEM;OUTPUT_DIR" "" ${ARGN})
  get_filename_component(model_abs "${model}" ABSOLUTE)
  if(NOT ARG_NAME)
    get_filename_component(stem "${model}" NAME_WE)
    string(REGEX REPLACE "[^A-Za-z0-9]+" "_" stem "${stem}")
    string(SUBSTRING "${stem}" 0 1 first)
    string(TOUPPER "${first}" first)
    string(SUBSTRING "${stem}" 1 -1 rest)
    string(REPLACE "_" "" rest "${rest}")
    set(ARG_NAME "${first}${rest}")
  endif()
  if(NOT ARG_STEM)
    # snake_case of the name, as kiln-onnx does by default.
    string(REGEX REPLACE "([a-z0-9])([A-Z])" "\\1_\\2" ARG_STEM "${ARG_NAME}")
    string(TOLOWER "${ARG_STEM}" ARG_STEM)
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/kiln_onnx/${ARG_STEM}")
  endif()
  _kiln_onnx_tool(kiln_add_onnx_model)
  set(outs "${ARG_OUTPUT_DIR}/${ARG_STEM}.h" "${ARG_OUTPUT_DIR}/${ARG_STEM}.cpp"
           "${ARG_OUTPUT_DIR}/${ARG_STEM}.safetensors")
  add_custom_command(
    OUTPUT ${outs}
    COMMAND ${tool} "${model_abs}" --out "${ARG_OUTPUT_DIR}" --name "${ARG_NAME}" --stem "${ARG_STEM}"
    DEPENDS "${model_abs}" ${tool_dep}
    COMMENT "kiln-onnx: generating ${ARG_NAME} from ${model}"
    VERBATIM)
  target_sources(${target} PRIVATE "${ARG_OUTPUT_DIR}/${ARG_STEM}.h" "${ARG_OUTPUT_DIR}/${ARG_STEM}.cpp")
  target_include_directories(${target} PRIVATE "${ARG_OUTPUT_DIR}")
endfunction()
