// Where the time of an EGGROLL forward goes, per row, on one thread (or --threads N): plain inference of the
// float MLP, generating the view's noise alone (every pair's factors, in one pass; nothing with the
// table, read in place), the perturbed forward with that noise already in the view, and the whole:
// a fresh view's forward, which generates each block of rows' factors just before it reads them.
//   forward_breakdown [--models medium,large] [--ranks 1,4] [--noise generator,table]
//                     [--members 2048] [--rows 1] [--reps 40] [--threads 1] [--chunk 0]
// --chunk C: each forward in calls of C members (as `eggroll bench` and training do, a thread's
// chunk of members at a time; C must divide the members); 0: one call for all members.
// medium = 64-512-64, large = 256-2048-256 (no biases, ReLU), as `eggroll bench`. Each figure is
// the best of `reps` timings (the machine is shared; the best is the least disturbed), so the
// parts need not add up to the whole exactly.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "eggroll/core/system.hpp"
#include "eggroll/es/noiser.hpp"
#include "eggroll/model/model.hpp"

using namespace eggroll;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) out.push_back(part);
  return out;
}

template <typename Fn>
double best_seconds(int reps, Fn fn) {
  double best = 1e30;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string models = "medium,large", ranks = "1,4", noises = "generator,table";
  std::int64_t members = 2048, rows_per_member = 1, chunk = 0;
  int reps = 40, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--models") models = v;
    else if (k == "--ranks") ranks = v;
    else if (k == "--noise") noises = v;
    else if (k == "--members") members = std::atol(v.c_str());
    else if (k == "--rows") rows_per_member = std::atol(v.c_str());
    else if (k == "--reps") reps = std::atoi(v.c_str());
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else if (k == "--chunk") chunk = std::atol(v.c_str());
    else {
      std::fprintf(stderr, "forward_breakdown: unknown option %s\n", k.c_str());
      return 1;
    }
  }
  if (chunk <= 0) chunk = members;
  if (members % chunk != 0) {
    std::fprintf(stderr, "forward_breakdown: --chunk %lld does not divide --members %lld\n",
                 static_cast<long long>(chunk), static_cast<long long>(members));
    return 1;
  }
  retain_freed_memory();
  omp_set_num_threads(threads);
  auto backend = make_backend(BackendKind::cpu);
  std::printf("%d thread(s), %lld members x %lld rows; ns per row, best of %d\n", threads,
              static_cast<long long>(members), static_cast<long long>(rows_per_member), reps);
  std::printf("%-8s %4s %-9s %10s %10s %14s %10s %7s\n", "model", "rank", "noise", "inference", "noise fill",
              "fwd - infer", "whole", "ratio");
  for (const std::string& name : split(models)) {
    MlpSpec spec;
    const bool large = name == "large";
    spec.input_dim = large ? 256 : 64;
    spec.hidden = {large ? 2048 : 512};
    spec.output_dim = large ? 256 : 64;
    spec.activation = Activation::relu;
    spec.bias = false;
    Mlp model(spec, 1);
    Tensor x(DType::f32, {chunk * rows_per_member, spec.input_dim});
    std::mt19937 gen(7);
    std::normal_distribution<float> normal;
    for (std::int64_t k = 0; k < x.numel(); ++k) x.data<float>()[k] = normal(gen);
    // every member's rows, a chunk of members per call (each chunk the same input rows)
    const auto forward = [&](PopulationView* view) {
      for (std::int64_t first = 0; first < members; first += chunk) {
        ForwardContext ctx = view == nullptr ? ForwardContext{*backend}
                                             : ForwardContext{*backend, view, rows_per_member, first, chunk};
        model.forward(ctx, x);
      }
    };
    for (const std::string& r : split(ranks))
      for (const std::string& noise : split(noises)) {
        EsConfig es;
        es.noiser = "eggroll";
        es.population = members;
        es.rank = std::atoi(r.c_str());
        es.sigma = 0.01;
        es.noise_source = noise;
        auto noiser = make_noiser(es, 3);
        std::int64_t epoch = 0;
        const double infer = best_seconds(reps, [&] { forward(nullptr); });
        const double fill = best_seconds(reps, [&] {
          PopulationView view(*noiser, epoch++, 0.01, 0, members);
          noiser->prefetch(view, model.params());
        });
        PopulationView cached(*noiser, 0, 0.01, 0, members);
        noiser->prefetch(cached, model.params());
        const double fwd = best_seconds(reps, [&] { forward(&cached); });
        const double whole = best_seconds(reps, [&] {  // a fresh view, as an epoch's: the forward generates
          PopulationView view(*noiser, epoch++, 0.01, 0, members);
          forward(&view);
        });
        const double per_row = 1e9 / static_cast<double>(members * rows_per_member);
        std::printf("%-8s %4s %-9s %10.0f %10.0f %14.0f %10.0f %7.3f\n", name.c_str(), r.c_str(), noise.c_str(),
                    infer * per_row, fill * per_row, (fwd - infer) * per_row, whole * per_row, infer / whole);
        std::fflush(stdout);
      }
  }
  return 0;
}
