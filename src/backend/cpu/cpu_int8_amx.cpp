// The int8 matmul's accumulation on AMX tiles (compiled with -mamx-tile -mamx-int8; chosen at run
// time as the int8 level avx512_amx where the CPU has AMX-INT8 and the kernel grants the tile
// data). It computes xu . W^T over the VNNI tiles' packed operands (cpu_int8_avx512.cpp), u8 x + 128
// against signed W, wrapping int32 sums; the row epilogues (AVX-512) add the bias as they read the
// sums, so every result equals the other levels' bit for bit.
#include "backend/cpu/cpu_int8_amx.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace eggroll::cpu_int8::detail {
namespace {

// Linux's arch_prctl request for permission to use a dynamically enabled state component, and
// the AMX tile data component's number (asm/prctl.h and the XSAVE feature numbers).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// The tile palette 1 configuration (64 bytes, the layout LDTILECFG reads): tiles 0-7 of 16 rows of
// 64 bytes. A constant in memory: GCC 12 does not see _tile_loadconfig read its operand, and drops
// the stores that would fill a local one.
struct alignas(64) TileConfig {
  std::uint8_t palette;
  std::uint8_t start_row;
  std::uint8_t reserved[14];
  std::uint16_t colsb[16];
  std::uint8_t rows[16];
};
constexpr TileConfig kTileConfig{1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

// Tiles 0-3 hold C (row tile r, column block c as tile 2 r + c), 4-5 the rows of xu, 6-7 W's blocks.
// Every tile is 16 rows of 64 bytes: a C tile is 16 rows x 16 int32 outputs, an A tile 16 rows x
// 64 bytes of xu (16 k-groups), a B tile 16 k-groups x 16 outputs x 4 bytes: exactly 16 consecutive
// groups of one output block of the packed W (PackedW's layout).
// The C tiles start from zero: the tile loads are what limits these loops (a loop of tile loads and
// tdpbusd runs at a third to half of one without the loads), and at K = 256 a bias row loaded into
// each C tile was a fifth of them.
template <int RT, int CT, bool Signed>
void tile(const std::uint8_t* xu, std::int64_t x_stride, const std::int8_t* wp, std::int64_t panel,
          std::int64_t k_steps, std::int32_t* acc, std::int64_t acc_stride) {
  _tile_zero(0);
  if constexpr (CT > 1) _tile_zero(1);
  if constexpr (RT > 1) _tile_zero(2);
  if constexpr (RT > 1 && CT > 1) _tile_zero(3);
  for (std::int64_t kt = 0; kt < k_steps; ++kt) {
    if (kt + 1 < k_steps)  // W's next tiles into L1: a tile load that misses L1 waits for its lines
      for (int l = 0; l < 16; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(wp + (kt + 1) * 1024 + l * 64), _MM_HINT_T0);
        if constexpr (CT > 1) _mm_prefetch(reinterpret_cast<const char*>(wp + panel + (kt + 1) * 1024 + l * 64), _MM_HINT_T0);
      }
    _tile_loadd(4, xu + kt * 64, x_stride);
    _tile_loadd(6, wp + kt * 1024, 64);
    if constexpr (RT > 1) _tile_loadd(5, xu + 16 * x_stride + kt * 64, x_stride);
    if constexpr (CT > 1) _tile_loadd(7, wp + panel + kt * 1024, 64);
    if constexpr (Signed) {
      _tile_dpbssd(0, 4, 6);
      if constexpr (CT > 1) _tile_dpbssd(1, 4, 7);
      if constexpr (RT > 1) _tile_dpbssd(2, 5, 6);
      if constexpr (RT > 1 && CT > 1) _tile_dpbssd(3, 5, 7);
    } else {
      _tile_dpbusd(0, 4, 6);
      if constexpr (CT > 1) _tile_dpbusd(1, 4, 7);
      if constexpr (RT > 1) _tile_dpbusd(2, 5, 6);
      if constexpr (RT > 1 && CT > 1) _tile_dpbusd(3, 5, 7);
    }
  }
  const std::int64_t stride = acc_stride * 4;
  _tile_stored(0, acc, stride);
  if constexpr (CT > 1) _tile_stored(1, acc + 16, stride);
  if constexpr (RT > 1) _tile_stored(2, acc + 16 * acc_stride, stride);
  if constexpr (RT > 1 && CT > 1) _tile_stored(3, acc + 16 * acc_stride + 16, stride);
}

}  // namespace

bool amx_usable() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool amx_tile = (edx >> 24) & 1u, amx_int8 = (edx >> 25) & 1u;
  if (!amx_tile || !amx_int8) return false;
  // the kernel enables the tile data per process, on request (it refuses where it cannot save it)
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

AmxTiles::AmxTiles() { _tile_loadconfig(&kTileConfig); }

AmxTiles::~AmxTiles() { _tile_release(); }

namespace {

template <bool Signed>
void accumulate(const std::uint8_t* xu, std::int64_t x_stride, std::int64_t rows, const std::int8_t* wp,
                std::int64_t n_groups, std::int64_t b_begin, std::int64_t b_end, std::int32_t* acc,
                std::int64_t acc_stride) {
  const std::int64_t panel = n_groups * 64, k_steps = x_stride / 64;
  // two output blocks at a time, their W panels reused by the block's row tiles (the first tile
  // reads them from L2; docs/results.md, "The int8 matmul on AMX tiles")
  for (std::int64_t b = b_begin; b < b_end; b += 2) {
    const bool two_cols = b + 1 < b_end;
    const std::int8_t* wb = wp + b * panel;
    for (std::int64_t r = 0; r < rows; r += 32) {
      const std::uint8_t* xr = xu + r * x_stride;
      std::int32_t* ar = acc + r * acc_stride + b * 16;
      const bool two_rows = r + 16 < rows;
      if (two_rows && two_cols)
        tile<2, 2, Signed>(xr, x_stride, wb, panel, k_steps, ar, acc_stride);
      else if (two_rows)
        tile<2, 1, Signed>(xr, x_stride, wb, panel, k_steps, ar, acc_stride);
      else if (two_cols)
        tile<1, 2, Signed>(xr, x_stride, wb, panel, k_steps, ar, acc_stride);
      else
        tile<1, 1, Signed>(xr, x_stride, wb, panel, k_steps, ar, acc_stride);
    }
  }
}

}  // namespace

void amx_accumulate(const std::uint8_t* xu, std::int64_t x_stride, std::int64_t rows, const std::int8_t* wp,
                    std::int64_t n_groups, std::int64_t b_begin, std::int64_t b_end, std::int32_t* acc,
                    std::int64_t acc_stride, bool signed_x) {
  if (signed_x) return accumulate<true>(xu, x_stride, rows, wp, n_groups, b_begin, b_end, acc, acc_stride);
  accumulate<false>(xu, x_stride, rows, wp, n_groups, b_begin, b_end, acc, acc_stride);
}

}  // namespace eggroll::cpu_int8::detail
#endif
