// WeightPacks: weight matrices in a backend's own layout (Backend::qpack for int8 matrices,
// Backend::pack for float ones), made once for a run of forward passes over weights that do not
// change, instead of once per matmul call.
//
// A population view keeps one for its epoch; a caller that runs the unperturbed model many times
// (sampling token by token, evaluation, a benchmark's plain inference) gives one to its
// ForwardContext. The packs stay valid while the parameters' values do: after changing a
// parameter (an update, a loaded checkpoint), clear() the packs or make new ones.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "eggroll/backend/backend.hpp"
#include "eggroll/model/params.hpp"

namespace eggroll {

class WeightPacks {
 public:
  WeightPacks() = default;
  WeightPacks(const WeightPacks&) = delete;
  WeightPacks& operator=(const WeightPacks&) = delete;

  // Matrix w (int8) in backend's qmm layout, packed on first use and kept; null when the backend
  // has no layout of its own. Safe to call from several threads: one packs, the others wait.
  const PackedWeights* qpacked(const Param& w, Backend& backend);
  // Matrix w (float) in backend's layout for its linear (Backend::pack), the same way.
  const PackedWeights* packed(const Param& w, Backend& backend);
  // Forgets every pack (not while another thread is using them).
  void clear();
  // How many matrices it holds.
  std::size_t size() const;

 private:
  // One matrix, one copy for every thread: one thread packs it (state kFilling), the others wait
  // for kPresent. A copy per thread, each packed and read by its own thread, made the medium
  // model's forward at population 256 faster (its rows per call are few, and the other thread's
  // freshly written lines are read from its cache) but the language model's step 3-6% slower (two
  // copies of its 4.6 MB of weights read from the L3 every token); the threads packing parts of
  // one copy together stayed as far below a copy per thread at population 256.
  struct Packing {
    std::atomic<std::uint8_t> state{0};
    std::shared_ptr<const PackedWeights> packed;
  };
  // By parameter id and the address of its values: a pack never serves another model's matrix
  // of the same name.
  using Key = std::pair<std::uint64_t, const void*>;
  // The entry of (w, values), packed by make() on first use.
  template <class Make>
  const PackedWeights* get(const Param& w, const void* values, Make make);
  mutable std::mutex mutex_;
  std::map<Key, Packing> packs_;
};

}  // namespace eggroll
