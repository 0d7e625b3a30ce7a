// The int8 ops of the reference and cpu backends (ALGORITHM.md section 2) as free functions, one
// namespace per backend; the Backend classes forward to them. Semantics: backend.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/core/unset_vector.hpp"

namespace eggroll::cpu {
class LineQueue;
}

namespace eggroll::reference_int8 {
  void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x, const std::int8_t* w,
           const QFactors& f, std::int8_t* y, const QAddend& add);
  void qembedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                  const std::int8_t* w, const QFactors& f, std::int8_t* y);
  void ql1_norm(const MemberRows& batch, std::int64_t d, const std::int8_t* x, const std::int8_t* w, std::int64_t w_stride,
                std::int8_t* y);
  void qadd(const MemberRows& batch, std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v,
            std::int64_t v_stride, std::int8_t* y);
  void qgru_gate(std::int64_t n, const std::int8_t* f, const std::int8_t* h, std::int8_t* g);
  void qgru_update(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h);
  void qloglik(std::int64_t rows, const std::int8_t* logits, const std::int32_t* targets, std::int32_t* ll);
  void qupdate_accumulate(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                          const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z);
  std::int64_t qapply_moves(std::int64_t n, const std::int64_t* z, std::int64_t threshold, std::int8_t* w);
}  // namespace eggroll::reference_int8

namespace eggroll::cpu_int8 {
  void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x, const std::int8_t* w,
           const QFactors& f, std::int8_t* y, const QAddend& add, const PackedWeights* packed);
  std::shared_ptr<const PackedWeights> qpack(std::int64_t m, std::int64_t n, const std::int8_t* w);
  void qembedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                  const std::int8_t* w, const QFactors& f, std::int8_t* y);
  void ql1_norm(const MemberRows& batch, std::int64_t d, const std::int8_t* x, const std::int8_t* w, std::int64_t w_stride,
                std::int8_t* y);
  void qadd(const MemberRows& batch, std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v,
            std::int64_t v_stride, std::int8_t* y);
  void qgru_gate(std::int64_t n, const std::int8_t* f, const std::int8_t* h, std::int8_t* g);
  void qgru_update(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h);
  void qgru_update_add(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h,
                       const std::int8_t* x, std::int8_t* y);
  void qloglik(std::int64_t rows, const std::int8_t* logits, const std::int32_t* targets, std::int32_t* ll);
  void qupdate_accumulate(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                          const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z);
  std::int64_t qapply_moves(std::int64_t n, const std::int64_t* z, std::int64_t threshold, std::int8_t* w);
// The SIMD level the cpu int8 kernels use ("avx512_amx", "avx512_vnni", "avx2" or "scalar"),
// chosen once at run time; set_level forces a lower one (tests, run.simd).
const char* level();
void set_level(const char* level);
// The levels this machine runs, lowest first.
std::vector<std::string> levels();
// Whether avx512_amx is among them: the CPU has AMX-INT8 and Linux granted this process the tiles.
bool amx_available();
}  // namespace eggroll::cpu_int8

// ---- cpu internals shared by the SIMD-level files (cpu_int8*.cpp) ----
namespace eggroll::cpu_int8 {

// clip(floor(acc / d)) for a divisor 1 <= d <= 8192 (D_n for every n <= 263,168), exactly, by
// multiply-high: acc is first clamped to [-128 d, 128 d) (which cannot change the clipped
// result), then u = acc + 128 d in [0, 256 d) gives floor(u / d) = (u * magic) >> 34 with
// magic = ceil(2^34 / d), exact because u (magic d - 2^34) < 256 d^2 <= 2^34.
struct FloorClip {
  static constexpr int kShift = 34;
  std::int64_t d = 1;
  std::uint64_t magic = std::uint64_t{1} << kShift;

  explicit FloorClip(std::int64_t divisor) : d(divisor), magic(((std::uint64_t{1} << kShift) + divisor - 1) / divisor) {}
  std::int8_t operator()(std::int64_t acc) const {
    const std::int64_t lo = -128 * d, hi = 128 * d - 1;
    const std::int64_t clamped = acc < lo ? lo : (acc > hi ? hi : acc);
    const std::uint64_t u = static_cast<std::uint64_t>(clamped - lo);
    const std::int64_t q = static_cast<std::int64_t>((u * magic) >> kShift) - 128;
    return static_cast<std::int8_t>(q < -127 ? -127 : q);
  }
};

namespace detail {

// Below this much work (multiply-accumulates, or elements for the elementwise ops) an op runs on
// the calling thread: starting an OpenMP team costs more than the work, and a thread count never
// changes results.
inline constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 18;

struct PackedW;

// One qmm call as the level kernels receive it (shapes as in backend.hpp).
struct QmmArgs {
  MemberRows batch;
  std::int64_t m = 0, n = 0;
  const std::int8_t* x = nullptr;  // (rows, n)
  const std::int8_t* w = nullptr;  // (m, n)
  const QFactors* f = nullptr;
  std::int8_t* y = nullptr;        // (rows, m)
  FloorClip div{1};
  QAddend add;
  const PackedW* packed = nullptr;  // W packed for the AVX-512 level, or null
};

// W packed for the AVX-512 VNNI qmm: (m_blocks, n_groups, 16, 4) bytes W[16 b + l][4 g + q] and
// the +128 offset's correction -128 sum_k W[a][k] (cpu_int8_avx512.cpp).
struct PackedW final : PackedWeights {
  std::int64_t m = 0, n = 0;
  // Left unset when made (the pack writes every value): a view packs each matrix once per epoch,
  // and clearing the buffers first cost more than packing them.
  UnsetVector<std::int8_t> wp;
  UnsetVector<std::int32_t> bias;
};
std::shared_ptr<const PackedW> pack_avx512_vnni(std::int64_t m, std::int64_t n, const std::int8_t* w);

// Member j's factors: B (n, r), A (m, r) and its sign, or sign 0 when unperturbed.
struct MemberFactors {
  const std::int8_t* b = nullptr;
  const std::int8_t* a = nullptr;
  int sign = 0;
};
// Inline: the kernels ask for it per row.
inline MemberFactors member_factors(const QFactors& f, std::int64_t member) {
  MemberFactors mf;
  if (f.blocks == nullptr || f.sign == nullptr || f.sign[member] == 0 || f.blocks[member] == nullptr) return mf;
  mf.b = f.blocks[member];
  mf.a = mf.b + f.n * f.rank;
  mf.sign = f.sign[member] > 0 ? 1 : -1;
  return mf;
}

// corr[a] = s floor(((x B) . A[a]) / 2^shift) for one row x (n), a = 0 .. m-1; scratch holds r values.
void lowrank_row_scalar(std::int64_t m, std::int64_t n, std::int64_t r, int shift, const MemberFactors& mf,
                        const std::int8_t* x, std::int64_t* scratch, std::int64_t* corr);

void qmm_scalar(const QmmArgs& args);
void qmm_avx2(const QmmArgs& args);
// amx: the tiles' accumulators computed on AMX tiles (cpu_int8_amx.hpp), the rest as without.
void qmm_avx512_vnni(const QmmArgs& args, bool amx);
// y[i] = clip(floor(t[i] / d)) by the AVX-512 level's output writer (its ByteWriter), for the tests
// that hold it to FloorClip on every value that matters; CPUs with the avx512_vnni level only.
void floor_clip_avx512(std::int64_t d, const std::int32_t* t, std::int64_t count, std::int8_t* y);

// The discrete update's pairs as the level kernels receive them: the j-th rank-1 term
// (j = k r + c over the pairs with d != 0) contributes coef[j] * Bp-column j, coef[j] = d_k A_k[a][c].
// bp: int16 in blocks of kBpCols B rows, (n_pad / kBpCols, n_jp = ceil(n_terms / 2), kBpCols, 2),
// Bp[jp][b][e] = B of term 2 jp + e at row b (zero past n and for a missing last term; n_pad = n
// rounded up to 64); coef: (m, 2 n_jp) int16. z (m, n) += the sum, int32 partial sums over at most
// chunk_jp term pairs at a time. A tile of columns reads its blocks' slices as contiguous runs: in
// rows of n_pad * 2 values every term pair's line fell into the same few cache sets at n >= 1024,
// and the slice was reread from memory.
struct UpdateArgs {
  static constexpr std::int64_t kBpCols = 16;
  std::int64_t m = 0, n = 0, n_pad = 0, n_jp = 0, chunk_jp = 1;
  const std::int16_t* bp = nullptr;
  const std::int16_t* coef = nullptr;
  std::int64_t* z = nullptr;
  // &Bp[jp][b][0]; the kBpCols - b % kBpCols rows from b follow it, two values a row
  std::int64_t bp_offset(std::int64_t jp, std::int64_t b) const {
    return ((b / kBpCols) * n_jp + jp) * kBpCols * 2 + (b % kBpCols) * 2;
  }
  const std::int16_t* bp_at(std::int64_t jp, std::int64_t b) const { return bp + bp_offset(jp, b); }
};
// y rows [i0, i1) of a qmm = clip(y + its addend): the fused qadd, which every level runs on
// rows it has just stored (nothing when the addend is empty).
void add_addend(const QmmArgs& g, std::int64_t i0, std::int64_t i1);
// Queues the lines that rows [i0, i1) of a qmm read and the hardware prefetchers do not see
// coming: their addend rows and vectors and each perturbed member's factor block (once per block
// met). The SIMD levels' drivers fetch them a few a tile during the block before.
void queue_block(const QmmArgs& g, std::int64_t i0, std::int64_t i1, cpu::LineQueue& queue);
// y = clip(a + b + v) over d values (qadd's row at the scalar level; y may be a); b, v may be null.
void add_row_scalar(std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v, std::int8_t* y);

// One row of ql1_norm and of qadd (backend.hpp) at the AVX-512 level (the scalar loops in
// cpu_int8.cpp are the other levels); b and v may be null.
void ql1_norm_row_avx512(std::int64_t d, const std::int8_t* x, const std::int8_t* w, std::int8_t* y);
void qadd_row_avx512(std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v, std::int8_t* y);

// qgru_gate and qgru_update (backend.hpp) over values [begin, end) at the AVX-512 level.
void qgru_gate_avx512(std::int64_t begin, std::int64_t end, const std::int8_t* f, const std::int8_t* h, std::int8_t* g);
void qgru_update_avx512(std::int64_t begin, std::int64_t end, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h);
// qapply_moves (backend.hpp) over values [begin, end) at the AVX-512 level, for a threshold >= 1;
// returns how many changed.
std::int64_t qapply_moves_avx512(std::int64_t begin, std::int64_t end, const std::int64_t* z, std::int64_t threshold,
                                 std::int8_t* w);
// One row of a perturbed rank-1 qembedding at the AVX-512 level: a = A_j[t][0], b = B_j (d).
void qembedding_rank1_row_avx512(std::int64_t d, const std::int8_t* w, std::int8_t a, const std::int8_t* b, int sign,
                                 int shift, std::int8_t* y);

// One SIMD level's update tile: z rows [a0, a0 + its rows) x columns [b0, b0 + the level's
// width) += the term pairs [j0, j1).
using UpdateTileFn = void (*)(const UpdateArgs&, std::int64_t a0, std::int64_t b0, std::int64_t j0, std::int64_t j1);
// Runs a level's tiles over z (tiles[k] has k + 1 rows, k < tile_rows; tile_cols columns each),
// column blocks outermost so that a thread's consecutive tiles reread one cached slice of Bp,
// each tile over the term pairs in chunks of chunk_jp. Plain C++: the levels' files share it.
void run_update_tiles(const UpdateArgs& g, int tile_rows, std::int64_t tile_cols, const UpdateTileFn* tiles);
void update_scalar(const UpdateArgs& args);
void update_avx2(const UpdateArgs& args);
void update_avx512_vnni(const UpdateArgs& args);
// Runs the update kernel of the current level.
void update_dispatch(const UpdateArgs& args);
// qupdate_accumulate (backend.hpp) at the AVX-512 VNNI level when every d is -1, 0 or 1 (false,
// and nothing done, otherwise), and its dispatch (false at the other levels).
bool update_signs_avx512_vnni(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                              const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z);
// The same on AMX tiles (level avx512_amx) at ranks 1, 2, 4, 8 and 16 (false, and nothing done, otherwise).
bool update_signs_amx(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                      const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z);
// The same at the AVX2 level, at rank 1 and ranks that are multiples of 4, with every |A| <= 64
// (false, and nothing done, otherwise).
bool update_signs_avx2(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                       const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z);
bool update_signs_dispatch(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                           const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z);
// qupdate_apply (backend.hpp) at the AVX-512 VNNI level at ranks 4, 8 and 16 when every d is -1, 0
// or 1: the step applied to w in the tiles' last pass, *moved the values changed (false, and
// nothing done, otherwise); and its dispatch (false at the other levels, AMX included).
bool apply_signs_avx512_vnni(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                             const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                             std::int8_t* w, std::int64_t* moved);
bool apply_signs_dispatch(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                          const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                          std::int8_t* w, std::int64_t* moved);
// Rows [a0, a1) of the update's coef (row stride width, from the block's first term) for `pairs`
// whole pairs of rank r in 1, 4, 8, 16: d_q A_q[a][c] at term r q + c, A_q (m, r) row-major at
// a_of[q], d_q = dk[q]. The AVX2 kernel serves the AVX2 and AVX-512 levels; the dispatch returns
// false (nothing written) at the scalar level and at other ranks, where the caller's loop does it.
void pack_coef_pairs_avx2(std::int64_t r, const std::int8_t* const* a_of, const std::int16_t* dk, std::int64_t pairs,
                          std::int64_t a0, std::int64_t a1, std::int64_t width, std::int16_t* coef);
// Bp's term pairs jp0 .. jp0 + r / 2 - 1: the columns of one pair's B (n, r) row-major at b, for an
// even rank (term pair e is columns 2 e, 2 e + 1), zero past n. The AVX2 kernel (ranks 2, 4, 8,
// 16) serves the AVX2 and AVX-512 levels; pack_b_pairs_available says where it runs.
void pack_b_pair_avx2(std::int64_t r, const std::int8_t* b, std::int64_t jp0, const UpdateArgs& g, std::int16_t* bp);
bool pack_b_pairs_available(std::int64_t r);
// Bp's term pair jp at rank 1, whose terms' B columns are b0 and b1 (n values each; b1 null for a
// missing last term, zeros): its whole blocks of kBpCols rows; returns the first row not written
// (the caller's loop does the rest). The AVX2 kernel serves the AVX2 and AVX-512 levels; the
// dispatch writes nothing and returns 0 at the scalar level.
std::int64_t pack_b_rank1_avx2(const std::int8_t* b0, const std::int8_t* b1, std::int64_t jp, const UpdateArgs& g,
                               std::int16_t* bp);
std::int64_t pack_b_rank1_dispatch(const std::int8_t* b0, const std::int8_t* b1, std::int64_t jp, const UpdateArgs& g,
                                   std::int16_t* bp);
bool pack_coef_pairs_dispatch(std::int64_t r, const std::int8_t* const* a_of, const std::int16_t* dk,
                              std::int64_t pairs, std::int64_t a0, std::int64_t a1, std::int64_t width,
                              std::int16_t* coef);

}  // namespace detail
}  // namespace eggroll::cpu_int8
