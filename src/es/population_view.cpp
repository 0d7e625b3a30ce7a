// PopulationView: an epoch's member range and its epoch-scoped noise cache.
#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "eggroll/es/noiser.hpp"

namespace eggroll {

PopulationView::PopulationView(const Noiser& noiser, std::int64_t epoch, double sigma, std::int64_t begin,
                               std::int64_t end)
    : noiser_(&noiser), epoch_(epoch), noise_epoch_(noiser.noise_epoch(epoch)), sigma_(sigma),
      begin_(begin), end_(end) {
  check(0 <= begin && begin <= end && end <= noiser.population(), "population view [", begin, ", ", end,
        ") is outside the population of ", noiser.population(), " members");
  pair_begin_ = begin == end ? 0 : noiser.pair_of(begin);
  pair_end_ = begin == end ? 0 : noiser.pair_of(end - 1) + 1;
}

// Below this many values a cache is filled on the calling thread: about 40 us of generation, less
// than waking a team of threads that sleep between epochs costs on a virtual machine (a small
// model's epoch fills several such caches).
constexpr std::int64_t kParallelFillValues = std::int64_t{1} << 17;

// The cached values of (param, tag) for every pair of the view, filled on first use by fill(pair,
// out) (len values each), in parallel over pairs when there are many; returns the pair's values.
template <typename T, typename Fill>
const T* PopulationView::cached(std::map<Key, Values<T>>& cache, const Param& p, std::int64_t pair, NoiseTag tag,
                                std::int64_t len, Fill fill) {
  auto& values = cache[Key{p.id, tag}];
  const std::int64_t n_pairs = pair_end_ - pair_begin_;
  if (values.empty()) {
    values.resize(static_cast<std::size_t>(n_pairs * len));
    if (n_pairs * len < kParallelFillValues || omp_get_level() > 0 || omp_get_max_threads() == 1) {
      for (std::int64_t k = 0; k < n_pairs; ++k) fill(pair_begin_ + k, values.data() + k * len);
    } else {
#pragma omp parallel for schedule(static)
      for (std::int64_t k = 0; k < n_pairs; ++k) fill(pair_begin_ + k, values.data() + k * len);
    }
  }
  check(static_cast<std::int64_t>(values.size()) == n_pairs * len, "noise of parameter '", p.name,
        "' requested with two lengths in one view");
  return values.data() + (pair - pair_begin_) * len;
}

// A fill(pair, out) of len values from the pair's stream.
template <typename T, typename StreamFill>
auto PopulationView::filler(const Param& p, NoiseTag tag, std::int64_t len, StreamFill stream_fill) const {
  const std::uint64_t seed = noiser_->seed(), epoch = noise_epoch_, id = p.id;
  return [=](std::int64_t pair, T* out) {
    stream_fill(noise_stream(seed, id, epoch, static_cast<std::uint64_t>(pair), tag), 0, static_cast<std::uint64_t>(len), out);
  };
}

// The pair's slice of the noise table (ALGORITHM.md 1.6) when there is one and the tag is factors,
// else null. Read in place: a copy into the view would write and read every value once more, and
// the slices are long runs at random places that the hardware prefetchers follow (the kernels
// fetch ahead where they read across several members: Blocked::prefetch_a). The table lies on
// huge pages, so its random offsets cost no more TLB misses than one contiguous block would.
template <typename Table>
static auto table_slice(const Table* table, const Param& p, std::uint64_t epoch, std::int64_t pair, NoiseTag tag,
                        std::int64_t len) -> decltype(table->data()) {
  if (table == nullptr || tag != NoiseTag::factors) return nullptr;
  return table->slice(p.id, epoch, static_cast<std::uint64_t>(pair), static_cast<std::uint64_t>(len));
}

void PopulationView::check_pair(std::int64_t pair) const {
  check(pair >= pair_begin_ && pair < pair_end_, "pair ", pair, " is outside the view's pairs [", pair_begin_,
        ", ", pair_end_, ")");
}

const float* PopulationView::normals(const Param& p, std::int64_t pair, NoiseTag tag, std::int64_t len) {
  check_pair(pair);
  if (const float* slice = table_slice(noiser_->table(), p, noise_epoch_, pair, tag, len)) return slice;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return cached(normals_, p, pair, tag, len, filler<float>(p, tag, len, fill_normal));
}

const std::uint32_t* PopulationView::bits(const Param& p, std::int64_t pair, NoiseTag tag, std::int64_t len) {
  check_pair(pair);
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return cached(bits_, p, pair, tag, len, filler<std::uint32_t>(p, tag, len, fill_bits));
}

const std::int8_t* PopulationView::int8s(const Param& p, std::int64_t pair, NoiseTag tag, std::int64_t len) {
  check_pair(pair);
  if (const std::int8_t* slice = table_slice(noiser_->int8_table(), p, noise_epoch_, pair, tag, len)) return slice;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return cached(int8s_, p, pair, tag, len, filler<std::int8_t>(p, tag, len, fill_int8));
}

// Generated values lie one pair after another in the cache (cached), so a range is one lookup;
// table slices are looked up pair by pair.
template <typename T, typename One>
void PopulationView::range(const Param& p, NoiseTag tag, std::int64_t len, std::int64_t pair_first, std::int64_t count,
                           bool from_table, One one, const T** out) {
  if (count <= 0) return;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  check_pair(pair_first + count - 1);
  if (from_table) {
    for (std::int64_t k = 0; k < count; ++k) out[k] = one(pair_first + k);
    return;
  }
  const T* first = one(pair_first);
  for (std::int64_t k = 0; k < count; ++k) out[k] = first + k * len;
}

void PopulationView::normals_range(const Param& p, NoiseTag tag, std::int64_t len, std::int64_t pair_first,
                                   std::int64_t count, const float** out) {
  range(p, tag, len, pair_first, count, noiser_->table() != nullptr && tag == NoiseTag::factors,
        [&](std::int64_t pair) { return normals(p, pair, tag, len); }, out);
}

void PopulationView::int8s_range(const Param& p, NoiseTag tag, std::int64_t len, std::int64_t pair_first,
                                 std::int64_t count, const std::int8_t** out) {
  range(p, tag, len, pair_first, count, noiser_->int8_table() != nullptr && tag == NoiseTag::factors,
        [&](std::int64_t pair) { return int8s(p, pair, tag, len); }, out);
}

std::int64_t PopulationView::cached_bytes() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::int64_t n = 0;
  for (auto& [k, v] : normals_) n += static_cast<std::int64_t>(v.size() * sizeof(float));
  for (auto& [k, v] : bits_) n += static_cast<std::int64_t>(v.size() * sizeof(std::uint32_t));
  for (auto& [k, v] : int8s_) n += static_cast<std::int64_t>(v.size());
  return n;
}

const QPacked* PopulationView::qpacked(const Param& w, Backend& backend) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = qpacked_.find(w.id);
  if (it == qpacked_.end()) it = qpacked_.emplace(w.id, backend.qpack(w.rows(), w.cols(), w.value.data<std::int8_t>())).first;
  return it->second.get();
}

void for_blocks(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min<std::int64_t>(omp_get_max_threads(), n));
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(blocks))
  for (std::int64_t k = 0; k < blocks; ++k) {
    try {
      fn(n * k / blocks, n * (k + 1) / blocks - n * k / blocks);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

void for_member_blocks(const ForwardContext& ctx, const std::function<void(ForwardContext&)>& fn) {
  const auto run = [&](std::int64_t first, std::int64_t count) {
    ForwardContext block = ctx;
    block.member_begin = ctx.member_begin + first;
    block.n_members = count;
    fn(block);
  };
  if (ctx.members() == 0) return run(0, 0);  // one empty block, as for any other count
  for_blocks(ctx.members(), run);
}

}  // namespace eggroll
