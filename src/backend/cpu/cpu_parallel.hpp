// Parallel loops of the cpu kernels that enter the OpenMP runtime only where a team pays.
// Entering a parallel region costs 1-3 us on this project's virtual machines, even when its if
// clause is false or it is nested in another region (a team of one), and an orphaned
// worksharing loop inside such a team costs as much: more than the small ops of an RL step or
// of a language model's token take. So a kernel's work runs on the calling thread, with no
// OpenMP construct at all, when it is small, when one thread is allowed, or when the caller
// already runs inside a region (for_member_blocks; nested regions would be teams of one
// anyway: the cpu backend keeps max_active_levels at 1). Results never depend on which: the
// kernels' results do not depend on the split (DESIGN.md contracts 2 and 3).
#pragma once
#include <omp.h>

#include <cstdint>
#include <utility>

namespace eggroll::cpu_parallel {

// Whether work judged big_enough should start a team here.
inline bool team_pays(bool big_enough) { return big_enough && omp_get_level() == 0 && omp_get_max_threads() > 1; }

// Items [first, last) of part t of n items split into nt contiguous parts.
inline std::pair<std::int64_t, std::int64_t> share(std::int64_t n, std::int64_t t, std::int64_t nt) {
  return {n * t / nt, n * (t + 1) / nt};
}

// region(t, nt) on each thread t of a new team of nt threads when team_pays(big_enough), else
// region(0, 1) on the calling thread. Phases whose results other threads read are separated by
// barrier(nt).
template <class Region>
void team(bool big_enough, Region&& region) {
  if (!team_pays(big_enough)) return region(std::int64_t{0}, std::int64_t{1});
#pragma omp parallel
  region(std::int64_t{omp_get_thread_num()}, std::int64_t{omp_get_num_threads()});
}

inline void barrier(std::int64_t nt) {
  if (nt > 1) {
#pragma omp barrier
  }
}

// body(i) for i in [0, n): contiguous shares of a team when team_pays(big_enough), else in
// order on the calling thread.
template <class Body>
void for_each(std::int64_t n, bool big_enough, Body&& body) {
  if (!team_pays(big_enough)) {
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace eggroll::cpu_parallel
