// A minibatch every member reads (ForwardContext::shared_input): the first linear layer computes
// x W^T once and adds each member's correction. Its result must be bit-identical to the plain
// path on the input repeated once per member, for every noiser, backend and member range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "eggroll/model/model.hpp"
#include "support/es_test_helpers.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using namespace es_test;
using testing::random_tensor;

Tensor repeat_rows(const Tensor& x, std::int64_t times) {
  Tensor out(DType::f32, {x.dim(0) * times, x.dim(1)});
  for (std::int64_t j = 0; j < times; ++j) std::memcpy(out.data<float>() + j * x.numel(), x.data<float>(), x.nbytes());
  return out;
}

// With a norm the first layer's bias is its epilogue; without one its activation too (applied
// member by member after the shared product, in the GEMM's stores for the repeated input).
TEST(SharedInput, FirstLayerOnceEqualsTheRepeatedInputBitForBit) {
  MlpSpec spec;
  spec.input_dim = 37;
  spec.output_dim = 3;
  spec.hidden = {70, 6};
  const std::int64_t population = 8, rows = 5;
  const Tensor x = random_tensor({rows, spec.input_dim}, 5);
  for (const char* norm : {"layer", "none"})
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu}) {
    spec.norm = norm;
    auto backend = make_backend(kind);
    for (const char* name : {"eggroll", "eggroll_sign", "eggroll_baseline", "open_es", "sparse", "noop"}) {
      SCOPED_TRACE(backend->name() + " " + name + " norm " + norm);
      Mlp model(spec, 3);
      EsConfig es = es_config(name, population, 2, 0.1);
      if (std::string(name) == "eggroll_baseline") es.group_size = 4;
      auto noiser = make_noiser(es, 9);
      PopulationView view(*noiser, 0, 0.1, 0, population);
      noiser->prefetch(view, model.params());
      // The whole population, then a sub-range as a thread's block would see it.
      for (auto [begin, count] : {std::pair<std::int64_t, std::int64_t>{0, population}, {3, 4}}) {
        ForwardContext shared{*backend, &view, rows, begin, count};
        shared.shared_input = true;
        ForwardContext plain{*backend, &view, rows, begin, count};
        const Tensor a = model.forward(shared, x);
        const Tensor b = model.forward(plain, repeat_rows(x, count));
        ASSERT_EQ(a.shape(), b.shape());
        EXPECT_EQ(0, std::memcmp(a.data<float>(), b.data<float>(), a.nbytes())) << "members from " << begin;
      }
    }
  }
}

// Backend::lowrank_correction_onto promises the bits of copying base into every member's rows
// and then lowrank_correction, at every level: members with their own blocks, an unperturbed
// member (coef 0) with a block and one without, one row or several per member, ranks in and out of the
// vectorised set, threads.
TEST(SharedInput, CorrectionOntoBaseEqualsCopyThenCorrection) {
  struct S { std::int64_t members, rpm, m, n, r; };
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu})
    for (const std::string& level : testing::simd_levels(*make_backend(kind)))
      for (S s : {S{5, 1, 64, 196, 1}, S{6, 7, 10, 64, 2}, S{4, 3, 33, 17, 3}, S{5, 2, 70, 40, 4}})
        for (int threads : {1, 2}) {
          auto be = make_backend(kind);
          be->set_simd(level);
          be->set_threads(threads);
          SCOPED_TRACE(be->name() + " " + level + " m=" + std::to_string(s.m) + " r=" + std::to_string(s.r));
          const std::int64_t rows = s.members * s.rpm, len = s.r * (s.m + s.n);
          const auto x = testing::random_values(rows * s.n, 3), base = testing::random_values(s.rpm * s.m, 4);
          const auto factors = testing::random_values(s.members * len, 5);
          std::vector<const float*> blocks(static_cast<std::size_t>(s.members));
          std::vector<float> coef(static_cast<std::size_t>(s.members));
          for (std::int64_t j = 0; j < s.members; ++j) {
            blocks[j] = j == 2 ? nullptr : factors.data() + j * len;  // member 2: unperturbed, no block
            coef[j] = j == 1 || j == 2 ? 0.0f : 0.1f * static_cast<float>(j % 2 ? -1 : 1);  // 1: unperturbed
          }
          const LowRankFactors f{s.m, s.n, s.r, blocks.data(), coef.data()};
          std::vector<float> onto(static_cast<std::size_t>(rows * s.m), std::nanf("")), apart(onto.size());
          be->lowrank_correction_onto({s.members, s.rpm}, f, x.data(), base.data(), onto.data());
          for (std::int64_t j = 0; j < s.members; ++j)
            std::copy(base.begin(), base.end(), apart.begin() + j * s.rpm * s.m);
          be->lowrank_correction({s.members, s.rpm}, f, x.data(), apart.data());
          ASSERT_EQ(0, std::memcmp(onto.data(), apart.data(), onto.size() * sizeof(float)));
        }
}

TEST(SharedInput, WrongRowCountIsAClearError) {
  MlpSpec spec;
  spec.input_dim = 4;
  spec.hidden = {3};
  Mlp model(spec, 1);
  auto backend = make_backend(BackendKind::cpu);
  auto noiser = make_noiser(es_config("eggroll", 4, 1, 0.1), 1);
  PopulationView view(*noiser, 0, 0.1, 0, 4);
  ForwardContext ctx{*backend, &view, 2};
  ctx.shared_input = true;
  try {
    model.forward(ctx, random_tensor({8, 4}, 1));  // 4 members x 2 rows: not the shared 2 rows
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shared input has 8 rows"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eggroll
