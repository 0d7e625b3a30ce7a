// A throwaway harness (not built by the project): variants of the fp32 GEMM driver
// (src/backend/cpu/cpu_sgemm_blocked.hpp) compiled side by side in one program, each a copy of
// the header with its namespace renamed (detail::v0 .. detail::v10) and one change, timed call by
// call in rounds (each round every variant in turn, the order rotating) against the build's own
// copy (base) and oneDNN's dnnl_sgemm, on prepacked W. Built with
//   g++ -O3 -std=c++20 -fopenmp -mavx2 -mfma -mavx512f -mavx512bw -mavx512vl -mavx512dq \
//       -ffp-contract=off -I src -I include -I VARIANTS harness.cpp -L build/src -leggroll -ldnnl
// and run as  harness ROWS M N REPS [NAMES]. The variants measured (harness_readings.txt):
//   v1  prefetcht0 of the panel 8 k steps ahead inside the k loop
//   v2  v1 + v3's y fetch, v3 a read fetch of the next row tile's y (first 24 k steps), v3' the
//       same with prefetchw
//   v4  v2 + the next panel's lines towards L2 (one every other k step, a share per row tile)
//   v5  the next panel's lines only, v6 v5 + the y fetch, v7 the y fetch only
//   v8  the committed header; v9 it without the panel lines; v10 it without the y fetch
//   t8x3, t12x2, t4x5: other micro-tile shapes (rows x vectors) of the unchanged driver
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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
#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/cpu_sgemm_blocked.hpp"
#include "v0.hpp"
#include "v1.hpp"
#include "v2.hpp"
#include "v3.hpp"
#include "v4.hpp"
#include "v5.hpp"
#include "v6.hpp"
#include "v7.hpp"
#include "v8.hpp"
#include "v9.hpp"
#include "v10.hpp"
using namespace eggroll::cpu_sgemm;
using namespace eggroll::cpu_sgemm::detail;
template <int MR, int NV>
struct ZmmT {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kNv = NV;
  static constexpr int kMr = MR;
  static __mmask16 first_lanes(int count) {
    return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                       : (count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u));
  }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg relu(Reg v) { return _mm512_max_ps(v, zero()); }
  static Reg load_first(const float* p, int count) { return _mm512_maskz_loadu_ps(first_lanes(count), p); }
  static Reg rank_fma(const float* p, std::int64_t rank, int count, const float* s, Reg acc) { return acc; }
  static void store_first(float* p, Reg v, int count) { _mm512_mask_storeu_ps(p, first_lanes(count), v); }
  static void transpose(Reg r[16]) { eggroll::avx512::transpose16(r); }
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
  auto add = [&](std::string name, std::function<void()> f) { if (only.empty() || only.find(name) != std::string::npos || name == "base") vars.push_back({name, f, {}}); };
  std::vector<std::shared_ptr<const eggroll::PackedWeights>> packs;
  // one variant: driver D (a namespace's Blocked<traits>) on W packed for it
  auto variant = [&]<class D>(std::string name, D*) {
    packs.push_back(D::pack_with(m, n));
    const eggroll::PackedWeights* pack = packs.back().get();
    add(name, [&, pack] { D::run(rows, m, n, x.data(), w.data(), y.data(), nullptr, nullptr, pack); });
  };
  using T = ZmmT<6, 4>;
  variant("base", static_cast<v0::Blocked<T>*>(nullptr));
  variant("v1", static_cast<v1::Blocked<T>*>(nullptr));
  variant("v2", static_cast<v2::Blocked<T>*>(nullptr));
  variant("v3", static_cast<v3::Blocked<T>*>(nullptr));
  variant("v4", static_cast<v4::Blocked<T>*>(nullptr));
  variant("v5", static_cast<v5::Blocked<T>*>(nullptr));
  variant("v6", static_cast<v6::Blocked<T>*>(nullptr));
  variant("v7", static_cast<v7::Blocked<T>*>(nullptr));
  variant("v8", static_cast<v8::Blocked<T>*>(nullptr));
  variant("v9", static_cast<v9::Blocked<T>*>(nullptr));
  variant("v10", static_cast<v10::Blocked<T>*>(nullptr));
  variant("t8x3", static_cast<v0::Blocked<ZmmT<8, 3>>*>(nullptr));
  variant("t12x2", static_cast<v0::Blocked<ZmmT<12, 2>>*>(nullptr));
  variant("t4x5", static_cast<v0::Blocked<ZmmT<4, 5>>*>(nullptr));
  add("onednn", [&] { dnnl_sgemm('N', 'T', rows, m, n, 1.0f, x.data(), n, w.data(), n, 0.0f, y.data(), m); });
  // check equality against base
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
    std::printf("%-8s median %6.1f G FMA/s  (min %6.1f max %6.1f)  vs base %.3f (%.3f-%.3f)\n", v.name.c_str(), g[g.size() / 2], g.front(), g.back(), r[r.size()/2], r.front(), r.back()); }
}
