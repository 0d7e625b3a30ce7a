// A throwaway harness (not built by the project): the AVX2 fp32 GEMM driver
// (src/backend/cpu/cpu_sgemm_blocked.hpp) with its blocking and micro-tile varied, each a copy of
// the header with its namespace renamed (detail::v0 .. detail::vN) and one change, timed call by
// call in rounds (each round every variant in turn, the order rotating) against the build's
// unchanged copy (base) and oneDNN's dnnl_sgemm, on prepacked W. Built with
//   g++ -O3 -std=c++20 -fopenmp -mavx2 -mfma -ffp-contract=off -I src -I include -I V \
//       harness.cpp -L build/src -leggroll -ldnnl
// and run as  harness ROWS M N REPS [NAMES] (NAMES: a comma-separated subset; base always runs).
// The copies V/v0.hpp .. V/v6.hpp came from the header at commit 3d51bbe by
//   sed -e 's/namespace eggroll::cpu_sgemm::detail {/namespace eggroll::cpu_sgemm::detail::vN {/' \
//       -e 's/#pragma once//' src/backend/cpu/cpu_sgemm_blocked.hpp > V/vN.hpp
// with kMc = 8 * kMr (v0), 16 * kMr (v1), 24 * kMr (v2), 32 * kMr (v3), 12 * kMr (v6), and kKc =
// 128 (v4; v5: 128 with kMc = 24 * kMr). Variant names: mc96 .. mc192 and kc128 (6 x 16 tiles),
// t4x3 / t4x3mc144 / t4x3mc48 (4 rows x 3 vectors in v0 / v2 / v6), t4x2, t3x4.
#include <immintrin.h>
#include <dnnl.h>
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include "backend/cpu/avx2_columns.hpp"
#include "backend/cpu/cpu_sgemm_blocked.hpp"
#include "v0.hpp"
#include "v1.hpp"
#include "v2.hpp"
#include "v3.hpp"
#include "v4.hpp"
#include "v5.hpp"
#include "v6.hpp"
using namespace eggroll::cpu_sgemm;
using namespace eggroll::cpu_sgemm::detail;
template <int MR, int NV>
struct YmmT {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kNv = NV;
  static constexpr int kMr = MR;
  static __m256i first_lanes(int count) { return eggroll::avx2::first_lanes(count); }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg relu(Reg v) { return _mm256_max_ps(v, zero()); }
  static Reg load_first(const float* p, int count) { return _mm256_maskload_ps(p, first_lanes(count)); }
  static Reg rank_fma(const float* p, std::int64_t rank, int count, const float* s, Reg acc) { return acc; }
  static void store_first(float* p, Reg v, int count) { _mm256_maskstore_ps(p, first_lanes(count), v); }
  static void transpose(Reg r[8]) { eggroll::avx2::transpose8(r); }
};
using Clock = std::chrono::steady_clock;
struct Var { std::string name; std::function<void()> fn; std::vector<double> g; };
int main(int argc, char** argv) {
  long rows = argc > 1 ? atol(argv[1]) : 4096, m = argc > 2 ? atol(argv[2]) : 2048, n = argc > 3 ? atol(argv[3]) : 256;
  int reps = argc > 4 ? atoi(argv[4]) : 9;
  std::string only = argc > 5 ? argv[5] : "";
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(rows * n), w(m * n), y(rows * m), y0(rows * m);
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  std::vector<Var> vars;
  auto add = [&](std::string name, std::function<void()> f) {
    if (only.empty() || (","+only+",").find(","+name+",") != std::string::npos || name == "base") vars.push_back({name, f, {}}); };
  std::vector<std::shared_ptr<const eggroll::PackedWeights>> packs;
  auto variant = [&]<class D>(std::string name, D*) {
    packs.push_back(D::pack_with(m, n));
    const eggroll::PackedWeights* pack = packs.back().get();
    add(name, [&, pack] { D::run(rows, m, n, x.data(), w.data(), y.data(), nullptr, nullptr, pack); });
  };
  using T = YmmT<6, 2>;
  variant("base", static_cast<v0::Blocked<T>*>(nullptr));
  variant("mc96", static_cast<v1::Blocked<T>*>(nullptr));
  variant("mc144", static_cast<v2::Blocked<T>*>(nullptr));
  variant("mc192", static_cast<v3::Blocked<T>*>(nullptr));
  variant("kc128", static_cast<v4::Blocked<T>*>(nullptr));
  variant("mc144kc128", static_cast<v5::Blocked<T>*>(nullptr));
  variant("t4x3", static_cast<v0::Blocked<YmmT<4, 3>>*>(nullptr));
  variant("t4x3mc144", static_cast<v2::Blocked<YmmT<4, 3>>*>(nullptr));
  variant("t4x3mc48", static_cast<v6::Blocked<YmmT<4, 3>>*>(nullptr));
  variant("t4x2", static_cast<v0::Blocked<YmmT<4, 2>>*>(nullptr));
  variant("t3x4", static_cast<v0::Blocked<YmmT<3, 4>>*>(nullptr));
  add("onednn", [&] { dnnl_sgemm('N', 'T', rows, m, n, 1.0f, x.data(), n, w.data(), n, 0.0f, y.data(), m); });
  vars[0].fn(); y0 = y;
  for (auto& v : vars) { if (v.name == "onednn") continue; std::fill(y.begin(), y.end(), 0.f); v.fn(); v.fn();
    if (std::memcmp(y.data(), y0.data(), y.size() * 4)) std::printf("%s DIFFERS\n", v.name.c_str()); }
  const double macs = double(rows) * m * n;
  for (int r = 0; r < reps + 1; ++r)
    for (std::size_t j = 0; j < vars.size(); ++j) {
      auto& v = vars[(j + r) % vars.size()];
      auto t0 = Clock::now(); int calls = 0; double s;
      do { v.fn(); ++calls; s = std::chrono::duration<double>(Clock::now() - t0).count(); } while (s < 0.03);
      if (r > 0) v.g.push_back(macs * calls / s / 1e9);
    }
  std::printf("rows %ld m %ld n %ld threads %d\n", rows, m, n, omp_get_max_threads());
  for (auto& v : vars) { auto g = v.g; std::sort(g.begin(), g.end());
    std::vector<double> r; for (std::size_t i = 0; i < v.g.size(); ++i) r.push_back(v.g[i] / vars[0].g[i]);
    std::sort(r.begin(), r.end());
    std::printf("%-11s median %6.1f G FMA/s  (min %6.1f max %6.1f)  vs base %.3f (%.3f-%.3f)\n", v.name.c_str(), g[g.size() / 2], g.front(), g.back(), r[r.size()/2], r.front(), r.back()); }
}
