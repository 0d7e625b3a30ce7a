// What the `eggroll bench` suites share: timing (median of interleaved repetitions), the thread
// harness that runs a forward over member chunks the way training does, the benchmark models and
// the machine description every record carries.
#pragma once
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eggroll/backend/backend.hpp"
#include "eggroll/es/noiser.hpp"
#include "eggroll/model/model.hpp"

namespace eggroll::cli::benchlib {

inline double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// Warms every function up (rounds of one call each, at least two, until each has run for
// kWarmupSeconds; one that has sits out the later rounds: a process's first case
// otherwise ran before the machine had settled), then
// runs `reps` rounds of all of them in turn (interleaved, so that a slow moment of a shared
// machine hits all of them alike); returns each one's median time per call. A round times each
// function over as many calls in a row as make at least min_sample_s (counted from its last
// warm-up call), so that a function of a fraction of a millisecond is not timed by a single
// call's clock reads and scheduler ticks.
inline constexpr double kWarmupSeconds = 0.1;
inline constexpr double kMinSampleSeconds = 0.02;
std::vector<double> interleaved_medians(const std::vector<std::function<void()>>& fns, int reps,
                                        double min_sample_s = kMinSampleSeconds);
// The same rounds; every round's time per call of each function: times[i][round].
std::vector<std::vector<double>> interleaved_times(const std::vector<std::function<void()>>& fns, int reps,
                                                   double min_sample_s = kMinSampleSeconds);

// Runs fn(first_member, count, thread) over members [0, members), each thread taking a contiguous
// block (as for_member_blocks does in training) and walking it in chunks of at most `chunk`
// members. Kernels inside run on their thread alone. Rethrows the first exception.
void over_member_chunks(std::int64_t members, std::int64_t chunk,
                        const std::function<void(std::int64_t, std::int64_t, int)>& fn);

// The MLPs of the benchmark protocol: in - hidden - out, no biases.
struct MlpShape {
  std::string name;
  std::int64_t in, hidden, out;
  std::int64_t macs_per_row() const { return in * hidden + hidden * out; }
  std::int64_t sum_mn_plus() const { return (in + hidden) + (hidden + out); }  // sum over matrices of m + n
};
const std::vector<MlpShape>& mlp_shapes();
const MlpShape& mlp_shape(const std::string& name);

// The int8 version of an MLP shape (ALGORITHM.md 2.1): MM layers, whose clip is the only
// nonlinearity, no biases; random int8 weights.
class QMlp final : public Model {
 public:
  QMlp(const MlpShape& shape, std::uint64_t seed);
  std::string kind() const override { return "qmlp"; }
  std::int64_t input_dim() const override { return shape_.in; }
  std::int64_t output_dim() const override { return shape_.out; }
  Tensor forward(ForwardContext& ctx, const Tensor& x) override;

 private:
  MlpShape shape_;
};

// The float MLP (ReLU, no biases) of a shape.
std::unique_ptr<Model> float_mlp(const MlpShape& shape, std::uint64_t seed);
// (rows, cols) random inputs: f32 in [-1, 1) or int8 in [-64, 64).
Tensor random_input(DType dtype, std::int64_t rows, std::int64_t cols, std::uint64_t seed);

// CPU model, SIMD levels of each kernel family, threads: every record carries it.
nlohmann::json machine_json();

// Peak multiply-adds per second (G) of this machine for a dtype ("f32" or "int8") at the best
// level, measured once per process by the register-only loops of the peak suite.
double peak_gmacs(const std::string& dtype);
// One run of the dtype's peak loop (the level whose rate peak_gmacs took) on every thread at once,
// about kPeakLoopSeconds long; returns the multiply-adds it did (0 where no loop runs). The forward,
// update and epoch suites interleave it with their cases' timings (interleaved_medians), which puts
// a peak measured in the same minutes beside each case: this host's speed moved by up to 2x between
// the minutes of one process, which a peak measured at its start does not see.
inline constexpr double kPeakLoopSeconds = 0.005;
std::int64_t run_peak_loop(const std::string& dtype);
// The peak suite's records: each level's fp32 FMA and int8 dot-product rate on all threads, and
// the memory read bandwidth.
nlohmann::json measure_peaks(bool print);
// G bytes per second that all threads read together from a buffer of `bytes` (default: 256 MiB,
// far past the caches, i.e. memory), measured once per process and size.
double read_bandwidth(std::int64_t bytes = std::int64_t{1} << 28);

// eggroll bench --suite lm (bench_lm.cpp): the records of the language model's step and of the
// int8 GEMM at its shapes; simd: the bench's kernel level, which the step's trainer keeps.
nlohmann::json lm_suite(bool quick, int reps, const std::string& simd);

}  // namespace eggroll::cli::benchlib
