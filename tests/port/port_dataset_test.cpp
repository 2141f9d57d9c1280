// SPDX-License-Identifier: MIT OR Apache-2.0
// Ported PyTorch script: a custom torch.utils.data.Dataset (items computed from their index)
// read by a DataLoader in order, an MLP trained with SGD and a StepLR schedule stepped every
// batch; compared with PyTorch's loss at every step (scripts/gen_port_reference.py).
#include <kiln/data.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <cmath>

#include "port/port_util.h"

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;
namespace kd = kiln::data;

/// One item of WaveDataset: features [3], target [1].
struct WaveItem {
  Tensor x, y;
};

/// class WaveDataset(torch.utils.data.Dataset): __len__ -> size(), __getitem__ -> get().
/// Item i: features sin(0.3 i + 0.7 k) for k < 3, target sum(features) / 2 + cos(0.1 i).
class WaveDataset : public kd::Dataset<WaveItem> {
 public:
  size_t size() const override { return 12; }
  WaveItem get(size_t i) const override {
    KILN_CHECK(i < size(), "WaveDataset", "index " << i << " out of range for " << size() << " items");
    std::vector<double> f;
    double sum = 0;
    for (int k = 0; k < 3; ++k) sum += f.emplace_back(std::sin(0.3 * double(i) + 0.7 * k));
    std::vector<float> ff(f.begin(), f.end());
    return {tensor(ff, {3}), tensor({float(sum / 2 + std::cos(0.1 * double(i)))}, {1})};
  }
};

/// PyTorch's default collate: stacks each field along a new first dimension.
kd::Batch collate(std::vector<WaveItem> items, const Device& device) {
  std::vector<Tensor> xs, ys;
  for (WaveItem& it : items) {
    xs.push_back(it.x);
    ys.push_back(it.y);
  }
  return {stack(xs).to(device), stack(ys).to(device)};
}

TEST(PortDataset, CustomDatasetLoaderAndStepLRFollowPyTorch) {
  const Device dev = Device::cpu().autodiff();
  nn::Sequential model(nn::Linear({.in_features = 3, .out_features = 8}, dev), nn::Tanh(),
                       nn::Linear({.in_features = 8, .out_features = 1}, dev));
  port::Reference ref = port::reference("dataset");
  ref.load_into(model);

  // DataLoader(WaveDataset(), batch_size=4, shuffle=False)
  kd::DataLoader<WaveItem> loader(std::make_shared<WaveDataset>(), {.batch_size = 4, .shuffle = false, .device = dev},
                                  collate);
  optim::SGD opt(model.parameters(), {.lr = 0.2});
  optim::lr_scheduler::StepLR sched(opt, /*step_size=*/3, /*gamma=*/0.5);
  std::vector<double> losses;
  for (uint64_t epoch = 0; losses.size() < 9; ++epoch) {
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      ASSERT_EQ(batch->input.size(0), 4);
      Tensor loss = F::mse_loss(model(batch->input), batch->target);
      Gradients grads = loss.backward();
      losses.push_back(loss.item<double>());
      opt.step(grads);
      sched.step();
    }
  }
  port::expect_trajectory("dataset", losses, ref.loss());
}

}  // namespace
