// A minibatch every member reads (ForwardContext::shared_input): the first linear layer computes
// x W^T once and adds each member's correction. Its result must be bit-identical to the plain
// path on the input repeated once per member, for every noiser, backend and member range.
#include <gtest/gtest.h>

#include <cstring>

#include "eggroll/model/model.hpp"
#include "support/es_test_helpers.hpp"

namespace eggroll {
namespace {

using namespace es_test;
using testing::random_tensor;

Tensor repeat_rows(const Tensor& x, std::int64_t times) {
  Tensor out(DType::f32, {x.dim(0) * times, x.dim(1)});
  for (std::int64_t j = 0; j < times; ++j) std::memcpy(out.data<float>() + j * x.numel(), x.data<float>(), x.nbytes());
  return out;
}

TEST(SharedInput, FirstLayerOnceEqualsTheRepeatedInputBitForBit) {
  MlpSpec spec;
  spec.input_dim = 37;
  spec.output_dim = 3;
  spec.hidden = {70, 6};
  spec.norm = "layer";
  const std::int64_t population = 8, rows = 5;
  const Tensor x = random_tensor({rows, spec.input_dim}, 5);
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu}) {
    auto backend = make_backend(kind);
    for (const char* name : {"eggroll", "eggroll_sign", "eggroll_baseline", "open_es", "sparse", "noop"}) {
      SCOPED_TRACE(backend->name() + " " + name);
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
