// Integer EGGROLL's exact helpers (ALGORITHM.md 2.1, 2.3, 2.5, 2.6): isqrt, the rank shift, the
// integer log-likelihood over the generated EXP2/THRESH tables, and the update threshold.
#include "eggroll/quant/qmath.hpp"

#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "eggroll/core/error.hpp"

namespace eggroll::q {

#include "loglik_tables.inc"

namespace {

// floor(log2(x)) for x >= 1.
int ilog2(std::uint64_t x) { return 63 - std::countl_zero(x); }

}  // namespace

std::int64_t isqrt(std::int64_t n) {
  check(n >= 0, "isqrt: n = ", n, ": expected n >= 0");
  // The double root is within a few units of the answer; the integer steps make it exact.
  auto r = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(n)));
  const auto un = static_cast<std::uint64_t>(n);
  // r <= 3037000500 here, so r * r and (r + 1)^2 fit in uint64.
  while (r * r > un) --r;
  while ((r + 1) * (r + 1) <= un) ++r;
  return static_cast<std::int64_t>(r);
}

int rank_shift(int rank) {
  check(rank >= 1, "rank_shift: rank = ", rank, ": expected rank >= 1 (es.rank)");
  return (ilog2(static_cast<std::uint64_t>(rank)) + 1) >> 1;
}

// THRESH[16 j] = 2^(j + 4), so the leading bit b of s picks the block k in [16 (b - 4), 16 (b - 4) + 15]
// and four steps find the largest k in it with THRESH[k] <= s (THRESH is non-decreasing).
// Domain 16 <= s < 2^28 (checked in debug builds only: this runs once per token per member).
int log2_fixed(std::uint32_t s) {
  assert(s >= 16u && s < (1u << 28));
  const int b = ilog2(s);
  int k = 16 * (b - 4);
  for (int step = 8; step >= 1; step >>= 1) {
    if (kLog2Thresh[k + step] <= s) k += step;
  }
  return k;
}

// Ssum <= 256 * EXP2[255] < 2^28 and Ssum >= 256 * 16, so LOG2 is always in its domain.
std::int32_t loglik(const std::int8_t* logits, int target) {
  assert(target >= 0 && target < 256);
  std::int32_t sum = 0;
  for (int j = 0; j < 256; ++j) sum += kExp2[logits[j] + 128];  // u = l + 128; l = -128 gives u = 0
  return (logits[target] + 128) - log2_fixed(static_cast<std::uint32_t>(sum));
}

// ---- the normal quantile from +, -, *, / and sqrt only ----
namespace {

constexpr double kLn2Hi = 0x1.62e42fee00000p-1;    // ln 2 with 11 trailing zero bits: k * kLn2Hi is exact
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;   // ln 2 - kLn2Hi
constexpr double kInvLn2 = 0x1.71547652b82fep+0;   // 1 / ln 2
constexpr double kInvSqrt2Pi = 0x1.9884533d43651p-2;  // 1 / sqrt(2 pi)

// 2^k for -1022 <= k <= 1023, built from its bits.
double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }

// e^x for x <= 0: x = k ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to degree 18
// (truncation below 1e-19), then scaled by 2^k. Relative error about 2 ulp above the subnormals.
double exp_nonpositive(double x) {
  if (x < -745.0) return 0.0;
  const int k = -static_cast<int>(-x * kInvLn2 + 0.5);  // round(x / ln2), k in [-1075, 0]
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double s = 1.0;
  for (int n = 18; n >= 1; --n) s = 1.0 + r * s / n;
  if (k < -1000) return (s * pow2(k + 600)) * pow2(-600);
  return s * pow2(k);
}

double normal_pdf(double t) { return exp_nonpositive(-0.5 * t * t) * kInvSqrt2Pi; }

// Q(t) = P(Z > t) for t >= 0. Below 2: Q = 1/2 - phi(t) (t + t^3/3 + t^5/(3 5) + ...), whose
// terms are all positive. From 2 on: Laplace's continued fraction
// Q = phi(t) / (t + 1/(t + 2/(t + 3/(t + ...)))) cut at depth 200, evaluated from the bottom up.
// Relative error below 1e-14 on [0, 2) and about 1e-16 beyond, so the tail keeps full precision.
double normal_upper_tail(double t) {
  if (t < 2.0) {
    const double t2 = t * t;
    double term = t;
    double sum = t;
    for (int n = 1; n < 200; ++n) {
      term = term * t2 / (2 * n + 1);
      const double next = sum + term;
      if (next == sum) break;
      sum = next;
    }
    return 0.5 - normal_pdf(t) * sum;
  }
  double f = t;
  for (int n = 200; n >= 1; --n) f = t + n / f;
  return normal_pdf(t) / f;
}

// The t >= 0 with Q(t) = q, for 0 < q < 1/2, by bisection on [0, 40] (Q(40) underflows to 0)
// down to adjacent doubles: about 110 evaluations, done once per epoch.
double upper_tail_quantile(double q) {
  double lo = 0.0;   // Q(lo) >= q
  double hi = 40.0;  // Q(hi) < q
  for (int it = 0; it < 2000; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (normal_upper_tail(mid) >= q) lo = mid; else hi = mid;
  }
  const double err_lo = normal_upper_tail(lo) - q;
  const double err_hi = q - normal_upper_tail(hi);
  return err_hi < err_lo ? hi : lo;
}

}  // namespace

// p > 1/2 is reduced to the upper tail of 1 - p, which is exact for p in [1/2, 1]; so
// normal_quantile(1 - p) == -normal_quantile(p) bit for bit whenever 1 - p is exact.
// The last p and its quantile are kept per thread: the integer strategy asks for the same p twice
// an epoch (matrices and vectors), and the bisection takes microseconds.
double normal_quantile(double p) {
  check(p > 0.0 && p < 1.0, "normal_quantile: p = ", p, ": expected 0 < p < 1");
  if (p == 0.5) return 0.0;
  thread_local double last_p = 0.5, last_z = 0.0;
  if (p != last_p) {
    last_z = p < 0.5 ? -upper_tail_quantile(p) : upper_tail_quantile(1.0 - p);
    last_p = p;
  }
  return last_z;
}

// (2^a - 1) t is formed exactly in int64, then divided by t_decay, plus 1 and inverted in double.
double alpha_schedule(std::int64_t epoch, int a, std::int64_t t_decay) {
  check(epoch >= 0, "alpha_schedule: epoch = ", epoch, ": expected >= 0");
  check(a >= 0 && a <= 30, "alpha_schedule: a = ", a, ": expected 0 <= a <= 30");
  check(t_decay >= 1, "alpha_schedule: t_decay = ", t_decay, ": expected >= 1");
  const std::int64_t scale = (std::int64_t{1} << a) - 1;
  check(epoch <= (std::int64_t{1} << 62) / (scale + 1), "alpha_schedule: epoch = ", epoch,
        " is too large for a = ", a, ": (2^a - 1) * epoch must fit in 62 bits");
  const double ratio = static_cast<double>(scale * epoch) / static_cast<double>(t_decay);
  return 1.0 / (ratio + 1.0);
}

// z_{1 - alpha/2} is taken as -z_{alpha/2} (the upper tail quantile of alpha/2), which avoids
// rounding 1 - alpha/2; alpha = 1 gives z = 0 and the threshold 0. With threshold 0 every |Z|
// qualifies, so the caller must treat Z = 0 as never moving (sign(0) = 0), as ALGORITHM.md 2.6 says.
std::int64_t update_threshold(double v, std::int64_t n_pairs, int rank, double alpha) {
  check(std::isfinite(v) && v >= 0.0, "update_threshold: v = ", v, ": expected a finite noise variance >= 0");
  check(n_pairs >= 0, "update_threshold: n_pairs = ", n_pairs, ": expected >= 0");
  check(rank >= 1, "update_threshold: rank = ", rank, ": expected >= 1 (es.rank)");
  check(alpha > 0.0 && alpha <= 1.0, "update_threshold: alpha = ", alpha, ": expected 0 < alpha <= 1");
  check(n_pairs <= (std::int64_t{1} << 53) / rank, "update_threshold: n_pairs * rank = ", n_pairs, " * ", rank,
        ": expected at most 2^53 (exact in double)");
  if (n_pairs == 0 || alpha == 1.0) return 0;
  const double z = -normal_quantile(0.5 * alpha);
  const double root = std::sqrt(static_cast<double>(n_pairs * rank));
  const double threshold = std::ceil(v * root * z);
  check(threshold < 0x1p62, "update_threshold: v * sqrt(n_pairs * rank) * z = ", threshold,
        " (v = ", v, ", n_pairs = ", n_pairs, ", rank = ", rank, ", alpha = ", alpha,
        "): expected below 2^62; lower the noise variance or the number of pairs");
  return static_cast<std::int64_t>(threshold);
}

}  // namespace eggroll::q
