// system_info(): build flags and run-time CPU detection; retain_freed_memory().
#include "eggroll/core/system.hpp"

#include <omp.h>

#include <fstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace eggroll {

static std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

SystemInfo system_info() {
  SystemInfo s;
  s.version = EGGROLL_VERSION;
  s.cuda_built = EGGROLL_HAVE_CUDA;
  s.mpi_built = EGGROLL_HAVE_MPI;
  s.python_built = EGGROLL_HAVE_PYTHON;
  s.cpu_model = read_cpu_model();
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    s.simd_level = "avx512";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    s.simd_level = "avx2";
  else
    s.simd_level = "scalar";
  s.avx512_vnni = __builtin_cpu_supports("avx512vnni");
#else
  s.simd_level = "scalar";
#endif
  s.max_threads = omp_get_max_threads();
  return s;
}

void retain_freed_memory() {
#if defined(__GLIBC__)
  constexpr int kOneGiB = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kOneGiB);  // blocks below this come from the heap, reused after free
  mallopt(M_TRIM_THRESHOLD, kOneGiB);  // the heap's free top is kept up to this size
  // The per-thread arenas stay: their heaps keep their free tops under the trim threshold too
  // (the page faults of a benchmark's epochs do not grow with the epochs), and threads that
  // allocate small tensors at every step (the RL task's blocks of members) would otherwise queue
  // on the one arena's lock.
#endif
}

}  // namespace eggroll
