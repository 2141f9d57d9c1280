// The source and build paths that test executables read. The build defines them in a generated
// source (kiln_test_paths() in cmake/KilnTestPaths.cmake), not on the compile line, so that
// object files do not depend on where the checkout lies. A name is defined only in the
// executables whose CMakeLists list it.
#pragma once

extern "C" {
extern const char kiln_test_path_KILN_GOLDEN_DIR[];       ///< tests/golden
extern const char kiln_test_path_KILN_PORT_DATA_DIR[];    ///< tests/port/data
extern const char kiln_test_path_KILN_ONNX_TOOL[];        ///< the kiln-onnx executable
extern const char kiln_test_path_KILN_ONNX_FIXTURES[];    ///< tests/fixtures/onnx
extern const char kiln_test_path_KILN_VISION_DATA_DIR[];  ///< tests/data/vision
extern const char kiln_test_path_KILN_RL_DATA_DIR[];      ///< tests/data/rl
extern const char kiln_test_path_KILN_TEXT_DATA_DIR[];    ///< tests/data/text
extern const char kiln_test_path_KILN_SERVER_TOOL[];      ///< the kiln-server executable
extern const char kiln_test_path_KILN_FUZZ_CORPUS_DIR[];  ///< tests/fuzz/corpus
}

#define KILN_GOLDEN_DIR kiln_test_path_KILN_GOLDEN_DIR
#define KILN_PORT_DATA_DIR kiln_test_path_KILN_PORT_DATA_DIR
#define KILN_ONNX_TOOL kiln_test_path_KILN_ONNX_TOOL
#define KILN_ONNX_FIXTURES kiln_test_path_KILN_ONNX_FIXTURES
#define KILN_VISION_DATA_DIR kiln_test_path_KILN_VISION_DATA_DIR
#define KILN_RL_DATA_DIR kiln_test_path_KILN_RL_DATA_DIR
#define KILN_TEXT_DATA_DIR kiln_test_path_KILN_TEXT_DATA_DIR
#define KILN_SERVER_TOOL kiln_test_path_KILN_SERVER_TOOL
#define KILN_FUZZ_CORPUS_DIR kiln_test_path_KILN_FUZZ_CORPUS_DIR
