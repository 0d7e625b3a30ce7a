// The int8 matmul (unperturbed qmm, W packed once) at two SIMD levels of the cpu backend, the levels
// alternating call by call inside one process, so that a noisy stretch of a shared machine slows
// both: G multiply-adds per second of each and their ratio, per shape.
//   qmm_levels [--levels avx512_vnni,avx512_amx] [--shapes 4096x512x64,...] [--reps 30]
// A shape is rows x m x n (rows of x, outputs, inputs). Each figure is the best of the reps (a
// rep times three calls); the default shapes are the medium, large and language models' layers.
// Threads: the OpenMP default (OMP_NUM_THREADS). Levels the machine lacks are an error.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/int8_ops.hpp"
#include "eggroll/backend/backend.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/core/system.hpp"

using namespace eggroll;

namespace {

struct Shape {
  std::int64_t rows = 0, m = 0, n = 0;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) out.push_back(part);
  return out;
}

Shape parse_shape(const std::string& s) {
  const std::vector<std::string> p = split(s, 'x');
  check(p.size() == 3, "qmm_levels: shape '", s, "', expected ROWSxMxN");
  const Shape shape{std::stoll(p[0]), std::stoll(p[1]), std::stoll(p[2])};
  check(shape.rows > 0 && shape.m > 0 && shape.n > 0, "qmm_levels: shape '", s, "' has a zero size");
  return shape;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> levels = {"avx512_vnni", "avx512_amx"};
  std::vector<Shape> shapes;
  for (const char* s : {"4096x512x64", "4096x64x512", "4096x2048x256", "4096x256x2048", "1024x256x256",
                        "1024x1024x256", "1024x256x1024", "4096x128x128"})
    shapes.push_back(parse_shape(s));
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    check(i + 1 < argc, "qmm_levels: ", a, " needs a value");
    const std::string v = argv[++i];
    if (a == "--levels") {
      levels = split(v, ',');
      check(levels.size() == 2, "qmm_levels: --levels takes two levels");
    } else if (a == "--shapes") {
      shapes.clear();
      for (const std::string& s : split(v, ',')) shapes.push_back(parse_shape(s));
    } else if (a == "--reps") {
      reps = std::max(1, std::stoi(v));
    } else {
      throw_error("qmm_levels: unknown option ", a, " (use --levels, --shapes, --reps)");
    }
  }
  const SystemInfo info = system_info();
  std::printf("cpu %s, %d threads; int8 levels here: ", cpu_description(info).c_str(), info.max_threads);
  for (const std::string& l : cpu_int8::levels()) std::printf("%s ", l.c_str());
  std::printf("\n");
  auto cpu = make_backend(BackendKind::cpu);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(-127, 127);
  for (const Shape& s : shapes) {
    std::vector<std::int8_t> x(static_cast<std::size_t>(s.rows * s.n)), w(static_cast<std::size_t>(s.m * s.n)),
        y(static_cast<std::size_t>(s.rows * s.m));
    for (auto& v : x) v = static_cast<std::int8_t>(byte(rng));
    for (auto& v : w) v = static_cast<std::int8_t>(byte(rng));
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < reps; ++rep)
      for (int l = 0; l < 2; ++l) {
        cpu_int8::set_level(levels[static_cast<std::size_t>(l)].c_str());
        const auto packed = cpu->qpack(s.m, s.n, w.data());  // each level's own layout (the same here)
        const auto t0 = std::chrono::steady_clock::now();
        for (int c = 0; c < 3; ++c)
          cpu->qmm({s.rows, 1}, s.m, s.n, x.data(), w.data(), QFactors{}, y.data(), QAddend{}, packed.get());
        best[l] = std::min(best[l], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3);
      }
    const double macs = static_cast<double>(s.rows * s.m * s.n);
    std::printf("rows %6lld  m %5lld  n %5lld: %s %7.1f, %s %7.1f G MAC/s; %s / %s %.2f\n",
                static_cast<long long>(s.rows), static_cast<long long>(s.m), static_cast<long long>(s.n),
                levels[0].c_str(), macs / best[0] * 1e-9, levels[1].c_str(), macs / best[1] * 1e-9, levels[1].c_str(),
                levels[0].c_str(), best[0] / best[1]);
  }
  cpu_int8::set_level("auto");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
