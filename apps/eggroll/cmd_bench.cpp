// eggroll bench: the benchmark protocol of DESIGN.md. Every record sets EGGROLL against plain
// batched inference of the same model on the same rows, measured in the same process, interleaved,
// median of the repetitions, and states its multiply-add rate as a fraction of this machine's
// peak (--suite peak): the peak measured once per process (peak_fraction) and, in the forward,
// update and epoch suites, the peak loop timed in turn with the case's own timings
// (peak_alongside_fraction, the table's "peak~"). Forward and epoch records also carry `bound`:
// the best ratio the case's own EGGROLL work allows here (work_bound), to tell a target that the
// code misses from one that this machine and design cannot reach.
//
//   peak     register-only fp32 FMA and int8 dot-product loops per SIMD level
//   forward  plain inference vs the EGGROLL perturbed forward (and open_es) per (model, dtype,
//            population, rank, rows per member R, noise source)
//   update   the update alone (shaping, gradient estimate or int8 z-test, optimizer step)
//   epoch    a whole epoch: ask, forward, scores, tell
//   lm       the EGG language model's population step vs the int8 GEMM at its shapes
//   memory   peak RSS of an epoch of the medium model at population 65536 (run it on its own)
#include <sys/resource.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "bench_harness.hpp"
#include "commands.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/es/strategy.hpp"
#include "eggroll/noise/noise.hpp"

namespace eggroll::cli {
namespace {

using namespace benchlib;

// Rows one forward call handles at most (per thread): bounds the activations' memory, and is how
// training tasks chunk members too.
constexpr std::int64_t kRowsPerCall = 2048;

struct Case {
  const MlpShape* model;
  std::string dtype;  // f32 | int8
  std::int64_t population, rank, rows_per_member;
  std::string noise;  // generator | table
  int table_log2 = 24;  // es.table_log2_size of table noise
};

std::string case_label(const Case& c) {
  std::ostringstream s;
  s << c.model->name << " " << c.dtype << " N=" << c.population << " r=" << c.rank << " R=" << c.rows_per_member
    << " " << c.noise;
  return s.str();
}

EsConfig es_config(const Case& c, const std::string& noiser) {
  EsConfig es;
  es.noiser = noiser;
  es.population = c.population;
  es.rank = static_cast<int>(c.rank);
  es.sigma = 0.01;
  es.noise_source = c.noise;
  es.table_log2_size = c.table_log2;
  if (noiser == "q_eggroll") es.shaping = "antithetic_sign";
  es.memory_budget = std::int64_t{8} << 30;  // one view per epoch, as the benchmark measures
  return es;
}

// One forward of every member's R rows through `model`: with `noiser`, a fresh population view
// (its noise generated inside the timed region, as an epoch does); without, plain inference.
class ForwardRunner {
 public:
  ForwardRunner(Model& model, Backend& backend, const Case& c)
      : model_(model), backend_(backend), c_(c),
        chunk_(std::max<std::int64_t>(1, kRowsPerCall / c.rows_per_member)) {
    const DType dt = c.dtype == "int8" ? DType::i8 : DType::f32;
    for (int t = 0; t < omp_get_max_threads(); ++t)
      inputs_.push_back(random_input(dt, chunk_ * c.rows_per_member, model.input_dim(), 100 + t));
    odd_.resize(inputs_.size());
  }

  // Plain batched inference of the unperturbed model on members' rows [0, members * R), its weights
  // packed in the first (warm-up) call and kept, as a model that serves many calls on the same
  // weights keeps them (WeightPacks).
  void inference(std::int64_t members) {
    over_member_chunks(members, chunk_, [&](std::int64_t, std::int64_t count, int t) {
      ForwardContext ctx{backend_};
      ctx.packs = &packs_;
      model_.forward(ctx, input(count, t));
    });
  }

  void perturbed(const Noiser& noiser, std::int64_t members, std::int64_t epoch) {
    PopulationView view(noiser, epoch, 0.01, 0, members);  // as Strategy::ask makes it
    over_member_chunks(members, chunk_, [&](std::int64_t first, std::int64_t count, int t) {
      ForwardContext ctx{backend_, &view, c_.rows_per_member, first, count};
      model_.forward(ctx, input(count, t));
    });
  }

 private:
  // The thread's rows read in place (a Tensor copy would time a memcpy with every forward). A
  // shorter chunk (a thread's last, or all its members when it has fewer than a chunk) gets rows of
  // its own, made on the first call with that count (a warm-up call) and kept, so that no timed
  // call makes its input.
  const Tensor& input(std::int64_t count, int t) {
    if (count == chunk_) return inputs_[t];
    auto [it, added] = odd_[t].try_emplace(count);
    if (added) it->second = random_input(inputs_[t].dtype(), count * c_.rows_per_member, model_.input_dim(), 7);
    return it->second;
  }

  Model& model_;
  Backend& backend_;
  Case c_;
  std::int64_t chunk_;
  std::vector<Tensor> inputs_;
  std::vector<std::map<std::int64_t, Tensor>> odd_;  // per thread: shorter chunks' rows by count
  WeightPacks packs_;                                 // plain inference's packed weights
};

// open_es in int8: each member's full int8 noise e_i (tag full) added to W, clipped, then the
// member's rows through MM with its own matrices.
void int8_open_es(QMlp& model, Backend& backend, const Case& c, std::int64_t members, std::int64_t epoch) {
  const std::int64_t R = c.rows_per_member;
  const Tensor x0 = random_input(DType::i8, R, model.input_dim(), 5);
  over_member_chunks(members, 1, [&](std::int64_t member, std::int64_t, int) {
    Tensor h = x0;
    for (int l = 0; l < 2; ++l) {
      const Param& w = model.params().at("layers." + std::to_string(l) + ".weight");
      const std::int64_t m = w.rows(), n = w.cols();
      std::vector<std::int8_t> noise(static_cast<std::size_t>(m * n)), wi(noise.size());
      fill_int8(noise_stream(0, w.id, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(member / 2),
                             NoiseTag::full),
                0, noise.size(), noise.data());
      const std::int8_t* base = w.value.data<std::int8_t>();
      const int s = member % 2 ? -1 : 1;
      for (std::size_t k = 0; k < noise.size(); ++k)
        wi[k] = static_cast<std::int8_t>(std::clamp(base[k] + s * noise[k], -127, 127));
      Tensor y(DType::i8, {R, m});
      backend.qmm({1, R}, m, n, h.data<std::int8_t>(), wi.data(), QFactors{m, n, 1, nullptr, nullptr, 0},
                  y.data<std::int8_t>());
      h = std::move(y);
    }
  });
}

std::unique_ptr<Model> make_bench_model(const Case& c) {
  if (c.dtype == "int8") return std::make_unique<QMlp>(*c.model, 1);
  return float_mlp(*c.model, 1);
}

struct Sweep {
  std::vector<std::string> models, dtypes, noises;
  std::vector<std::int64_t> populations, ranks, rows;
  int table_log2 = 24;
};

std::vector<Case> cases_of(const Sweep& s) {
  std::vector<Case> out;
  for (const auto& m : s.models)
    for (const auto& d : s.dtypes)
      for (std::int64_t n : s.populations)
        for (std::int64_t r : s.ranks)
          for (std::int64_t rows : s.rows)
            for (const auto& noise : s.noises) out.push_back({&mlp_shape(m), d, n, r, rows, noise, s.table_log2});
  return out;
}

nlohmann::json base_record(const char* suite, const Case& c) {
  nlohmann::json rec = {{"suite", suite},        {"model", c.model->name},       {"dtype", c.dtype},
                        {"population", c.population}, {"rank", c.rank}, {"rows_per_member", c.rows_per_member},
                        {"noise", c.noise},      {"machine", machine_json()}};
  if (c.noise == "table") rec["table_log2_size"] = c.table_log2;
  return rec;
}

const char* peak_dtype(const Case& c) { return c.dtype == "int8" ? "int8" : "f32"; }

// The case's peak loop (run_peak_loop) as one of the functions interleaved_medians times; the
// multiply-adds of its last run in *macs.
std::function<void()> peak_sample(const Case& c, std::int64_t* macs) {
  return [dtype = std::string(peak_dtype(c)), macs] { *macs = run_peak_loop(dtype); };
}

// G multiply-adds per second of plain inference at rows_per_s, and its fraction of the peak: the
// process's (the peak suite's loops, measured once) and the one measured alongside the case's
// timings, interleaved with them (alongside_gmacs; 0: none).
void add_rate(nlohmann::json& rec, const Case& c, double rows_per_s, double alongside_gmacs) {
  const double g = rows_per_s * static_cast<double>(c.model->macs_per_row()) / 1e9;
  const double peak = peak_gmacs(peak_dtype(c));
  rec["gmacs"] = g;
  rec["peak_gmacs"] = peak;
  rec["peak_fraction"] = peak > 0 ? g / peak : 0.0;
  if (alongside_gmacs > 0) {
    rec["peak_alongside_gmacs"] = alongside_gmacs;
    rec["peak_alongside_fraction"] = g / alongside_gmacs;
  }
}

// 100 x the record's fraction of the peak measured alongside, for the tables (0 where none).
double alongside_percent(const nlohmann::json& rec) {
  return 100.0 * rec.value("peak_alongside_fraction", 0.0);
}

// Every pair's factors of a case generated once, as the generator makes them (r (m + n) values a
// pair and matrix, fill_normal or fill_int8), on all threads, into a pair's buffer that each
// thread reuses: the noise at the generator's own rate, with none of the view's writes.
void generate_factors(const Case& c, std::int64_t epoch) {
  const MlpShape& s = *c.model;
  const std::int64_t lens[2] = {c.rank * (s.hidden + s.in), c.rank * (s.out + s.hidden)};
  over_member_chunks(c.population / 2, 64, [&](std::int64_t first, std::int64_t count, int) {
    thread_local std::vector<float> normals;
    thread_local std::vector<std::int8_t> int8s;
    for (int l = 0; l < 2; ++l) {
      const auto len = static_cast<std::uint64_t>(lens[l]);
      normals.resize(len);
      int8s.resize(len);
      for (std::int64_t pair = first; pair < first + count; ++pair) {
        const NoiseStream stream = noise_stream(3, static_cast<std::uint64_t>(l), static_cast<std::uint64_t>(epoch),
                                                static_cast<std::uint64_t>(pair), NoiseTag::factors);
        if (c.dtype == "int8") {
          fill_int8(stream, 0, len, int8s.data());
        } else {
          fill_normal(stream, 0, len, normals.data());
        }
      }
    }
  });
}

// The best ratio to plain inference (its time per call: inference_s) that the case's EGGROLL work
// allows on this machine: the factors obtained once per pair (factor_s: generated at the measured
// rate, or read at the table's rate) and the low-rank correction's R r (m + n) multiply-adds per
// row and matrix, plus, for an epoch, the update's r m n / 2 per member and matrix
// (update_macs), run at the fastest multiply-add rate the process saw (the peak measured at its
// start, the one measured alongside, or plain inference's own rate: a slow minute of the peak loop
// must not make the bound too low). Every other cost (the fused tiles' extra loads, x . B's reads,
// the generated factors' writes into the view, the view's pack of W, shaping and the scores, the
// int8 rank product's 32-bit multiplies, which run below the int8 peak) is taken as zero, so the
// ratio can only be lower. ALGORITHM.md 4.
double work_bound(const Case& c, const nlohmann::json& rec, double inference_s, double factor_s, double update_macs) {
  const double rows = static_cast<double>(c.population * c.rows_per_member);
  const double correction_macs = rows * static_cast<double>(c.rank * c.model->sum_mn_plus());
  const double rate = std::max({rec.value("peak_gmacs", 0.0), rec.value("peak_alongside_gmacs", 0.0),
                                rec.value("gmacs", 0.0)}) * 1e9;
  const double arithmetic_s = rate > 0 ? (correction_macs + update_macs) / rate : 0.0;
  return inference_s / (inference_s + factor_s + arithmetic_s);
}

// The bound's parts in the record, and the text of the tables' bound column.
std::string add_bound(nlohmann::json& rec, double factor_s, double bound) {
  rec["factor_s"] = factor_s;
  rec["bound"] = bound;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", bound);
  return buf;
}

// Seconds all threads take to read a case's factors once from its noise table (a pair's r (m + n)
// values per matrix are shared by its two members' R rows), at the rate they read a buffer of the
// table's size (memory for the default table; a cache level for a table that fits one); the bytes
// a row and the rate in the record.
double table_read_seconds(nlohmann::json& rec, const Case& c) {
  const double value_bytes = c.dtype == "int8" ? 1.0 : 4.0;
  const double bytes_per_row = static_cast<double>(c.rank * c.model->sum_mn_plus()) * value_bytes /
                               (2.0 * static_cast<double>(c.rows_per_member));
  const double table_rate = read_bandwidth(static_cast<std::int64_t>(value_bytes) << c.table_log2);
  rec["factor_bytes_per_row"] = bytes_per_row;
  rec["table_read_gbytes_per_s"] = table_rate;
  return bytes_per_row * static_cast<double>(c.population * c.rows_per_member) / (table_rate * 1e9);
}

nlohmann::json forward_suite(const Sweep& sweep, int reps, bool open_es) {
  nlohmann::json records = nlohmann::json::array();
  auto backend = make_backend(BackendKind::cpu);
  std::printf("%-40s %12s %12s %7s %9s %7s %7s %10s %7s\n", "case", "infer rows/s", "egg rows/s", "ratio", "G MAC/s",
              "peak", "peak~", "open_es", "bound");
  for (const Case& c : cases_of(sweep)) {
    auto model = make_bench_model(c);
    const std::string noiser_name = c.dtype == "int8" ? "q_eggroll" : "eggroll";
    auto noiser = make_noiser(es_config(c, noiser_name), 3);
    ForwardRunner run(*model, *backend, c);
    std::int64_t epoch = 0, fill_epoch = 0;
    std::int64_t peak_macs = 0;
    std::vector<std::function<void()>> timed = {[&] { run.inference(c.population); },
                                                [&] { run.perturbed(*noiser, c.population, epoch++); },
                                                peak_sample(c, &peak_macs)};
    if (c.noise == "generator") timed.push_back([&] { generate_factors(c, fill_epoch++); });
    const std::vector<double> t = interleaved_medians(timed, reps);
    const double rows = static_cast<double>(c.population * c.rows_per_member);
    nlohmann::json rec = base_record("forward", c);
    rec["inference_rows_per_s"] = rows / t[0];
    rec["eggroll_rows_per_s"] = rows / t[1];
    rec["ratio"] = t[0] / t[1];
    add_rate(rec, c, rows / t[0], static_cast<double>(peak_macs) / t[2] / 1e9);
    double factor_s = 0;
    if (c.noise == "table") {
      factor_s = table_read_seconds(rec, c);
      rec["read_bound"] = t[0] / (t[0] + factor_s);  // the factors' reads alone
    } else {
      factor_s = t[3];
    }
    const std::string bound = add_bound(rec, factor_s, work_bound(c, rec, t[0], factor_s, 0.0));
    std::string oes = "-";
    // open_es for contrast (one GEMM per member), on a slice of the population: a rate needs no more.
    if (open_es && c.noise == "generator" && c.rank == sweep.ranks.front()) {
      const std::int64_t members = std::min<std::int64_t>(c.population, 2 * omp_get_max_threads() * 8);
      double s = 0;
      if (c.dtype == "int8") {
        s = median({seconds_of([&] { int8_open_es(static_cast<QMlp&>(*model), *backend, c, members, 0); }),
                    seconds_of([&] { int8_open_es(static_cast<QMlp&>(*model), *backend, c, members, 1); }),
                    seconds_of([&] { int8_open_es(static_cast<QMlp&>(*model), *backend, c, members, 2); })});
      } else {
        auto oes_noiser = make_noiser(es_config(c, "open_es"), 3);
        s = median({seconds_of([&] { run.perturbed(*oes_noiser, members, 0); }),
                    seconds_of([&] { run.perturbed(*oes_noiser, members, 1); }),
                    seconds_of([&] { run.perturbed(*oes_noiser, members, 2); })});
      }
      const double oes_rows_per_s = static_cast<double>(members * c.rows_per_member) / s;
      rec["open_es_rows_per_s"] = oes_rows_per_s;
      rec["open_es_ratio"] = oes_rows_per_s / (rows / t[0]);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4f", oes_rows_per_s / (rows / t[0]));
      oes = buf;
    }
    std::printf("%-40s %12.0f %12.0f %7.3f %9.1f %6.1f%% %6.1f%% %10s %7s\n", case_label(c).c_str(), rows / t[0],
                rows / t[1], t[0] / t[1], rec["gmacs"].get<double>(), 100.0 * rec["peak_fraction"].get<double>(),
                alongside_percent(rec), oes.c_str(), bound.c_str());
    std::fflush(stdout);
    records.push_back(rec);
  }
  return records;
}

// A Strategy over the model's parameters for a case (float: SGD; int8: the discrete update).
std::unique_ptr<Strategy> bench_strategy(Model& model, const Case& c, Backend& backend) {
  const std::string noiser = c.dtype == "int8" ? "q_eggroll" : "eggroll";
  OptimConfig optim;
  optim.lr = 1e-3;
  return std::make_unique<Strategy>(model.params(), es_config(c, noiser), optim, 3, 1000000, backend);
}

// The exact sum of v[0 .. n): 16 bytes a step made unsigned (x ^ 0x80 = x + 128) and summed by
// psadbw (SSE2, in the CLI's baseline instruction set) into 64-bit lanes, less 128 per value. The
// plain loop, which GCC widens to 32-bit lanes at that baseline, took 3-4% of an int8 medium
// epoch's time on a Zen 5 (fifty-third pass), more than the stand-in should.
std::int64_t int8_sum(const std::int8_t* v, std::int64_t n) {
  std::int64_t sum = 0, k = 0;
#if defined(__SSE2__)
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80)), zero = _mm_setzero_si128();
  __m128i acc = zero;
  for (; k + 16 <= n; k += 16) {
    const __m128i x = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + k)), bias);
    acc = _mm_add_epi64(acc, _mm_sad_epu8(x, zero));
  }
  alignas(16) std::int64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), acc);
  sum = lanes[0] + lanes[1] - 128 * k;
#endif
  for (; k < n; ++k) sum += v[k];
  return sum;
}

// The sum of v[0 .. n) in eight partial double sums, value k into part k % 8 (the last n % 8 into
// part 0), added in order at the end: one serial chain of double adds would cost a task's
// stand-in more than some of the cases' whole correction. The parts two at a time in SSE2 (the
// CLI's baseline), where GCC 12 at -O2 left the loop scalar: the same additions in the same order,
// so the same sum, in a third of the time (fifty-third pass).
double float_sum(const float* v, std::int64_t n) {
  double part[8] = {};
  std::int64_t k = 0;
#if defined(__SSE2__)
  __m128d acc[4] = {_mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd()};
  for (; k + 8 <= n; k += 8) {
    const __m128 lo = _mm_loadu_ps(v + k), hi = _mm_loadu_ps(v + k + 4);
    acc[0] = _mm_add_pd(acc[0], _mm_cvtps_pd(lo));
    acc[1] = _mm_add_pd(acc[1], _mm_cvtps_pd(_mm_movehl_ps(lo, lo)));
    acc[2] = _mm_add_pd(acc[2], _mm_cvtps_pd(hi));
    acc[3] = _mm_add_pd(acc[3], _mm_cvtps_pd(_mm_movehl_ps(hi, hi)));
  }
  for (int q = 0; q < 4; ++q) _mm_storeu_pd(part + 2 * q, acc[q]);
#endif
  for (; k + 8 <= n; k += 8)
    for (int q = 0; q < 8; ++q) part[q] += v[k + q];
  for (; k < n; ++k) part[0] += v[k];
  double s = 0;
  for (int q = 0; q < 8; ++q) s += part[q];
  return s;
}

// Scores of every member from a forward of its rows (mean output, a cheap stand-in for a task).
std::vector<double> forward_scores(Model& model, Backend& backend, PopulationView& view, const Case& c,
                                   const std::vector<Tensor>& inputs, std::int64_t chunk) {
  std::vector<double> scores(static_cast<std::size_t>(c.population));
  over_member_chunks(c.population, chunk, [&](std::int64_t first, std::int64_t count, int t) {
    ForwardContext ctx{backend, &view, c.rows_per_member, first, count};
    Tensor odd;  // the rows of a last, shorter chunk; the others read the thread's rows in place
    if (count != chunk) odd = random_input(inputs[t].dtype(), count * c.rows_per_member, model.input_dim(), 7);
    const Tensor y = model.forward(ctx, count == chunk ? inputs[t] : odd);
    const std::int64_t per_member = c.rows_per_member * model.output_dim();
    for (std::int64_t j = 0; j < count; ++j) {
      double s = 0;
      if (y.dtype() == DType::i8) {  // an exact integer sum, as an integer task's score
        s = static_cast<double>(int8_sum(y.data<std::int8_t>() + j * per_member, per_member));
      } else {
        s = float_sum(y.data<float>() + j * per_member, per_member);
      }
      scores[first + j] = s / static_cast<double>(per_member);
    }
  });
  return scores;
}

// update: the tell alone (shaping + estimate + step) with the epoch's noise already generated.
// epoch: ask + forward + scores + tell, against plain inference of the same rows.
nlohmann::json epoch_suite(const Sweep& sweep, int reps, bool update_only) {
  nlohmann::json records = nlohmann::json::array();
  auto backend = make_backend(BackendKind::cpu);
  std::printf("%-40s %12s %12s %7s %9s %7s %7s %10s %7s\n", "case", "infer rows/s",
              update_only ? "upd rows/s" : "epoch rows/s", "ratio", "G MAC/s", "peak", "peak~",
              update_only ? "update s" : "epoch s", "bound");
  for (const Case& c : cases_of(sweep)) {
    auto model = make_bench_model(c);
    auto strategy = bench_strategy(*model, c, *backend);
    // plain inference on a copy that the epochs leave as it is (its packed weights stay valid)
    auto plain_model = make_bench_model(c);
    ForwardRunner run(*plain_model, *backend, c);
    const std::int64_t chunk = std::max<std::int64_t>(1, kRowsPerCall / c.rows_per_member);
    std::vector<Tensor> inputs;
    for (int t = 0; t < omp_get_max_threads(); ++t)
      inputs.push_back(random_input(c.dtype == "int8" ? DType::i8 : DType::f32, chunk * c.rows_per_member,
                                    model->input_dim(), 100 + t));
    std::vector<double> scores(static_cast<std::size_t>(c.population));
    for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = std::sin(static_cast<double>(i) * 0.7);
    std::vector<double> update_s;  // the tell alone, timed inside (the ask before it is not part of it)
    std::int64_t peak_macs = 0, fill_epoch = 0;
    std::vector<std::function<void()>> timed = {
        [&] { run.inference(c.population); },
        [&] {
          auto view = strategy->ask();
          if (update_only) {
            strategy->noiser().prefetch(*view, model->params());  // the noise a forward would have made
            update_s.push_back(seconds_of([&] { strategy->tell(scores, view.get()); }));
          } else {
            strategy->tell(forward_scores(*model, *backend, *view, c, inputs, chunk), view.get());
          }
        },
        peak_sample(c, &peak_macs)};
    if (!update_only && c.noise == "generator") timed.push_back([&] { generate_factors(c, fill_epoch++); });
    const std::vector<double> t = interleaved_medians(timed, reps);
    double second = t[1];
    if (update_only) {
      // the first two (cold) calls dropped; the later warm-up calls run warm and count
      update_s.erase(update_s.begin(), update_s.begin() + std::min<std::size_t>(2, update_s.size()));
      second = median(update_s);
    }
    const double rows = static_cast<double>(c.population * c.rows_per_member);
    nlohmann::json rec = base_record(update_only ? "update" : "epoch", c);
    rec["inference_rows_per_s"] = rows / t[0];
    rec["eggroll_rows_per_s"] = update_only ? rows / (t[0] + second) : rows / second;
    rec["ratio"] = update_only ? t[0] / (t[0] + second) : t[0] / second;
    rec[update_only ? "update_s" : "epoch_s"] = second;
    // The update's own multiply-adds: pairs x rank x sum of m n (one rank-r GEMM per matrix).
    const double update_macs =
        static_cast<double>(c.population / 2 * c.rank) * static_cast<double>(c.model->macs_per_row());
    if (update_only) rec["update_gmacs"] = update_macs / second / 1e9;
    add_rate(rec, c, rows / t[0], static_cast<double>(peak_macs) / t[2] / 1e9);
    std::string bound = "-";
    if (!update_only) {
      const double factor_s = c.noise == "table" ? table_read_seconds(rec, c) : t[3];
      bound = add_bound(rec, factor_s, work_bound(c, rec, t[0], factor_s, update_macs));
    }
    std::printf("%-40s %12.0f %12.0f %7.3f %9.1f %6.1f%% %6.1f%% %10.4f %7s\n", case_label(c).c_str(), rows / t[0],
                rec["eggroll_rows_per_s"].get<double>(), rec["ratio"].get<double>(), rec["gmacs"].get<double>(),
                100.0 * rec["peak_fraction"].get<double>(), alongside_percent(rec), second, bound.c_str());
    std::fflush(stdout);
    records.push_back(rec);
  }
  return records;
}

// Peak RSS of epochs of the medium model at population 65536 (R = 1) against the sizes that
// matter: nothing of size N x m x n may exist.
nlohmann::json memory_suite() {
  auto backend = make_backend(BackendKind::cpu);
  const Case c{&mlp_shape("medium"), "f32", 65536, 1, 1, "generator"};
  auto model = make_bench_model(c);
  auto strategy = bench_strategy(*model, c, *backend);
  const std::int64_t chunk = kRowsPerCall;
  std::vector<Tensor> inputs;
  for (int t = 0; t < omp_get_max_threads(); ++t) inputs.push_back(random_input(DType::f32, chunk, c.model->in, 100 + t));
  for (int e = 0; e < 2; ++e) {
    auto view = strategy->ask();
    strategy->tell(forward_scores(*model, *backend, *view, c, inputs, chunk), view.get());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double mb = 1.0 / (1024.0 * 1024.0);
  const double rss = static_cast<double>(ru.ru_maxrss) * 1024.0 * mb;
  const double params = static_cast<double>(c.model->macs_per_row()) * 4 * mb;
  const double noise = static_cast<double>(c.population / 2 * c.rank * c.model->sum_mn_plus()) * 4 * mb;
  const double activations = static_cast<double>(omp_get_max_threads() * chunk *
                                                 (c.model->in + c.model->hidden + c.model->out)) * 4 * mb;
  const double full = static_cast<double>(c.population) * static_cast<double>(c.model->macs_per_row()) * 4 * mb;
  std::printf("medium model, population 65536, R = 1: peak RSS %.1f MB; parameters %.2f MB, the epoch's factors "
              "%.1f MB, activations in flight %.1f MB; N x m x n would be %.0f MB\n",
              rss, params, noise, activations, full);
  return nlohmann::json::array({{{"suite", "memory"}, {"model", "medium"}, {"dtype", "f32"}, {"population", 65536},
                                 {"rank", 1}, {"rows_per_member", 1}, {"peak_rss_mb", rss}, {"params_mb", params},
                                 {"factors_mb", noise}, {"activations_mb", activations}, {"full_noise_mb", full},
                                 {"machine", machine_json()}}});
}

Sweep default_sweep(const std::string& suite, bool quick) {
  Sweep s;
  s.dtypes = {"f32", "int8"};
  s.noises = {"generator", "table"};
  s.ranks = {1, 4};
  s.rows = {1, 16};
  if (quick) {
    s.models = {"medium", "large"};
    s.populations = {1024};
    s.noises = {"generator"};
  } else {
    s.models = {"small", "medium", "large"};
    s.populations = suite == "forward" ? std::vector<std::int64_t>{256, 1024, 4096} : std::vector<std::int64_t>{1024, 4096};
  }
  return s;
}

}  // namespace

int bench(const BenchArgs& args) {
  if (args.threads > 0) omp_set_num_threads(args.threads);
  make_backend(BackendKind::cpu)->set_simd(args.simd);  // the kernel levels are process-wide
  const nlohmann::json machine = machine_json();
  std::printf("eggroll bench --suite %s%s: cpu %s, simd %s, kernels: int8 %s, fp32 gemm %s, noise %s; %d threads\n",
              args.suite.c_str(), args.quick ? " --quick" : "", machine["cpu_description"].get<std::string>().c_str(),
              machine["simd"].get<std::string>().c_str(), machine["int8_level"].get<std::string>().c_str(),
              machine["sgemm_level"].get<std::string>().c_str(), machine["noise_level"].get<std::string>().c_str(),
              omp_get_max_threads());
  std::fflush(stdout);
  const int reps = std::max(1, args.reps);
  Sweep sweep = default_sweep(args.suite, args.quick);
  if (!args.models.empty()) sweep.models = args.models;
  if (!args.dtypes.empty()) sweep.dtypes = args.dtypes;
  if (!args.populations.empty()) sweep.populations = args.populations;
  if (!args.ranks.empty()) sweep.ranks = args.ranks;
  if (!args.rows.empty()) sweep.rows = args.rows;
  if (!args.noises.empty()) sweep.noises = args.noises;
  sweep.table_log2 = args.table_log2;
  for (const auto& m : sweep.models) mlp_shape(m);  // names checked before any work
  for (const auto& d : sweep.dtypes) check(d == "f32" || d == "int8", "bench: --dtypes '", d, "': expected f32 or int8");
  for (const auto& n : sweep.noises)
    check(n == "generator" || n == "table", "bench: --noise '", n, "': expected generator or table");
  for (std::int64_t n : sweep.populations)
    check(n >= 2 && n % 2 == 0, "bench: population ", n, " must be even and >= 2 (antithetic pairs)");
  for (std::int64_t r : sweep.ranks) check(r >= 1 && r <= 64, "bench: rank ", r, " must be in 1..64");
  for (std::int64_t r : sweep.rows) check(r >= 1 && r <= 4096, "bench: rows per member ", r, " must be in 1..4096");

  nlohmann::json records = nlohmann::json::array();
  auto append = [&](const nlohmann::json& more) {
    for (const auto& r : more) records.push_back(r);
  };
  if (args.suite == "peak") {
    append(measure_peaks(true));
  } else if (args.suite == "forward") {
    append(forward_suite(sweep, reps, true));
  } else if (args.suite == "update" || args.suite == "epoch") {
    if (args.rows.empty() && args.suite == "epoch") sweep.rows = {16};
    if (args.rows.empty() && args.suite == "update") sweep.rows = {16};
    if (args.noises.empty()) sweep.noises = {"generator"};
    append(epoch_suite(sweep, reps, args.suite == "update"));
  } else if (args.suite == "lm") {
    append(lm_suite(args.quick, reps, args.simd));
  } else if (args.suite == "memory") {
    append(memory_suite());
  } else {
    throw_error("bench: --suite '", args.suite, "': expected peak, forward, update, epoch, lm or memory");
  }
  if (!args.json.empty()) write_json(args.json, records);
  return 0;
}

}  // namespace eggroll::cli
