// A register tile of ROWS x V ymm accumulators fed from L1: V panel loads and ROWS broadcasts from
// memory a step, ROWS V FMAs; G multiply-adds (8 lanes each) a second on one thread.
//   g++ -O3 -mavx2 -mfma -o tile_microbench tile_microbench.cpp && ./tile_microbench
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
// tile ROWSxV: per step V loads of b, ROWS broadcasts, ROWS*V FMAs; all in L1
template <int ROWS, int V>
__attribute__((noinline)) void run(const float* a, const float* b, long steps, float* out) {
  __m256 acc[ROWS][V];
  for (int i = 0; i < ROWS; ++i) for (int v = 0; v < V; ++v) acc[i][v] = _mm256_setzero_ps();
  for (long q = 0; q < steps; ++q) {
    const float* aq = a + (q & 255) * ROWS;
    const float* bq = b + (q & 255) * 8 * V;
    __m256 bv[V];
    for (int v = 0; v < V; ++v) bv[v] = _mm256_loadu_ps(bq + 8 * v);
    for (int i = 0; i < ROWS; ++i) {
      __m256 av = _mm256_broadcast_ss(aq + i);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < ROWS; ++i) for (int v = 0; v < V; ++v) _mm256_storeu_ps(out + (i * V + v) * 8, acc[i][v]);
}
template <int ROWS, int V> void time_it(const char* name, float* a, float* b, float* out) {
  long steps = 200000000 / (ROWS * V);
  run<ROWS, V>(a, b, steps / 10, out);
  auto t0 = std::chrono::steady_clock::now();
  run<ROWS, V>(a, b, steps, out);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%s %dx%d: %.1f G FMA/s (x8 lanes)\n", name, ROWS, V, steps * ROWS * V * 8.0 / s / 1e9);
}
int main() {
  static float a[256 * 16], b[256 * 32], out[1024];
  for (int i = 0; i < 256 * 16; ++i) a[i] = 1e-3f * (i % 7);
  for (int i = 0; i < 256 * 32; ++i) b[i] = 1e-3f * (i % 5);
  for (int rep = 0; rep < 2; ++rep) {
    time_it<6, 2>("bcast", a, b, out);
    time_it<4, 3>("bcast", a, b, out);
    time_it<3, 4>("bcast", a, b, out);
    time_it<2, 6>("bcast", a, b, out);
  }
}
