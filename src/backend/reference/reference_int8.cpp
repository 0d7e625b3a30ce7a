// The reference backend's int8 ops (ALGORITHM.md section 2): plain scalar loops that state the
// math once, in int64 wherever a sum could leave int32; the oracle every cpu level is tested against.
#include <cstdlib>
#include <vector>

#include "backend/int8_ops.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll::reference_int8 {
namespace {

using q::clip8;
using q::floor_div;

// The factors of member j: B (n, r) and A (m, r), or nulls when the member is unperturbed.
struct MemberFactors {
  const std::int8_t* b = nullptr;
  const std::int8_t* a = nullptr;
  int sign = 0;
};

MemberFactors member_factors(const QFactors& f, std::int64_t member) {
  MemberFactors mf;
  if (f.blocks == nullptr || f.sign == nullptr || f.sign[member] == 0) return mf;
  const std::int8_t* block = f.blocks[member];
  if (block == nullptr) return mf;
  mf.b = block;
  mf.a = block + f.n * f.rank;
  mf.sign = f.sign[member] > 0 ? 1 : -1;
  return mf;
}

void check_factors(const QFactors& f, std::int64_t m, std::int64_t n, const char* op) {
  if (f.blocks == nullptr) return;
  check(f.m == m && f.n == n && f.rank >= 1, op, ": factors are for (", f.m, ", ", f.n, ") at rank ",
        f.rank, ", expected (", m, ", ", n, ") at rank >= 1; build the QFactors for this matrix");
  check(f.shift >= 0 && f.shift < 63, op, ": factor shift = ", f.shift, ", expected 0 .. 62");
}

}  // namespace

// y[i][a] = clip(floor((x_i . W_a + s_j floor(((x_i B_j) . A_j[a]) / 2^S)) / D_n)).
void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x, const std::int8_t* w,
         const QFactors& f, std::int8_t* y, const QAddend& add) {
  check_factors(f, m, n, "qmm");
  const std::int64_t d_n = qmm_divisor(n);
  const std::int64_t r = f.rank;
  std::vector<std::int64_t> xb(static_cast<std::size_t>(r));
  for (std::int64_t i = 0; i < batch.rows(); ++i) {
    const std::int8_t* xi = x + i * n;
    const MemberFactors mf = member_factors(f, i / batch.rows_per_member);
    if (mf.sign != 0) {
      for (std::int64_t c = 0; c < r; ++c) {
        xb[c] = 0;
        for (std::int64_t k = 0; k < n; ++k) xb[c] += std::int64_t{xi[k]} * mf.b[k * r + c];
      }
    }
    for (std::int64_t a = 0; a < m; ++a) {
      std::int64_t acc = 0;
      for (std::int64_t k = 0; k < n; ++k) acc += std::int64_t{xi[k]} * w[a * n + k];
      if (mf.sign != 0) {
        std::int64_t p = 0;
        for (std::int64_t c = 0; c < r; ++c) p += xb[c] * mf.a[a * r + c];
        acc += mf.sign * floor_div(p, std::int64_t{1} << f.shift);
      }
      std::int64_t out = clip8(floor_div(acc, d_n));
      if (add.rows != nullptr) out += add.rows[i * m + a];
      if (add.vec != nullptr) out += add.vec[(i / batch.rows_per_member) * add.vec_stride + a];
      y[i * m + a] = static_cast<std::int8_t>(clip8(out));
    }
  }
}

// y[i][k] = clip(W[t][k] + s_j floor((A_j[t] . B_j[k]) / 2^S)), t = tokens[i].
void qembedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                const std::int8_t* w, const QFactors& f, std::int8_t* y) {
  check_factors(f, vocab, d, "qembedding");
  const std::int64_t r = f.rank;
  for (std::int64_t i = 0; i < batch.rows(); ++i) {
    const std::int64_t t = tokens[i];
    check(t >= 0 && t < vocab, "qembedding: token ", t, " at row ", i, ", expected 0 .. ", vocab - 1);
    const MemberFactors mf = member_factors(f, i / batch.rows_per_member);
    for (std::int64_t k = 0; k < d; ++k) {
      std::int64_t v = w[t * d + k];
      if (mf.sign != 0) {
        std::int64_t p = 0;
        for (std::int64_t c = 0; c < r; ++c) p += std::int64_t{mf.a[t * r + c]} * mf.b[k * r + c];
        v += mf.sign * floor_div(p, std::int64_t{1} << f.shift);
      }
      y[i * d + k] = static_cast<std::int8_t>(clip8(v));
    }
  }
}

// mav = max(floor(sum |x| / d), 1); y = clip(floor(x w / mav)).
void ql1_norm(const MemberRows& batch, std::int64_t d, const std::int8_t* x, const std::int8_t* w, std::int64_t w_stride,
              std::int8_t* y) {
  for (std::int64_t i = 0; i < batch.rows(); ++i) {
    const std::int8_t* xi = x + i * d;
    const std::int8_t* wi = w + (i / batch.rows_per_member) * w_stride;
    std::int64_t sum = 0;
    for (std::int64_t k = 0; k < d; ++k) sum += std::abs(std::int64_t{xi[k]});
    std::int64_t mav = floor_div(sum, d);
    if (mav < 1) mav = 1;
    for (std::int64_t k = 0; k < d; ++k)
      y[i * d + k] = static_cast<std::int8_t>(clip8(floor_div(std::int64_t{xi[k]} * wi[k], mav)));
  }
}

// y = clip(a + b + v[member]).
void qadd(const MemberRows& batch, std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v,
          std::int64_t v_stride, std::int8_t* y) {
  for (std::int64_t i = 0; i < batch.rows(); ++i) {
    const std::int8_t* vi = v != nullptr ? v + (i / batch.rows_per_member) * v_stride : nullptr;
    for (std::int64_t k = 0; k < d; ++k) {
      std::int64_t s = a[i * d + k];
      if (b != nullptr) s += b[i * d + k];
      if (vi != nullptr) s += vi[k];
      y[i * d + k] = static_cast<std::int8_t>(clip8(s));
    }
  }
}

// g = floor((f + 127) h / 256).
void qgru_gate(std::int64_t n, const std::int8_t* f, const std::int8_t* h, std::int8_t* g) {
  for (std::int64_t k = 0; k < n; ++k)
    g[k] = static_cast<std::int8_t>(floor_div((std::int64_t{f[k]} + 127) * h[k], 256));
}

// h' = clip(h + floor((f + 127) (hh - h) / 256)), in place on h.
void qgru_update(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h) {
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t step = floor_div((std::int64_t{f[k]} + 127) * (std::int64_t{hh[k]} - h[k]), 256);
    h[k] = static_cast<std::int8_t>(clip8(h[k] + step));
  }
}

// ll[row] = loglik of 2.5 for the row's 256 logits and its target.
void qloglik(std::int64_t rows, const std::int8_t* logits, const std::int32_t* targets, std::int32_t* ll) {
  for (std::int64_t i = 0; i < rows; ++i) {
    check(targets[i] >= 0 && targets[i] < 256, "qloglik: target ", targets[i], " at row ", i, ", expected 0 .. 255");
    ll[i] = q::loglik(logits + i * 256, targets[i]);
  }
}

// z[a][b] += sum_k d[k] sum_c A_k[a][c] B_k[b][c], one pair at a time in k order.
void qupdate_accumulate(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                        const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  for (std::int64_t k = 0; k < n_pairs; ++k) {
    if (d[k] == 0 || blocks[k] == nullptr) continue;
    const std::int8_t* bk = blocks[k];
    const std::int8_t* ak = blocks[k] + n * rank;
    for (std::int64_t a = 0; a < m; ++a)
      for (std::int64_t b = 0; b < n; ++b) {
        std::int64_t p = 0;
        for (std::int64_t c = 0; c < rank; ++c) p += std::int64_t{ak[a * rank + c]} * bk[b * rank + c];
        z[a * n + b] += d[k] * p;
      }
  }
}

// Each value on its own, in order.
std::int64_t qapply_moves(std::int64_t n, const std::int64_t* z, std::int64_t threshold, std::int8_t* w) {
  std::int64_t moved = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (z[i] == 0 || (z[i] < 0 ? -z[i] : z[i]) < threshold) continue;
    const std::int32_t next = q::clip8(w[i] + (z[i] > 0 ? 1 : -1));
    moved += next != w[i];
    w[i] = static_cast<std::int8_t>(next);
  }
  return moved;
}

}  // namespace eggroll::reference_int8
