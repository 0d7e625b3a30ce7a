// eggroll bench --suite lm: the EGG language model's population step (int8: the forward of every
// member over the epoch's tokens and the discrete update) against the int8 GEMM at its matrix
// shapes, with as many rows per thread as the members each thread holds.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "eggroll/task/task.hpp"
#include "eggroll/train/trainer.hpp"
#include "lm_config.hpp"

namespace eggroll::cli::benchlib {
namespace {

// The model the suite times (as bench/lm_throughput and builds_ab's lm): 6 layers of width 256,
// 100 tokens an epoch.
constexpr std::int64_t kWidth = 256, kLayers = 6, kTokens = 100;

// The int8 GEMM at the EGG model's shapes, `rows` rows per thread: one timing function per shape
// (`calls`, to be interleaved with other timings), and from their seconds a record per shape and
// the rate of the model's shape mix (its multiply-adds per member-token over the time they take at
// these rates).
struct LmGemm {
  double mix_gmacs = 0, macs_per_token = 0;
};
class LmGemmShapes {
 public:
  LmGemmShapes(Backend& backend, std::int64_t rows) : rows_(rows) {
    const std::int64_t threads = omp_get_max_threads();
    for (const Shape& s : shapes_) {
      Buffers b;  // outputs allocated once: the rate is the GEMM's alone
      for (int t = 0; t < threads; ++t) {
        b.xs.push_back(random_input(DType::i8, rows, s.n, 11 + t));
        b.ys.emplace_back(DType::i8, eggroll::Shape{rows, s.m});
      }
      b.w = random_input(DType::i8, s.m, s.n, 12);
      b.packed = backend.qpack(s.m, s.n, b.w.data<std::int8_t>());  // as a model's
      buffers_.push_back(std::move(b));
    }
    for (std::size_t i = 0; i < shapes_.size(); ++i)
      calls.push_back([this, &backend, i, threads] {
        const Shape& s = shapes_[i];
        Buffers& b = buffers_[i];
        over_member_chunks(rows_ * threads, rows_, [&](std::int64_t, std::int64_t, int t) {
          backend.qmm({1, rows_}, s.m, s.n, b.xs[t].data<std::int8_t>(), b.w.data<std::int8_t>(),
                      QFactors{s.m, s.n, 1, nullptr, nullptr, 0}, b.ys[t].data<std::int8_t>(), {}, b.packed.get());
        });
      });
  }
  std::vector<std::function<void()>> calls;  // one GEMM call per shape on every thread

  // Calls of calls[i] per member-token of the model (the shape's matrices per token over the
  // rows of a call).
  double calls_per_token(std::size_t i) const {
    return static_cast<double>(shapes_[i].count) / static_cast<double>(rows_ * omp_get_max_threads());
  }

  // seconds[i]: a call of calls[i]. Prints and records each shape's rate.
  LmGemm rates(const std::vector<double>& seconds, double peak, nlohmann::json& records) const {
    LmGemm out;
    double seconds_per_token = 0;
    for (std::size_t i = 0; i < shapes_.size(); ++i) {
      const Shape& s = shapes_[i];
      const double g = static_cast<double>(rows_ * omp_get_max_threads() * s.m * s.n) / seconds[i] / 1e9;
      std::printf("int8 GEMM %4lld x %4lld, %lld rows per thread: %7.1f G MAC/s (%.1f%% of peak)\n",
                  static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(rows_), g,
                  100.0 * g / peak);
      records.push_back({{"suite", "lm"}, {"model", "int8_gemm"}, {"dtype", "int8"}, {"m", s.m}, {"n", s.n},
                         {"rows_per_thread", rows_}, {"gmacs", g}, {"peak_fraction", g / peak},
                         {"machine", machine_json()}});
      out.macs_per_token += static_cast<double>(s.count * s.m * s.n);
      seconds_per_token += static_cast<double>(s.count * s.m * s.n) / (g * 1e9);
    }
    out.mix_gmacs = out.macs_per_token / seconds_per_token / 1e9;
    std::printf("int8 GEMM at the model's shape mix, %lld rows per thread: %.1f G MAC/s (%.2f M multiply-adds per "
                "member-token)\n",
                static_cast<long long>(rows_), out.mix_gmacs, out.macs_per_token / 1e6);
    return out;
  }

 private:
  struct Shape {
    std::int64_t m, n, count;
  };
  struct Buffers {
    std::vector<Tensor> xs, ys;
    Tensor w;
    std::shared_ptr<const PackedWeights> packed;
  };
  // The model's matrices per block: 4 GRU matrices (d x d), the MLP's (4d x d) and (d x 4d); the
  // head (256 x d). Multiply-adds per member-token: layers (12 d^2) + 256 d.
  static constexpr std::int64_t d_ = kWidth;
  const std::vector<Shape> shapes_ = {{d_, d_, 4 * kLayers + 1}, {4 * d_, d_, kLayers}, {d_, 4 * d_, kLayers}};
  std::int64_t rows_;
  std::vector<Buffers> buffers_;
};

}  // namespace

// The EGG language model (int8, population step = forward of every member over T tokens + the
// discrete update) against plain int8 GEMMs at its matrix shapes, with as many rows per thread
// as the members each thread holds (the step's rate over that GEMM rate is the ratio), and at
// 2048 rows per thread for reference. The step's epochs and the GEMM timings at its rows take
// turns in one sequence of rounds (interleaved_times), as the other suites' pairs do, and the ratio
// is the median of the rounds' own ratios: timed minutes apart, the two read a host whose AMX rate
// moves by 2x between stretches (docs/results.md, forty-third pass) at 0.39-0.84.
nlohmann::json lm_suite(bool quick, int reps, const std::string& simd) {
  nlohmann::json records = nlohmann::json::array();
  auto backend = make_backend(BackendKind::cpu);
  const std::int64_t threads = omp_get_max_threads();
  const double peak = peak_gmacs("int8");
  LmGemmShapes shapes_2048(*backend, 2048);
  const LmGemm at_2048 = shapes_2048.rates(interleaved_medians(shapes_2048.calls, reps), peak, records);
  for (std::int64_t population : quick ? std::vector<std::int64_t>{1024} : std::vector<std::int64_t>{1024, 4096}) {
    const std::int64_t rows = std::max<std::int64_t>(1, population / threads);
    register_model_kinds();
    register_task_kinds();
    // the bench's --simd level, which the trainer sets for the process as run.simd
    Trainer trainer(parse_config(lm_config_text(kWidth, kLayers, population, kTokens, 1, simd), "<bench lm>"), *backend);
    LmGemmShapes shapes(*backend, rows);
    std::vector<std::function<void()>> fns = shapes.calls;
    fns.push_back([&] { trainer.train_epoch(); });
    // each GEMM sample a quarter of a second, so the three cover about as long as an epoch: short
    // samples caught this host's fast stretches more often than the epochs did
    const std::vector<std::vector<double>> times = interleaved_times(fns, std::max(3, reps / 2), 0.25);
    std::vector<double> t;
    for (const auto& ti : times) t.push_back(median(ti));
    const LmGemm gemm = shapes.rates(t, peak, records);
    const std::vector<double>& epochs = times.back();
    const double s = t.back();
    const double mtps = static_cast<double>(population * kTokens) / s;
    const double g = mtps * gemm.macs_per_token / 1e9;
    // The ratio of each round (its epoch against its own GEMM timings, seconds apart), then their
    // median: on a host whose speed changes between minutes, the pairs measured together.
    std::vector<double> round_ratios;
    for (std::size_t r = 0; r < epochs.size(); ++r) {
      double gemm_s_per_token = 0;  // the round's GEMM seconds per member-token, by the shape mix
      for (std::size_t i = 0; i + 1 < times.size(); ++i)
        gemm_s_per_token += times[i][r] * shapes.calls_per_token(i);
      round_ratios.push_back(gemm_s_per_token * static_cast<double>(population * kTokens) / epochs[r]);
    }
    const double ratio = median(round_ratios);
    std::printf("EGG LM d=%lld x %lld layers, population %lld: %.0f member-tokens/s, %.1f G MAC/s = %.2f of the GEMM "
                "rate at %lld rows per thread (round by round; %.2f of it at 2048), %.1f%% of peak\n",
                static_cast<long long>(kWidth), static_cast<long long>(kLayers), static_cast<long long>(population), mtps, g,
                ratio, static_cast<long long>(rows), g / at_2048.mix_gmacs, 100.0 * g / peak);
    std::fflush(stdout);
    records.push_back({{"suite", "lm"}, {"model", "egg"}, {"dtype", "int8"}, {"population", population}, {"rank", 1},
                       {"rows_per_member", kTokens}, {"noise", "generator"}, {"member_tokens_per_s", mtps},
                       {"gmacs", g}, {"gemm_rows_per_thread", rows}, {"gemm_gmacs", gemm.mix_gmacs},
                       {"ratio", ratio}, {"round_ratios", round_ratios}, {"ratio_of_medians", g / gemm.mix_gmacs},
                       {"gemm_gmacs_2048", at_2048.mix_gmacs},
                       {"ratio_2048", g / at_2048.mix_gmacs}, {"peak_fraction", g / peak}, {"epoch_s", s},
                       {"machine", machine_json()}});
  }
  return records;
}

}  // namespace eggroll::cli::benchlib
