// What entering an OpenMP region costs on this machine, against the same 64-value loop without
// one: the reason the cpu kernels go through cpu_parallel (docs/design.md, "OpenMP regions only
// where a team pays"). Prints ns per call for: the bare loop; a region whose if clause is false;
// the same from inside a region of 2 threads (nested, so a team of one); and cpu_parallel::team
// from inside that region (no OpenMP construct at all).
//     build/bench/omp_region_cost [--calls N]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "backend/cpu/cpu_parallel.hpp"

namespace {

void bare(double* a) {
  for (int i = 0; i < 64; ++i) a[i] += 1.0;
}

void region_if_false(double* a, bool big) {
#pragma omp parallel for if (big)
  for (int i = 0; i < 64; ++i) a[i] += 1.0;
}

void through_team(double* a) {
  eggroll::cpu_parallel::team(false, [&](std::int64_t, std::int64_t) { bare(a); });
}

// ns per call of fn over `calls` calls, on `threads` threads each calling it (1: no region).
double ns_per_call(int threads, long calls, const std::function<void(double*)>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  if (threads == 1) {
    double a[64] = {};
    for (long c = 0; c < calls; ++c) fn(a);
  } else {
#pragma omp parallel num_threads(threads)
    {
      double a[64] = {};
      for (long c = 0; c < calls; ++c) fn(a);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(calls) * 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 200000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atol(argv[i + 1]);
  omp_set_max_active_levels(1);
  std::printf("ns per call of a 64-value loop, %ld calls\n", calls);
  std::printf("bare loop, one thread:                          %8.1f\n", ns_per_call(1, calls, bare));
  std::printf("region with if(false), one thread:              %8.1f\n",
              ns_per_call(1, calls, [](double* a) { region_if_false(a, false); }));
  std::printf("nested region (team of one), in 2 threads:      %8.1f\n",
              ns_per_call(2, calls, [](double* a) { region_if_false(a, true); }));
  std::printf("cpu_parallel::team, in 2 threads:               %8.1f\n", ns_per_call(2, calls, through_team));
  return 0;
}
