// Values per second of the noise fills (fill_normal, fill_int8, fill_bits) at every SIMD level
// this machine runs, on one thread, for factor-block sized and long ranges.
//   noise_throughput [--reps 15] [--lengths 64,576,2304,1048576] [--json FILE]
// Each rep fills about 2^22 values (calls of one length, first = 0, each call on a stream not used
// before, so no branch history carries over from earlier calls of the same stream); reps take
// the levels in turn and the figure is the median over reps after one warm-up rep.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eggroll/noise/noise.hpp"
#include "noise/noise_simd.hpp"

using namespace eggroll;

namespace {

constexpr std::uint64_t kValuesPerRep = std::uint64_t{1} << 22;

// Seconds per value of one rep of fill: calls of `length` values, call c on the stream `base`
// with pair (rep * calls + c).
template <typename T, typename Fill>
double rep_seconds_per_value(Fill fill, std::uint64_t length, int rep, NoiseStream base, std::vector<T>& out) {
  out.resize(length);
  const std::uint64_t calls = std::max<std::uint64_t>(1, kValuesPerRep / length);
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t c = 0; c < calls; ++c) {
    base.pair = static_cast<std::uint32_t>(static_cast<std::uint64_t>(rep) * calls + c);
    fill(base, 0, length, out.data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return seconds / static_cast<double>(calls * length);
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  std::vector<std::uint64_t> lengths = {64, 576, 2304, std::uint64_t{1} << 20};
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--reps") reps = std::max(1, std::stoi(v));
    else if (a == "--json") json_path = v;
    else if (a == "--lengths") {
      lengths.clear();
      std::stringstream ss(v);
      for (std::string p; std::getline(ss, p, ',');) lengths.push_back(std::max<std::uint64_t>(1, std::stoull(p)));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }

  const NoiseStream base = noise_stream(1234, param_id("bench.weight"), 5, 0, NoiseTag::factors);
  const std::vector<std::string> levels = noise_simd_levels();

  nlohmann::json records = nlohmann::json::array();
  std::vector<float> normal_out;
  std::vector<std::int8_t> int8_out;
  std::vector<std::uint32_t> bits_out;
  std::printf("%-8s %-7s %9s %14s %10s %9s\n", "fill", "level", "length", "values/s", "ns/value", "x scalar");
  for (const std::string op : {"normal", "int8", "bits"}) {
    for (std::uint64_t length : lengths) {
      // Reps go round the levels in turn, so load from other processes falls on all of them alike.
      std::vector<std::vector<double>> times(levels.size());
      for (int rep = 0; rep <= reps; ++rep) {
        for (std::size_t l = 0; l < levels.size(); ++l) {
          set_noise_simd(levels[l].c_str());
          const double s = op == "normal" ? rep_seconds_per_value(fill_normal, length, rep, base, normal_out)
                           : op == "int8" ? rep_seconds_per_value(fill_int8, length, rep, base, int8_out)
                                          : rep_seconds_per_value(fill_bits, length, rep, base, bits_out);
          if (rep > 0) times[l].push_back(s);  // rep 0 warms up
        }
      }
      const double scalar_s = median(times[0]);
      for (std::size_t l = 0; l < levels.size(); ++l) {
        const double s = median(times[l]);
        std::printf("%-8s %-7s %9llu %14.4g %10.3f %9.2f\n", op.c_str(), levels[l].c_str(),
                    static_cast<unsigned long long>(length), 1.0 / s, s * 1e9, scalar_s / s);
        records.push_back({{"fill", op}, {"level", levels[l]}, {"length", length}, {"values_per_s", 1.0 / s},
                           {"ns_per_value", s * 1e9}, {"speedup_vs_scalar", scalar_s / s}, {"reps", reps}});
      }
      std::fflush(stdout);
    }
  }
  set_noise_simd("auto");
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << records.dump(2) << "\n";
  }
  return 0;
}
