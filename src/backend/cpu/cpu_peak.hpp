// Register-only loops that measure this machine's arithmetic peak per SIMD level (`eggroll bench
// --suite peak`): independent accumulator chains, no memory traffic, so the rate is the core's
// fused multiply-add or int8 dot-product throughput. Each returns the multiply-adds it performed
// (fp32 FMA lanes, or int8 products for the dot-product loops) and writes one value to sink so
// the loop is not optimised away.
#pragma once
#include <cstdint>

namespace eggroll::cpu_peak {

std::int64_t fp32_avx512(std::int64_t iterations, float* sink);  // vfmadd231ps zmm
std::int64_t fp32_avx2(std::int64_t iterations, float* sink);    // vfmadd231ps ymm
std::int64_t int8_vnni512(std::int64_t iterations, int* sink);   // vpdpbusd zmm (64 products each)
// AVX2 has no int8 dot-product instruction: the sequence the AVX2 kernels use, vpmaddubsw then
// vpmaddwd against ones and vpaddd (32 products per three instructions).
std::int64_t int8_avx2(std::int64_t iterations, int* sink);

}  // namespace eggroll::cpu_peak
