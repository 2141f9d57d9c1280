// SPDX-License-Identifier: MIT OR Apache-2.0
// A GRU forecasts monthly sea surface temperatures (El Nino, Nino 1+2 region, 1950-2010) one
// month ahead from the previous 24 months, against the seasonal-naive forecast (the value of the
// same month a year before) and persistence (last month's value).
//
//   time-series [--quick] [--epochs N] [--data PATH]
//
// Data: elnino.csv of the Debian package python3-statsmodels (NOAA ERSST.V3B, public domain):
// one row per year, twelve monthly columns. The last 9 years (108 months) are the test split;
// the model and the normalisation see only the years before. --quick trains fewer epochs and
// exits with status 1 unless the GRU beats the seasonal-naive forecast on the test split.
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr const char* kDefaultData = "/usr/lib/python3/dist-packages/statsmodels/datasets/elnino/elnino.csv";
constexpr int64_t kWindow = 24;  // months of history the GRU reads
constexpr int64_t kSeason = 12;  // period of the seasonal-naive forecast
constexpr int64_t kTest = 108;   // months held out at the end

// The monthly values, in time order, from the YEAR,JAN..DEC table.
std::vector<double> read_series(const std::string& path) {
  std::ifstream f(path);
  KILN_CHECK(f.good(), "time-series", "cannot read '" << path << "' (install python3-statsmodels)");
  std::vector<double> v;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::stringstream s(line);
    std::string cell;
    std::getline(s, cell, ',');  // year
    while (std::getline(s, cell, ',')) v.push_back(std::stod(cell));
  }
  KILN_CHECK(v.size() > static_cast<size_t>(kTest + kWindow + kSeason), "time-series",
             "'" << path << "' holds only " << v.size() << " values");
  return v;
}

struct Forecaster : nn::Module {
  nn::GRU gru;
  nn::Linear head;
  explicit Forecaster(const Device& d)
      : gru({.input_size = 1, .hidden_size = 32, .batch_first = true}, d),
        head({.in_features = 32, .out_features = 1}, d) {}
  /// windows [N, kWindow, 1] (normalised) -> next value [N].
  Tensor forward(const Tensor& x) const {
    Tensor h = gru(x).h_n.select(0, 0);  // [N, 32]
    return head(h).reshape({x.size(0)});
  }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(Forecaster, gru, head)
};

// Windows ending before each target t in [from, to): inputs [n, kWindow, 1] and targets [n].
std::pair<Tensor, Tensor> windows(const std::vector<double>& z, int64_t from, int64_t to) {
  std::vector<float> x, y;
  for (int64_t t = from; t < to; ++t) {
    for (int64_t k = t - kWindow; k < t; ++k) x.push_back(static_cast<float>(z[static_cast<size_t>(k)]));
    y.push_back(static_cast<float>(z[static_cast<size_t>(t)]));
  }
  const int64_t n = to - from;
  return {tensor<float>(x, {n, kWindow, 1}), tensor<float>(y, {n})};
}

double rmse(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int64_t epochs = -1;
  std::string path = kDefaultData;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--epochs" && i + 1 < argc) {
      epochs = std::atoll(argv[++i]);
    } else if (a == "--data" && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--epochs N] [--data PATH]\n", argv[0]);
      return a == "--help" || a == "-h" ? 0 : 1;
    }
  }
  if (epochs < 0) epochs = quick ? 8 : 150;
  try {
    const std::vector<double> y = read_series(path);
    const auto n = static_cast<int64_t>(y.size()), split = n - kTest;
    // Normalise with the training months only.
    double mean = 0, var = 0;
    for (int64_t t = 0; t < split; ++t) mean += y[static_cast<size_t>(t)];
    mean /= static_cast<double>(split);
    for (int64_t t = 0; t < split; ++t) var += std::pow(y[static_cast<size_t>(t)] - mean, 2);
    const double sd = std::sqrt(var / static_cast<double>(split));
    std::vector<double> z(y.size());
    for (size_t i = 0; i < y.size(); ++i) z[i] = (y[i] - mean) / sd;

    manual_seed(0);
    const Device d = Device::cpu().autodiff();
    auto [x_train, y_train] = windows(z, kWindow, split);
    auto [x_test, y_test] = windows(z, split, n);
    Forecaster model(d);
    optim::Adam opt(model.parameters(), {.lr = 5e-3});
    const int64_t n_train = x_train.size(0), batch = 64;
    double first_loss = 0, last_loss = 0;
    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      Tensor order = randperm(n_train);
      double sum = 0;
      for (int64_t s = 0; s < n_train; s += batch) {
        Tensor idx = order.narrow(0, s, std::min(batch, n_train - s));
        Tensor pred = model(index_select(x_train, 0, idx).to(d));
        Tensor loss = nn::functional::mse_loss(pred, index_select(y_train, 0, idx).to(d));
        opt.step(loss.backward());
        sum += loss.item<double>() * static_cast<double>(idx.size(0));
      }
      const double epoch_loss = sum / static_cast<double>(n_train);
      if (epoch == 0) first_loss = epoch_loss;
      last_loss = epoch_loss;
      if ((epoch + 1) % (quick ? 2 : 25) == 0)
        std::printf("epoch %lld: train MSE (normalised) %.4f\n", static_cast<long long>(epoch + 1), epoch_loss);
    }
    // Test split, in degrees Celsius.
    std::vector<double> truth, gru, seasonal, persistence;
    {
      NoGradGuard ng;
      std::vector<float> p = model(x_test.to(d)).to(Device::cpu()).to_vector<float>();
      for (int64_t t = split; t < n; ++t) {
        const auto i = static_cast<size_t>(t);
        truth.push_back(y[i]);
        gru.push_back(p[static_cast<size_t>(t - split)] * sd + mean);
        seasonal.push_back(y[i - kSeason]);
        persistence.push_back(y[i - 1]);
      }
    }
    const double r_gru = rmse(truth, gru), r_season = rmse(truth, seasonal), r_persist = rmse(truth, persistence);
    std::printf("test RMSE over %lld months (deg C): GRU %.3f, seasonal naive %.3f, persistence %.3f\n",
                static_cast<long long>(kTest), r_gru, r_season, r_persist);
    if (quick) {
      if (!(last_loss < 0.5 * first_loss) || !(r_gru < r_season)) {
        std::printf("time-series quick: FAILED (train loss %.4f -> %.4f)\n", first_loss, last_loss);
        return 1;
      }
      std::printf("time-series quick: ok\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
