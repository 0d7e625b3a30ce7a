// system_info(): build flags and run-time CPU detection; retain_freed_memory(); huge-page arrays.
#include "eggroll/core/system.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "backend/int8_ops.hpp"
#include "eggroll/core/error.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace eggroll {

void read_cpuinfo(std::istream& in, SystemInfo& s) {
  s.cpu_model = "unknown";
  s.cpu_family = s.cpu_model_number = -1;
  std::string line;
  bool name = false, family = false, model = false;
  while (!(name && family && model) && std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const auto first = line.find_first_not_of(' ', colon + 1);
    const std::string value = first == std::string::npos ? "" : line.substr(first);
    if (key == "model name" && !name) {
      s.cpu_model = value;
      name = true;
    } else if (key == "cpu family" && !family) {
      s.cpu_family = std::atoi(value.c_str());
      family = true;
    } else if (key == "model" && !model) {
      s.cpu_model_number = std::atoi(value.c_str());
      model = true;
    }
  }
}

std::string cpu_description(const SystemInfo& s) {
  if (s.cpu_family < 0) return s.cpu_model;
  return s.cpu_model + " (family " + std::to_string(s.cpu_family) + ", model " + std::to_string(s.cpu_model_number) +
         ")";
}

SystemInfo system_info() {
  SystemInfo s;
  s.version = EGGROLL_VERSION;
  s.cuda_built = EGGROLL_HAVE_CUDA;
  s.mpi_built = EGGROLL_HAVE_MPI;
  s.python_built = EGGROLL_HAVE_PYTHON;
  std::ifstream cpuinfo("/proc/cpuinfo");
  read_cpuinfo(cpuinfo, s);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    s.simd_level = "avx512";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    s.simd_level = "avx2";
  else
    s.simd_level = "scalar";
  s.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  s.amx_int8 = cpu_int8::amx_available();
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

// Linux: an anonymous mapping 2 MiB larger than asked, trimmed at both ends to the 2 MiB-aligned
// range (a fault in a marked, aligned range takes a whole huge page). Elsewhere: aligned_alloc.
HugePageFree allocate_huge_pages(std::size_t bytes, void** out) {
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(raw != MAP_FAILED, "cannot map ", size, " bytes of memory");
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) munmap(raw, aligned - begin);                                   // the head
  munmap(reinterpret_cast<void*>(aligned + size), begin + kHugePage - aligned);          // the tail (> 0)
  *out = reinterpret_cast<void*>(aligned);
  madvise(*out, size, MADV_HUGEPAGE);  // advice only: without huge pages the memory is still good
  return HugePageFree{size};
#else
  *out = std::aligned_alloc(kHugePage, size);
  check(*out != nullptr, "cannot allocate ", size, " bytes of memory");
  return HugePageFree{0};
#endif
}

void HugePageFree::operator()(void* p) const {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p != nullptr) munmap(p, mapped_bytes);
#else
  std::free(p);
#endif
}

}  // namespace eggroll
