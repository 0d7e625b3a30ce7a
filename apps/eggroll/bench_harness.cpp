// The shared parts of `eggroll bench` (bench_harness.hpp).
#include "bench_harness.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "backend/cpu/cpu_peak.hpp"
#include "backend/cpu/cpu_sgemm.hpp"
#include "backend/int8_ops.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/core/system.hpp"
#include "eggroll/model/qlayers.hpp"
#include "eggroll/noise/noise.hpp"

namespace eggroll::cli::benchlib {

std::vector<std::vector<double>> interleaved_times(const std::vector<std::function<void()>>& fns, int reps,
                                                   double min_sample_s) {
  constexpr double kMaxCalls = 10000;
  std::vector<int> calls(fns.size(), 1);
  std::vector<double> warm(fns.size(), 0.0);
  for (int w = 0; w < 2 || *std::min_element(warm.begin(), warm.end()) < kWarmupSeconds; ++w)
    for (std::size_t i = 0; i < fns.size(); ++i) {
      if (w >= 2 && warm[i] >= kWarmupSeconds) continue;  // warm: a long function waits for the short ones
      const double s = seconds_of(fns[i]);
      warm[i] += s;
      if (w >= 1) calls[i] = static_cast<int>(std::clamp(std::ceil(min_sample_s / std::max(s, 1e-9)), 1.0, kMaxCalls));
    }
  std::vector<std::vector<double>> times(fns.size());
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < fns.size(); ++i)
      times[i].push_back(seconds_of([&] {
                           for (int c = 0; c < calls[i]; ++c) fns[i]();
                         }) /
                         calls[i]);
  return times;
}

std::vector<double> interleaved_medians(const std::vector<std::function<void()>>& fns, int reps,
                                        double min_sample_s) {
  std::vector<double> out;
  for (const auto& t : interleaved_times(fns, reps, min_sample_s)) out.push_back(median(t));
  return out;
}

void over_member_chunks(std::int64_t members, std::int64_t chunk,
                        const std::function<void(std::int64_t, std::int64_t, int)>& fn) {
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t first = members * t / nt, last = members * (t + 1) / nt;
    try {
      for (std::int64_t c = first; c < last; c += chunk) fn(c, std::min(chunk, last - c), static_cast<int>(t));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

const std::vector<MlpShape>& mlp_shapes() {
  static const std::vector<MlpShape> shapes = {
      {"small", 4, 256, 2}, {"medium", 64, 512, 64}, {"large", 256, 2048, 256}};
  return shapes;
}

const MlpShape& mlp_shape(const std::string& name) {
  for (const MlpShape& s : mlp_shapes())
    if (s.name == name) return s;
  throw_error("bench: model '", name, "' is not one of small (4-256-2), medium (64-512-64), large (256-2048-256)");
}

QMlp::QMlp(const MlpShape& shape, std::uint64_t seed) : shape_(shape) {
  const std::int64_t dims[3] = {shape.in, shape.hidden, shape.out};
  for (int l = 0; l < 2; ++l) {
    const std::string name = "layers." + std::to_string(l) + ".weight";
    Tensor w(DType::i8, {dims[l + 1], dims[l]});
    std::vector<std::uint32_t> bits(static_cast<std::size_t>(w.numel()));
    fill_bits(noise_stream(seed, param_id(name), 0, 0, NoiseTag::init), 0, bits.size(), bits.data());
    for (std::int64_t k = 0; k < w.numel(); ++k)
      w.data<std::int8_t>()[k] = static_cast<std::int8_t>(static_cast<int>(bits[k] % 255) - 127);
    params_.add(name, ParamKind::matrix, std::move(w));
  }
}

Tensor QMlp::forward(ForwardContext& ctx, const Tensor& x) {
  const Tensor h = qlinear(ctx, params_.at("layers.0.weight"), x);
  return qlinear(ctx, params_.at("layers.1.weight"), h);
}

std::unique_ptr<Model> float_mlp(const MlpShape& shape, std::uint64_t seed) {
  MlpSpec spec;
  spec.input_dim = shape.in;
  spec.output_dim = shape.out;
  spec.hidden = {shape.hidden};
  spec.activation = Activation::relu;
  spec.bias = false;
  return std::make_unique<Mlp>(spec, seed);
}

Tensor random_input(DType dtype, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  Tensor x(dtype, {rows, cols});
  std::vector<std::uint32_t> bits(static_cast<std::size_t>(rows * cols));
  fill_bits(noise_stream(seed, param_id("bench.input"), 0, 0, NoiseTag::init), 0, bits.size(), bits.data());
  for (std::size_t k = 0; k < bits.size(); ++k) {
    if (dtype == DType::i8)
      x.data<std::int8_t>()[k] = static_cast<std::int8_t>(static_cast<int>(bits[k] % 128) - 64);
    else
      x.data<float>()[k] = static_cast<float>(bits[k] >> 8) / 8388608.0f - 1.0f;
  }
  return x;
}

nlohmann::json machine_json() {
  const SystemInfo s = system_info();
  return {{"cpu", s.cpu_model}, {"cpu_family", s.cpu_family}, {"cpu_model_number", s.cpu_model_number},
          {"cpu_description", cpu_description(s)}, {"simd", s.simd_level}, {"avx512_vnni", s.avx512_vnni}, {"amx_int8", s.amx_int8},
          {"int8_level", cpu_int8::level()}, {"sgemm_level", cpu_sgemm::level()},
          {"noise_level", noise_simd_level()}, {"threads", omp_get_max_threads()}};
}

namespace {

// A register-only loop of `iterations` steps on the calling thread; its multiply-adds.
using PeakLoop = std::int64_t (*)(std::int64_t, float*, int*);

struct Level {
  const char* name;
  const char* dtype;
  bool available;
  PeakLoop run;
};

std::vector<Level> peak_levels() {
  bool avx2 = false, avx512 = false, vnni = false, amx = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  avx512 = __builtin_cpu_supports("avx512f");
  vnni = avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  amx = cpu_int8::amx_available();
#endif
  return {
      {"avx512", "f32", avx512, [](std::int64_t it, float* f, int*) { return cpu_peak::fp32_avx512(it, f); }},
      {"avx2", "f32", avx2, [](std::int64_t it, float* f, int*) { return cpu_peak::fp32_avx2(it, f); }},
      {"avx512_amx", "int8", amx, [](std::int64_t it, float*, int* i) { return cpu_peak::int8_amx(it, i); }},
      {"avx512_vnni", "int8", vnni, [](std::int64_t it, float*, int* i) { return cpu_peak::int8_vnni512(it, i); }},
      {"avx2", "int8", avx2, [](std::int64_t it, float*, int* i) { return cpu_peak::int8_avx2(it, i); }},
  };
}

// G multiply-adds per second of one level's loop on every thread at once: the best of 7 runs after
// a warm-up (a peak is what the machine can do; a shared machine's other load only lowers it).
// One run of a peak loop on every thread at once; the multiply-adds done.
std::int64_t on_all_threads(PeakLoop run, std::int64_t iterations) {
  std::int64_t total = 0;
#pragma omp parallel reduction(+ : total)
  {
    float f = 0.0f;
    int i = 0;
    total += run(iterations, &f, &i);
    if (f == 12345.0f && i == 12345) std::printf(" ");  // keeps the sinks alive
  }
  return total;
}

double measure_level(const Level& l) {
  const std::int64_t iterations = 4'000'000;
  std::vector<double> rates;
  for (int rep = 0; rep < 8; ++rep) {
    std::int64_t total = 0;
    const double s = seconds_of([&] { total = on_all_threads(l.run, iterations); });
    if (rep > 0) rates.push_back(static_cast<double>(total) / s / 1e9);
  }
  return *std::max_element(rates.begin(), rates.end());
}

// Per dtype, the best level's rate and its loop.
struct BestPeak {
  double gmacs = 0.0;
  PeakLoop run = nullptr;
};
std::map<std::string, BestPeak>& peak_cache() {
  static std::map<std::string, BestPeak> cache;
  return cache;
}

// G bytes per second read by every thread at once, each its own contiguous part of a buffer of
// `bytes` on huge pages (as the noise tables are): the best of 5 samples after the one that
// touches the pages. A buffer far past the caches (the peak suite's 256 MiB) measures memory; one
// the size of a noise table measures wherever that table lives. Small buffers are read several
// times per sample (at least 256 MiB in all). 0 where no vector read loop runs.
double measure_read_bandwidth(std::int64_t bytes) {
  bool avx2 = false, avx512 = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  avx2 = __builtin_cpu_supports("avx2");
  avx512 = __builtin_cpu_supports("avx512f");
#endif
  if (!avx2) return 0.0;
  const std::int64_t count = std::max<std::int64_t>(bytes / sizeof(float), 64 * omp_get_max_threads());  // floats
  const std::int64_t passes = std::max<std::int64_t>(1, (std::int64_t{1} << 26) / count);
  HugePageArray<float> buffer = make_huge_page_array<float>(static_cast<std::size_t>(count));
  std::fill_n(buffer.get(), count, 1.0f);
  double best = 0.0;
  for (int rep = 0; rep < 6; ++rep) {
    float sum = 0.0f;
    const double s = seconds_of([&] {
#pragma omp parallel reduction(+ : sum)
      {
        const std::int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
        const std::int64_t begin = count * t / n / 64 * 64, end = count * (t + 1) / n / 64 * 64;
        for (std::int64_t p = 0; p < (rep == 0 ? 1 : passes); ++p)
          sum += avx512 ? cpu_peak::read_avx512(buffer.get() + begin, end - begin)
                        : cpu_peak::read_avx2(buffer.get() + begin, end - begin);
      }
    });
    if (sum == 12345.0f) std::printf(" ");  // keeps the sum alive
    if (rep > 0) best = std::max(best, static_cast<double>(count * passes) * sizeof(float) / s / 1e9);
  }
  return best;
}

}  // namespace

nlohmann::json measure_peaks(bool print) {
  nlohmann::json records = nlohmann::json::array();
  const int threads = omp_get_max_threads();
  for (const Level& l : peak_levels()) {
    if (!l.available) continue;
    const double g = measure_level(l);
    BestPeak& best = peak_cache()[l.dtype];
    if (g > best.gmacs) best = {g, l.run};
    if (print)
      std::printf("peak %-4s %-12s %8.1f G multiply-adds/s on %d threads (%.1f per thread)\n", l.dtype, l.name, g,
                  threads, g / threads);
    records.push_back({{"suite", "peak"}, {"dtype", l.dtype}, {"level", l.name}, {"gmacs", g},
                       {"gmacs_per_thread", g / threads}, {"machine", machine_json()}});
  }
  const double bandwidth = read_bandwidth();
  if (print)
    std::printf("peak memory read        %8.1f G bytes/s on %d threads (%.1f per thread)\n", bandwidth, threads,
                bandwidth / threads);
  records.push_back({{"suite", "peak"}, {"dtype", "memory"}, {"level", "read"}, {"gbytes_per_s", bandwidth},
                     {"gbytes_per_s_per_thread", bandwidth / threads}, {"machine", machine_json()}});
  return records;
}

double read_bandwidth(std::int64_t bytes) {
  static std::map<std::int64_t, double> cache;
  auto it = cache.find(bytes);
  if (it == cache.end()) it = cache.emplace(bytes, measure_read_bandwidth(bytes)).first;
  return it->second;
}

double peak_gmacs(const std::string& dtype) {
  if (peak_cache().count(dtype) == 0) measure_peaks(false);
  auto it = peak_cache().find(dtype);
  return it == peak_cache().end() ? 0.0 : it->second.gmacs;
}

std::int64_t run_peak_loop(const std::string& dtype) {
  const double rate = peak_gmacs(dtype);
  const auto it = peak_cache().find(dtype);
  if (it == peak_cache().end() || rate <= 0.0) return 0;
  const auto run = it->second.run;
  float f = 0.0f;
  int i = 0;
  // multiply-adds per iteration (the AMX loop counts its steps in 32 iterations)
  constexpr std::int64_t kProbe = 64;
  const double per_iteration = static_cast<double>(run(kProbe, &f, &i)) / kProbe;
  // about kPeakLoopSeconds on each thread at the rate the peak suite measured
  const double per_thread = rate * 1e9 / omp_get_max_threads();
  const std::int64_t iterations =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(kPeakLoopSeconds * per_thread / std::max(per_iteration, 1.0)));
  return on_all_threads(run, iterations);
}

}  // namespace eggroll::cli::benchlib
