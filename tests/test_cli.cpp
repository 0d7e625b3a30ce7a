// The eggroll CLI end to end: run folders, --resume rules, eval output, bad input handling.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <algorithm>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "eggroll/core/system.hpp"
#include "eggroll/io/checkpoint_dir.hpp"
#include "eggroll/io/metrics.hpp"
#include "eggroll/io/safetensors.hpp"
#include "support/test_support.hpp"

namespace fs = std::filesystem;
using eggroll::testing::run_cli;
using eggroll::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// A small sphere run: seconds, with checkpoints every 5 epochs.
const std::string kSmall = std::string(EGGROLL_SOURCE_DIR) + "/configs/sphere.toml " +
    "--set task.dim=36 --set es.population=32 --set es.rank=2 "
    "--set optim.lr=0.05 --set run.checkpoint_every=5 --set run.eval_every=5 ";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

eggroll::Checkpoint last_checkpoint(const fs::path& run) {
  auto latest = eggroll::CheckpointDir((run / "checkpoints").string()).latest_valid();
  EXPECT_TRUE(latest.has_value());
  return latest->second;
}

void expect_same_tensors(const eggroll::Checkpoint& a, const eggroll::Checkpoint& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    const auto& u = b.tensors.at(name);
    ASSERT_EQ(t.nbytes(), u.nbytes()) << name;
    EXPECT_EQ(0, std::memcmp(t.raw(), u.raw(), t.nbytes())) << "tensor " << name << " differs";
  }
}

TEST(Cli, ResumeEqualsStraightTrainingAndTruncatesMetrics) {
  TempDir tmp;
  const fs::path straight = tmp.path() / "straight", split = tmp.path() / "split";
  auto r = run_cli("train " + kSmall + "--set run.epochs=20 --run-dir " + straight.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("train " + kSmall + "--set run.epochs=10 --run-dir " + split.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // A metrics line past the last checkpoint (as after a crash) must be dropped on resume.
  { std::ofstream(split / "metrics.jsonl", std::ios::app) << "{\"epoch\": 10, \"loss\": 1}\n"; }
  r = run_cli("train --run-dir " + split.string() + " --resume --set run.epochs=20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("resuming from the checkpoint of epoch 10"));
  expect_same_tensors(last_checkpoint(straight), last_checkpoint(split));
  auto records = eggroll::read_metrics((split / "metrics.jsonl").string());
  ASSERT_EQ(records.size(), 20u);
  for (std::size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i]["epoch"].get<int>(), static_cast<int>(i));
}

TEST(Cli, EvalPrintsOneFigurePerLine) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  ASSERT_EQ(run_cli("train " + kSmall + "--set run.epochs=5 --run-dir " + run.string()).exit_code, 0);
  auto r = run_cli("eval " + run.string() + " --json " + (tmp.path() / "e.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("epoch: 5\n"));
  EXPECT_THAT(r.output, HasSubstr("eval_loss: "));
  EXPECT_THAT(slurp(tmp.path() / "e.json"), HasSubstr("\"eval_loss\""));
  // A checkpoint file works as well as a run folder.
  r = run_cli("eval " + (run / "checkpoints" / "epoch-00000005.safetensors").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Cli, InfoNamesBackendsAndSimd) {
  auto r = run_cli("info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("backends: reference, cpu"));
  EXPECT_THAT(r.output, HasSubstr("simd: "));
}

// The processor's model name, family and model number: the first processor's, spaces and tabs
// around the keys as /proc/cpuinfo writes them; -1 and "unknown" where a field is missing.
TEST(Cli, CpuinfoGivesTheFirstProcessorsFamilyAndModel) {
  std::istringstream listing(
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
      "model name\t: AMD EPYC\n\nprocessor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: other\n");
  eggroll::SystemInfo s;
  eggroll::read_cpuinfo(listing, s);
  EXPECT_EQ(s.cpu_model, "AMD EPYC");
  EXPECT_EQ(s.cpu_family, 25);
  EXPECT_EQ(s.cpu_model_number, 17);
  EXPECT_EQ(eggroll::cpu_description(s), "AMD EPYC (family 25, model 17)");
  std::istringstream empty("processor\t: 0\n");
  eggroll::read_cpuinfo(empty, s);
  EXPECT_EQ(s.cpu_model, "unknown");
  EXPECT_EQ(s.cpu_family, -1);
  EXPECT_EQ(eggroll::cpu_description(s), "unknown");
}

// The work bound of a forward or epoch record (cmd_bench.cpp, work_bound), recomputed from the
// record's own fields for the small model (4-256-2: sum of m + n 518, of m n 1536).
double small_model_work_bound(const nlohmann::json& rec) {
  const double rows = rec["population"].get<double>() * rec["rows_per_member"].get<double>();
  const double inference_s = rows / rec["inference_rows_per_s"].get<double>();
  double macs = rows * rec["rank"].get<double>() * 518.0;
  if (rec["suite"] == "epoch") macs += rec["population"].get<double>() / 2 * rec["rank"].get<double>() * 1536.0;
  const double rate = std::max({rec["peak_gmacs"].get<double>(), rec["peak_alongside_gmacs"].get<double>(),
                                rec["gmacs"].get<double>()}) * 1e9;
  return inference_s / (inference_s + rec["factor_s"].get<double>() + macs / rate);
}

// The forward suite's records, and for table noise the bound of reading the factors at the
// machine's read bandwidth (small sizes: seconds; the figures themselves are benchmarks).
TEST(Cli, BenchForwardWritesRecordsWithTheTableReadBound) {
  TempDir dir;
  const std::string json = (dir.path() / "forward.json").string();
  auto r = run_cli("bench --suite forward --dtypes f32 int8 --models small --populations 64 --ranks 2 --rows 1 "
                   "--noise generator table --table-log2 20 --reps 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(records.size(), 4u);
  for (const auto& rec : records) {
    SCOPED_TRACE(rec.dump());
    EXPECT_EQ(rec["suite"], "forward");
    for (const char* key : {"inference_rows_per_s", "eggroll_rows_per_s", "ratio", "gmacs", "peak_fraction",
                            "peak_alongside_gmacs", "peak_alongside_fraction"})
      EXPECT_GT(rec[key].get<double>(), 0.0) << key;
    EXPECT_DOUBLE_EQ(rec["peak_alongside_fraction"].get<double>(),
                     rec["gmacs"].get<double>() / rec["peak_alongside_gmacs"].get<double>());
    if (rec["noise"] == "table") {
      // small = 4-256-2: a pair's 2 (4 + 256 + 256 + 2) values, shared by its two members' rows
      const double value_bytes = rec["dtype"] == "int8" ? 1.0 : 4.0;
      EXPECT_DOUBLE_EQ(rec["factor_bytes_per_row"].get<double>(), 2.0 * 518.0 * value_bytes / 2.0);
      EXPECT_EQ(rec["table_log2_size"], 20);
      EXPECT_GT(rec["table_read_gbytes_per_s"].get<double>(), 0.0);
      EXPECT_GT(rec["read_bound"].get<double>(), 0.0);
      EXPECT_LE(rec["read_bound"].get<double>(), 1.0);
      // the factors' share of the work bound is their reads at the table's rate
      const double rows = rec["population"].get<double>() * rec["rows_per_member"].get<double>();
      EXPECT_NEAR(rec["factor_s"].get<double>(),
                  rec["factor_bytes_per_row"].get<double>() * rows / (rec["table_read_gbytes_per_s"].get<double>() * 1e9),
                  1e-12 * rec["factor_s"].get<double>());
      EXPECT_LT(rec["bound"].get<double>(), rec["read_bound"].get<double>());  // the correction's arithmetic too
    } else {
      EXPECT_FALSE(rec.contains("read_bound"));
    }
    // every case: the factors' time (generated: measured) and the bound of its EGGROLL work
    EXPECT_GT(rec["factor_s"].get<double>(), 0.0);
    EXPECT_GT(rec["bound"].get<double>(), 0.0);
    EXPECT_LT(rec["bound"].get<double>(), 1.0);
    EXPECT_NEAR(rec["bound"].get<double>(), small_model_work_bound(rec), 1e-9);
  }
  EXPECT_NE(r.output.find("bound"), std::string::npos) << r.output;
}

// The update and epoch suites' records, each with the peak timed alongside its case (small sizes:
// seconds; the figures themselves are benchmarks).
TEST(Cli, BenchUpdateAndEpochWriteRecordsWithThePeakAlongside) {
  TempDir dir;
  for (const std::string suite : {"update", "epoch"}) {
    SCOPED_TRACE(suite);
    const std::string json = (dir.path() / (suite + ".json")).string();
    auto r = run_cli("bench --suite " + suite + " --dtypes f32 int8 --models small --populations 64 --ranks 2 "
                     "--rows 1 --reps 1 --json " + json);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("peak~"), std::string::npos) << r.output;
    const auto records = nlohmann::json::parse(slurp(json));
    ASSERT_EQ(records.size(), 2u);
    for (const auto& rec : records) {
      SCOPED_TRACE(rec.dump());
      EXPECT_EQ(rec["suite"], suite);
      for (const char* key : {"inference_rows_per_s", "eggroll_rows_per_s", "ratio", "gmacs", "peak_fraction",
                              "peak_alongside_gmacs", "peak_alongside_fraction"})
        EXPECT_GT(rec[key].get<double>(), 0.0) << key;
      EXPECT_GT(rec[suite == "update" ? "update_s" : "epoch_s"].get<double>(), 0.0);
      if (suite == "epoch") {  // the bound of the epoch's work: factors, correction and update
        EXPECT_GT(rec["factor_s"].get<double>(), 0.0);
        EXPECT_NEAR(rec["bound"].get<double>(), small_model_work_bound(rec), 1e-9);
        EXPECT_LT(rec["bound"].get<double>(), 1.0);
      } else {
        EXPECT_FALSE(rec.contains("bound"));
      }
    }
  }
}

// The language model's step against the int8 GEMM at its shapes: the GEMM records at both row
// counts, and the step's ratio the median of its rounds' own ratios (at least three rounds).
TEST(Cli, BenchLmRatioIsTheMedianOfItsRounds) {
  TempDir dir;
  const std::string json = (dir.path() / "lm.json").string();
  auto r = run_cli("bench --suite lm --quick --reps 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = nlohmann::json::parse(slurp(json));
  int gemms = 0, steps = 0;
  for (const auto& rec : records) {
    SCOPED_TRACE(rec.dump());
    EXPECT_EQ(rec["suite"], "lm");
    if (rec["model"] == "int8_gemm") {
      ++gemms;
      EXPECT_GT(rec["gmacs"].get<double>(), 0.0);
      continue;
    }
    ++steps;
    EXPECT_EQ(rec["model"], "egg");
    std::vector<double> rounds = rec["round_ratios"].get<std::vector<double>>();
    ASSERT_GE(rounds.size(), 3u);
    std::sort(rounds.begin(), rounds.end());
    const double median = rounds.size() % 2 ? rounds[rounds.size() / 2]
                                            : 0.5 * (rounds[rounds.size() / 2 - 1] + rounds[rounds.size() / 2]);
    EXPECT_DOUBLE_EQ(rec["ratio"].get<double>(), median);
    for (const char* key : {"member_tokens_per_s", "gmacs", "gemm_gmacs", "ratio_of_medians", "epoch_s"})
      EXPECT_GT(rec[key].get<double>(), 0.0) << key;
  }
  EXPECT_EQ(gemms, 6);  // three shapes at 2048 rows per thread and at the step's rows
  EXPECT_EQ(steps, 1);
}

// --simd runs the kernels at a lower level (as run.simd), and every record says which ran.
TEST(Cli, BenchSimdSetsTheKernelLevels) {
  TempDir dir;
  const std::string json = (dir.path() / "forward.json").string();
  auto r = run_cli("bench --suite forward --simd scalar --dtypes f32 int8 --models small --populations 64 --ranks 2 "
                   "--rows 1 --noise generator --reps 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(records.size(), 2u);
  for (const auto& rec : records) {
    EXPECT_EQ(rec["machine"]["int8_level"], "scalar");
    EXPECT_EQ(rec["machine"]["sgemm_level"], "scalar");
    EXPECT_EQ(rec["machine"]["noise_level"], "scalar");
  }
  r = run_cli("bench --suite forward --simd sse9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--simd"), std::string::npos) << r.output;
}

struct BadCase {
  std::string args, message;
};

TEST(Cli, BadInputExitsNonZeroWithAClearMessage) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "x").string();
  { std::ofstream(tmp.path() / "unknown.toml") << "[es]\nrankk = 2\n"; }
  { std::ofstream(tmp.path() / "type.toml") << "[es]\nrank = \"two\"\n"; }
  { std::ofstream(tmp.path() / "syntax.toml") << "[es\nrank = 2\n"; }
  const std::vector<BadCase> cases = {
      {"train " + (tmp.path() / "missing.toml").string(), "not found"},
      {"train " + (tmp.path() / "unknown.toml").string(), "es.rankk"},
      {"train " + (tmp.path() / "type.toml").string(), "es.rank = \"two\""},
      {"train " + (tmp.path() / "syntax.toml").string(), "syntax.toml"},
      {"train --set es.population=0 --run-dir " + dir, "es.population = 0"},
      {"train --set es.population=7 --run-dir " + dir, "odd"},
      {"train --set es.rank=0 --run-dir " + dir, "es.rank = 0"},
      {"train --set es.sigma=nan --run-dir " + dir, "es.sigma = nan"},
      {"train --set model.hidden=[0] --run-dir " + dir, "model.hidden"},
      {"train --set task.kind=nope --run-dir " + dir, "task.kind"},
      {"train --resume", "--run-dir"},
      {"train --resume --run-dir " + dir, "holds no run"},
      {"eval " + dir, "does not exist"},
  };
  for (auto& c : cases) {
    auto r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.output, HasSubstr("error")) << c.args;
  }
  EXPECT_FALSE(fs::exists(dir)) << "a failed start must not create the run folder";
}

TEST(Cli, JsonOutputIsCheckedBeforeAnyWork) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "x").string();
  const std::string missing = (tmp.path() / "no" / "such" / "s.json").string();
  auto r = run_cli("train " + kSmall + "--set run.epochs=5 --run-dir " + dir + " --json " + missing);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("does not exist"));
  EXPECT_FALSE(fs::exists(dir)) << "the run must not start";
  r = run_cli("bench --suite forward --quick --json " + tmp.path().string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("is a directory"));
  EXPECT_THAT(r.output, Not(HasSubstr("infer rows/s"))) << "no case may run";
}

TEST(Cli, ExistingRunsAndCheckpointsAreNeverOverwritten) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  ASSERT_EQ(run_cli("train " + kSmall + "--set run.epochs=5 --run-dir " + run.string()).exit_code, 0);
  const std::string config = slurp(run / "config.toml"), metrics = slurp(run / "metrics.jsonl");
  const fs::path ck = run / "checkpoints" / "epoch-00000005.safetensors";
  const std::string ck_bytes = slurp(ck);

  auto r = run_cli("train " + kSmall + "--set run.epochs=5 --run-dir " + run.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("already holds a run"));
  r = run_cli("train --run-dir " + run.string() + " --resume --set es.sigma=0.5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("es.sigma"));
  { std::ofstream(tmp.path() / "other.toml") << "[es]\nrank = 3\n[model]\nkind = \"matrix\"\n[task]\nkind = \"sphere\"\n"; }
  r = run_cli("train " + (tmp.path() / "other.toml").string() + " --run-dir " + run.string() + " --resume");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("es.rank"));
  EXPECT_EQ(config, slurp(run / "config.toml"));
  EXPECT_EQ(metrics, slurp(run / "metrics.jsonl"));
  EXPECT_EQ(ck_bytes, slurp(ck));
}

TEST(Cli, CorruptCheckpointsAreReportedAndSkipped) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  ASSERT_EQ(run_cli("train " + kSmall + "--set run.epochs=10 --run-dir " + run.string()).exit_code, 0);
  const fs::path newest = run / "checkpoints" / "epoch-00000010.safetensors";
  const std::string bytes = slurp(newest);
  { std::ofstream(newest, std::ios::binary) << bytes.substr(0, bytes.size() / 2); }  // truncated
  auto r = run_cli("eval " + newest.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("truncated"));
  r = run_cli("eval " + run.string());  // falls back to epoch 5, with a warning
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("epoch: 5\n"));
  EXPECT_THAT(r.output, HasSubstr("warning"));
  { std::ofstream(tmp.path() / "garbage.safetensors", std::ios::binary) << "not a checkpoint at all"; }
  r = run_cli("eval " + (tmp.path() / "garbage.safetensors").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("corrupt"));
}

TEST(Cli, CheckpointOfAnotherModelIsRefused) {
  TempDir tmp;
  const fs::path a = tmp.path() / "a";
  ASSERT_EQ(run_cli("train " + kSmall + "--set run.epochs=5 --run-dir " + a.string()).exit_code, 0);
  // Rewrite the checkpoint's config to a bigger sphere: the tensor shapes no longer match.
  const fs::path ck = a / "checkpoints" / "epoch-00000005.safetensors";
  auto c = eggroll::read_safetensors(ck.string());
  auto& cfg = c.metadata["config"];
  cfg.replace(cfg.find("dim = 36"), 8, "dim = 64");
  eggroll::write_safetensors((tmp.path() / "other.safetensors").string(), c);
  auto r = run_cli("eval " + (tmp.path() / "other.safetensors").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("another model"));
}

}  // namespace

namespace {

TEST(Cli, PlotWritesAPng) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  ASSERT_EQ(run_cli("train " + kSmall + "--set run.epochs=10 --run-dir " + run.string()).exit_code, 0);
  auto r = run_cli("plot " + run.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string png = slurp(run / "learning_curve.png");
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  r = run_cli("plot " + tmp.path().string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("metrics.jsonl"));
}

// A classification run (its records carry test_accuracy) is drawn as accuracy, whatever it was
// scored by; a run with loss alone as loss.
TEST(Cli, PlotDrawsAccuracyForClassificationRuns) {
  TempDir tmp;
  for (bool classification : {true, false}) {
    const fs::path run = tmp.path() / (classification ? "cls" : "reg");
    fs::create_directories(run);
    {
      std::ofstream m(run / "metrics.jsonl");
      for (int e = 0; e < 3; ++e) {
        m << "{\"epoch\":" << e << ",\"wall_s\":" << e << ",\"loss\":" << 2.0 - 0.5 * e;
        if (classification) m << ",\"accuracy\":" << 0.3 + 0.2 * e;
        if (classification && e == 2) m << ",\"test_accuracy\":0.7,\"test_loss\":1.1";
        m << "}\n";
      }
    }
    const fs::path json = run / "plot.json";
    auto r = run_cli("plot " + run.string() + " --json " + json.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(nlohmann::json::parse(slurp(json)).at("main_figure"), classification ? "accuracy" : "loss");
  }
}

TEST(Cli, ProgressFallsBackToPlainLinesWithoutATerminal) {
  TempDir tmp;
  auto r = run_cli("train " + kSmall + "--set run.epochs=10 --run-dir " + (tmp.path() / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos);
  EXPECT_THAT(r.output, HasSubstr("epoch 10/10 | loss "));
  EXPECT_THAT(r.output, HasSubstr("members/s | ETA "));
}

}  // namespace
