// Register-only loops that measure this machine's arithmetic peak per SIMD level (`eggroll bench
// --suite peak`): independent accumulator chains, no memory traffic, so the rate is the core's
// fused multiply-add or int8 dot-product throughput. Each returns the multiply-adds it performed
// (fp32 FMA lanes, or int8 products for the dot-product loops) and writes one value to sink so
// the loop is not optimised away. A read loop gives the memory bandwidth the factors of a noise
// table are read at.
#pragma once
#include <cstdint>

namespace eggroll::cpu_peak {

std::int64_t fp32_avx512(std::int64_t iterations, float* sink);  // vfmadd231ps zmm
std::int64_t fp32_avx2(std::int64_t iterations, float* sink);    // vfmadd231ps ymm
std::int64_t int8_vnni512(std::int64_t iterations, int* sink);   // vpdpbusd zmm (64 products each)
// tdpbusd on 16 x 64-byte tiles (16,384 products each), iterations / 32 steps of four; needs the
// int8 level avx512_amx to be available (the kernel's permission for the tiles).
std::int64_t int8_amx(std::int64_t iterations, int* sink);
// AVX2 has no int8 dot-product instruction: the sequence the AVX2 kernels use, vpmaddubsw then
// vpmaddwd against ones and vpaddd (32 products per three instructions).
std::int64_t int8_avx2(std::int64_t iterations, int* sink);

// The memory read loop of the peak suite: the sum of count floats (count a multiple of 64), read
// in order with four independent vector sums, so the rate is the memory system's for one stream.
float read_avx512(const float* p, std::int64_t count);
float read_avx2(const float* p, std::int64_t count);

}  // namespace eggroll::cpu_peak
