// Integer EGGROLL end to end: int8 noise statistics, the perturbed int8 op against its formula,
// the discrete update's move rate, and the EGG language model learning and resuming bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "eggroll/backend/backend.hpp"
#include "eggroll/es/strategy.hpp"
#include "eggroll/model/egg.hpp"
#include "eggroll/model/qlayers.hpp"
#include "eggroll/model/weight_packs.hpp"
#include "eggroll/quant/qmath.hpp"
#include "eggroll/train/trainer.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

EsConfig q_es(std::int64_t population, int rank) {
  EsConfig es;
  es.noiser = "q_eggroll";
  es.population = population;
  es.rank = rank;
  es.shaping = "antithetic_sign";
  return es;
}

Tensor random_int8(Shape shape, std::uint64_t seed, int lo = -40, int hi = 40) {
  Tensor t(DType::i8, std::move(shape));
  auto v = testing::random_values(t.numel(), seed);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<std::int8_t>()[i] = static_cast<std::int8_t>(lo + static_cast<int>((v[i] + 1.0f) * 0.5f * (hi - lo)));
  return t;
}

TEST(Int8Noise, MeanZeroAndVarianceTheExactV) {
  const double v = int8_noise_variance();
  EXPECT_NEAR(v, 243.56, 6.0);  // the continuous Gaussian's 256 * (1 - small truncation loss)
  const std::int64_t n = 1 << 20;
  std::vector<std::int8_t> e(n);
  fill_int8(noise_stream(3, param_id("w"), 0, 0, NoiseTag::factors), 0, n, e.data());
  double sum = 0, sq = 0, fourth = 0;
  for (std::int8_t x : e) {
    sum += x;
    sq += static_cast<double>(x) * x;
    fourth += std::pow(static_cast<double>(x), 4);
  }
  // Tolerances: 5 standard errors from the sample size (sd of the mean sqrt(v / n); of the mean
  // square sqrt((E x^4 - v^2) / n)).
  EXPECT_NEAR(sum / n, 0.0, 5 * std::sqrt(v / n));
  EXPECT_NEAR(sq / n, v, 5 * std::sqrt((fourth / n - v * v) / n));
  // The table is exactly symmetric, so its own mean is 0 and v is a dyadic rational.
  std::int64_t table_sq = 0;
  for (std::int8_t q : kInt8NormalTable) table_sq += q * q;
  EXPECT_EQ(v, static_cast<double>(table_sq) / 4096.0);
}

TEST(Int8Noise, TableOffsetsCollideAboutAsExpected) {
  // P = 16384 pairs in a 2^24 table: about P^2 / 2^25 = 8 identical offsets expected (Poisson).
  Int8NoiseTable table(5, 24);
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t k = 0; k < 16384; ++k)
    offsets.push_back(static_cast<std::uint64_t>(table.slice(param_id("w"), 0, k, 512) - table.data()));
  std::sort(offsets.begin(), offsets.end());
  const auto same = static_cast<double>(offsets.size() - (std::unique(offsets.begin(), offsets.end()) - offsets.begin()));
  EXPECT_LE(same, 8 + 5 * std::sqrt(8.0));
}

// The perturbed int8 matmul of member i equals ALGORITHM.md 2.1/2.3 computed here in int64.
// From the generator and, read in place at random offsets, from the int8 noise table; a shape
// small enough for the scalar tails and one wide enough for the SIMD tiles.
TEST(QEggroll, PerturbedMatmulMatchesTheFormula) {
  auto backend = make_backend(BackendKind::cpu);
  struct Case {
    const char* source;
    std::int64_t m, n;
    int rank;
  };
  std::vector<Case> cases;
  for (const char* source : {"generator", "table"})
    for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{7, 19}, {70, 45}})
      for (int rank : {1, 2, 3, 4, 8}) cases.push_back({source, m, n, rank});
  for (const auto& [source, m, n, rank] : cases) {
    SCOPED_TRACE(std::string(source) + " " + std::to_string(m) + "x" + std::to_string(n));
    const std::int64_t population = 6;
    ParamStore store;
    Param& w = store.add("w", ParamKind::matrix, random_int8({m, n}, 11 + rank));
    EsConfig es = q_es(population, rank);
    es.noise_source = source;
    es.table_log2_size = 20;
    Strategy s(store, es, OptimConfig{}, 9, 10, *backend);
    auto view = s.ask();
    Tensor x = random_int8({population, n}, 40 + rank, -127, 127);
    ForwardContext ctx{*backend, view.get(), 1};
    Tensor y = qlinear(ctx, w, x);
    const int shift = 4 + 4 + q::rank_shift(rank);
    const std::int64_t dn = 16 * q::isqrt(n);
    for (std::int64_t i = 0; i < population; ++i) {
      const std::int8_t* blk = s.noiser().qfactor_block(*view, w, i / 2);
      if (s.noiser().int8_table() != nullptr) {  // the pair's slice of ALGORITHM.md 1.6, in place
        ASSERT_EQ(blk, s.noiser().int8_table()->slice(w.id, view->noise_epoch(), static_cast<std::uint64_t>(i / 2),
                                                      static_cast<std::uint64_t>(rank * (m + n))));
      }
      ASSERT_EQ(s.noiser().int8_table() != nullptr, std::string(source) == "table");
      const std::int8_t* B = blk;
      const std::int8_t* A = blk + n * rank;
      for (std::int64_t a = 0; a < m; ++a) {
        std::int64_t acc = 0, p = 0;
        for (std::int64_t k = 0; k < n; ++k) acc += x.data<std::int8_t>()[i * n + k] * w.value.data<std::int8_t>()[a * n + k];
        for (int c = 0; c < rank; ++c) {
          std::int64_t xb = 0;
          for (std::int64_t k = 0; k < n; ++k) xb += x.data<std::int8_t>()[i * n + k] * B[k * rank + c];
          p += xb * A[a * rank + c];
        }
        acc += (i % 2 ? -1 : 1) * q::floor_div(p, std::int64_t{1} << shift);
        EXPECT_EQ(y.data<std::int8_t>()[i * m + a], q::clip8(q::floor_div(acc, dn))) << "rank " << rank << " member " << i;
      }
    }
  }
}

TEST(QEggroll, LinearWithAddendIsLinearThenAddAndRefusesBadShapes) {
  auto backend = make_backend(BackendKind::cpu);
  const std::int64_t m = 9, n = 33, population = 6;
  ParamStore store;
  store.add("w", ParamKind::matrix, random_int8({m, n}, 5));
  store.add("b", ParamKind::vector, random_int8({m}, 6));
  const Param& w = store.at("w");  // after both adds: an add may move the store's params
  const Param& bias = store.at("b");
  Strategy s(store, q_es(population, 2), OptimConfig{}, 9, 10, *backend);
  auto view = s.ask();
  ForwardContext ctx{*backend, view.get(), 1};
  const Tensor x = random_int8({population, n}, 7), r = random_int8({population, m}, 8);
  const Tensor fused = qlinear_add(ctx, w, x, &r, &bias);
  const Tensor apart = qadd(ctx, qlinear(ctx, w, x), &r, &bias);
  EXPECT_EQ(0, std::memcmp(fused.data<std::int8_t>(), apart.data<std::int8_t>(), static_cast<std::size_t>(population * m)));
  const Tensor wrong = random_int8({population, m + 1}, 9);
  EXPECT_THAT([&] { qlinear_add(ctx, w, x, &wrong, nullptr); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("the added tensor has i8 (6, 10), expected i8 (6, 9)")));
}

// Weights packed once (WeightPacks) give what packing them in every call gives, from several
// threads at once, and a pack never serves another store's matrix of the same name.
TEST(QEggroll, WeightPacksGiveThePerCallResult) {
  auto backend = make_backend(BackendKind::cpu);
  const std::int64_t m = 40, n = 200, rows = 37;
  ParamStore one, two;
  one.add("w", ParamKind::matrix, random_int8({m, n}, 11));
  two.add("w", ParamKind::matrix, random_int8({m, n}, 12));
  const Tensor x = random_int8({rows, n}, 13);
  auto plain = [&](const ParamStore& s, WeightPacks* packs) {
    ForwardContext ctx{*backend};
    ctx.packs = packs;
    return qlinear(ctx, s.at("w"), x);
  };
  const Tensor want_one = plain(one, nullptr), want_two = plain(two, nullptr);
  WeightPacks packs;
  constexpr int kThreads = 4;
  std::vector<Tensor> got(kThreads);
#pragma omp parallel for num_threads(kThreads)
  for (int t = 0; t < kThreads; ++t) got[t] = plain(t % 2 ? two : one, &packs);
  for (int t = 0; t < kThreads; ++t) {
    const Tensor& want = t % 2 ? want_two : want_one;
    EXPECT_EQ(0, std::memcmp(got[t].data<std::int8_t>(), want.data<std::int8_t>(), static_cast<std::size_t>(rows * m)))
        << "thread " << t;
  }
  EXPECT_EQ(2u, packs.size());
  packs.clear();
  EXPECT_EQ(0u, packs.size());
}

// Under random fitness about alpha_t of the weights move; the threshold grows with sqrt(pairs).
TEST(QEggroll, RandomFitnessMovesAboutAlphaOfTheWeights) {
  auto backend = make_backend(BackendKind::cpu);
  const std::int64_t population = 256;  // 128 pairs
  ParamStore store;
  store.add("w", ParamKind::matrix, random_int8({64, 96}, 1));
  Strategy s(store, q_es(population, 1), OptimConfig{}, 4, 2000, *backend);
  Tensor epoch(DType::i32, {1});
  epoch.data<std::int32_t>()[0] = 1000;  // alpha_1000 = 1 / 16
  s.load_state({{"strategy/epoch", epoch}});
  auto scores = testing::random_values(population, 77);
  EpochUpdate u = s.tell(std::vector<double>(scores.begin(), scores.end()));
  EXPECT_NEAR(u.alpha, 1.0 / 16.0, 1e-12);
  EXPECT_EQ(u.n_pairs_decided, 128);
  EXPECT_NEAR(u.frac_moved, u.alpha, 0.3 * u.alpha) << "threshold " << u.threshold;
  const double v = int8_noise_variance();
  EXPECT_EQ(u.threshold, q::update_threshold(v, 128, 1, 1.0 / 16.0));
  EXPECT_NEAR(static_cast<double>(q::update_threshold(v, 512, 1, 0.0625)) / static_cast<double>(u.threshold), 2.0, 0.01);
}

std::string write_repeating_text(const std::filesystem::path& dir) {
  std::ofstream f(dir / "tiny.txt");
  for (int d = 0; d < 40; ++d) f << "the cat sat on the mat. the cat sat on the mat.\n%\n";
  return (dir / "tiny.txt").string();
}

std::string tiny_lm_config(const std::string& path) {
  return R"(
[run]
epochs = 300
eval_every = 0
[es]
noiser = "q_eggroll"
population = 64
rank = 1
shaping = "antithetic_sign"
alpha_decay_epochs = 100
[model]
kind = "egg"
width = 32
layers = 1
mlp_ratio = 2
[task]
kind = "text"
path = ")" + path + R"("
separator = "%"
tokens_per_epoch = 16
val_fraction = 0.1
eval_streams = 4
)";
}

TEST(EggLanguageModel, LearnsATinyRepeatingText) {
  testing::TempDir tmp;
  auto backend = make_backend(BackendKind::cpu);
  Trainer t(testing::config_from(tiny_lm_config(write_repeating_text(tmp.path()))), *backend);
  const double start = t.evaluate().at("val_bits_per_byte");
  for (int e = 0; e < 300; ++e) t.train_epoch();
  const auto figures = t.evaluate();
  RecordProperty("val_bpb_start", std::to_string(start));
  RecordProperty("val_bpb_end", std::to_string(figures.at("val_bits_per_byte")));
  EXPECT_GT(start, 6.0);
  EXPECT_LT(figures.at("val_bits_per_byte"), 3.5);
  EXPECT_LT(figures.at("val_bits_per_byte"), figures.at("baseline_unigram_bpb"));
}

TEST(EggLanguageModel, ResumeIsBitIdenticalToStraightTraining) {
  testing::TempDir tmp;
  auto backend = make_backend(BackendKind::cpu);
  const Config cfg = testing::config_from(tiny_lm_config(write_repeating_text(tmp.path())), {"run.epochs=12"});
  Trainer straight(cfg, *backend);
  for (int e = 0; e < 12; ++e) straight.train_epoch();
  Trainer first(cfg, *backend);
  for (int e = 0; e < 5; ++e) first.train_epoch();
  Checkpoint ck = first.checkpoint();
  Trainer second(cfg, *backend);
  second.restore(ck);
  for (int e = 5; e < 12; ++e) second.train_epoch();
  for (const Param& p : straight.model().params().all()) {
    const Tensor& q = second.model().params().at(p.name).value;
    EXPECT_EQ(0, std::memcmp(p.value.raw(), q.raw(), p.value.nbytes())) << p.name;
  }
  Checkpoint a = straight.checkpoint(), b = second.checkpoint();
  for (auto& [k, t] : a.tensors) EXPECT_EQ(0, std::memcmp(t.raw(), b.tensors.at(k).raw(), t.nbytes())) << k;
}

TEST(EggLanguageModel, OversizedAccumulationIsRefused) {
  EXPECT_THROW(EggModel(EggSpec{40000, 1, 4}, 0), Error);
}

}  // namespace
}  // namespace eggroll
