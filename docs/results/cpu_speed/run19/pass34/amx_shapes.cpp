#include "backend/int8_ops.hpp"
#include "eggroll/backend/backend.hpp"
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
using namespace eggroll;
int main(int argc, char** argv) {
  auto cpu = make_backend(BackendKind::cpu);
  std::mt19937 rng(1);
  struct S { long rows, m, n; };
  for (S s : {S{4096, 512, 64}, S{4096, 64, 512}, S{4096, 2048, 256}, S{4096, 256, 2048}, S{1024, 256, 256}, S{1024, 1024, 256}, S{1024, 256, 1024}, S{4096, 128, 128}, S{4096, 256, 128}, S{4096, 128, 256}}) {
    std::vector<int8_t> x(s.rows * s.n), w(s.m * s.n), y(s.rows * s.m);
    for (auto& v : x) v = rng() % 200 - 100;
    for (auto& v : w) v = rng() % 200 - 100;
    auto packed = cpu->qpack(s.m, s.n, w.data());
    double best[2] = {1e9, 1e9};
    const char* lv[2] = {"avx512_vnni", "avx512_amx"};
    for (int rep = 0; rep < 30; ++rep)
      for (int l = 0; l < 2; ++l) {
        cpu_int8::set_level(lv[l]);
        auto t0 = std::chrono::steady_clock::now();
        for (int c = 0; c < 3; ++c) cpu->qmm({s.rows, 1}, s.m, s.n, x.data(), w.data(), QFactors{}, y.data(), QAddend{}, packed.get());
        best[l] = std::min(best[l], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3);
      }
    std::printf("rows=%ld m=%ld n=%ld: vnni %.0f, amx %.0f G MAC/s (amx/vnni %.2f)\n", s.rows, s.m, s.n,
                s.rows * s.m * s.n / best[0] * 1e-9, s.rows * s.m * s.n / best[1] * 1e-9, best[0] / best[1]);
  }
}
