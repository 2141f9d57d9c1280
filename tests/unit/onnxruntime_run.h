// SPDX-License-Identifier: MIT OR Apache-2.0
// Runs an ONNX model with ONNX Runtime from the tests, through python3 (packages onnx and
// onnxruntime, installed by scripts/install-deps.sh when pip can; tests skip without them).
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::test {

/// Whether python3 can import onnx and onnxruntime.
inline bool have_onnxruntime() {
  static const bool ok = std::system("python3 -c 'import onnx, onnxruntime' > /dev/null 2>&1") == 0;
  return ok;
}

/// Checks the model with onnx.checker and runs it with ONNX Runtime on x (f32); the output.
inline Tensor run_onnxruntime(const std::string& model, const Tensor& x, const Shape& out_shape) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_export_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path mp = dir / "model.onnx", ip = dir / "in.bin", op = dir / "out.bin", sp = dir / "run.py";
  std::ofstream(mp, std::ios::binary).write(model.data(), static_cast<std::streamsize>(model.size()));
  std::vector<float> xv = x.to(Device::cpu()).to_vector<float>();
  std::ofstream(ip, std::ios::binary).write(reinterpret_cast<const char*>(xv.data()), xv.size() * 4);
  std::ofstream(sp) << "import sys, numpy as np, onnx, onnxruntime as ort\n"
                       "m = onnx.load(sys.argv[1]); onnx.checker.check_model(m, full_check=True)\n"
                       "shape = [int(s) for s in sys.argv[4].split(',')]\n"
                       "x = np.fromfile(sys.argv[2], dtype=np.float32).reshape(shape)\n"
                       "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
                       "y = s.run(None, {s.get_inputs()[0].name: x})[0]\n"
                       "y.astype(np.float32).tofile(sys.argv[3])\n";
  std::string shape;
  for (int64_t d : x.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  const std::string cmd =
      "python3 " + sp.string() + " " + mp.string() + " " + ip.string() + " " + op.string() + " " + shape;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(op, std::ios::binary);
  std::vector<float> y(static_cast<size_t>(shape_numel(out_shape)));
  f.read(reinterpret_cast<char*>(y.data()), static_cast<std::streamsize>(y.size() * 4));
  std::filesystem::remove_all(dir);
  return tensor(y, out_shape);
}

}  // namespace kiln::test
