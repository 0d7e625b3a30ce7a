// What this build and this machine offer: version, optional parts, CPU model, SIMD level, threads.
#pragma once
#include <cstddef>
#include <istream>
#include <memory>
#include <string>

namespace eggroll {

struct SystemInfo {
  std::string version;
  bool cuda_built = false, mpi_built = false, python_built = false;
  std::string cpu_model;     // from /proc/cpuinfo, or "unknown"
  // x86 family and model numbers from /proc/cpuinfo, -1 where absent. Virtual machines often
  // hide the model name ("AMD EPYC"); these still tell the core apart (AMD: family 25 is Zen 3
  // and Zen 4, where AVX-512 runs on 256-bit units; family 26 is Zen 5).
  int cpu_family = -1, cpu_model_number = -1;
  std::string simd_level;    // best supported: avx512 | avx2 | scalar
  bool avx512_vnni = false;
  bool amx_int8 = false;     // AMX-INT8 usable here (the CPU has it and the kernel granted its tiles)
  int max_threads = 1;       // OpenMP threads available
};

SystemInfo system_info();

// Fills s.cpu_model, s.cpu_family and s.cpu_model_number from the first processor of a
// /proc/cpuinfo listing ("unknown" and -1 where absent).
void read_cpuinfo(std::istream& in, SystemInfo& s);

// "AMD EPYC (family 25, model 17)": the model name with its family and model numbers.
std::string cpu_description(const SystemInfo& s);

// Makes the C library's allocator keep freed memory for reuse instead of handing large blocks
// back to the operating system at every free (glibc: mmap and trim thresholds raised to 1 GiB).
// Training allocates the same activation and noise buffers every epoch; returned to the system,
// each new buffer costs a page fault per 4 KiB, which on virtual machines can take more time
// than the arithmetic. The CLI calls it at start; a program that embeds the library may too.
// Does nothing where the C library has no such setting.
void retain_freed_memory();

// Uninitialised memory for count values of T on 2 MiB boundaries, marked for transparent huge
// pages where the system offers them (Linux madvise; elsewhere plain aligned memory). For large
// tables read at random offsets (the noise tables): one TLB entry then covers 2 MiB instead of
// 4 KiB. Throws eggroll::Error when the memory cannot be had.
struct HugePageFree {
  std::size_t mapped_bytes = 0;
  void operator()(void* p) const;
};
HugePageFree allocate_huge_pages(std::size_t bytes, void** out);
template <typename T>
using HugePageArray = std::unique_ptr<T[], HugePageFree>;
template <typename T>
HugePageArray<T> make_huge_page_array(std::size_t count) {
  void* p = nullptr;
  HugePageFree free = allocate_huge_pages(count * sizeof(T), &p);
  return HugePageArray<T>(static_cast<T*>(p), free);
}

}  // namespace eggroll
