// eggroll info: version, backends, SIMD level, threads, GPUs.
#include <cstdio>

#include "commands.hpp"
#include "eggroll/core/system.hpp"

namespace eggroll::cli {

int info(const std::string& json) {
  SystemInfo s = system_info();
  const char* gpus = s.cuda_built ? "CUDA toolkit found at build time; the CUDA backend is not built yet"
                                  : "none (built without CUDA)";
  std::printf("version: %s\n", s.version.c_str());
  std::printf("backends: reference, cpu\n");
  std::printf("cpu: %s\n", cpu_description(s).c_str());
  std::printf("simd: %s%s\n", s.simd_level.c_str(),
              s.amx_int8 ? " (+vnni, +amx int8)" : (s.avx512_vnni ? " (+vnni)" : ""));
  std::printf("threads: %d\n", s.max_threads);
  std::printf("gpus: %s\n", gpus);
  std::printf("mpi: %s\n", s.mpi_built ? "found at build time (not built yet)" : "no");
  std::printf("python: %s\n", s.python_built ? "found at build time (not built yet)" : "no");
  if (!json.empty())
    write_json(json, {{"version", s.version}, {"backends", {"reference", "cpu"}}, {"cpu", s.cpu_model},
                      {"cpu_family", s.cpu_family}, {"cpu_model_number", s.cpu_model_number},
                      {"simd", s.simd_level}, {"avx512_vnni", s.avx512_vnni}, {"amx_int8", s.amx_int8}, {"threads", s.max_threads},
                      {"cuda_built", s.cuda_built}, {"mpi_built", s.mpi_built}, {"python_built", s.python_built}});
  return 0;
}

}  // namespace eggroll::cli
