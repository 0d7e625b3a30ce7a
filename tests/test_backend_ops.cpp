// The one cross-backend harness (STYLE.md principles 1 and 2): every Backend op x every backend x
// several shapes, on random inputs, against the reference backend, which is itself checked
// against the op's math computed in double. Outputs of overwriting ops are poisoned with NaN
// before each run; accumulating ops start from random values; a guard past every output must
// stay untouched. Also: cpu results do not depend on the thread count (bit for bit), and a row's
// gemm result does not depend on how many rows share the call (DESIGN.md contract 2).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "support/lowrank_factors.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using testing::random_values;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr std::int64_t kGuard = 5;          // elements past the output that no op may touch
constexpr float kGuardValue = -7777.0f;

// The backends checked against the reference (a CUDA backend joins this list).
std::vector<BackendKind> backends_under_test() { return {BackendKind::cpu}; }

using testing::simd_levels;

// Values in [lo, hi) from a seed, never all zero.
std::vector<float> values(std::int64_t n, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return random_values(n, seed, lo, hi);
}

// Output of one op run: out values, their row length (for the tolerance), and whether the
// guard elements after the output survived.
struct OpResult {
  std::vector<float> out;
  std::int64_t row_len = 1;
  bool guard_intact = true;
};

// An output buffer with kGuard guard values after n elements, initialised to init (NaN poison
// for overwriting ops, random values for accumulating ones).
struct OutBuffer {
  std::vector<float> data;
  std::int64_t n;
  OutBuffer(std::int64_t n, const std::vector<float>& init) : data(static_cast<std::size_t>(n + kGuard)), n(n) {
    std::copy(init.begin(), init.end(), data.begin());
    std::fill(data.begin() + n, data.end(), kGuardValue);
  }
  OutBuffer(std::int64_t n, float poison) : OutBuffer(n, std::vector<float>(static_cast<std::size_t>(n), poison)) {}
  float* ptr() { return data.data(); }
  OpResult result(std::int64_t row_len) const {
    OpResult r{std::vector<float>(data.begin(), data.begin() + n), row_len, true};
    for (std::int64_t g = 0; g < kGuard; ++g) r.guard_intact = r.guard_intact && data[n + g] == kGuardValue;
    return r;
  }
};

// One op on one shape: run builds its inputs from fixed seeds, so every call sees the same ones;
// oracle gives the expected output computed in double.
struct OpCase {
  std::string name;
  std::function<OpResult(Backend&)> run;
  std::function<std::vector<double>()> oracle;
};

using testing::Factors;

// ---- the op cases ----

// The perturbed forward x (W + coef_j A_j B_j^T)^T of rows of member row / rpm, in double (f null:
// x W^T), each row of y (rows, m) added to its start value (0 where y starts empty).
void perturbed_forward_math(const std::vector<float>& x, const std::vector<float>& w, const Factors* f,
                            std::int64_t rpm, std::int64_t m, std::int64_t n, std::vector<double>& y) {
  const auto rows = static_cast<std::int64_t>(x.size()) / n;
  y.resize(static_cast<std::size_t>(rows * m), 0.0);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t j = row / rpm;
    for (std::int64_t a = 0; a < m; ++a) {
      double acc = 0;
      for (std::int64_t b = 0; b < n; ++b)
        acc += x[row * n + b] * (w[a * n + b] + (f != nullptr ? f->coef[j] * f->ab(j, a, b) : 0.0));
      y[row * m + a] += acc;
    }
  }
}

void add_gemm_cases(std::vector<OpCase>& cases) {
  struct S { std::int64_t rows, m, n; };
  for (S s : {S{1, 1, 1}, S{1, 7, 13}, S{5, 7, 13}, S{37, 33, 65}, S{3, 65, 33}, S{16, 16, 128}}) {
    const std::uint64_t seed = static_cast<std::uint64_t>(s.rows * 1000 + s.m * 10 + s.n);
    auto x = values(s.rows * s.n, seed), w = values(s.m * s.n, seed + 1);
    cases.push_back({"gemm_nt rows=" + std::to_string(s.rows) + " m=" + std::to_string(s.m) + " n=" +
                         std::to_string(s.n),
                     [=](Backend& be) {
                       OutBuffer y(s.rows * s.m, kNan);
                       be.gemm_nt(s.rows, s.m, s.n, x.data(), w.data(), y.ptr());
                       return y.result(s.m);
                     },
                     [=] {
                       std::vector<double> y(static_cast<std::size_t>(s.rows * s.m));
                       for (std::int64_t i = 0; i < s.rows; ++i)
                         for (std::int64_t a = 0; a < s.m; ++a) {
                           double acc = 0;
                           for (std::int64_t k = 0; k < s.n; ++k) acc += static_cast<double>(x[i * s.n + k]) * w[a * s.n + k];
                           y[i * s.m + a] = acc;
                         }
                       return y;
                     }});
  }
}

void add_lowrank_correction_cases(std::vector<OpCase>& cases) {
  struct S { std::int64_t members, rpm, m, n, r, zero_member; bool null_block; };
  for (S s : {S{1, 1, 7, 13, 1, -1, false}, S{4, 3, 7, 13, 2, 1, true}, S{9, 1, 33, 65, 8, 4, true},
              S{6, 3, 13, 7, 5, 0, false}, S{2, 1, 1, 1, 3, -1, false}, S{3, 3, 16, 24, 4, 2, true},
              S{5, 1, 8, 8, 7, -1, false}, S{3, 2, 70, 300, 1, 1, false}, S{4, 1, 129, 200, 3, -1, false},
              S{2, 16, 20, 700, 2, -1, false}, S{8, 1, 50, 40, 6, 2, true}, S{4, 3, 37, 21, 20, 1, false},
              S{6, 1, 30, 45, 20, -1, false}}) {
    const std::uint64_t seed = static_cast<std::uint64_t>(s.members * 7919 + s.m * 31 + s.n * 3 + s.r);
    const std::int64_t rows = s.members * s.rpm;
    auto x = values(rows * s.n, seed), y0 = values(rows * s.m, seed + 1);
    auto f = std::make_shared<Factors>(s.members, s.m, s.n, s.r, seed, s.zero_member, s.null_block);
    cases.push_back({"lowrank_correction members=" + std::to_string(s.members) + " rpm=" + std::to_string(s.rpm) +
                         " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " r=" + std::to_string(s.r) +
                         (s.zero_member >= 0 ? " zero_member=" + std::to_string(s.zero_member) : ""),
                     [=](Backend& be) {
                       OutBuffer y(rows * s.m, y0);  // accumulates into y
                       be.lowrank_correction({s.members, s.rpm}, f->view(), x.data(), y.ptr());
                       return y.result(s.m);
                     },
                     [=] {
                       std::vector<double> y(y0.begin(), y0.end());
                       for (std::int64_t row = 0; row < rows; ++row) {
                         const std::int64_t j = row / s.rpm;
                         for (std::int64_t a = 0; a < s.m; ++a) {
                           double acc = 0;  // x (W + coef A B^T)^T - x W^T = coef x B A^T
                           for (std::int64_t b = 0; b < s.n; ++b) acc += x[row * s.n + b] * f->ab(j, a, b);
                           y[row * s.m + a] += f->coef[j] * acc;
                         }
                       }
                       return y;
                     }});
  }
}

// The perturbed forward x (W + coef_j A_j B_j^T)^T: shapes that reach the GEMM's k blocking
// (n > 256), its narrow-output path (m <= 4), edge tiles, every rank kind, unperturbed members,
// (16 rows per member, n 1100) the transposed x . B over several groups of long rows, and (one row
// per member, W 156 KB) a W past a quarter of a 512 KiB L2, which the AVX2 level queues no factors
// beside; ranks 6 and 12 with one row per member (their blocks padded to 8 and 16 columns at the
// vector levels); ranks 20 and 33 with several rows per member and rank 20 with one (the factors
// transposed in blocks of 16 or 8 columns, with tails of rows and columns).
void add_perturbed_matmul_cases(std::vector<OpCase>& cases) {
  struct S { std::int64_t members, rpm, m, n, r, zero_member; bool null_block; };
  for (S s : {S{1, 1, 7, 13, 1, -1, false}, S{13, 1, 33, 65, 1, 4, true}, S{5, 3, 40, 300, 2, 1, false},
              S{25, 1, 2, 48, 1, 3, true}, S{7, 2, 3, 17, 4, -1, false}, S{6, 4, 64, 600, 4, 5, true},
              S{26, 1, 70, 20, 3, -1, false}, S{4, 1, 129, 31, 8, 0, false}, S{3, 16, 24, 1100, 4, 1, false},
              S{9, 1, 300, 130, 4, 2, false}, S{20, 1, 100, 70, 6, 3, true}, S{7, 1, 40, 90, 12, -1, false},
              S{5, 3, 37, 21, 20, 1, false}, S{3, 5, 19, 40, 33, -1, false}, S{12, 1, 37, 50, 20, 4, true}}) {
    const std::uint64_t seed = static_cast<std::uint64_t>(s.members * 811 + s.m * 37 + s.n * 5 + s.r);
    const std::int64_t rows = s.members * s.rpm;
    auto x = values(rows * s.n, seed), w = values(s.m * s.n, seed + 2);
    auto f = std::make_shared<Factors>(s.members, s.m, s.n, s.r, seed, s.zero_member, s.null_block);
    cases.push_back({"perturbed_matmul members=" + std::to_string(s.members) + " rpm=" + std::to_string(s.rpm) +
                         " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " r=" + std::to_string(s.r),
                     [=](Backend& be) {
                       OutBuffer y(rows * s.m, kNan);
                       be.perturbed_matmul({s.members, s.rpm}, f->view(), x.data(), w.data(), y.ptr());
                       return y.result(s.m);
                     },
                     [=] {
                       std::vector<double> y;
                       perturbed_forward_math(x, w, f.get(), s.rpm, s.m, s.n, y);
                       return y;
                     }});
  }
}

void add_lowrank_update_cases(std::vector<OpCase>& cases) {
  struct S { std::int64_t m, n, r, terms; };
  for (S s : {S{1, 1, 1, 1}, S{7, 13, 1, 5}, S{33, 65, 8, 9}, S{13, 7, 3, 1}, S{16, 24, 4, 40}, S{1, 9, 2, 3},
              S{37, 100, 2, 300}, S{70, 33, 1, 600},
              // Several blocks of panel columns; one row tile, so threads split the columns.
              S{20, 600, 2, 130}, S{5, 300, 4, 70},
              // A short wide matrix (the medium model's second layer): two threads split the
              // columns, and the rows lie in tiles of unequal height.
              S{64, 512, 4, 70},
              // Both sides above 64: several column tiles and row tiles on each thread.
              S{96, 130, 2, 40}, S{200, 80, 4, 20}}) {
    const std::uint64_t seed = static_cast<std::uint64_t>(s.m * 131 + s.n * 17 + s.r * 5 + s.terms);
    auto out0 = values(s.m * s.n, seed);
    auto f = std::make_shared<Factors>(s.terms, s.m, s.n, s.r, seed, -1, false);
    std::vector<double> weight(static_cast<std::size_t>(s.terms));
    auto wv = values(s.terms, seed + 2);
    for (std::int64_t k = 0; k < s.terms; ++k) weight[k] = 0.25 * wv[k];
    if (s.terms > 2) weight[1] = 0.0;  // a pair whose members tied
    cases.push_back({"lowrank_update m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " r=" +
                         std::to_string(s.r) + " terms=" + std::to_string(s.terms),
                     [=](Backend& be) {
                       OutBuffer out(s.m * s.n, out0);  // accumulates: out += sum_k w_k A_k B_k^T
                       be.lowrank_update(s.m, s.n, s.r, s.terms, f->blocks.data(), weight.data(), out.ptr());
                       return out.result(s.n);
                     },
                     [=] {
                       std::vector<double> out(out0.begin(), out0.end());
                       for (std::int64_t a = 0; a < s.m; ++a)
                         for (std::int64_t b = 0; b < s.n; ++b)
                           for (std::int64_t k = 0; k < s.terms; ++k)
                             out[a * s.n + b] += static_cast<double>(static_cast<float>(weight[k])) * f->ab(k, a, b);
                       return out;
                     }});
  }
}

void add_row_vector_cases(std::vector<OpCase>& cases) {
  struct S { std::int64_t members, rpm, d, stride_extra; bool shared; };
  for (bool mul : {false, true})
    for (S s : {S{1, 1, 1, 0, false}, S{1, 1, 7, 0, true}, S{4, 3, 13, 0, false}, S{5, 1, 65, 3, false},
                S{3, 3, 33, 0, true}, S{2, 7, 16, 1, false}}) {
      const std::uint64_t seed = static_cast<std::uint64_t>(s.members * 97 + s.rpm * 11 + s.d + (mul ? 5000 : 0));
      const std::int64_t rows = s.members * s.rpm;
      const std::int64_t stride = s.shared ? 0 : s.d + s.stride_extra;
      auto y0 = values(rows * s.d, seed);
      auto v = values(s.shared ? s.d : s.members * stride, seed + 1);
      cases.push_back({std::string(mul ? "mul_rows" : "add_rows") + " members=" + std::to_string(s.members) +
                           " rpm=" + std::to_string(s.rpm) + " d=" + std::to_string(s.d) +
                           " stride=" + std::to_string(stride),
                       [=](Backend& be) {
                         OutBuffer y(rows * s.d, y0);  // in place
                         if (mul)
                           be.mul_rows({s.members, s.rpm}, s.d, v.data(), stride, y.ptr());
                         else
                           be.add_rows({s.members, s.rpm}, s.d, v.data(), stride, y.ptr());
                         return y.result(s.d);
                       },
                       [=] {
                         std::vector<double> y(y0.begin(), y0.end());
                         for (std::int64_t row = 0; row < rows; ++row)
                           for (std::int64_t k = 0; k < s.d; ++k) {
                             const double vk = v[(row / s.rpm) * stride + k];
                             y[row * s.d + k] = mul ? y[row * s.d + k] * vk : y[row * s.d + k] + vk;
                           }
                         return y;
                       }});
    }
}

void add_norm_cases(std::vector<OpCase>& cases) {
  struct S { std::int64_t rows, d; };
  for (bool l1 : {false, true})
    for (S s : {S{1, 1}, S{1, 7}, S{7, 13}, S{33, 65}, S{4, 256}}) {
      const std::uint64_t seed = static_cast<std::uint64_t>(s.rows * 313 + s.d + (l1 ? 9000 : 0));
      // Shifted inputs, so the mean matters (layer norm) and signs are mixed (l1 norm).
      auto x = values(s.rows * s.d, seed, l1 ? -2.0f : 1.0f, l1 ? 1.0f : 4.0f);
      const float eps = 1e-5f;
      cases.push_back({std::string(l1 ? "l1_norm" : "layer_norm") + " rows=" + std::to_string(s.rows) +
                           " d=" + std::to_string(s.d),
                       [=](Backend& be) {
                         OutBuffer y(s.rows * s.d, kNan);
                         if (l1)
                           be.l1_norm(s.rows, s.d, x.data(), eps, y.ptr());
                         else
                           be.layer_norm(s.rows, s.d, x.data(), eps, y.ptr());
                         return y.result(s.d);
                       },
                       [=] {
                         std::vector<double> y(static_cast<std::size_t>(s.rows * s.d));
                         for (std::int64_t i = 0; i < s.rows; ++i) {
                           const float* xr = x.data() + i * s.d;
                           double mean = 0, var = 0, l1sum = 0;
                           for (std::int64_t k = 0; k < s.d; ++k) mean += xr[k], l1sum += std::fabs(xr[k]);
                           mean /= static_cast<double>(s.d);
                           for (std::int64_t k = 0; k < s.d; ++k) var += (xr[k] - mean) * (xr[k] - mean);
                           var /= static_cast<double>(s.d);
                           for (std::int64_t k = 0; k < s.d; ++k)
                             y[i * s.d + k] = l1 ? xr[k] / (l1sum / static_cast<double>(s.d) + eps)
                                                 : (xr[k] - mean) / std::sqrt(var + eps);
                         }
                         return y;
                       }});
    }
}

double activation_math(Activation a, double v) {
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return v > 0 ? v : 0.0;
    case Activation::tanh: return std::tanh(v);
    case Activation::gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Activation::silu: return v / (1.0 + std::exp(-v));
  }
  return v;
}

void add_activation_cases(std::vector<OpCase>& cases) {
  for (Activation a : {Activation::none, Activation::relu, Activation::tanh, Activation::gelu, Activation::silu})
    for (std::int64_t n : {1, 7, 91, 4099}) {
      const std::uint64_t seed = static_cast<std::uint64_t>(n * 7 + static_cast<int>(a));
      auto x = values(n, seed, -6.0f, 6.0f);  // reaches the saturated parts of tanh, gelu and silu
      cases.push_back({"activation " + activation_name(a) + " n=" + std::to_string(n),
                       [=](Backend& be) {
                         OutBuffer y(n, kNan);
                         be.activation(a, n, x.data(), y.ptr());
                         return y.result(std::min<std::int64_t>(n, 13));
                       },
                       [=] {
                         std::vector<double> y(static_cast<std::size_t>(n));
                         for (std::int64_t i = 0; i < n; ++i) y[i] = activation_math(a, x[i]);
                         return y;
                       }});
    }
}

// A linear layer (Backend::linear): the matmul with or without factors, then a bias (none, one
// for every row, or one per member) and an activation.
void add_linear_cases(std::vector<OpCase>& cases) {
  enum Bias { no_bias, shared_bias, member_bias };
  struct S { std::int64_t members, rpm, m, n, r; Bias bias; Activation a; };
  for (S s : {S{13, 1, 70, 20, 1, member_bias, Activation::relu}, S{6, 4, 64, 600, 4, shared_bias, Activation::tanh},
              S{5, 3, 33, 65, 3, member_bias, Activation::gelu}, S{7, 2, 3, 17, 4, shared_bias, Activation::silu},
              S{9, 1, 129, 31, 0, no_bias, Activation::relu}, S{4, 2, 40, 24, 0, member_bias, Activation::none}}) {
    const std::uint64_t seed = static_cast<std::uint64_t>(s.members * 613 + s.m * 17 + s.n * 3 + s.r);
    const std::int64_t rows = s.members * s.rpm;
    auto x = values(rows * s.n, seed), w = values(s.m * s.n, seed + 1);
    auto bias = values((s.bias == member_bias ? s.members : 1) * s.m, seed + 2);
    const std::int64_t stride = s.bias == member_bias ? s.m : 0;
    auto f = s.r > 0 ? std::make_shared<Factors>(s.members, s.m, s.n, s.r, seed, 1, true) : nullptr;
    cases.push_back({"linear members=" + std::to_string(s.members) + " rpm=" + std::to_string(s.rpm) +
                         " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " r=" + std::to_string(s.r) +
                         " bias " + std::to_string(s.bias) + " " + activation_name(s.a),
                     [=](Backend& be) {
                       OutBuffer y(rows * s.m, kNan);
                       const LowRankFactors lf = f ? f->view() : LowRankFactors{};
                       const RowEpilogue e{s.bias == no_bias ? nullptr : bias.data(), stride, s.a};
                       const auto packed = be.pack(s.m, s.n, w.data());  // null where the backend has none
                       be.linear({s.members, s.rpm}, s.m, s.n, x.data(), w.data(), f ? &lf : nullptr, e, y.ptr(),
                                 packed.get());
                       return y.result(s.m);
                     },
                     [=] {
                       std::vector<double> y(static_cast<std::size_t>(rows * s.m), 0.0);
                       for (std::int64_t row = 0; row < rows; ++row)
                         for (std::int64_t a = 0; s.bias != no_bias && a < s.m; ++a)
                           y[row * s.m + a] = bias[row / s.rpm * stride + a];
                       perturbed_forward_math(x, w, f.get(), s.rpm, s.m, s.n, y);
                       for (double& v : y) v = activation_math(s.a, v);
                       return y;
                     }});
  }
}

void add_embedding_cases(std::vector<OpCase>& cases) {
  struct S { std::int64_t members, rpm, vocab, d, r, zero_member; bool factors; };
  for (S s : {S{1, 1, 1, 1, 1, -1, true}, S{1, 1, 13, 7, 1, -1, false}, S{4, 3, 13, 7, 2, 1, true},
              S{3, 1, 65, 33, 8, 2, true}, S{6, 3, 32, 16, 4, -1, false}, S{5, 3, 11, 9, 3, 0, true}}) {
    const std::uint64_t seed = static_cast<std::uint64_t>(s.members * 53 + s.vocab * 7 + s.d + s.r);
    const std::int64_t rows = s.members * s.rpm;
    auto w = values(s.vocab * s.d, seed);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows));
    auto tv = random_values(rows, seed + 1);
    for (std::int64_t i = 0; i < rows; ++i)
      tokens[i] = std::min<std::int32_t>(static_cast<std::int32_t>((tv[i] + 1.0f) * 0.5f * s.vocab),
                                         static_cast<std::int32_t>(s.vocab - 1));
    // Factors for the (m = vocab, n = d) matrix; the zero member has coef 0 and no block.
    auto f = std::make_shared<Factors>(s.members, s.vocab, s.d, s.r, seed, s.zero_member, true);
    cases.push_back({"embedding members=" + std::to_string(s.members) + " rpm=" + std::to_string(s.rpm) +
                         " vocab=" + std::to_string(s.vocab) + " d=" + std::to_string(s.d) +
                         (s.factors ? " r=" + std::to_string(s.r) : " no factors"),
                     [=](Backend& be) {
                       OutBuffer y(rows * s.d, kNan);
                       const LowRankFactors lf = s.factors ? f->view() : LowRankFactors{s.vocab, s.d, s.r, nullptr, nullptr};
                       be.embedding({s.members, s.rpm}, s.vocab, s.d, tokens.data(), w.data(), lf, y.ptr());
                       return y.result(s.d);
                     },
                     [=] {
                       std::vector<double> y(static_cast<std::size_t>(rows * s.d));
                       for (std::int64_t row = 0; row < rows; ++row) {
                         const std::int64_t j = row / s.rpm, t = tokens[row];
                         for (std::int64_t k = 0; k < s.d; ++k)
                           y[row * s.d + k] = w[t * s.d + k] + (s.factors ? f->coef[j] * f->ab(j, t, k) : 0.0);
                       }
                       return y;
                     }});
  }
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  add_gemm_cases(cases);
  add_lowrank_correction_cases(cases);
  add_perturbed_matmul_cases(cases);
  add_lowrank_update_cases(cases);
  add_row_vector_cases(cases);
  add_norm_cases(cases);
  add_activation_cases(cases);
  add_linear_cases(cases);
  add_embedding_cases(cases);
  return cases;
}

// |got - want| <= 1e-5 * max |row of want| + 1e-6 for every element (NaN fails).
template <typename T>
::testing::AssertionResult close_rows(const std::vector<float>& got, const std::vector<T>& want, std::int64_t row_len) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (std::size_t r0 = 0; r0 < want.size(); r0 += static_cast<std::size_t>(row_len)) {
    const std::size_t r1 = std::min(want.size(), r0 + static_cast<std::size_t>(row_len));
    double scale = 0.0;
    for (std::size_t i = r0; i < r1; ++i) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    const double tol = 1e-5 * scale + 1e-6;
    for (std::size_t i = r0; i < r1; ++i) {
      const double err = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
      if (!(err <= tol))
        return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", expected " << want[i]
                                             << " (|diff| " << err << " > tol " << tol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(BackendOps, ReferenceMatchesTheMathInDouble) {
  auto ref = make_backend(BackendKind::reference);
  for (const OpCase& c : all_cases()) {
    SCOPED_TRACE(c.name);
    const OpResult r = c.run(*ref);
    EXPECT_TRUE(r.guard_intact) << "wrote past the output";
    EXPECT_TRUE(close_rows(r.out, c.oracle(), r.row_len));
  }
}

TEST(BackendOps, EveryBackendMatchesTheReference) {
  auto ref = make_backend(BackendKind::reference);
  const auto cases = all_cases();
  ASSERT_GE(cases.size(), 60u);
  for (BackendKind kind : backends_under_test()) {
    auto be = make_backend(kind);
    for (const std::string& level : simd_levels(*be)) {
      be->set_simd(level);
      for (const OpCase& c : cases) {
        SCOPED_TRACE(be->name() + " " + level + ": " + c.name);
        const OpResult want = c.run(*ref), got = c.run(*be);
        EXPECT_TRUE(got.guard_intact) << "wrote past the output";
        EXPECT_TRUE(close_rows(got.out, want.out, want.row_len));
      }
    }
    be->set_simd("auto");
  }
}

TEST(BackendOps, CpuResultsDoNotDependOnTheThreadCount) {
  auto be = make_backend(BackendKind::cpu);
  const int saved = omp_get_max_threads();
  for (const std::string& level : simd_levels(*be))
  for (const OpCase& c : all_cases()) {
    be->set_simd(level);
    SCOPED_TRACE(level + ": " + c.name);
    omp_set_num_threads(1);
    const OpResult one = c.run(*be);
    omp_set_num_threads(2);
    const OpResult two = c.run(*be);
    be->set_threads(3);  // more threads than rows for the small cases
    const OpResult three = c.run(*be);
    ASSERT_EQ(one.out.size(), two.out.size());
    EXPECT_EQ(0, std::memcmp(one.out.data(), two.out.data(), one.out.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(one.out.data(), three.out.data(), one.out.size() * sizeof(float)));
  }
  omp_set_num_threads(saved);
  be->set_simd("auto");
}

// Contract 2: each row's result depends on that row alone, so a row computed in a batch of 1 or
// of 37 rows gives the same bits (this is what lets members be evaluated in chunks of any size).
TEST(BackendOps, RowResultsDoNotDependOnTheBatch) {
  const std::int64_t rows = 37, m = 33, n = 65, r = 4;
  const auto x = values(rows * n, 71), w = values(m * n, 72);
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu})
  for (const std::string& level : simd_levels(*make_backend(kind))) {
    auto be = make_backend(kind);
    be->set_simd(level);
    SCOPED_TRACE(be->name() + " " + level);
    std::vector<float> all(static_cast<std::size_t>(rows * m), kNan);
    be->gemm_nt(rows, m, n, x.data(), w.data(), all.data());
    for (std::int64_t i = 0; i < rows; ++i) {
      std::vector<float> one(static_cast<std::size_t>(m), kNan);
      be->gemm_nt(1, m, n, x.data() + i * n, w.data(), one.data());
      ASSERT_EQ(0, std::memcmp(one.data(), all.data() + i * m, m * sizeof(float))) << "row " << i;
    }
    // The low-rank correction: 37 members of one row each vs each member alone.
    const Factors f(rows, m, n, r, 73, 5, true);
    const auto y0 = values(rows * m, 74);
    std::vector<float> y_all = y0;
    be->lowrank_correction({rows, 1}, f.view(), x.data(), y_all.data());
    for (std::int64_t j = 0; j < rows; ++j) {
      std::vector<float> y_one(y0.begin() + j * m, y0.begin() + (j + 1) * m);
      const LowRankFactors lf{m, n, r, f.blocks.data() + j, f.coef.data() + j};
      be->lowrank_correction({1, 1}, lf, x.data() + j * n, y_one.data());
      ASSERT_EQ(0, std::memcmp(y_one.data(), y_all.data() + j * m, m * sizeof(float))) << "member " << j;
    }
    // The perturbed forward (fused on the cpu backend): the same, with the GEMM in it.
    std::vector<float> p_all(static_cast<std::size_t>(rows * m), kNan);
    be->perturbed_matmul({rows, 1}, f.view(), x.data(), w.data(), p_all.data());
    for (std::int64_t j = 0; j < rows; ++j) {
      std::vector<float> p_one(static_cast<std::size_t>(m), kNan);
      const LowRankFactors lf{m, n, r, f.blocks.data() + j, f.coef.data() + j};
      be->perturbed_matmul({1, 1}, lf, x.data() + j * n, w.data(), p_one.data());
      ASSERT_EQ(0, std::memcmp(p_one.data(), p_all.data() + j * m, m * sizeof(float))) << "member " << j;
    }
  }
}

// lowrank_update accumulates (header: out += ...), one term at a time in k order, so splitting
// the terms over two calls gives the same bits as one call. Both shapes: tall (n <= m) and wide,
// which the cpu backend sums transposed in a scratch block. The cpu backend's vector levels
// (cpu_float_update.hpp) sum every element as one FMA chain in the same order whatever the
// vector width, so its avx2 and avx512 levels give the same bits.
TEST(BackendOps, LowrankUpdateAccumulatesAndSplitsExactly) {
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  for (const auto& [m, n, r] : {Shape{13, 7, 3}, Shape{7, 13, 3}, Shape{70, 33, 4}, Shape{20, 300, 1}}) {
    SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + " r " + std::to_string(r));
    const std::int64_t terms = 10;
    const Factors f(terms, m, n, r, 81, -1, false);
    std::vector<double> weight(terms);
    for (std::int64_t k = 0; k < terms; ++k) weight[k] = 0.1 * static_cast<double>(k + 1) * (k % 2 ? -1 : 1);
    const auto out0 = values(m * n, 82);
    std::map<std::string, std::vector<float>> cpu_levels;  // the cpu backend's result per level
    for (BackendKind kind : {BackendKind::reference, BackendKind::cpu})
    for (const std::string& level : simd_levels(*make_backend(kind))) {
      auto be = make_backend(kind);
      be->set_simd(level);
      SCOPED_TRACE(be->name() + " " + level);
      std::vector<float> once = out0, split = out0;
      be->lowrank_update(m, n, r, terms, f.blocks.data(), weight.data(), once.data());
      be->lowrank_update(m, n, r, 4, f.blocks.data(), weight.data(), split.data());
      be->lowrank_update(m, n, r, terms - 4, f.blocks.data() + 4, weight.data() + 4, split.data());
      EXPECT_EQ(0, std::memcmp(once.data(), split.data(), once.size() * sizeof(float)));
      // Zero terms leave out unchanged (it is accumulated into, not overwritten).
      std::vector<float> none = out0;
      be->lowrank_update(m, n, r, 0, f.blocks.data(), weight.data(), none.data());
      EXPECT_EQ(none, out0);
      if (kind == BackendKind::cpu) cpu_levels[level] = once;
    }
    if (cpu_levels.count("avx2") != 0 && cpu_levels.count("avx512") != 0) {
      EXPECT_EQ(0, std::memcmp(cpu_levels["avx2"].data(), cpu_levels["avx512"].data(), out0.size() * sizeof(float)));
    }
  }
}

TEST(BackendOps, NamesAndFactory) {
  EXPECT_EQ(make_backend(BackendKind::reference)->name(), "reference");
  EXPECT_EQ(make_backend(BackendKind::cpu)->name(), "cpu");
  EXPECT_EQ(backend_from_name("cpu"), BackendKind::cpu);
  EXPECT_THROW(backend_from_name("gpu"), std::exception);
  for (Activation a : {Activation::none, Activation::relu, Activation::tanh, Activation::gelu, Activation::silu})
    EXPECT_EQ(activation_from_name(activation_name(a)), a);
  EXPECT_THROW(activation_from_name("sigmoid"), std::exception);
}

}  // namespace
}  // namespace eggroll
