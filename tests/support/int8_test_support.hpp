// Helpers of the int8 op tests (test_int8_ops.cpp, test_int8_qmm_ranks.cpp, test_int8_update.cpp):
// random int8 values and factors, the SIMD levels, and every level's result compared with the
// reference's bit for bit.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/int8_ops.hpp"
#include "eggroll/backend/backend.hpp"

namespace eggroll::int8_test {

using I8 = std::vector<std::int8_t>;
constexpr std::int64_t kGuard = 16;  // bytes past every output that no op may touch
constexpr std::int8_t kPoison = 0x5A;

// splitmix64: int8 values in [lo, hi], with about one in eight forced to lo or hi.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  I8 int8s(std::int64_t n, int lo = -127, int hi = 127) {
    I8 v(static_cast<std::size_t>(n));
    for (auto& e : v) {
      const std::uint64_t u = next();
      const int uniform = lo + static_cast<int>((u >> 8) % (hi - lo + 1));
      e = static_cast<std::int8_t>((u & 7) == 0 ? ((u >> 3) & 1 ? hi : lo) : uniform);
    }
    return v;
  }
};

// The SIMD levels this machine runs, lowest first; the guard restores the detected level.
inline std::vector<std::string> levels() { return cpu_int8::levels(); }
struct LevelGuard {
  std::string saved = cpu_int8::level();
  ~LevelGuard() { cpu_int8::set_level(saved.c_str()); }
};

// An int8 output buffer poisoned before the run, with a guard tail.
template <typename T>
struct Out {
  std::vector<T> data;
  std::int64_t n;
  explicit Out(std::int64_t n, T poison = static_cast<T>(kPoison))
      : data(static_cast<std::size_t>(n + kGuard), poison), n(n) {}
  T* ptr() { return data.data(); }
};

// Runs op(cpu backend) at every level and compares its first n values and guard with the reference's.
template <typename T>
inline void expect_all_levels_equal(const std::string& what, std::int64_t n,
                                    const std::function<void(Backend&, T*)>& op) {
  auto ref = make_backend(BackendKind::reference);
  auto cpu = make_backend(BackendKind::cpu);
  Out<T> want(n);
  op(*ref, want.ptr());
  LevelGuard guard;
  for (const std::string& l : levels()) {
    cpu_int8::set_level(l.c_str());
    Out<T> got(n);
    op(*cpu, got.ptr());
    ASSERT_EQ(0, std::memcmp(want.data.data(), got.data.data(), got.data.size() * sizeof(T))) << what << " level " << l;
  }
}

// Int8 factors of one (m, n) matrix for n_members members (pairs share a block; signs +1, -1):
// member zero_member has sign 0, member null_member a null block (with a nonzero sign).
struct QF {
  std::vector<I8> storage;
  std::vector<const std::int8_t*> blocks;
  std::vector<std::int8_t> sign;
  QFactors f;
  QF(Rng& rng, std::int64_t n_members, std::int64_t m, std::int64_t n, std::int64_t r, int shift,
     std::int64_t zero_member = -1, std::int64_t null_member = -1, int lo = -127) {
    for (std::int64_t j = 0; j < n_members; ++j) {
      if (j % 2 == 0) storage.push_back(rng.int8s(r * (n + m), lo));
      blocks.push_back(storage.back().data());
      sign.push_back(j % 2 ? -1 : 1);
    }
    if (zero_member >= 0 && zero_member < n_members) sign[zero_member] = 0;
    if (null_member >= 0 && null_member < n_members) blocks[null_member] = nullptr;
    f = QFactors{m, n, r, blocks.data(), sign.data(), shift};
  }
};

}  // namespace eggroll::int8_test
