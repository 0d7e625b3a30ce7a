// The side of bench/builds_ab.cpp that runs inside each build: a float MLP's plain inference,
// EGGROLL forward and update through the build's own libeggroll, behind a C interface, so that builds_ab can
// load one copy of this module per build (each in its own dlmopen namespace, beside that build's
// library) and time them alternately in one process.
// medium = 64-512-64, large = 256-2048-256 (float: no biases, ReLU; int8: two MM layers of random
// int8 weights, the q_eggroll noiser), as `eggroll bench`; the rows of a
// call are `eggroll bench`'s (2048 a thread), and the EGGROLL forward makes a fresh population view
// per timing, as an epoch does.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "eggroll/core/system.hpp"
#include "eggroll/es/noiser.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/model/qlayers.hpp"
#include "eggroll/noise/noise.hpp"
#include "eggroll/task/task.hpp"
#include "eggroll/train/trainer.hpp"
#include "lm_config.hpp"

using namespace eggroll;

namespace {

// The int8 MLP of `eggroll bench`: two MM layers (ALGORITHM.md 2.1), weights uniform in [-127, 127].
class QMlp final : public Model {
 public:
  QMlp(std::int64_t in, std::int64_t hidden, std::int64_t out) : in_(in), out_(out) {
    const std::int64_t dims[3] = {in, hidden, out};
    for (int l = 0; l < 2; ++l) {
      const std::string name = "layers." + std::to_string(l) + ".weight";
      Tensor w(DType::i8, {dims[l + 1], dims[l]});
      std::vector<std::uint32_t> bits(static_cast<std::size_t>(w.numel()));
      fill_bits(noise_stream(1, param_id(name), 0, 0, NoiseTag::init), 0, bits.size(), bits.data());
      for (std::int64_t k = 0; k < w.numel(); ++k)
        w.data<std::int8_t>()[k] = static_cast<std::int8_t>(static_cast<int>(bits[k] % 255) - 127);
      params_.add(name, ParamKind::matrix, std::move(w));
    }
  }
  std::string kind() const override { return "qmlp"; }
  std::int64_t input_dim() const override { return in_; }
  std::int64_t output_dim() const override { return out_; }
  Tensor forward(ForwardContext& ctx, const Tensor& x) override {
    const Tensor h = qlinear(ctx, params_.at("layers.0.weight"), x);
    return qlinear(ctx, params_.at("layers.1.weight"), h);
  }

 private:
  std::int64_t in_, out_;
};

struct Case {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Trainer> trainer;  // model lm: the EGG language model's training (part 3)
  std::unique_ptr<Model> model;
  std::unique_ptr<Tensor> x;  // one call's rows, read by every call
  std::unique_ptr<Noiser> noiser;
  WeightPacks packs;  // plain inference's packed weights, made once (as `eggroll bench` keeps them)
  std::int64_t members = 0, rows_per_member = 1, chunk = 0, epoch = 0;
};

// Every member's rows through the model: plain inference (view null) or the EGGROLL forward.
void forward_all(Case& c, PopulationView* view) {
  for (std::int64_t first = 0; first < c.members; first += c.chunk) {
    const std::int64_t count = std::min(c.chunk, c.members - first);
    ForwardContext ctx =
        view == nullptr ? ForwardContext{*c.backend} : ForwardContext{*c.backend, view, c.rows_per_member, first, count};
    if (view == nullptr) ctx.packs = &c.packs;
    if (count == c.chunk) {
      c.model->forward(ctx, *c.x);
    } else {
      Tensor part(c.x->dtype(), {count * c.rows_per_member, c.x->shape()[1]});
      std::memcpy(part.raw(), c.x->raw(), part.nbytes());
      c.model->forward(ctx, part);
    }
  }
}

// The int8 update's accumulation alone (Backend::qupdate_accumulate over each matrix, as
// tell_integer calls it, every pair decided with a made-up sign) right after an untimed EGGROLL
// forward.
double int8_update_seconds(Case& c, PopulationView& view) {
  forward_all(c, &view);
  std::vector<std::int8_t> d;
  for (std::int64_t k = view.pair_begin(); k < view.pair_end(); ++k) d.push_back(std::sin(0.7 * k) > 0 ? 1 : -1);
  std::vector<std::vector<std::int64_t>> z;
  std::vector<std::vector<const std::int8_t*>> blocks;
  for (const Param& p : c.model->params().all()) {
    z.emplace_back(static_cast<std::size_t>(p.value.numel()), 0);
    blocks.emplace_back();
    for (std::int64_t k = view.pair_begin(); k < view.pair_end(); ++k)
      blocks.back().push_back(c.noiser->qfactor_block(view, p, k));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t g = 0;
  for (const Param& p : c.model->params().all()) {
    c.backend->qupdate_accumulate(p.rows(), p.cols(), c.noiser->rank(), static_cast<std::int64_t>(d.size()),
                                  blocks[g].data(), d.data(), z[g].data());
    ++g;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

extern "C" {

// A case, or null with a message on stderr where the library refuses it (an unknown model, dtype
// or noise source, an impossible rank, a SIMD level the machine lacks). dtype: f32 or int8; simd: as
// run.simd (the kernel levels are process-wide, per build's namespace).
[[gnu::visibility("default")]] void* builds_ab_open(const char* model, const char* dtype, int rank, const char* noise,
                                                    long members, long rows_per_member, int threads,
                                                    const char* simd) try {
  const bool large = std::strcmp(model, "large") == 0, int8 = std::strcmp(dtype, "int8") == 0;
  if (std::strcmp(model, "lm") == 0) {  // as bench/lm_throughput: width 256, 6 layers, 100 tokens
    omp_set_num_threads(threads);
    retain_freed_memory();
    register_model_kinds();
    register_task_kinds();
    auto c = std::make_unique<Case>();
    c->backend = make_backend(BackendKind::cpu);  // the trainer sets its SIMD level (run.simd)
    c->trainer = std::make_unique<Trainer>(parse_config(lm_config_text(256, 6, members, 100, rank, simd), "<builds_ab>"),
                                           *c->backend);
    return c.release();
  }
  if (!large && std::strcmp(model, "medium") != 0) {
    std::fprintf(stderr, "builds_ab: unknown model %s (medium, large, lm)\n", model);
    return nullptr;
  }
  if (!int8 && std::strcmp(dtype, "f32") != 0) {
    std::fprintf(stderr, "builds_ab: unknown dtype %s (f32, int8)\n", dtype);
    return nullptr;
  }
  retain_freed_memory();
  omp_set_num_threads(threads);
  auto c = std::make_unique<Case>();
  c->backend = make_backend(BackendKind::cpu);
  c->backend->set_simd(simd);
  const std::int64_t in = large ? 256 : 64, hidden = large ? 2048 : 512, out = in;
  if (int8) {
    c->model = std::make_unique<QMlp>(in, hidden, out);
  } else {
    MlpSpec spec;
    spec.input_dim = in;
    spec.hidden = {hidden};
    spec.output_dim = out;
    spec.activation = Activation::relu;
    spec.bias = false;
    c->model = std::make_unique<Mlp>(spec, 1);
  }
  c->members = members;
  c->rows_per_member = rows_per_member;
  c->chunk = std::max<std::int64_t>(1, std::min<std::int64_t>(members, 2048 / rows_per_member * threads));
  c->x = std::make_unique<Tensor>(int8 ? DType::i8 : DType::f32, std::vector<std::int64_t>{c->chunk * rows_per_member, in});
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> byte(-64, 63);
  for (std::int64_t k = 0; k < c->x->numel(); ++k) {
    if (int8)
      c->x->data<std::int8_t>()[k] = static_cast<std::int8_t>(byte(gen));
    else
      c->x->data<float>()[k] = normal(gen);
  }
  EsConfig es;
  es.noiser = int8 ? "q_eggroll" : "eggroll";
  es.population = members;
  es.rank = rank;
  es.sigma = 0.01;
  es.noise_source = noise;
  if (int8) es.shaping = "antithetic_sign";
  es.memory_budget = std::int64_t{8} << 30;
  c->noiser = make_noiser(es, 3);
  return c.release();
} catch (const std::exception& e) {
  std::fprintf(stderr, "builds_ab: %s\n", e.what());
  return nullptr;
}

// Seconds of one pass over every member's rows: plain inference (part 0) or the EGGROLL forward
// (part 1); or (part 2) of the update alone (float: Noiser::accumulate_gradient over each matrix,
// as tell calls it, with made-up fitness; int8: int8_update_seconds) right after an untimed
// EGGROLL forward, which leaves the factor
// blocks where an epoch's forward leaves them; or (part 3, model lm) of one training epoch of the
// language model (its population step: every member's forward over the tokens, then the update).
[[gnu::visibility("default")]] double builds_ab_time(void* handle, int part) {
  Case& c = *static_cast<Case*>(handle);
  if (part == 3) return c.trainer->train_epoch().epoch_s;
  std::unique_ptr<PopulationView> view;
  if (part != 0) view = std::make_unique<PopulationView>(*c.noiser, c.epoch++, 0.01, 0, c.members);
  if (part == 2 && c.noiser->integer()) return int8_update_seconds(c, *view);
  if (part == 2) {
    forward_all(c, view.get());
    std::vector<double> fitness(static_cast<std::size_t>(c.members));
    for (std::size_t i = 0; i < fitness.size(); ++i) fitness[i] = std::sin(0.7 * static_cast<double>(i));
    std::vector<Tensor> grads;
    for (const Param& p : c.model->params().all())
      if (p.low_rank()) grads.emplace_back(DType::f32, p.value.shape());
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t g = 0;
    for (const Param& p : c.model->params().all())
      if (p.low_rank()) c.noiser->accumulate_gradient(*c.backend, *view, p, fitness, grads[g++]);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const auto t0 = std::chrono::steady_clock::now();
  forward_all(c, view.get());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

[[gnu::visibility("default")]] void builds_ab_close(void* handle) { delete static_cast<Case*>(handle); }

}  // extern "C"
