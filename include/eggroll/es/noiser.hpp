// Noisers (ALGORITHM.md 1.1, 1.5) and the population view that forward passes read.
//
// A Noiser decides how member i's parameters differ from the shared ones inside each op
// (matmul, vector, embedding lookup) and how shaped fitness becomes a gradient estimate.
// A PopulationView is one epoch's range of members [begin, end); it owns the epoch-scoped
// factor cache, so a task that calls forward many times per epoch reuses each pair's factors.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/core/tensor.hpp"
#include "eggroll/core/unset_vector.hpp"
#include "eggroll/es/shaping.hpp"
#include "eggroll/io/config.hpp"
#include "eggroll/model/params.hpp"
#include "eggroll/model/weight_packs.hpp"
#include "eggroll/noise/noise.hpp"

namespace eggroll {

class Noiser;

// A view's noise caches: left unset by resize (the cache fills every value right after; clearing a
// buffer of the whole population's factors first would double its memory traffic), and aligned
// for the kernels' loads (UnsetVector).
template <typename T>
using NoiseValues = UnsetVector<T>;

// The memory of finished views' noise caches, kept by their noiser for the next views: an
// epoch's views ask for the same sizes as the last epoch's, and fresh memory costs a page fault
// per 4 KiB at first touch (the large model's factors at rank 4: 150 MB an epoch, which took
// about as long to fault in as to generate). Holds at most kKept buffers of each type.
class SpareNoiseBuffers {
 public:
  static constexpr std::size_t kKept = 16;
  // A buffer of n values (unset): the smallest kept one that holds n, else a new one.
  template <typename T>
  NoiseValues<T> take(std::size_t n);
  // Keeps v's memory for a later take (the smallest buffer goes when there are too many).
  template <typename T>
  void give(NoiseValues<T>&& v);

 private:
  template <typename T>
  std::vector<NoiseValues<T>>& kept();
  std::mutex mutex_;
  std::vector<NoiseValues<float>> floats_;
  std::vector<NoiseValues<std::uint32_t>> words_;
  std::vector<NoiseValues<std::int8_t>> bytes_;
};

class PopulationView {
 public:
  PopulationView(const Noiser& noiser, std::int64_t epoch, double sigma, std::int64_t begin, std::int64_t end);
  ~PopulationView();  // gives its caches' memory to the noiser's spares
  PopulationView(const PopulationView&) = delete;
  PopulationView& operator=(const PopulationView&) = delete;

  const Noiser& noiser() const { return *noiser_; }
  std::int64_t epoch() const { return epoch_; }
  std::uint64_t noise_epoch() const { return noise_epoch_; }
  double sigma() const { return sigma_; }
  std::int64_t begin() const { return begin_; }
  std::int64_t end() const { return end_; }
  std::int64_t size() const { return end_ - begin_; }
  std::int64_t pair_begin() const { return pair_begin_; }
  std::int64_t pair_end() const { return pair_end_; }

  // len normal values of (param, pair, tag), pair in [pair_begin, pair_end): the pair's slice of
  // the noise table itself (tag factors, es.noise_source = table), or generated once per view for
  // all its pairs. The pointer stays valid for the view's lifetime.
  const float* normals(const Param& p, std::int64_t pair, NoiseTag tag, std::int64_t len);
  const std::uint32_t* bits(const Param& p, std::int64_t pair, NoiseTag tag, std::int64_t len);
  // The int8 noise of ALGORITHM.md 2.2, from the int8 noise table or generated once per view.
  const std::int8_t* int8s(const Param& p, std::int64_t pair, NoiseTag tag, std::int64_t len);
  // The same for count consecutive pairs from pair_first, taking the lock once (a forward pass
  // asks for every member's block of every matrix): out[k] = the block of pair pair_first + k.
  // With present = false, generated values are not made present: the pointers are where they
  // will be, and fill_normals makes them present (a forward that generates each block of rows'
  // factors just before it reads them). Table slices are always present. Returns whether every
  // pair of the range is present on return.
  bool normals_range(const Param& p, NoiseTag tag, std::int64_t len, std::int64_t pair_first, std::int64_t count,
                     const float** out, bool present = true);
  // Generates the values of count pairs from pair_first that are not present yet (others'
  // are left as they are; several threads may fill overlapping ranges at once), in parallel
  // when there are many and this is not inside a parallel region.
  void fill_normals(const Param& p, NoiseTag tag, std::int64_t len, std::int64_t pair_first, std::int64_t count);
  void int8s_range(const Param& p, NoiseTag tag, std::int64_t len, std::int64_t pair_first, std::int64_t count,
                   const std::int8_t** out);
  std::int64_t cached_bytes() const;
  // Matrix w in backend's qmm layout (Backend::qpack), packed on first use and kept for the
  // view's lifetime (parameters do not change within an epoch); null when the backend has none.
  // Safe to call from several threads.
  const PackedWeights* qpacked(const Param& w, Backend& backend);
  // Matrix w (float) in backend's layout for its linear (Backend::pack), the same way.
  const PackedWeights* packed(const Param& w, Backend& backend);
  // The members' perturbed copies of a vector parameter, made by make() on first use and kept for
  // the view's lifetime (parameters do not change within an epoch).
  // Safe to call from several threads (as are normals, bits and int8s).
  template <typename Make>
  const Tensor& member_vectors(const Param& p, Make make) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    auto it = vectors_.find(p.id);
    if (it == vectors_.end()) it = vectors_.emplace(p.id, make()).first;
    return it->second;
  }

 private:
  struct Key {
    std::uint64_t param;
    NoiseTag tag;
    bool operator<(const Key& o) const { return param != o.param ? param < o.param : tag < o.tag; }
  };
  template <typename T>
  using Values = NoiseValues<T>;
  // One (param, tag)'s values for every pair of the view, len per pair, and which are present:
  // generated on first use, all of them at once (in parallel), or by ranges (fill_normals).
  template <typename T>
  struct Cache {
    Values<T> values;
    std::unique_ptr<std::atomic<std::uint8_t>[]> state;  // per pair: kEmpty, kFilling, kPresent
    std::atomic<bool> complete{false};                   // every pair present
    std::int64_t len = 0;
  };
  template <typename T>
  using Caches = std::map<Key, Cache<T>>;

  template <typename T>
  Cache<T>& cache_of(Caches<T>& caches, const Param& p, NoiseTag tag, std::int64_t len);
  template <typename T, typename Fill>
  void fill_pairs(Cache<T>& c, std::int64_t first, std::int64_t count, Fill fill);
  template <typename T, typename Fill>
  const T* cached(Caches<T>& caches, const Param& p, std::int64_t pair, NoiseTag tag, std::int64_t len, Fill fill);
  template <typename T, typename StreamFill>
  auto filler(const Param& p, NoiseTag tag, std::int64_t len, StreamFill stream_fill) const;
  template <typename T, typename One, typename Fill>
  bool range(Caches<T>& caches, bool from_table, const Param& p, NoiseTag tag, std::int64_t len,
             std::int64_t pair_first, std::int64_t count, const T** out, bool present, One one, Fill fill);
  void check_pair(std::int64_t pair) const;

  const Noiser* noiser_;
  std::int64_t epoch_;
  std::uint64_t noise_epoch_;
  double sigma_;
  std::int64_t begin_, end_, pair_begin_, pair_end_;
  Caches<float> normals_;
  Caches<std::uint32_t> bits_;
  Caches<std::int8_t> int8s_;
  std::map<std::uint64_t, Tensor> vectors_;
  WeightPacks packs_;  // qpacked, packed
  mutable std::recursive_mutex mutex_;
};

// What a forward pass needs: the backend, and the members (null view = the unperturbed model,
// plain inference). With a view, x holds rows_per_member consecutive rows per member.
// A context may cover a sub-range of the view's members ([member_begin, member_begin +
// n_members) relative to the view; n_members < 0 = to the view's end), so that threads can run
// the same forward on disjoint members of one view.
struct ForwardContext {
  Backend& backend;
  PopulationView* view = nullptr;
  std::int64_t rows_per_member = 1;
  std::int64_t member_begin = 0;
  std::int64_t n_members = -1;
  // x holds only rows_per_member rows, read by every member alike (a minibatch all members share):
  // linear layers compute x W^T once and add each member's low-rank correction; outputs still
  // have members x rows_per_member rows. Tasks set it only for models that accept it
  // (Model::accepts_shared_input), whose first op is a linear layer.
  bool shared_input = false;
  // Packed weights for the matmuls of unperturbed parameters (all of them without a view), kept
  // across calls; null: a view's own, or packed within each call without one.
  WeightPacks* packs = nullptr;
  // Matrix w in the backend's layout for linear (float) or qmm (int8): the caller's packs, else
  // the view's, else null (the call packs W itself).
  const PackedWeights* packed(const Param& w) const;
  const PackedWeights* qpacked(const Param& w) const;
  std::int64_t members() const { return !view ? 0 : (n_members < 0 ? view->size() - member_begin : n_members); }
  // The global index of the context's j-th member.
  std::int64_t member(std::int64_t j) const { return view->begin() + member_begin + j; }
  MemberRows batch() const { return {members(), rows_per_member}; }
};

// Runs fn on disjoint, contiguous member ranges of ctx, one per thread, each with its own
// ForwardContext (kernels inside run on that thread alone). A member's result does not depend
// on the split (contract 2). An exception thrown by fn is rethrown on the calling thread.
void for_member_blocks(const ForwardContext& ctx, const std::function<void(ForwardContext&)>& fn);
// The same for items [0, n) without a view: fn(first, count) on disjoint, contiguous ranges, one
// per thread (none when n is 0).
void for_blocks(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn);

enum class NoiseSource { generator, table };

class Noiser {
 public:
  Noiser(const EsConfig& es, std::uint64_t seed);
  virtual ~Noiser() = default;
  virtual std::string name() const = 0;

  std::uint64_t seed() const { return seed_; }
  int rank() const { return rank_; }
  bool antithetic() const { return antithetic_; }
  std::int64_t population() const { return population_; }
  std::int64_t pair_of(std::int64_t member) const { return antithetic_ ? member / 2 : member; }
  std::int64_t n_pairs() const { return antithetic_ ? population_ / 2 : population_; }
  float sign_of(std::int64_t member) const { return antithetic_ && (member & 1) ? -1.0f : 1.0f; }
  std::uint64_t noise_epoch(std::int64_t epoch) const;
  const NoiseTable* table() const { return table_.get(); }
  const Int8NoiseTable* int8_table() const { return int8_table_.get(); }
  // Integer noisers (q_eggroll) perturb int8 parameters and update them by the discrete z-test.
  virtual bool integer() const { return false; }

  // Does member i carry noise? (eggroll_baseline keeps two baselines per group unperturbed.)
  virtual bool perturbs(std::int64_t member) const { return true; }
  // Does the noiser perturb anything at all? (noop: no; then forward is plain inference.)
  virtual bool active() const { return true; }

  // y (rows, m) = x (rows, n) W_i^T for the members of ctx.view (non-null; y allocated by the
  // caller), then the layer's epilogue `after` on every row (Backend::linear: its bias stride
  // counts the context's members, from ctx.member_begin), which the backend may fuse.
  virtual void matmul(ForwardContext& ctx, const Param& w, const float* x, float* y, const RowEpilogue& after) const;
  void matmul(ForwardContext& ctx, const Param& w, const float* x, float* y) const { matmul(ctx, w, x, y, {}); }
  // The same for x (rows_per_member, n) shared by every member (ctx.shared_input): y (members x
  // rows_per_member, m), bit-identical to matmul on x repeated once per member.
  virtual void matmul_shared(ForwardContext& ctx, const Param& w, const float* x, float* y,
                             const RowEpilogue& after) const;
  void matmul_shared(ForwardContext& ctx, const Param& w, const float* x, float* y) const {
    matmul_shared(ctx, w, x, y, {});
  }
  // (n_members, numel) perturbed copies v_i of a vector parameter.
  virtual Tensor vectors(PopulationView& view, const Param& v) const;
  // Embedding rows: y (rows, d) = W_i[tokens[row]] for the member of each row.
  virtual void embedding(ForwardContext& ctx, const Param& w, const std::int32_t* tokens, float* y) const;

  // Shaped fitness from raw scores (ALGORITHM.md 1.3).
  virtual std::vector<double> shape(const std::vector<double>& scores, Shaping shaping, std::int64_t group_size) const;
  // grad += the descent direction -sqrt(N) g from the view's members (fitness indexed by global
  // member). Summed over pairs in index order, so views in increasing order give the same bits
  // as one view over the whole population.
  virtual void accumulate_gradient(Backend& backend, PopulationView& view, const Param& p,
                                   const std::vector<double>& fitness, Tensor& grad) const;
  // ---- int8 (integer noisers; the float noisers throw) ----
  // y (rows, m) = MM(x, W_i) of ALGORITHM.md 2.1 / 2.3 for the members of ctx.view, then
  // clip(y + add) when the addend is not empty (Backend::qmm).
  virtual void qmatmul(ForwardContext& ctx, const Param& w, const std::int8_t* x, std::int8_t* y,
                       const QAddend& add) const;
  // (n_members, numel) perturbed int8 vectors: clip(v + s_i floor(e1 e2 / 2^(4 + sigma_shift))).
  virtual Tensor qvectors(PopulationView& view, const Param& v) const;
  virtual void qembedding(ForwardContext& ctx, const Param& w, const std::int32_t* tokens, std::int8_t* y) const;
  // A pair's int8 factor block (B (n, r) then A (m, r)), and a vector's e1 then e2 (2 numel).
  const std::int8_t* qfactor_block(PopulationView& view, const Param& p, std::int64_t pair) const;
  // Every pair's int8 factor block of the view, in order (one lock for all of them).
  std::vector<const std::int8_t*> qfactor_blocks(PopulationView& view, const Param& p) const;
  const std::int8_t* qvector_noise(PopulationView& view, const Param& p, std::int64_t pair) const;
  // The shift S of 2.3: 4 + sigma_shift + k_r for matrices, 4 + sigma_shift for vectors.
  int qshift(const Param& p) const;
  int sigma_shift() const { return sigma_shift_; }

  // Global-norm clip to apply to the gradient (0 = none).
  virtual double clip_norm(double configured) const { return configured; }
  // Generates every pair's noise of every perturbed parameter now, in parallel over pairs (call
  // it outside parallel regions). Not needed before a forward: the forward generates what it
  // reads, float factors a block of rows at a time inside the fused kernel (Noiser::matmul), the
  // rest by the ranges its threads ask for; for timing an update without its noise, say.
  virtual void prefetch(PopulationView& view, const ParamStore& params) const;
  // Bytes of noise a view holds per pair for these parameters (sizes the member chunks).
  virtual std::int64_t bytes_per_pair(const ParamStore& params) const;
  // Where views keep their caches' memory between epochs (views point to their noiser anyway).
  SpareNoiseBuffers& spare_buffers() const { return *spares_; }

 protected:
  // The rank-r factor blocks of a low-rank parameter (B (n, r) then A (m, r)) of every pair of
  // the view, in order (one lock for all of them: a lock per pair was a visible part of a small
  // model's update).
  std::vector<const float*> factor_blocks(PopulationView& view, const Param& p) const;
  // Each member's factor block of the context (one lock for all of them); with present = false,
  // where the values will be (PopulationView::normals_range), and *all_present (when given) says
  // whether they are there already.
  std::vector<const float*> member_blocks(const ForwardContext& ctx, const Param& p, bool present = true,
                                          bool* all_present = nullptr) const;
  std::vector<const std::int8_t*> qmember_blocks(const ForwardContext& ctx, const Param& p) const;
  // matmul_shared for noisers without a low-rank forward: x repeated per member, then matmul.
  void matmul_repeated(ForwardContext& ctx, const Param& w, const float* x, float* y, const RowEpilogue& after) const;
  // coef_j = s_j sigma / sqrt(r) per member of the context, 0 for unperturbed members.
  std::vector<float> member_coefs(const ForwardContext& ctx) const;
  // Weight of each pair of the view in the update: sum over its members of f_i s_i.
  std::vector<double> pair_weights(const PopulationView& view, const std::vector<double>& fitness) const;
  void accumulate_vector_gradient(PopulationView& view, const Param& p, const std::vector<double>& fitness,
                                  Tensor& grad) const;

  std::uint64_t seed_;
  int rank_;
  bool antithetic_;
  std::int64_t population_;
  std::int64_t noise_reuse_;
  bool fixed_noise_;
  std::int64_t group_size_;
  int sigma_shift_;
  std::shared_ptr<NoiseTable> table_;
  std::shared_ptr<Int8NoiseTable> int8_table_;
  std::shared_ptr<SpareNoiseBuffers> spares_ = std::make_shared<SpareNoiseBuffers>();
};

std::unique_ptr<Noiser> make_noiser(const EsConfig& es, std::uint64_t seed);

}  // namespace eggroll
