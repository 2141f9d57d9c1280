// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision against OpenCV: morphology, filters, colour and connected components on one
// 512 x 512 image (bench/cv_vision_bench.py times the same cases with cv2, setNumThreads(1)).
//
//   kiln_bench_vision [--threads N] [--reps R] [--smoke] [--size S]
//
// Prints one tab-separated line per case: <id> \t <seconds per call, best of R> \t <pixels> \t ok.
// Both scripts build the same image: pixel i of a plane is the top byte of splitmix64(i), u8, or
// that / 255 as f32; RGB planes hash i + plane * H * W; the connected-components image is the
// pixels below 128 (half full, random).
#include <kiln/kiln.h>
#include <kiln/vision.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

uint8_t hash_byte(uint64_t i) {  // splitmix64's output, top byte
  uint64_t z = i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint8_t>(z >> 56);
}

Tensor image_u8(int64_t c, int64_t h, int64_t w) {
  std::vector<uint8_t> v(static_cast<size_t>(c * h * w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = hash_byte(i);
  return tensor(v, {1, c, h, w}).to(u8);
}

double best_of(int reps, bool smoke, const std::function<void()>& f) {
  for (int i = 0; i < (smoke ? 0 : 2); ++i) f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    f();
    sync(Device::cpu());
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 10;
  int64_t s = 512;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    if (a == "--size" && i + 1 < argc) s = std::atoll(argv[++i]);
    if (a == "--smoke") smoke = true;
  }
  if (smoke) reps = 1, s = 37;
  set_num_threads(threads);
  const char* only = std::getenv("BENCH_ONLY");

  const Tensor g8 = image_u8(1, s, s), gf = g8.to(f32) / 255.0;
  const Tensor rgb8 = image_u8(3, s, s), rgbf = rgb8.to(f32) / 255.0;
  const Tensor fg = (g8 < 128).to(u8);
  const Tensor rect3 = vision::structuring_element("rect", {3, 3});
  const Tensor rect5 = vision::structuring_element("rect", {5, 5});
  const Tensor ell5 = vision::structuring_element("ellipse", {5, 5});
  sync(Device::cpu());

  int failed = 0;
  Tensor out;
  auto run = [&](const std::string& id, const std::function<Tensor()>& f) {
    if (only && id.rfind(only, 0) != 0) return;
    try {
      const double t = best_of(reps, smoke, [&] { out = f(); });
      std::printf("%s\t%.9g\t%lld\tok\n", id.c_str(), t, static_cast<long long>(s * s));
    } catch (const std::exception& e) {
      std::string msg = e.what();
      std::replace(msg.begin(), msg.end(), '\t', ' ');
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      std::printf("%s\tnan\t%lld\tskip: %s\n", id.c_str(), static_cast<long long>(s * s), msg.c_str());
      ++failed;
    }
    std::fflush(stdout);
  };

  run("vision/erode_rect3_f32", [&] { return vision::erode(gf, rect3); });
  run("vision/erode_rect3_u8", [&] { return vision::erode(g8, rect3); });
  run("vision/dilate_ellipse5_f32", [&] { return vision::dilate(gf, ell5); });
  run("vision/dilate_ellipse5_u8", [&] { return vision::dilate(g8, ell5); });
  run("vision/open_rect5_u8", [&] { return vision::morphology(g8, "open", rect5); });
  run("vision/gaussian5_f32", [&] { return vision::gaussian_blur(gf, {5, 5}, 0); });
  run("vision/gaussian5_u8", [&] { return vision::gaussian_blur(g8, {5, 5}, 0); });
  run("vision/box5_f32", [&] { return vision::box_filter(gf, {5, 5}); });
  run("vision/sobel_dx3_f32", [&] { return vision::sobel(gf, 1, 0, 3); });
  run("vision/sobel_dx3_u8", [&] { return vision::sobel(g8, 1, 0, 3); });
  run("vision/laplacian3_f32", [&] { return vision::laplacian(gf, 3); });
  run("vision/median3_u8", [&] { return vision::median_blur(g8, 3); });
  run("vision/median5_u8", [&] { return vision::median_blur(g8, 5); });
  run("vision/median5_f32", [&] { return vision::median_blur(gf, 5); });
  run("vision/median7_u8", [&] { return vision::median_blur(g8, 7); });
  run("vision/median15_u8", [&] { return vision::median_blur(g8, 15); });
  run("vision/bilateral9_u8", [&] { return vision::bilateral_filter(g8, 9, 75, 75); });
  run("vision/bilateral9_rgb_u8", [&] { return vision::bilateral_filter(rgb8, 9, 75, 75); });
  run("vision/bilateral5_rgb_f32", [&] { return vision::bilateral_filter(rgbf, 5, 0.3, 3); });
  run("vision/rgb_to_gray_f32", [&] { return vision::rgb_to_gray(rgbf); });
  run("vision/rgb_to_gray_u8", [&] { return vision::rgb_to_gray(rgb8); });
  run("vision/components8_random", [&] { return vision::connected_components(fg, 8).labels; });
  run("vision/components4_random", [&] { return vision::connected_components(fg, 4).labels; });
  return smoke && failed ? 1 : 0;
}
