// What this build and this machine offer: version, optional parts, CPU model, SIMD level, threads.
#pragma once
#include <string>

namespace eggroll {

struct SystemInfo {
  std::string version;
  bool cuda_built = false, mpi_built = false, python_built = false;
  std::string cpu_model;     // from /proc/cpuinfo, or "unknown"
  std::string simd_level;    // best supported: avx512 | avx2 | scalar
  bool avx512_vnni = false;
  int max_threads = 1;       // OpenMP threads available
};

SystemInfo system_info();

}  // namespace eggroll
