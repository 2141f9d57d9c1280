// A small CNN on a folder of images: the example first draws a data set of circles, squares
// and triangles (PNG and JPEG files, one sub-folder per class), then reads it back with
// kiln::data::image_folder, augments it with random flips and crops, and trains with worker
// threads loading batches. `--quick` uses fewer images and epochs; `--dir PATH` chooses where
// the images go (default ./image-folder-data).
#include <kiln/data.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace kd = kiln::data;
using kiln::Tensor;

namespace {

constexpr int kSize = 24;
const char* kClasses[] = {"circle", "square", "triangle"};

// Draws one shape of class k, with random centre, size, colour and background noise, as
// u8 [3, kSize, kSize].
Tensor draw(int k, kd::Rng& rng) {
  std::vector<uint8_t> px(3 * kSize * kSize);
  const double cx = 8 + rng.uniform() * 8, cy = 8 + rng.uniform() * 8, r = 4 + rng.uniform() * 3;
  uint8_t colour[3];
  for (auto& c : colour) c = static_cast<uint8_t>(120 + rng.below(136));
  for (int y = 0; y < kSize; ++y)
    for (int x = 0; x < kSize; ++x) {
      const double dx = x - cx, dy = y - cy;
      bool in = k == 0   ? dx * dx + dy * dy <= r * r
                : k == 1 ? std::fabs(dx) <= r * 0.85 && std::fabs(dy) <= r * 0.85
                         : dy <= r * 0.8 && dy >= -r && std::fabs(dx) <= (dy + r) * 0.6;
      for (int c = 0; c < 3; ++c)
        px[static_cast<size_t>((c * kSize + y) * kSize + x)] = in ? colour[c] : static_cast<uint8_t>(rng.below(60));
    }
  return kiln::from_blob_copy(px.data(), {3, kSize, kSize}, kiln::u8, kiln::Device::cpu());
}

void make_dataset(const std::filesystem::path& root, int per_class) {
  kd::Rng rng(2024);
  for (int k = 0; k < 3; ++k) {
    std::filesystem::create_directories(root / kClasses[k]);
    for (int i = 0; i < per_class; ++i) {
      // Triangles are stored as JPEG, the others as PNG: the folder reader takes both.
      std::string name = (root / kClasses[k] / std::to_string(i)).string();
      if (k == 2)
        kd::write_jpeg(name + ".jpg", draw(k, rng), 92);
      else
        kd::write_png(name + ".png", draw(k, rng));
    }
  }
}

struct Cnn : kiln::nn::Module {
  kiln::nn::Conv2d conv1, conv2;
  kiln::nn::MaxPool2d pool;
  kiln::nn::Linear fc;
  explicit Cnn(const kiln::Device& d)
      : conv1({.in_channels = 3, .out_channels = 8, .kernel_size = 3, .padding = 1}, d),
        conv2({.in_channels = 8, .out_channels = 16, .kernel_size = 3, .padding = 1}, d),
        pool({.kernel_size = 2}),
        fc({.in_features = 16 * 6 * 6, .out_features = 3}, d) {}
  // x [N, 3, 24, 24] -> logits [N, 3]
  Tensor forward(const Tensor& x) const {
    Tensor h = pool(kiln::relu(conv1(x)));
    h = pool(kiln::relu(conv2(h)));
    return fc(h.flatten(1));
  }
  KILN_VISIT(Cnn, conv1, conv2, pool, fc)
};

}  // namespace

/// The example; a kiln::Error it raises is reported by main.
int run(int argc, char** argv) {
  bool quick = false;
  std::filesystem::path dir = "image-folder-data";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) dir = argv[++i];
  }
  kiln::manual_seed(0);
  std::filesystem::remove_all(dir);
  make_dataset(dir, quick ? 30 : 200);

  // Read the folder back: classes are the sub-folder names, sorted.
  auto folder = kd::image_folder(dir.string());
  std::printf("%zu images in %zu classes:", folder->size(), folder->classes().size());
  for (const auto& c : folder->classes()) std::printf(" %s", c.c_str());
  std::printf("\n");
  kd::DatasetPtr<kd::ImageItem> all = folder;
  auto [train, valid] = kd::split(all, 0.2, /*seed=*/3);

  // u8 [3, 24, 24] -> normalised f32; training images are also flipped and shifted at random
  // (the draws depend on (seed, epoch, index), so any number of workers gives the same batches).
  auto prepare = [](const Tensor& im) { return kd::normalize(kd::to_tensor(im), {0.25}, {0.3}); };
  auto train_ds = kd::map_image(kd::map_image(kd::map_image(train, prepare), kd::RandomHorizontalFlip{.seed = 1}),
                                kd::RandomCrop{.size = kSize, .padding = 2, .seed = 2});
  auto valid_ds = kd::map_image(valid, prepare);

  const kiln::Device dev = kiln::Device::cpu().autodiff();
  kd::DataLoader<kd::ImageItem> train_loader(train_ds, {.batch_size = 32, .seed = 5, .workers = 2, .device = dev});
  kd::DataLoader<kd::ImageItem> valid_loader(valid_ds, {.batch_size = 64, .shuffle = false, .device = dev});

  Cnn model(dev);
  kiln::optim::Adam opt(model.parameters(), {.lr = 3e-3});
  const int epochs = quick ? 2 : 6;
  double accuracy = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    train_loader.start_epoch(static_cast<uint64_t>(epoch));
    double loss_sum = 0;
    int steps = 0;
    while (auto b = train_loader.next()) {
      Tensor loss = kiln::nn::functional::cross_entropy(model.forward(b->input), b->target);
      opt.step(loss.backward());
      loss_sum += loss.item<float>();
      ++steps;
    }
    kiln::NoGradGuard no_grad;
    int64_t correct = 0, seen = 0;
    valid_loader.start_epoch(0);
    while (auto b = valid_loader.next()) {
      correct += model.forward(b->input).argmax(1).eq(b->target).sum().item<int64_t>();
      seen += b->target.size(0);
    }
    accuracy = static_cast<double>(correct) / static_cast<double>(seen);
    std::printf("epoch %d  train loss %.3f  valid accuracy %.1f%%\n", epoch, loss_sum / steps, 100 * accuracy);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

// A kiln::Error (a wrong shape, a missing file...) says what went wrong: print it, exit 1.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
