# Embeds the micro kernels (micro/kiln_micro.h, micro/kiln_micro.cpp) into kiln_onnx as string
# constants kKilnMicroH / kKilnMicroCpp: `kiln-onnx --target micro` writes them beside each
# generated model, so a generated folder builds on its own (docs/micro.md). Re-run at configure
# time when either file changes; the include file is rewritten only when its text changes.
set(KILN_MICRO_DIR ${PROJECT_SOURCE_DIR}/micro)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${KILN_MICRO_DIR}/kiln_micro.h
                                                                 ${KILN_MICRO_DIR}/kiln_micro.cpp)
file(READ ${KILN_MICRO_DIR}/kiln_micro.h KILN_MICRO_H_TEXT)
file(READ ${KILN_MICRO_DIR}/kiln_micro.cpp KILN_MICRO_CPP_TEXT)
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/micro_kernels_embed.inc
     CONTENT "// Generated from micro/ by cmake/micro_embed.cmake.\nstatic const char* const kKilnMicroH = R\"KILNMICRO(@KILN_MICRO_H_TEXT@)KILNMICRO\";\nstatic const char* const kKilnMicroCpp = R\"KILNMICRO(@KILN_MICRO_CPP_TEXT@)KILNMICRO\";\n"
     @ONLY)
target_include_directories(kiln_onnx PRIVATE ${PROJECT_BINARY_DIR}/generated)
