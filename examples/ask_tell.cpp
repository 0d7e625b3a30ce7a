// ask/tell on parameters of your own: fit a 12 x 8 matrix W and a bias b so that x W^T + b
// matches a hidden linear map, scoring each member with plain C++ (no eggroll model needed).
// Build against an installed eggroll: see examples/CMakeLists.txt.
#include <cmath>
#include <cstdio>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/es/strategy.hpp"

int main() {
  using namespace eggroll;
  const std::int64_t m = 12, n = 8;
  EsConfig es;
  es.population = 64;
  es.rank = 2;
  es.sigma = 0.05;
  OptimConfig optim;
  optim.name = "adam";
  optim.lr = 0.05;
  auto backend = make_backend(BackendKind::cpu);
  auto strategy = Strategy::for_shapes({{"W", {m, n}}, {"b", {m}}}, es, optim, /*seed=*/1, /*total_epochs=*/300, *backend);

  // The target: W*[a][k] = sin(a + 2k), b*[a] = cos(a).
  auto loss = [&](const Tensor& w, const Tensor& b) {
    double se = 0.0;
    for (std::int64_t a = 0; a < m; ++a) {
      for (std::int64_t k = 0; k < n; ++k) {
        double d = w.data<float>()[a * n + k] - std::sin(a + 2.0 * k);
        se += d * d;
      }
      double d = b.data<float>()[a] - std::cos(static_cast<double>(a));
      se += d * d;
    }
    return se / static_cast<double>(m * n + m);
  };
  double first = loss(strategy->params().at("W").value, strategy->params().at("b").value);
  for (int epoch = 0; epoch < 300; ++epoch) {
    std::vector<double> scores(static_cast<std::size_t>(strategy->population()));
    for (std::int64_t i = 0; i < strategy->population(); ++i)
      scores[i] = -loss(strategy->member_tensor(i, "W"), strategy->member_tensor(i, "b"));
    strategy->tell(scores);
  }
  double last = loss(strategy->params().at("W").value, strategy->params().at("b").value);
  std::printf("initial loss: %.4g\nfinal loss: %.4g\n", first, last);
  return last < 0.1 * first ? 0 : 1;
}
