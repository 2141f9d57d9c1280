// An MLP regressor on the diabetes data set that Debian's python3-sklearn ships as CSV files
// (442 patients, 10 features, a disease-progression target). Reads the files with
// kiln::data::read_csv, standardises the columns, splits train/validation with a seed and
// trains with Adam in a plain loop over a DataLoader. `--quick` runs a few epochs.
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

constexpr const char* kDir = "/usr/lib/python3/dist-packages/sklearn/datasets/data";

struct Mlp : kiln::nn::Module {
  kiln::nn::Linear fc1, fc2, out;
  explicit Mlp(const kiln::Device& d)
      : fc1({.in_features = 10, .out_features = 32}, d),
        fc2({.in_features = 32, .out_features = 32}, d),
        out({.in_features = 32, .out_features = 1}, d) {}
  // x [N, 10] -> [N, 1]
  Tensor forward(const Tensor& x) const { return out(kiln::relu(fc2(kiln::relu(fc1(x))))); }
  KILN_VISIT(Mlp, fc1, fc2, out)
};

// Mean squared error of the model over a loader, in the target's standardised units.
double evaluate(const Mlp& model, kd::DataLoader<kd::TabularItem>& loader) {
  kiln::NoGradGuard no_grad;
  double sum = 0;
  size_t n = 0;
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    Tensor err = model.forward(b->input) - b->target;
    sum += err.square().sum().item<float>();
    n += static_cast<size_t>(b->input.size(0));
  }
  return sum / static_cast<double>(n);
}

}  // namespace

/// The example; a kiln::Error it raises is reported by main.
int run(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::string features_path = std::string(kDir) + "/diabetes_data_raw.csv.gz";
  const std::string target_path = std::string(kDir) + "/diabetes_target.csv.gz";
  if (!std::filesystem::exists(features_path) || !std::filesystem::exists(target_path)) {
    std::printf("diabetes data not found in %s (install python3-sklearn)\n", kDir);
    return 77;  // "skipped" for the test
  }
  kiln::manual_seed(0);

  // 1. Read: space-separated, no header. Ten feature columns, one target column.
  kd::Table raw = kd::read_csv(features_path, {.delimiter = ' ',
                                               .header = false,
                                               .names = {"age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"},
                                               .default_type = kd::ColumnType::Float64});
  kd::Table target = kd::read_csv(target_path, {.delimiter = ' ', .header = false, .names = {"y"}});
  std::vector<kd::Column> cols = raw.columns();
  cols.push_back(target.column("y"));
  kd::Table table(cols, "diabetes");
  std::printf("read %zu rows with columns:", table.num_rows());
  for (const auto& n : table.names()) std::printf(" %s", n.c_str());
  std::printf("\n");

  // 2. A dataset of rows; 20% held out for validation (seeded).
  kd::DatasetPtr<kd::TabularItem> rows = kd::tabular(table, {.targets = {"y"}});
  auto [train, valid] = kd::split(rows, 0.2, /*seed=*/7);

  // 3. Standardise features and target with the training split's statistics.
  Tensor x_all = kd::DataLoader<kd::TabularItem>(train, {.batch_size = train->size(), .shuffle = false}).next()->input;
  Tensor y_all = kd::DataLoader<kd::TabularItem>(train, {.batch_size = train->size(), .shuffle = false}).next()->target;
  Tensor x_mean = x_all.mean({0}), x_std = x_all.std({0});
  Tensor y_mean = y_all.mean({0}), y_std = y_all.std({0});
  const double y_scale = y_std.item<float>();
  auto standardise = [=](kd::TabularItem it) {
    return kd::TabularItem{(it.features - x_mean) / x_std, (it.target - y_mean) / y_std};
  };
  auto train_ds = kd::to_memory(kd::map(train, standardise));
  auto valid_ds = kd::to_memory(kd::map(valid, standardise));
  // R^2 = 1 - mse / variance of the (standardised) validation targets.
  Tensor yv = kd::DataLoader<kd::TabularItem>(valid_ds, {.batch_size = valid_ds->size()}).next()->target;
  const double valid_var = yv.var({}, /*correction=*/0).item<float>();

  // 4. Loaders put batches on the autodiff device the model lives on.
  const kiln::Device dev = kiln::Device::cpu().autodiff();
  kd::DataLoader<kd::TabularItem> train_loader(train_ds, {.batch_size = 32, .seed = 1, .device = dev});
  kd::DataLoader<kd::TabularItem> valid_loader(valid_ds, {.batch_size = 128, .shuffle = false, .device = dev});

  // 5. Train.
  Mlp model(dev);
  kiln::optim::Adam opt(model.parameters(), {.lr = 1e-3, .weight_decay = 1e-4});
  const int epochs = quick ? 5 : 40;
  double first_valid = 0, last_valid = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    train_loader.start_epoch(static_cast<uint64_t>(epoch));
    double loss_sum = 0;
    int steps = 0;
    while (auto b = train_loader.next()) {
      Tensor loss = kiln::nn::functional::mse_loss(model.forward(b->input), b->target);
      opt.step(loss.backward());
      loss_sum += loss.item<float>();
      ++steps;
    }
    last_valid = evaluate(model, valid_loader);
    if (epoch == 0) first_valid = last_valid;
    if (quick || epoch % 5 == 0 || epoch == epochs - 1)
      std::printf("epoch %3d  train mse %.3f  valid mse %.3f  valid RMSE %.1f  R^2 %.3f\n", epoch, loss_sum / steps,
                  last_valid, std::sqrt(last_valid) * y_scale, 1.0 - last_valid / valid_var);
  }
  // For scale: a linear model reaches R^2 of about 0.5 on this data.
  std::printf("validation RMSE %.1f, R^2 %.3f (training target std %.1f)\n", std::sqrt(last_valid) * y_scale,
              1.0 - last_valid / valid_var, y_scale);
  if (!(last_valid < first_valid)) {
    std::printf("error: validation loss did not improve\n");
    return 1;
  }
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
