// The side of bench/builds_ab.cpp that runs inside each build: a float MLP's plain inference,
// EGGROLL forward and update through the build's own libeggroll, behind a C interface, so that builds_ab can
// load one copy of this module per build (each in its own dlmopen namespace, beside that build's
// library) and time them alternately in one process.
// medium = 64-512-64, large = 256-2048-256 (no biases, ReLU), as `eggroll bench`; the rows of a
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

using namespace eggroll;

namespace {

struct Case {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Mlp> model;
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
      Tensor part(DType::f32, {count * c.rows_per_member, c.x->shape()[1]});
      std::copy_n(c.x->data<float>(), part.numel(), part.data<float>());
      c.model->forward(ctx, part);
    }
  }
}

}  // namespace

extern "C" {

// A case, or null with a message on stderr where the library refuses it (an unknown model or
// noise source, an impossible rank).
[[gnu::visibility("default")]] void* builds_ab_open(const char* model, int rank, const char* noise, long members,
                                                    long rows_per_member, int threads) try {
  const bool large = std::strcmp(model, "large") == 0;
  if (!large && std::strcmp(model, "medium") != 0) {
    std::fprintf(stderr, "builds_ab: unknown model %s (medium, large)\n", model);
    return nullptr;
  }
  retain_freed_memory();
  omp_set_num_threads(threads);
  auto c = std::make_unique<Case>();
  c->backend = make_backend(BackendKind::cpu);
  MlpSpec spec;
  spec.input_dim = large ? 256 : 64;
  spec.hidden = {large ? 2048 : 512};
  spec.output_dim = large ? 256 : 64;
  spec.activation = Activation::relu;
  spec.bias = false;
  c->model = std::make_unique<Mlp>(spec, 1);
  c->members = members;
  c->rows_per_member = rows_per_member;
  c->chunk = std::max<std::int64_t>(1, std::min<std::int64_t>(members, 2048 / rows_per_member * threads));
  c->x = std::make_unique<Tensor>(DType::f32, std::vector<std::int64_t>{c->chunk * rows_per_member, spec.input_dim});
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  for (std::int64_t k = 0; k < c->x->numel(); ++k) c->x->data<float>()[k] = normal(gen);
  EsConfig es;
  es.noiser = "eggroll";
  es.population = members;
  es.rank = rank;
  es.sigma = 0.01;
  es.noise_source = noise;
  es.memory_budget = std::int64_t{8} << 30;
  c->noiser = make_noiser(es, 3);
  return c.release();
} catch (const std::exception& e) {
  std::fprintf(stderr, "builds_ab: %s\n", e.what());
  return nullptr;
}

// Seconds of one pass over every member's rows: plain inference (part 0) or the EGGROLL forward
// (part 1); or (part 2) of the update alone (Noiser::accumulate_gradient over each matrix, as tell
// calls it, with made-up fitness) right after an untimed EGGROLL forward, which leaves the factor
// blocks where an epoch's forward leaves them.
[[gnu::visibility("default")]] double builds_ab_time(void* handle, int part) {
  Case& c = *static_cast<Case*>(handle);
  std::unique_ptr<PopulationView> view;
  if (part != 0) view = std::make_unique<PopulationView>(*c.noiser, c.epoch++, 0.01, 0, c.members);
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
