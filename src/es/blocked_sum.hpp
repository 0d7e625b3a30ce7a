// A sum in double over many values whose bits do not depend on the number of threads.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace eggroll::es_detail {

// sum over e < n of term(e) (a double): blocks of kBlock values, in parallel where there are more
// than four, each summed in eight partial sums; the blocks' sums added in order, so the result is
// the same for any number of threads. One chain of dependent adds costs about four cycles a value
// (milliseconds an epoch at a million parameters, on one thread while the others wait).
template <class Term>
double blocked_sum(std::int64_t n, Term term) {
  constexpr std::int64_t kBlock = std::int64_t{1} << 14;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> block_sum(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static) if (blocks > 4)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t end = std::min(n, (b + 1) * kBlock);
    double part[8] = {};
    std::int64_t e = b * kBlock;
    for (; e + 8 <= end; e += 8)
      for (int l = 0; l < 8; ++l) part[l] += term(e + l);
    for (; e < end; ++e) part[0] += term(e);
    double sum = 0.0;
    for (double p : part) sum += p;
    block_sum[static_cast<std::size_t>(b)] = sum;
  }
  double sum = 0.0;
  for (double v : block_sum) sum += v;
  return sum;
}

}  // namespace eggroll::es_detail
