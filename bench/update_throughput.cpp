// G multiply-adds per second of the update's sum over terms on the cpu backend at given matrix
// shapes and ranks, without shaping, noise or optimizer: float (Backend::lowrank_update) or int8
// (Backend::qupdate_accumulate with signs +-1, as the integer strategy passes them).
//   update_throughput [--shapes 512x64,64x512,2048x256,256x2048] [--ranks 1,4] [--terms 2048]
//                     [--reps 15] [--dtype f32|int8] [--byte-max 61]
// Shapes are m x n (outputs x inputs, as the model's matrices). The factor blocks are random
// normals (int8: random bytes in [-byte-max, byte-max], at most 128, by default the int8 noise's range; 127
// makes the AVX2 level's sign quads give way to the int16 term pairs) laid out as a view lays them out (one block of
// r (n + m) values per term). Threads: the OpenMP default (OMP_NUM_THREADS). Freed memory is kept
// as the CLI keeps it (retain_freed_memory). Each figure is the median of the reps after one
// warm-up call; the shapes and ranks are run in turn within each rep, so a noisy stretch spreads
// over all.
// To compare two builds, run this binary with each library in LD_PRELOAD, alternating.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/core/system.hpp"

using namespace eggroll;

namespace {

struct Case {
  std::int64_t m, n, r;
  std::vector<float> factors;
  std::vector<const float*> blocks;
  std::vector<double> weight;
  std::vector<float> out;
  std::vector<std::int8_t> qfactors, signs;
  std::vector<const std::int8_t*> qblocks;
  std::vector<std::int64_t> z;
  std::vector<double> seconds;
};

// A whole number of at least 1, or a clear error naming what it was for.
std::int64_t count_of(const std::string& text, const char* what) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 1)
    throw_error("update_throughput: ", what, " must be a whole number of at least 1, got '", text, "'");
  return v;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, ',');) parts.push_back(p);
  return parts;
}

}  // namespace

int main(int argc, char** argv) try {
  retain_freed_memory();  // as the CLI: freed blocks are reused, not faulted in again at every call
  std::string shapes = "512x64,64x512,2048x256,256x2048", ranks = "1,4";
  std::string dtype = "f32";
  std::int64_t terms = 2048;
  int reps = 15, byte_max = 61;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw_error("update_throughput: ", a, " needs a value");
    const std::string v = argv[i + 1];
    if (a == "--shapes") shapes = v;
    else if (a == "--ranks") ranks = v;
    else if (a == "--terms") terms = count_of(v, "--terms");
    else if (a == "--reps") reps = static_cast<int>(count_of(v, "--reps"));
    else if (a == "--dtype") dtype = v;
    else if (a == "--byte-max") byte_max = static_cast<int>(std::min<std::int64_t>(count_of(v, "--byte-max"), 128));
    else throw_error("update_throughput: unknown option ", a, " (--shapes, --ranks, --terms, --reps, --dtype, --byte-max)");
  }
  check(dtype == "f32" || dtype == "int8", "update_throughput: --dtype must be f32 or int8, got '", dtype, "'");
  const bool int8 = dtype == "int8";
  std::uniform_int_distribution<int> byte(-byte_max, std::min(byte_max, 127));
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<Case> cases;
  for (const std::string& shape : split(shapes)) {
    const auto x = shape.find('x');
    if (x == std::string::npos) throw_error("update_throughput: shape '", shape, "' is not MxN");
    for (const std::string& rank : split(ranks)) {
      Case c;
      c.m = count_of(shape.substr(0, x), "a shape's m");
      c.n = count_of(shape.substr(x + 1), "a shape's n");
      c.r = count_of(rank, "a rank");
      const std::int64_t block = c.r * (c.m + c.n);
      if (int8) {
        c.qfactors.resize(static_cast<std::size_t>(terms * block));
        for (std::int8_t& v : c.qfactors) v = static_cast<std::int8_t>(byte(gen));
        for (std::int64_t k = 0; k < terms; ++k) c.qblocks.push_back(c.qfactors.data() + k * block);
        for (std::int64_t k = 0; k < terms; ++k) c.signs.push_back(static_cast<std::int8_t>(gen() % 2 ? 1 : -1));
        c.z.assign(static_cast<std::size_t>(c.m * c.n), 0);
      } else {
        c.factors.resize(static_cast<std::size_t>(terms * block));
        for (float& v : c.factors) v = normal(gen);
        for (std::int64_t k = 0; k < terms; ++k) c.blocks.push_back(c.factors.data() + k * block);
        for (std::int64_t k = 0; k < terms; ++k) c.weight.push_back(normal(gen));
        c.out.assign(static_cast<std::size_t>(c.m * c.n), 0.0f);
      }
      cases.push_back(std::move(c));
    }
  }
  auto backend = make_backend(BackendKind::cpu);
  const auto run = [&](Case& c) {
    if (int8)
      backend->qupdate_accumulate(c.m, c.n, c.r, terms, c.qblocks.data(), c.signs.data(), c.z.data());
    else
      backend->lowrank_update(c.m, c.n, c.r, terms, c.blocks.data(), c.weight.data(), c.out.data());
  };
  for (Case& c : cases) run(c);  // warm-up
  for (int rep = 0; rep < reps; ++rep)
    for (Case& c : cases) {
      const auto start = std::chrono::steady_clock::now();
      run(c);
      c.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  std::printf("%-12s %5s %7s %10s %10s\n", "shape", "rank", "terms", "ms", "G MAC/s");
  for (Case& c : cases) {
    std::nth_element(c.seconds.begin(), c.seconds.begin() + reps / 2, c.seconds.end());
    const double s = c.seconds[static_cast<std::size_t>(reps / 2)];
    const double macs = static_cast<double>(c.m * c.n * c.r * terms);
    std::printf("%-12s %5lld %7lld %10.3f %10.1f\n", (std::to_string(c.m) + "x" + std::to_string(c.n)).c_str(),
                static_cast<long long>(c.r), static_cast<long long>(terms), 1e3 * s, macs / s / 1e9);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
