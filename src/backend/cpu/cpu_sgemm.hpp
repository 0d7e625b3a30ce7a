// The cpu backend's fp32 GEMM y = x W^T (the base matmul of every float layer), with a SIMD
// level chosen once at run time (AVX-512F, AVX2+FMA, or scalar).
//
// Determinism (DESIGN.md contract 2): every output element is one fused multiply-add chain
//   y[i][a] = fma(x[i][n-1], W[a][n-1], ... fma(x[i][1], W[a][1], fma(x[i][0], W[a][0], 0.0f)))
// in k = 0 .. n-1 order, whatever the level, the rows of the call, the row or column blocking
// or the thread count. So a row's bits depend only on that row of x and on W, and all levels
// give the same bits (the scalar level uses std::fma in the same order).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/line_queue.hpp"
#include "eggroll/backend/backend.hpp"

namespace eggroll::cpu_sgemm {

// A linear layer's epilogue (Backend::linear's RowEpilogue) taken by the GEMM when an element's
// chain (and the fused correction, if any) is complete: y = a(y + bias of the row's member), with
// the same operations as the backend's add_rows and activation after the GEMM, so the same bits.
// Bias and relu act on the accumulators before the store where the tile holds the finished values
// (relu as max(y, 0), which gives 0 for NaN as the backend's relu does); otherwise on the tile's
// rows just stored, in L1. The other activations run `kernel` (the backend's own elementwise
// kernel for them) on each finished row segment of a tile, in place.
struct RowFinish {
  const float* bias = nullptr;  // null: no bias
  std::int64_t bias_stride = 0;  // 0: one vector for every row, else member j's at bias + j bias_stride
  std::int64_t rows_per_member = 1;
  bool relu = false;
  Activation activation = Activation::none;  // applied by kernel (null for none and relu)
  void (*kernel)(Activation, std::int64_t, const float*, float*) = nullptr;
  const float* bias_of_row(std::int64_t row) const {
    return bias_stride == 0 ? bias : bias + row / rows_per_member * bias_stride;
  }
};

// y (rows, m) = x (rows, n) W^T, W (m, n); all row-major and dense. OpenMP over row and column
// blocks when called outside a parallel region (inside one with nesting off it runs on the
// calling thread). n == 0 writes zeros. x and y must not overlap. With finish (may be null): the
// epilogue above on every element.
// With packed (may be null): pack(m, n, w) of the same, unchanged W, whose panels the call reads
// instead of packing W into scratch (filling them first where no call has; a pack of another
// layout, made at another level, is ignored).
void gemm_nt(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
             const RowFinish* finish = nullptr, const PackedWeights* packed = nullptr);
// W (m, n) in the panels gemm_nt packs at the current level (null at the scalar level, which
// packs nothing), for many calls on an unchanged W: made empty, and filled by the first calls
// that pass it (PackedPanels), which then read it like every later call.
std::shared_ptr<const PackedWeights> pack(std::int64_t m, std::int64_t n);
// The epilogue above on rows [0, rows) of y (rows, m) after the fact, on the calling thread: for
// the GEMM's scalar level and for edge cases that have no tiles.
void finish_rows(std::int64_t rows, std::int64_t m, const RowFinish& finish, float* y);

// The SIMD level gemm_nt uses: "avx512", "avx2" or "scalar".
const char* level();
// Forces a level up to the detected one ("auto" = the detected one); throws eggroll::Error for
// an unknown or unavailable level. For tests and benchmarks: every level gives the same bits.
void set_level(const char* level);
// The levels this machine runs, lowest first.
std::vector<std::string> levels();

// The rows per block of a fused forward with one row per member (cpu_float_lowrank.hpp): limited
// so that the next block's factor blocks fit a quarter of a 1 MiB L2 (fetch_budget), or whole
// blocks (whole). automatic (the default) takes fetch_budget where this core's L2 is below 2 MiB
// and whole otherwise: measured on a Zen 4 host (1 MiB L2), where one tile's rows beat 96 for the
// large model at rank 4, and on an Intel host (2 MiB), where whole 48-row blocks beat 24, 12 and 6
// at every rank (docs/results.md, thirty-fourth pass). Results do not depend on it; tests force each.
enum class FusedBlockRows { automatic, fetch_budget, whole };
void set_fused_block_rows(FusedBlockRows rule);
// Whether fused forwards here limit their blocks (the rule in force, automatic resolved).
bool fused_block_rows_limited();

// The low-rank correction of ALGORITHM.md 1.1 fused into the GEMM's store: when an element's chain
// is complete, y[i][a] = chain, then y[i][a] = fma(s_i[c], A_j[a][c], y[i][a]) for c = 0 .. r-1 in
// order, j the member of row i, s_i[c] = coef_j (x[i] B_j)[c] computed by the caller, A_j (m, r)
// the second part of member j's factor block (B (n, r) first). The separate correction kernel
// (cpu_float.hpp) performs the same operations in the same order, so both give the same bits;
// fused, y is written once instead of being read back and rewritten.
struct LowRankEpilogue {
  std::int64_t rank = 1, m = 0;
  std::int64_t rows = 0;                // rows of the call (the length of row_a)
  const float* const* row_a = nullptr;  // (rows): the row's A_j, null for an unperturbed member
  float* row_scale = nullptr;           // (rows, rank): s_i
  // true: row_a points at A_j^T (rank, m), each c's values contiguous (rank 1: A_j itself);
  // false: at A_j (m, rank) in the factor block, whose columns the store takes itself.
  bool a_by_rank = true;
  // true: rows meet a new factor block at nearly every row (one row per member), so the driver
  // fetches each tile's A values ahead of it; false: a member's rows share A, which stays cached.
  bool fetch_a_ahead = false;
  // Optional: fills row_scale (and row_a) of rows [first, last). The driver calls it for each
  // block of rows just before computing them, while those rows of x are in cache (a separate
  // pass over x before the GEMM re-reads every activation from memory), or once for all rows
  // before the GEMM when its threads share rows. Each row's values are the same either way.
  // next (null for the up-front call): where prepare may queue what the next block of rows will
  // read (their factor blocks), for the driver to fetch during this block's tiles.
  // Rank 1 with xb_in_tiles: the rows [first, tiles_last) get x B_j from the driver's tiles, which
  // read x anyway: for them prepare sets row_b[i] = B_j (null for an unperturbed row) and
  // row_scale[i] = coef_j, which the tiles turn into s_i = coef_j (x B_j), summed in the order of
  // the level's x . B (a row's bits do not depend on which of the two computed it). tiles_last ==
  // first: prepare computes every row's s_i itself.
  const std::function<void(std::int64_t first, std::int64_t last, std::int64_t tiles_last, cpu::LineQueue* next)>*
      prepare = nullptr;
  bool xb_in_tiles = false;
  const float* const* row_b = nullptr;  // (rows), with xb_in_tiles
  // Rows per block of the driver, if fewer than its own (rounded up to whole tiles): so that what prepare queues for the next block fits in cache beside this one. The
  // blocking never changes a value.
  std::int64_t block_rows = 0;
};

// ---- internals shared with the level files (cpu_sgemm_avx512.cpp, cpu_sgemm_avx2.cpp) ----
namespace detail {

// A pack (cpu_sgemm::pack): W's panels of nr outputs, panel p = (n, nr) with panel[k][c] =
// W[p nr + c][k] (zero past m), 64-byte aligned.
// It is made empty and filled by the first GEMM calls that read it, inside their own parallel
// regions: each calling thread claims panels one at a time (claim), packs them and counts them
// (packed_one), then waits until every panel is there (wait_filled). Threads of one team and
// independent callers (each thread running its own chunk of rows, as the trainer's and the
// bench's do) share the packing alike, and no call packs W a second time.
// Its memory comes from, and goes back to, a process-wide store of freed packs' memory: a
// population view's packs live for one epoch, and fresh pages for every epoch's packs were
// zeroed by the kernel on first touch (15% of the large model's forward at 256 rows an epoch).
class PackedPanels final : public PackedWeights {
 public:
  PackedPanels(int nr, std::int64_t m, std::int64_t n);
  ~PackedPanels() override;
  PackedPanels(const PackedPanels&) = delete;
  PackedPanels& operator=(const PackedPanels&) = delete;
  int nr() const { return nr_; }
  std::int64_t panels() const { return panels_; }
  float* data() const { return data_; }
  // Every panel packed (acquire: their values are visible to the caller).
  bool filled() const { return packed_.load(std::memory_order_acquire) == panels_; }
  // The next panel no thread has claimed yet, or panels() and past when all are claimed.
  std::int64_t claim() const { return claimed_.fetch_add(1, std::memory_order_relaxed); }
  // One claimed panel packed (release: its values before the count).
  void packed_one() const { packed_.fetch_add(1, std::memory_order_release); }
  // Until every panel is packed (by this thread or others).
  void wait_filled() const;
  // This pack when it is of nr-output panels of an (m, n) W, else null.
  static const PackedPanels* of(const PackedWeights* packed, int nr, std::int64_t m, std::int64_t n);

 private:
  int nr_;
  std::int64_t m_, n_, panels_;
  std::size_t bytes_;
  float* data_;
  mutable std::atomic<std::int64_t> claimed_{0}, packed_{0};
};

// Scratch for the packed W: at least n_floats floats, 64-byte aligned, owned by the calling
// thread and reused across its calls (grow-only), so concurrent callers never share one.
float* thread_buffer(std::int64_t n_floats);

// This core's L2 in bytes as glibc reads it from the CPU, 0 where unknown.
std::int64_t l2_bytes();

// Below this many multiply-adds (about 10 us on one core) a call runs on the calling thread:
// waking a team costs more than it saves.
inline constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 19;

void gemm_nt_avx512(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
                    const RowFinish* finish, const PackedWeights* packed);
// gemm_nt with the fused correction, AVX-512F level only (the caller checks the level).
void gemm_nt_lowrank_avx512(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                            const LowRankEpilogue& e, float* y, const RowFinish* finish,
                            const PackedWeights* packed);
std::shared_ptr<const PackedWeights> pack_avx512(std::int64_t m, std::int64_t n);
void gemm_nt_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
                  const RowFinish* finish, const PackedWeights* packed);
// gemm_nt with the fused correction at the AVX2 level (the caller checks that the CPU has it).
void gemm_nt_lowrank_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                          const LowRankEpilogue& e, float* y, const RowFinish* finish, const PackedWeights* packed);
std::shared_ptr<const PackedWeights> pack_avx2(std::int64_t m, std::int64_t n);

}  // namespace detail
}  // namespace eggroll::cpu_sgemm
