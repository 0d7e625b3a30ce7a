// WeightPacks (weight_packs.hpp): one pack per matrix, made by the first thread that asks.
#include "eggroll/model/weight_packs.hpp"

#include <thread>

namespace eggroll {
namespace {
constexpr std::uint8_t kEmpty = 0, kFilling = 1, kPresent = 2;
}

const PackedWeights* WeightPacks::qpacked(const Param& w, Backend& backend) {
  const std::int8_t* values = w.value.data<std::int8_t>();
  return get(w, values, [&] { return backend.qpack(w.rows(), w.cols(), values); });
}

const PackedWeights* WeightPacks::packed(const Param& w, Backend& backend) {
  const float* values = w.value.data<float>();
  return get(w, values, [&] { return backend.pack(w.rows(), w.cols(), values); });
}

template <class Make>
const PackedWeights* WeightPacks::get(const Param& w, const void* values, Make make) {
  Packing* entry = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entry = &packs_[Key{w.id, values}];  // std::map nodes stay where they are
  }
  // One thread packs; the others wait for it by polling, not on a lock: a thread put to sleep
  // on a lock woke tens of microseconds after the pack (several percent of a small model's forward
  // on a virtual machine). Why one copy and not one per thread: weight_packs.hpp.
  while (true) {
    std::uint8_t was = kEmpty;
    if (entry->state.compare_exchange_strong(was, kFilling, std::memory_order_acquire)) {
      try {
        entry->packed = make();
      } catch (...) {
        entry->state.store(kEmpty, std::memory_order_release);  // a waiting thread then packs it itself
        throw;
      }
      entry->state.store(kPresent, std::memory_order_release);
      return entry->packed.get();
    }
    while ((was = entry->state.load(std::memory_order_acquire)) == kFilling) std::this_thread::yield();
    if (was == kPresent) return entry->packed.get();
  }
}

void WeightPacks::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  packs_.clear();
}

std::size_t WeightPacks::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return packs_.size();
}

}  // namespace eggroll
