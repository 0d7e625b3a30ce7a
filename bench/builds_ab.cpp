// Two or more builds of libeggroll in one process, timed alternately: each build's float plain
// inference and EGGROLL forward (bench/builds_ab_module.cpp), rep by rep, so that a slow stretch
// of a shared machine slows every build alike. Between processes this host's speed moved by up to
// 2x (docs/results.md), more than most changes; inside one process the builds' order held from
// run to run.
//   builds_ab --libs A/libeggroll.so.0,B/libeggroll.so.0 [--models medium,large] [--ranks 1,4]
//             [--noise table,generator] [--members 2048] [--rows 1] [--threads 1] [--reps 11]
//             [--part forward|update] [--dtype f32|int8] [--simd LEVEL] [--module PATH]
// --dtype int8: the int8 MLPs of `eggroll bench`. --simd: the kernels' SIMD level,
// as run.simd (auto, scalar, avx2, avx512, avx512_amx).
// --models lm: the EGG language model's training epoch (as bench/lm_throughput: width 256, 6
// layers, 100 tokens, population --members, int8 whatever --dtype says), per build the median
// milliseconds of an epoch and, against the first build, the median per-rep speed-up.
// --part update: instead, the update of the population's pairs right after an untimed EGGROLL
// forward (float: as tell computes it, each matrix's Noiser::accumulate_gradient; int8: the
// accumulation of tell_integer, each matrix's Backend::qupdate_accumulate), per build the
// median milliseconds of an update and, against the first build, the median per-rep speed-up.
// A library is a build's src/libeggroll.so.0.1.0 (copied anywhere, any name). Each is loaded with
// dlmopen into a namespace of its own, then this build's module (libbuilds_ab_module.so beside
// this program, or --module) into the same namespace, where it binds to that library. Each case
// prints, per build, the median ns per row of plain inference and of the EGGROLL forward and the
// median of the per-rep ratio; then each build's median per-rep ratio over the first build's, and
// the median per-rep speed-up of its plain inference and of its EGGROLL forward over the first's.
// OMP_WAIT_POLICY defaults to passive here: every namespace has an OpenMP runtime of its own, whose
// idle threads must not spin while another build runs.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The directory of this program (for the module beside it).
std::string own_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  std::string path(buf.data(), static_cast<std::size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}

struct Build {
  std::string lib;
  void* (*open)(const char*, const char*, int, const char*, long, long, int, const char*) = nullptr;
  double (*time)(void*, int) = nullptr;
  void (*close)(void*) = nullptr;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "builds_ab: %s\n", what.c_str());
  std::exit(1);
}

Build load(const std::string& lib, const std::string& module) {
  void* l = dlmopen(LM_ID_NEWLM, lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (l == nullptr) fail("cannot load " + lib + ": " + dlerror());
  Lmid_t ns = 0;
  if (dlinfo(l, RTLD_DI_LMID, &ns) != 0) fail(std::string("dlinfo: ") + dlerror());
  void* m = dlmopen(ns, module.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (m == nullptr) fail("cannot load " + module + " beside " + lib + ": " + dlerror());
  Build b;
  b.lib = lib;
  b.open = reinterpret_cast<decltype(b.open)>(dlsym(m, "builds_ab_open"));
  b.time = reinterpret_cast<decltype(b.time)>(dlsym(m, "builds_ab_time"));
  b.close = reinterpret_cast<decltype(b.close)>(dlsym(m, "builds_ab_close"));
  if (b.open == nullptr || b.time == nullptr || b.close == nullptr) fail(module + " lacks the builds_ab entry points");
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::string libs, models = "medium,large", ranks = "1,4", noises = "table", module, part = "forward", dtype = "f32", simd = "auto";
  long members = 2048, rows = 1;
  int threads = 1, reps = 11;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) fail("option " + k + " needs a value");
    const std::string v = argv[i + 1];
    if (k == "--libs") libs = v;
    else if (k == "--models") models = v;
    else if (k == "--ranks") ranks = v;
    else if (k == "--noise") noises = v;
    else if (k == "--members") members = std::atol(v.c_str());
    else if (k == "--rows") rows = std::atol(v.c_str());
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else if (k == "--reps") reps = std::atoi(v.c_str());
    else if (k == "--module") module = v;
    else if (k == "--part") part = v;
    else if (k == "--dtype") dtype = v;
    else if (k == "--simd") simd = v;
    else fail("unknown option " + k);
  }
  if (split(libs).size() < 2) fail("--libs needs two or more libraries, comma-separated");
  if (members < 2 || rows < 1 || threads < 1 || reps < 1) fail("--members >= 2, --rows, --threads, --reps >= 1");
  if (part != "forward" && part != "update") fail("--part " + part + ": expected forward or update");
  const bool update = part == "update";
  if (dtype != "f32" && dtype != "int8") fail("--dtype " + dtype + ": expected f32 or int8");
  for (const std::string& model : split(models))
    if (update && model == "lm") fail("--part update times the MLPs' update; --models lm times the whole epoch");
  for (const std::string& noise : split(noises))
    if (noise != "table" && noise != "generator") fail("--noise " + noise + ": expected table or generator");
  if (module.empty()) module = own_dir() + "/libbuilds_ab_module.so";
  setenv("OMP_WAIT_POLICY", "passive", 0);
  std::vector<Build> builds;
  for (const std::string& lib : split(libs)) builds.push_back(load(lib, module));
  std::printf("%zu builds, %s, %d thread(s), %ld members x %ld rows, %d reps; %s\n", builds.size(), dtype.c_str(),
              threads, members, rows, reps,
              update ? "ms per update (medians)" : "ns per row (medians); lm: ms per epoch (medians)");
  for (std::size_t q = 0; q < builds.size(); ++q) std::printf("  %c: %s\n", static_cast<char>('A' + q), builds[q].lib.c_str());
  for (const std::string& model : split(models))
    for (const std::string& rank : split(ranks))
      for (const std::string& noise : split(noises)) {
        std::vector<void*> cases;
        for (const Build& b : builds) {
          cases.push_back(b.open(model.c_str(), dtype.c_str(), std::atoi(rank.c_str()), noise.c_str(), members, rows, threads,
                                simd.c_str()));
          if (cases.back() == nullptr) return 1;  // the module said why
        }
        const std::size_t nb = builds.size();
        std::vector<std::vector<double>> infer(nb), egg(nb), ratio(nb);
        const bool single = update || model == "lm";  // one part timed: the update, or the LM's step
        for (int rep = -2; rep < reps; ++rep)  // two warm-up reps
          for (std::size_t s = 0; s < nb; ++s) {
            const std::size_t q = (s + static_cast<std::size_t>(rep + 2)) % nb;  // each build first in turn
            if (single) {
              const double tu = builds[q].time(cases[q], update ? 2 : 3);
              if (rep >= 0) egg[q].push_back(tu);
              continue;
            }
            const double ti = builds[q].time(cases[q], 0), te = builds[q].time(cases[q], 1);
            if (rep < 0) continue;
            infer[q].push_back(ti);
            egg[q].push_back(te);
            ratio[q].push_back(ti / te);
          }
        std::printf("%-6s r%-2s %-9s R %-3ld", model.c_str(), rank.c_str(), noise.c_str(), rows);
        if (single) {
          for (std::size_t q = 0; q < nb; ++q) std::printf(" | %c %8.3f", static_cast<char>('A' + q), 1e3 * median(egg[q]));
          for (std::size_t q = 1; q < nb; ++q) {
            std::vector<double> rel;  // A's time over this build's, rep by rep
            for (std::size_t k = 0; k < egg[q].size(); ++k) rel.push_back(egg[0][k] / egg[q][k]);
            std::printf(" | A/%c %.3f", static_cast<char>('A' + q), median(rel));
          }
        } else {
          const double per_row = 1e9 / static_cast<double>(members * rows);
          for (std::size_t q = 0; q < nb; ++q)
            std::printf(" | %c %7.0f %7.0f %.3f", static_cast<char>('A' + q), median(infer[q]) * per_row,
                        median(egg[q]) * per_row, median(ratio[q]));
          for (std::size_t q = 1; q < nb; ++q) {
            // the ratio's change, and each part's speed-up (A's time over this build's), rep by rep
            std::vector<double> rel, infer_up, egg_up;
            for (std::size_t k = 0; k < ratio[q].size(); ++k) {
              rel.push_back(ratio[q][k] / ratio[0][k]);
              infer_up.push_back(infer[0][k] / infer[q][k]);
              egg_up.push_back(egg[0][k] / egg[q][k]);
            }
            std::printf(" | %c/A %.3f (inference x%.3f, EGGROLL x%.3f)", static_cast<char>('A' + q), median(rel),
                        median(infer_up), median(egg_up));
          }
        }
        std::printf("\n");
        std::fflush(stdout);
        for (std::size_t q = 0; q < nb; ++q) builds[q].close(cases[q]);
      }
  return 0;
}
