// The CLI with the integer language model: train, eval (bits per byte and baselines), sample,
// and the text task's bad inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_support.hpp"

namespace fs = std::filesystem;
using eggroll::testing::run_cli;
using eggroll::testing::TempDir;
using ::testing::HasSubstr;

namespace {

// A tiny model on a small generated text: seconds.
std::string tiny(const fs::path& text) {
  return std::string(EGGROLL_SOURCE_DIR) + "/configs/charlm_fortunes.toml --set task.path=" + text.string() +
         " --set model.width=16 --set model.layers=1 --set es.population=16 --set task.tokens_per_epoch=8 "
         "--set task.eval_streams=4 --set run.eval_every=5 --set run.checkpoint_every=5 ";
}

fs::path write_text(const fs::path& dir) {
  std::ofstream f(dir / "text.txt");
  for (int i = 0; i < 30; ++i) f << "fortune number " << i << " says hello.\n%\n";
  return dir / "text.txt";
}

TEST(CliLanguageModel, TrainEvalAndSample) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  auto r = run_cli("train " + tiny(write_text(tmp.path())) + "--set run.epochs=10 --run-dir " + run.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("baseline_unigram_bpb"));
  EXPECT_THAT(r.output, HasSubstr("val_bits_per_byte"));
  r = run_cli("eval " + run.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* k : {"val_bits_per_byte: ", "baseline_unigram_bpb: ", "baseline_bigram_bpb: ", "baseline_gzip_bpb: ",
                        "baseline_xz_bpb: "})
    EXPECT_THAT(r.output, HasSubstr(k));
  const std::string ck = (run / "checkpoints" / "epoch-00000010.safetensors").string();
  r = run_cli("sample " + ck + " --prompt fortune --bytes 20 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("fortune", 0), 0u) << r.output;
  EXPECT_EQ(run_cli("sample " + ck + " --prompt fortune --bytes 20 --seed 3").output, r.output) << "same seed, same text";
  r = run_cli("sample " + ck + " --temperature -1");
  EXPECT_NE(r.exit_code, 0);
  // A byte-level model may write bytes that are not UTF-8 (near-uniform draws at temperature 100):
  // the JSON stays valid, "bytes" keeps each byte as it is.
  const fs::path json = tmp.path() / "sample.json";
  r = run_cli("sample " + ck + " --bytes 64 --seed 5 --temperature 100 --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::string bytes;
  for (unsigned b : j.at("bytes")) bytes.push_back(static_cast<char>(b));
  EXPECT_EQ(r.output, bytes + "\n");
  EXPECT_TRUE(std::any_of(bytes.begin(), bytes.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
      << "the draw has no byte past ASCII: the test needs another seed";
  EXPECT_THAT(j.at("text").get<std::string>(), HasSubstr("\xEF\xBF\xBD"));  // U+FFFD
}

TEST(CliLanguageModel, MetricsCarryTheIntegerUpdateFigures) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  ASSERT_EQ(run_cli("train " + tiny(write_text(tmp.path())) + "--set run.epochs=3 --set task.diagnostics_every=2 --run-dir " +
                    run.string()).exit_code, 0);
  std::ifstream in(run / "metrics.jsonl");
  std::string first;
  std::getline(in, first);
  for (const char* k : {"\"alpha\"", "\"threshold\"", "\"frac_moved\"", "\"train_bits_per_byte\""})
    EXPECT_THAT(first, HasSubstr(k));
  EXPECT_THAT(first, ::testing::Not(HasSubstr("\"lr\"")));
  // Diagnostics on epochs 0 and 2: per layer mean |activation|, % saturated, entropy.
  for (const char* k : {"\"diag_l0_gru_mean_abs\"", "\"diag_l0_mlp_saturated_pct\"", "\"diag_logits_entropy_bits\""})
    EXPECT_THAT(first, HasSubstr(k));
  std::string second;
  std::getline(in, second);
  EXPECT_THAT(second, ::testing::Not(HasSubstr("diag_")));
}

TEST(CliLanguageModel, BadTextIsAClearError) {
  TempDir tmp;
  { std::ofstream(tmp.path() / "empty.txt"); }
  { std::ofstream(tmp.path() / "binary.bin", std::ios::binary) << std::string("\x00\x01\x02\xff\xfe", 5) << "abc"; }
  fs::create_directories(tmp.path() / "nothing");
  { std::ofstream(tmp.path() / "nothing" / "x.dat") << "index"; }
  { std::ofstream(tmp.path() / "one.txt") << "a single document without any separator line\n"; }
  const std::string dir = (tmp.path() / "run").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(tmp.path() / "missing.txt").string(), "missing.txt"},
      {(tmp.path() / "empty.txt").string(), "empty.txt"},
      {(tmp.path() / "binary.bin").string(), "binary.bin"},
      {(tmp.path() / "nothing").string(), "nothing"},
      {(tmp.path() / "one.txt").string(), "one.txt"},
  };
  for (auto& [path, needle] : cases) {
    auto r = run_cli("train " + std::string(EGGROLL_SOURCE_DIR) + "/configs/charlm_fortunes.toml --set task.path=" + path +
                     " --run-dir " + dir);
    EXPECT_NE(r.exit_code, 0) << path;
    EXPECT_THAT(r.output, HasSubstr("error")) << path;
    EXPECT_THAT(r.output, HasSubstr(needle)) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir));
  auto r = run_cli("train " + std::string(EGGROLL_SOURCE_DIR) + "/configs/charlm_fortunes.toml --set model.width=40000 --run-dir " + dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("133,143"));
}

}  // namespace
