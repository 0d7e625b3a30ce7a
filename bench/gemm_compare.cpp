// fp32 GEMM y (rows, m) = x (rows, n) W^T on the CPU: eggroll's cpu_sgemm::gemm_nt against
// oneDNN (dnnl_sgemm) and OpenBLAS (cblas_sgemm) on the models' weight shapes, plus whether each
// library's rows are invariant to the rows of the call and to the thread count (DESIGN.md
// contract 2: a third-party GEMM may serve a member's forward only if they are).
//   gemm_compare [--threads 2] [--reps 7] [--rows 256,1024,4096,16384] [--json FILE]
// Speed: median (and best) of --reps samples after one warm-up sample, the three libraries
// interleaved sample by sample; each sample repeats the call for >= 20 ms. Reported as G
// multiply-adds/s and as a fraction of the machine's FMA peak, measured here with an
// independent-FMA loop. OpenBLAS reads OPENBLAS_CORETYPE when it loads, so to measure its
// SkylakeX kernels run: OPENBLAS_CORETYPE=SkylakeX gemm_compare
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_sgemm.hpp"
#include "eggroll/core/system.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using GemmFn = std::function<void(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                                  float* y)>;

struct Library {
  std::string name;
  GemmFn gemm;
};

// The weight matrices (m, n) of the models: MLP small 4-256-2, medium 64-512-64, large
// 256-2048-256, and the language model's 256x256, 1024x256, 256x1024.
struct Shape {
  std::int64_t m, n;
  const char* model;
};
const Shape kShapes[] = {{256, 4, "small"},    {2, 256, "small"},    {512, 64, "medium"},
                         {64, 512, "medium"},  {2048, 256, "large"}, {256, 2048, "large"},
                         {256, 256, "lm"},     {1024, 256, "lm"},    {256, 1024, "lm"}};

std::vector<Library> libraries() {
  return {
      {"eggroll", [](std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                     float* y) { eggroll::cpu_sgemm::gemm_nt(rows, m, n, x, w, y); }},
      {"oneDNN", [](std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y) {
         // Row-major: C (M, N) = A (M, K) B^T with B stored (N, K).
         if (dnnl_sgemm('N', 'T', rows, m, n, 1.0f, x, n, w, n, 0.0f, y, m) != dnnl_success) {
           std::fprintf(stderr, "dnnl_sgemm failed\n");
           std::exit(1);
         }
       }},
      {"OpenBLAS", [](std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y) {
         cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows), static_cast<blasint>(m),
                     static_cast<blasint>(n), 1.0f, x, static_cast<blasint>(n), w, static_cast<blasint>(n), 0.0f, y,
                     static_cast<blasint>(m));
       }},
  };
}

// Thread count for all three libraries (OpenBLAS may run its own pthreads pool).
void set_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& f : v) f = dist(gen);
  return v;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- machine peak: independent FMA chains, one per register, on every thread ----
#if defined(__x86_64__)
__attribute__((target("avx512f"))) double fma_peak_avx512(std::int64_t iters) {
  float sink = 0.0f;
  const auto t0 = Clock::now();
#pragma omp parallel reduction(+ : sink)
  {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i + omp_get_thread_num()));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (std::int64_t it = 0; it < iters; ++it)
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    float lanes[16];
    for (int i = 0; i < 12; ++i) {
      _mm512_storeu_ps(lanes, acc[i]);
      sink += lanes[0];
    }
  }
  const double total = static_cast<double>(omp_get_max_threads()) * static_cast<double>(iters) * 12.0 * 16.0;
  return sink == 12345.0f ? 0.0 : total / seconds_since(t0);
}
__attribute__((target("avx2,fma"))) double fma_peak_avx2(std::int64_t iters) {
  float sink = 0.0f;
  const auto t0 = Clock::now();
#pragma omp parallel reduction(+ : sink)
  {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i + omp_get_thread_num()));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (std::int64_t it = 0; it < iters; ++it)
      for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    float lanes[8];
    for (int i = 0; i < 12; ++i) {
      _mm256_storeu_ps(lanes, acc[i]);
      sink += lanes[0];
    }
  }
  const double total = static_cast<double>(omp_get_max_threads()) * static_cast<double>(iters) * 12.0 * 8.0;
  return sink == 12345.0f ? 0.0 : total / seconds_since(t0);
}
#endif

// fp32 FMA/s of the machine on the current thread count (best of 5 runs of ~0.1 s); 0 if unknown.
double fma_peak() {
  double best = 0.0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  for (int r = 0; r < 5; ++r) {
    if (__builtin_cpu_supports("avx512f")) best = std::max(best, fma_peak_avx512(20'000'000));
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = std::max(best, fma_peak_avx2(40'000'000));
  }
#endif
  return best;
}

// ---- invariance: do a row's bits depend on the rows of the call or on the thread count? ----
struct Invariance {
  bool rows = true, threads = true;
  std::string failures;
};

bool same_bits(const float* a, const float* b, std::size_t count) { return std::memcmp(a, b, count * sizeof(float)) == 0; }

// Rows [a, b) computed alone must equal the same rows of the full call, for a few sub-ranges
// (a prefix of 7, single rows, an odd middle range); 1 thread must equal `threads` threads.
void check_invariance(const Library& lib, const Shape& s, std::int64_t rows, int threads, Invariance& inv) {
  const auto x = random_values(static_cast<std::size_t>(rows * s.n), 11);
  const auto w = random_values(static_cast<std::size_t>(s.m * s.n), 12);
  std::vector<float> full(static_cast<std::size_t>(rows * s.m)), one_thread(full.size());
  set_threads(threads);
  lib.gemm(rows, s.m, s.n, x.data(), w.data(), full.data());
  const std::int64_t ranges[][2] = {{0, 7}, {0, 1}, {rows / 2, rows / 2 + 1}, {rows - 1, rows}, {5, 5 + 37}};
  for (const auto& r : ranges) {
    const std::int64_t a = r[0], b = std::min(r[1], rows);
    std::vector<float> part(static_cast<std::size_t>((b - a) * s.m));
    lib.gemm(b - a, s.m, s.n, x.data() + a * s.n, w.data(), part.data());
    if (!same_bits(part.data(), full.data() + a * s.m, part.size())) {
      inv.rows = false;
      inv.failures += " rows[" + std::to_string(a) + "," + std::to_string(b) + ")@" + std::to_string(s.m) + "x" +
                      std::to_string(s.n);
    }
  }
  set_threads(1);
  lib.gemm(rows, s.m, s.n, x.data(), w.data(), one_thread.data());
  set_threads(threads);
  if (!same_bits(one_thread.data(), full.data(), full.size())) {
    inv.threads = false;
    inv.failures += " threads@" + std::to_string(s.m) + "x" + std::to_string(s.n);
  }
}

// ---- speed ----
struct Timing {
  double median_gmacs = 0.0, best_gmacs = 0.0;
};

// Median and best G multiply-adds/s of each library on one shape, samples interleaved.
std::vector<Timing> time_shape(const std::vector<Library>& libs, const Shape& s, std::int64_t rows, int reps,
                               double& max_rel_diff) {
  const auto x = random_values(static_cast<std::size_t>(rows * s.n), 1);
  const auto w = random_values(static_cast<std::size_t>(s.m * s.n), 2);
  std::vector<std::vector<float>> y(libs.size(), std::vector<float>(static_cast<std::size_t>(rows * s.m)));
  const double macs = static_cast<double>(rows) * static_cast<double>(s.m) * static_cast<double>(s.n);
  // Calls per sample: enough for >= 20 ms at the first library's speed.
  const auto t0 = Clock::now();
  libs[0].gemm(rows, s.m, s.n, x.data(), w.data(), y[0].data());
  const int calls = static_cast<int>(std::clamp(0.02 / std::max(seconds_since(t0), 1e-7), 1.0, 100000.0));
  std::vector<std::vector<double>> samples(libs.size());
  for (int rep = 0; rep <= reps; ++rep)  // rep 0 is the warm-up
    for (std::size_t l = 0; l < libs.size(); ++l) {
      const auto start = Clock::now();
      for (int c = 0; c < calls; ++c) libs[l].gemm(rows, s.m, s.n, x.data(), w.data(), y[l].data());
      if (rep > 0) samples[l].push_back(seconds_since(start) / calls);
    }
  std::vector<Timing> out(libs.size());
  for (std::size_t l = 0; l < libs.size(); ++l) {
    std::sort(samples[l].begin(), samples[l].end());
    out[l].median_gmacs = macs / samples[l][samples[l].size() / 2] / 1e9;
    out[l].best_gmacs = macs / samples[l].front() / 1e9;
  }
  // The libraries must agree up to rounding: |y_l - y_0| relative to the row's largest |y_0|.
  max_rel_diff = 0.0;
  for (std::size_t l = 1; l < libs.size(); ++l)
    for (std::int64_t i = 0; i < rows; ++i) {
      double row_max = 1e-30;
      for (std::int64_t a = 0; a < s.m; ++a) row_max = std::max(row_max, std::fabs(static_cast<double>(y[0][i * s.m + a])));
      for (std::int64_t a = 0; a < s.m; ++a)
        max_rel_diff = std::max(max_rel_diff, std::fabs(static_cast<double>(y[l][i * s.m + a]) - y[0][i * s.m + a]) / row_max);
    }
  return out;
}

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 7;
  std::vector<std::int64_t> row_counts = {256, 1024, 4096, 16384};
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--threads") threads = std::stoi(v);
    else if (a == "--reps") reps = std::max(5, std::stoi(v));
    else if (a == "--rows") row_counts = parse_list(v);
    else if (a == "--json") json_path = v;
    else {
      std::fprintf(stderr, "unknown option %s (use --threads, --reps, --rows, --json)\n", a.c_str());
      return 2;
    }
  }
  set_threads(threads);
  const auto libs = libraries();
  const eggroll::SystemInfo sys = eggroll::system_info();
  const double peak = fma_peak() / 1e9;
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const int openblas_parallel = openblas_get_parallel();
  std::printf("cpu: %s, simd %s, %d threads; fp32 FMA peak %.1f G FMA/s (measured)\n", sys.cpu_model.c_str(),
              sys.simd_level.c_str(), threads, peak);
  std::printf("eggroll sgemm level %s; oneDNN %d.%d.%d; OpenBLAS %s, core %s (OPENBLAS_CORETYPE=%s), threading %s\n",
              eggroll::cpu_sgemm::level(), dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch,
              openblas_get_config(), openblas_get_corename(), coretype != nullptr ? coretype : "unset",
              openblas_parallel == 2 ? "openmp" : (openblas_parallel == 1 ? "pthreads" : "sequential"));

  nlohmann::json records = nlohmann::json::array();
  std::printf("\n%-6s %-11s %6s | %-23s | %-23s | %-23s | %-8s | fastest\n", "model", "W (m x n)", "rows",
              "eggroll G FMA/s (peak)", "oneDNN G FMA/s (peak)", "OpenBLAS G FMA/s (peak)", "max diff");
  for (const Shape& s : kShapes)
    for (std::int64_t rows : row_counts) {
      double diff = 0.0;
      const auto t = time_shape(libs, s, rows, reps, diff);
      std::size_t fastest = 0;
      for (std::size_t l = 1; l < libs.size(); ++l)
        if (t[l].median_gmacs > t[fastest].median_gmacs) fastest = l;
      char shape[32];
      std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(s.m), static_cast<long long>(s.n));
      std::printf("%-6s %-11s %6lld |", s.model, shape, static_cast<long long>(rows));
      for (std::size_t l = 0; l < libs.size(); ++l)
        std::printf(" %7.1f (best %6.1f) %3.0f%% |", t[l].median_gmacs, t[l].best_gmacs,
                    peak > 0 ? 100.0 * t[l].median_gmacs / peak : 0.0);
      std::printf(" %8.1e | %s\n", diff, libs[fastest].name.c_str());
      std::fflush(stdout);
      for (std::size_t l = 0; l < libs.size(); ++l)
        records.push_back({{"suite", "gemm"}, {"library", libs[l].name}, {"model", s.model}, {"m", s.m}, {"n", s.n},
                           {"rows", rows}, {"gmacs_median", t[l].median_gmacs}, {"gmacs_best", t[l].best_gmacs},
                           {"peak_gmacs", peak}, {"fraction_of_peak", peak > 0 ? t[l].median_gmacs / peak : 0.0},
                           {"threads", threads}, {"cpu", sys.cpu_model}, {"simd", sys.simd_level},
                           {"openblas_coretype", coretype != nullptr ? coretype : ""}});
    }

  std::printf("\nrow and thread invariance (rows [0,7), single rows, [5,42) vs the full call; 1 vs %d threads;"
              " every shape at 256 and 1024 rows):\n", threads);
  nlohmann::json invariance = nlohmann::json::object();
  for (const Library& lib : libs) {
    Invariance inv;
    for (const Shape& s : kShapes)
      for (std::int64_t rows : {std::int64_t{256}, std::int64_t{1024}}) check_invariance(lib, s, rows, threads, inv);
    std::printf("  %-8s row-invariant: %s, thread-invariant: %s%s%s\n", lib.name.c_str(), inv.rows ? "yes" : "no",
                inv.threads ? "yes" : "no", inv.failures.empty() ? "" : "; differs at", inv.failures.c_str());
    invariance[lib.name] = {{"row_invariant", inv.rows}, {"thread_invariant", inv.threads}, {"failures", inv.failures}};
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    const nlohmann::json doc = {{"records", records}, {"invariance", invariance}};
    std::fprintf(f, "%s\n", doc.dump(2).c_str());
    std::fclose(f);
  }
  return 0;
}
