// Fitness shapers and non-finite score replacement; the math is in eggroll/es/shaping.hpp.
#include "eggroll/es/shaping.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eggroll/core/error.hpp"

namespace eggroll {

namespace {

constexpr double kZscoreEps = 1e-5;

// f[i] = (s[i] - mean) / sqrt(var + 1e-5) for i in [begin, end), population statistics of that
// range. A tied range gives exactly 0 (the computed mean of equal values can differ from them
// by rounding, so ties are detected rather than left to the formula).
void zscore_range(const std::vector<double>& s, std::size_t begin, std::size_t end,
                  std::vector<double>& f) {
  const double first = s[begin];
  bool tied = true;
  double sum = 0.0;
  for (std::size_t i = begin; i < end; ++i) {
    sum += s[i];
    tied = tied && s[i] == first;
  }
  if (tied) {
    for (std::size_t i = begin; i < end; ++i) f[i] = 0.0;
    return;
  }
  const double count = static_cast<double>(end - begin);
  const double mean = sum / count;
  double sq = 0.0;
  for (std::size_t i = begin; i < end; ++i) sq += (s[i] - mean) * (s[i] - mean);
  const double inv_std = 1.0 / std::sqrt(sq / count + kZscoreEps);
  for (std::size_t i = begin; i < end; ++i) f[i] = (s[i] - mean) * inv_std;
}

std::vector<double> centered_rank(const std::vector<double>& s) {
  const std::size_t n = s.size();
  std::vector<double> f(n, 0.0);
  if (n <= 1) return f;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s[a] < s[b]; });
  const double denom = static_cast<double>(n - 1);
  std::size_t run = 0;
  while (run < n) {
    std::size_t last = run;  // [run, last] is a run of tied scores in sorted order
    while (last + 1 < n && s[order[last + 1]] == s[order[run]]) ++last;
    const double rank = 0.5 * static_cast<double>(run + last);
    for (std::size_t j = run; j <= last; ++j) f[order[j]] = rank / denom - 0.5;
    run = last + 1;
  }
  return f;
}

}  // namespace

Shaping shaping_from_name(const std::string& name) {
  if (name == "zscore") return Shaping::zscore;
  if (name == "group_zscore") return Shaping::group_zscore;
  if (name == "centered_rank") return Shaping::centered_rank;
  if (name == "antithetic_sign") return Shaping::antithetic_sign;
  if (name == "raw") return Shaping::raw;
  throw_error("unknown fitness shaping '", name,
              "': expected one of zscore, group_zscore, centered_rank, antithetic_sign, raw "
              "(set es.shaping)");
}

std::string shaping_name(Shaping shaping) {
  switch (shaping) {
    case Shaping::zscore: return "zscore";
    case Shaping::group_zscore: return "group_zscore";
    case Shaping::centered_rank: return "centered_rank";
    case Shaping::antithetic_sign: return "antithetic_sign";
    case Shaping::raw: return "raw";
  }
  throw_error("invalid Shaping value ", static_cast<int>(shaping));
}

std::int64_t replace_nonfinite_scores(std::vector<double>& scores) {
  bool any_finite = false;
  double worst = 0.0;
  for (double s : scores) {
    if (!std::isfinite(s)) continue;
    if (!any_finite || s < worst) worst = s;
    any_finite = true;
  }
  if (!any_finite) return static_cast<std::int64_t>(scores.size());
  std::int64_t n_replaced = 0;
  for (double& s : scores) {
    if (std::isfinite(s)) continue;
    s = worst;
    ++n_replaced;
  }
  return n_replaced;
}

std::vector<double> shape_fitness(Shaping shaping, const std::vector<double>& scores,
                                  std::int64_t group_size) {
  const std::size_t n = scores.size();
  for (std::size_t i = 0; i < n; ++i)
    check(std::isfinite(scores[i]), "fitness shaping got the non-finite score ", scores[i],
          " for member ", i, ": expected finite scores; call replace_nonfinite_scores first");
  std::vector<double> f(n, 0.0);
  switch (shaping) {
    case Shaping::zscore:
      if (n > 0) zscore_range(scores, 0, n, f);
      return f;
    case Shaping::group_zscore: {
      const auto n_members = static_cast<std::int64_t>(n);
      check(group_size > 0 && group_size % 2 == 0 && n_members % group_size == 0,
            "group_zscore: group_size = ", group_size, " with population ", n_members,
            ": expected an even group_size that divides the population (set es.group_size, "
            "e.g. 2)");
      const auto g = static_cast<std::size_t>(group_size);
      for (std::size_t b = 0; b < n; b += g) zscore_range(scores, b, b + g, f);
      return f;
    }
    case Shaping::centered_rank:
      return centered_rank(scores);
    case Shaping::antithetic_sign:
      check(n % 2 == 0, "antithetic_sign shaping needs an even population (antithetic pairs), got ",
            n, " scores; set es.population to an even number");
      for (std::size_t k = 0; k < n; k += 2) {
        const double d = static_cast<double>((scores[k] > scores[k + 1]) - (scores[k] < scores[k + 1]));
        f[k] = d;
        f[k + 1] = 0.0 - d;  // +0 rather than -0 for a tied pair
      }
      return f;
    case Shaping::raw:
      return scores;
  }
  throw_error("invalid Shaping value ", static_cast<int>(shaping));
}

}  // namespace eggroll
