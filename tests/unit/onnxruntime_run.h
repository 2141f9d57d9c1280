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
#include <sstream>
#include <string>
#include <vector>

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

/// Checks the model with onnx.checker and runs it with ONNX Runtime on inputs (f32, f64, i64,
/// i32 or bool, fed to the graph inputs in order); the outputs in the graph's order, as f32.
inline std::vector<Tensor> run_onnxruntime(const std::string& model, const std::vector<Tensor>& inputs) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_export_io_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path mp = dir / "model.onnx", sp = dir / "run.py", meta = dir / "outputs.txt";
  std::ofstream(mp, std::ios::binary).write(model.data(), static_cast<std::streamsize>(model.size()));
  std::string specs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor x = inputs[i].to(Device::cpu()).contiguous();
    std::ofstream f(dir / ("in" + std::to_string(i) + ".bin"), std::ios::binary);
    auto put = [&](auto v) {
      f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(v[0])));
    };
    const char* np = "float32";
    switch (x.dtype()) {
      case DType::F32:
        put(x.to_vector<float>());
        break;
      case DType::F64:
        put(x.to_vector<double>());
        np = "float64";
        break;
      case DType::I64:
        put(x.to_vector<int64_t>());
        np = "int64";
        break;
      case DType::I32:
        put(x.to_vector<int32_t>());
        np = "int32";
        break;
      case DType::Bool:
        put(x.to(u8).to_vector<uint8_t>());
        np = "bool";
        break;
      default:
        ADD_FAILURE() << "no ONNX Runtime input of dtype " << dtype_name(x.dtype());
    }
    std::string shape;
    for (int64_t d : x.shape()) shape += "," + std::to_string(d);
    specs += " " + std::string(np) + shape;
  }
  std::ofstream(sp) << "import sys, numpy as np, onnx, onnxruntime as ort\n"
                       "d = sys.argv[1]\n"
                       "m = onnx.load(d + '/model.onnx'); onnx.checker.check_model(m, full_check=True)\n"
                       "s = ort.InferenceSession(d + '/model.onnx', providers=['CPUExecutionProvider'])\n"
                       "feed = {}\n"
                       "for i, spec in enumerate(sys.argv[2:]):\n"
                       "    dt, *shape = spec.split(',')\n"
                       "    x = np.fromfile(f'{d}/in{i}.bin', dtype=np.uint8 if dt == 'bool' else dt)\n"
                       "    feed[s.get_inputs()[i].name] = x.astype(dt).reshape([int(k) for k in shape])\n"
                       "with open(d + '/outputs.txt', 'w') as meta:\n"
                       "    for i, y in enumerate(s.run(None, feed)):\n"
                       "        np.asarray(y).astype(np.float32).tofile(f'{d}/out{i}.bin')\n"
                       "        meta.write(' '.join(str(k) for k in np.shape(y)) + '\\n')\n";
  const std::string cmd = "python3 " + sp.string() + " " + dir.string() + specs;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<Tensor> outs;
  std::ifstream mf(meta);
  std::string line;
  for (size_t i = 0; std::getline(mf, line); ++i) {
    Shape shape;
    std::istringstream ls(line);
    for (int64_t k; ls >> k;) shape.push_back(k);
    std::vector<float> y(static_cast<size_t>(shape_numel(shape)));
    std::ifstream(dir / ("out" + std::to_string(i) + ".bin"), std::ios::binary)
        .read(reinterpret_cast<char*>(y.data()), static_cast<std::streamsize>(y.size() * 4));
    outs.push_back(tensor(y, shape));
  }
  std::filesystem::remove_all(dir);
  return outs;
}

}  // namespace kiln::test
