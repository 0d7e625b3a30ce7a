// Fitness shaping (ALGORITHM.md 1.3): raw member scores -> shaped fitness f_i, and the
// replacement of non-finite scores that runs before it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eggroll {

// Raw scores s_0..s_{N-1}, higher is better (a minimisation task negates its loss). All
// statistics are computed in double, sums taken in index order, so results are deterministic.
//
//   zscore          f_i = (s_i - mean) / sqrt(var + 1e-5), mean and population variance
//                   var = (1/N) sum_i (s_i - mean)^2 over all N members.
//   group_zscore(G) the same inside each block b of G consecutive members, with the block's own
//                   mean_b and population variance var_b. G must divide N and be even, so an
//                   antithetic pair never straddles two blocks. A block of tied scores gives
//                   exactly f = 0 (the same holds for zscore when all N scores are tied).
//   centered_rank   rank_i in 0..N-1 in increasing score order, tied scores sharing the mean of
//                   their ranks; f_i = rank_i / (N - 1) - 0.5, in [-0.5, 0.5]. N = 1 gives 0.
//   antithetic_sign d_k = sign(s_{2k} - s_{2k+1}) in {-1, 0, +1}; f_{2k} = d_k, f_{2k+1} = -d_k.
//                   N must be even.
//   raw             f_i = s_i (for debugging).
enum class Shaping { zscore, group_zscore, centered_rank, antithetic_sign, raw };

// "zscore", "group_zscore", "centered_rank", "antithetic_sign", "raw"; an unknown name throws an
// Error listing the allowed ones.
Shaping shaping_from_name(const std::string& name);
std::string shaping_name(Shaping shaping);

// Replaces every non-finite score (NaN, +inf, -inf) by the worst (lowest) finite score and
// returns how many were replaced. If no score is finite, leaves scores unchanged and returns
// scores.size() (the caller then skips the epoch's update).
std::int64_t replace_nonfinite_scores(std::vector<double>& scores);

// Shaped fitness (N values) for N raw scores. group_size is G for group_zscore and ignored by
// the others. Throws an Error when a score is not finite (call replace_nonfinite_scores first),
// when group_zscore's G is not a positive even divisor of N, or when antithetic_sign gets an
// odd N.
std::vector<double> shape_fitness(Shaping shaping, const std::vector<double>& scores,
                                  std::int64_t group_size);

}  // namespace eggroll
