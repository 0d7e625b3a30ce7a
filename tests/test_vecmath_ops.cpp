// The cpu backend's ops through glibc's vector math library (cpu_vecmath.hpp) at every level,
// against the reference backend and the definitions: activations and the softmax
// cross-entropy, whatever the place of a value or row in the call.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using testing::simd_levels;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> values(std::int64_t n, std::uint64_t seed, float lo, float hi) {
  return testing::random_values(n, seed, lo, hi);
}

// Activations at every level: a value's result does not depend on where it lies in the array or
// on the threads' split (the SIMD levels run whole vectors and a masked last one, never a scalar
// tail), and extreme inputs (infinities, NaN, +-0, huge and tiny values) give what the scalar
// functions give.
TEST(BackendOps, ActivationValuesDoNotDependOnTheirPlace) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = values(40000, 91, -12.0f, 12.0f);  // past the parallel threshold
  const std::vector<float> extremes = {0.0f, -0.0f, inf, -inf, kNan, 1e30f, -1e30f, 1e-40f, -1e-40f, 88.7f, -88.7f, 9.0f};
  for (std::size_t i = 0; i < extremes.size(); ++i) x[i * 997] = extremes[i];
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  auto ref = make_backend(BackendKind::reference);
  auto be = make_backend(BackendKind::cpu);
  const int saved = omp_get_max_threads();
  for (const std::string& level : simd_levels(*be))
  for (Activation a : {Activation::relu, Activation::tanh, Activation::gelu, Activation::silu}) {
    be->set_simd(level);
    SCOPED_TRACE(level + " " + activation_name(a));
    std::vector<float> all(x.size()), expect(x.size());
    ref->activation(a, n, x.data(), expect.data());
    omp_set_num_threads(2);
    be->activation(a, n, x.data(), all.data());
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::isnan(expect[i]), std::isnan(all[i])) << "x = " << x[i];
      if (std::isnan(expect[i]) || expect[i] == all[i]) continue;
      // a few ulp of the input's scale (gelu's 1 + erf(x) cancels for x far below 0)
      const float scale = std::max({1.0f, std::fabs(x[i]), std::fabs(expect[i])});
      ASSERT_LE(std::fabs(expect[i] - all[i]), 4e-7f * scale) << "x = " << x[i];
    }
    omp_set_num_threads(1);
    for (std::int64_t first : {1, 3, 15, 16, 17, 1000})
      for (std::int64_t len : {1, 5, 16, 23, 40000 - 1000}) {
        std::vector<float> part(static_cast<std::size_t>(len));
        be->activation(a, len, x.data() + first, part.data());
        ASSERT_EQ(0, std::memcmp(part.data(), all.data() + first, part.size() * sizeof(float)))
            << "first " << first << " len " << len;
      }
    std::vector<float> in_place(x.begin(), x.begin() + 37);  // x == y
    be->activation(a, 37, in_place.data(), in_place.data());
    EXPECT_EQ(0, std::memcmp(in_place.data(), all.data(), in_place.size() * sizeof(float)));
  }
  omp_set_num_threads(saved);
  be->set_simd("auto");
}

// Softmax cross-entropy at every backend and level: against the definition in long double, the
// same correctness flags, a row's result whatever its place in the call (the SIMD level runs 8
// rows per vector and masks the last ones), extreme logits as the scalar definition treats
// them, and a label out of range is an error.
TEST(BackendOps, CrossEntropyMatchesTheDefinitionWhereverTheRowLies) {
  const float inf = std::numeric_limits<float>::infinity();
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu})
  for (const std::string& level : simd_levels(*make_backend(kind)))
  for (std::int64_t classes : {1, 3, 10, 17}) {
    auto be = make_backend(kind);
    be->set_simd(level);
    SCOPED_TRACE(be->name() + " " + level + " classes " + std::to_string(classes));
    const std::int64_t rows = 1029;
    std::vector<float> logits = values(rows * classes, 101 + classes, -20.0f, 20.0f);
    std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int32_t>((i * 7 + 3) % classes);
    // rows with extreme logits: NaN, +-inf, huge, and ties (the first largest counts)
    const float extremes[] = {kNan, inf, -inf, 1e30f, -1e30f};
    for (std::int64_t e = 0; e < 5; ++e) logits[(e * 97) * classes + (e % classes)] = extremes[e];
    for (std::int64_t k = 0; k < classes; ++k) logits[600 * classes + k] = 2.5f;
    std::vector<double> loss(rows);
    std::vector<std::uint8_t> correct(rows);
    be->cross_entropy(rows, classes, logits.data(), labels.data(), rows, loss.data(), correct.data());
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* l = logits.data() + i * classes;
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < classes; ++k)
        if (l[k] > l[best]) best = k;
      long double sum = 0;
      for (std::int64_t k = 0; k < classes; ++k) sum += std::exp(static_cast<long double>(l[k]) - l[best]);
      const long double want = l[best] + std::log(sum) - l[labels[i]];
      ASSERT_EQ(std::isnan(static_cast<double>(want)), std::isnan(loss[i])) << "row " << i;
      if (std::isfinite(static_cast<double>(want))) {
        ASSERT_NEAR(loss[i], static_cast<double>(want), 1e-12 * std::max(1.0L, std::fabs(want))) << "row " << i;
      } else if (!std::isnan(loss[i])) {
        ASSERT_EQ(loss[i], static_cast<double>(want)) << "row " << i;
      }
      ASSERT_EQ(correct[i], best == labels[i] && std::isfinite(static_cast<double>(want))) << "row " << i;
    }
    for (std::int64_t first : {1, 5, 8, 13, 600})
      for (std::int64_t count : {1, 7, 9, 100}) {
        std::vector<double> part(count);
        std::vector<std::uint8_t> part_correct(count);
        be->cross_entropy(count, classes, logits.data() + first * classes, labels.data() + first, count, part.data(),
                          part_correct.data());
        ASSERT_EQ(0, std::memcmp(part.data(), loss.data() + first, count * sizeof(double))) << first << " " << count;
        ASSERT_EQ(0, std::memcmp(part_correct.data(), correct.data() + first, count)) << first << " " << count;
      }
    // a period of labels repeated over the rows
    std::vector<double> periodic(rows);
    be->cross_entropy(rows, classes, logits.data(), labels.data(), 5, periodic.data(), correct.data());
    for (std::int64_t i = 5; i < rows; i += 97) {
      std::vector<std::int32_t> one = {labels[i % 5]};
      double l1 = 0;
      std::uint8_t c1 = 0;
      be->cross_entropy(1, classes, logits.data() + i * classes, one.data(), 1, &l1, &c1);
      ASSERT_EQ(0, std::memcmp(&l1, &periodic[i], sizeof(double))) << "row " << i;
    }
    labels[3] = static_cast<std::int32_t>(classes);
    EXPECT_THROW(be->cross_entropy(rows, classes, logits.data(), labels.data(), rows, loss.data(), correct.data()),
                 std::exception);
  }
}

}  // namespace
}  // namespace eggroll
