// The AMX int8 peak loop (cpu_peak.hpp), compiled with -mamx-tile -mamx-int8: four independent
// tile dot products per step from tiles that stay loaded, so the rate is the core's TMUL unit's.
#include "backend/cpu/cpu_peak.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/cpu_int8_amx.hpp"

namespace eggroll::cpu_peak {

std::int64_t int8_amx(std::int64_t iterations, int* sink) {
  const cpu_int8::detail::AmxTiles tiles;
  alignas(64) static const std::int8_t kOperand[16 * 64] = {3, -2, 1, 5};
  alignas(64) std::int32_t out[16 * 16];
  _tile_zero(0);  // the tile intrinsics take their tile numbers as literals
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, kOperand, 64);
  _tile_loadd(5, kOperand, 64);
  _tile_loadd(6, kOperand, 64);
  _tile_loadd(7, kOperand, 64);
  const std::int64_t steps = iterations / 32;  // a step is 1024 times a vpdpbusd's work
  for (std::int64_t s = 0; s < steps; ++s) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  *sink = out[0];
  return steps * 4 * 16 * 16 * 64;
}

}  // namespace eggroll::cpu_peak
#endif
