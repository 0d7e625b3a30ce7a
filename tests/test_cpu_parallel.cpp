// cpu_parallel: the cpu kernels' loops start a team only where it pays, and otherwise run on the
// calling thread with no OpenMP construct; either way every item is covered once and a barrier
// separates the phases of a team's work.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <vector>

#include "backend/cpu/cpu_parallel.hpp"

namespace eggroll {
namespace {

struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

TEST(CpuParallel, ATeamCoversEveryItemOnceAndItsBarrierSeparatesThePhases) {
  ThreadGuard guard;
  omp_set_max_active_levels(1);
  omp_set_num_threads(3);
  const std::int64_t n = 1000;
  std::vector<int> first(n, 0), second(n, 0);
  std::atomic<int> regions{0}, teams_of_three{0};
  cpu_parallel::team(true, [&](std::int64_t t, std::int64_t nt) {
    ++regions;
    teams_of_three += nt == 3;
    const auto [a, b] = cpu_parallel::share(n, t, nt);
    for (std::int64_t i = a; i < b; ++i) first[i] += 1;
    cpu_parallel::barrier(nt);
    // after the barrier every thread's first phase is done: read another thread's share
    const auto [c, d] = cpu_parallel::share(n, (t + 1) % nt, nt);
    for (std::int64_t i = c; i < d; ++i) second[i] = first[i];
  });
  EXPECT_EQ(regions, 3);
  EXPECT_EQ(teams_of_three, 3);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(first[i], 1) << i;
    ASSERT_EQ(second[i], 1) << i;
  }
}

TEST(CpuParallel, SmallWorkOneThreadOrAnEnclosingRegionRunOnTheCallingThread) {
  ThreadGuard guard;
  omp_set_max_active_levels(1);
  omp_set_num_threads(2);
  const auto calls = [](bool big) {
    std::vector<std::int64_t> seen;
    cpu_parallel::team(big, [&](std::int64_t t, std::int64_t nt) { seen.push_back(t * 10 + nt); });
    return seen;
  };
  EXPECT_EQ(calls(false), std::vector<std::int64_t>{1});  // (0, 1) on the calling thread
  EXPECT_FALSE(cpu_parallel::team_pays(false));
  EXPECT_TRUE(cpu_parallel::team_pays(true));
  omp_set_num_threads(1);
  EXPECT_FALSE(cpu_parallel::team_pays(true));
  omp_set_num_threads(2);
  std::atomic<int> inner_pays{0}, inner_single{0};
#pragma omp parallel num_threads(2)
  {
    inner_pays += cpu_parallel::team_pays(true);
    cpu_parallel::team(true, [&](std::int64_t t, std::int64_t nt) { inner_single += t == 0 && nt == 1; });
  }
  EXPECT_EQ(inner_pays, 0);
  EXPECT_EQ(inner_single, 2);
}

TEST(CpuParallel, ForEachVisitsEveryIndexOnce) {
  ThreadGuard guard;
  omp_set_num_threads(3);
  for (bool big : {false, true}) {
    std::vector<std::atomic<int>> hits(777);
    cpu_parallel::for_each(777, big, [&](std::int64_t i) { ++hits[static_cast<std::size_t>(i)]; });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  int calls = 0;
  cpu_parallel::for_each(0, true, [&](std::int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace eggroll
