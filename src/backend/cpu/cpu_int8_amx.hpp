// The int8 matmul's accumulation on AMX tiles, for the int8 level avx512_amx (cpu_int8_amx.cpp).
#pragma once
#include <cstdint>

namespace eggroll::cpu_int8::detail {

// Whether this CPU has AMX-TILE and AMX-INT8 and the kernel granted this process the tile data
// (asked once here; a refusal leaves the VNNI level the best).
bool amx_usable();

// The calling thread's tiles configured for amx_accumulate while the object lives, released after.
class AmxTiles {
 public:
  AmxTiles();
  ~AmxTiles();
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
};

// Output blocks [b_begin, b_end) of acc (rows, 16 m_blocks) at row stride acc_stride = xu rows .
// packed W^T, the VNNI tiles' accumulators less their bias (PackedW's -128 sum_k W[a][k], which the
// reader adds): xu (rows, x_stride) is x + 128 as u8, zero past n; wp is PackedW's (m_blocks,
// n_groups, 16, 4) bytes (output block b's at wp + b n_groups 64). Needs an AmxTiles on this thread.
// The tiles work in whole 16-row steps: xu must be readable for rows rounded up to 16 (what the
// extra rows hold only lands in their own acc rows, which must exist) and wp for 1024 bytes past
// its last block (multiplied by xu's zero padding, so never part of a result). With signed_x, xu's
// bytes are signed int8 (tdpbssd), as the discrete update's A factors are summed.
void amx_accumulate(const std::uint8_t* xu, std::int64_t x_stride, std::int64_t rows, const std::int8_t* wp,
                    std::int64_t n_groups, std::int64_t b_begin, std::int64_t b_end, std::int32_t* acc,
                    std::int64_t acc_stride, bool signed_x = false);

}  // namespace eggroll::cpu_int8::detail
