// Time of packing W for the fp32 GEMM: a 6-row gemm_nt with a fresh pack against one with a kept pack
// (forty-third pass). Build from the repository root:
//   g++ -O2 -std=c++20 -I src -I include pack_timing.cpp -L build/src -leggroll -fopenmp
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include "backend/cpu/cpu_sgemm.hpp"
using namespace eggroll;
int main() {
  for (auto [m, n] : {std::pair<long, long>{512, 64}, {64, 512}, {2048, 256}, {256, 2048}}) {
    std::vector<float> w(m * n), x(6 * n), y(6 * m);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.001f * (i % 997);
    std::vector<double> fresh, kept;
    auto keep = cpu_sgemm::pack(m, n);
    cpu_sgemm::gemm_nt(6, m, n, x.data(), w.data(), y.data(), nullptr, keep.get());
    for (int rep = 0; rep < 200; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      auto p = cpu_sgemm::pack(m, n);
      cpu_sgemm::gemm_nt(6, m, n, x.data(), w.data(), y.data(), nullptr, p.get());
      auto t1 = std::chrono::steady_clock::now();
      cpu_sgemm::gemm_nt(6, m, n, x.data(), w.data(), y.data(), nullptr, keep.get());
      auto t2 = std::chrono::steady_clock::now();
      fresh.push_back(std::chrono::duration<double>(t1 - t0).count());
      kept.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    std::sort(fresh.begin(), fresh.end()); std::sort(kept.begin(), kept.end());
    double pack_us = (fresh[100] - kept[100]) * 1e6;
    std::printf("%ldx%ld: 6-row gemm with fresh pack %.1f us, kept %.1f us -> pack %.1f us (%.2f ns/float)\n", m, n, fresh[100] * 1e6, kept[100] * 1e6, pack_us, pack_us * 1e3 / (m * n));
  }
}
