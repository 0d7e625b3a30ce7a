// eggroll: train, evaluate and inspect EGGROLL runs from the command line.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "commands.hpp"
#include "eggroll/core/system.hpp"
#include "eggroll/core/error.hpp"

namespace {

// --json FILE: "-" (standard output) or a file that can be written, checked before any work so
// that a long run does not end by failing to save its figures.
const CLI::Validator kJsonOutput(
    [](const std::string& path) -> std::string {
      if (path == "-") return {};
      namespace fs = std::filesystem;
      std::error_code ec;
      const fs::path p(path);
      if (fs::is_directory(p, ec))
        return "'" + path + "' is a directory; give a file name inside it (or - for standard output)";
      const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
      if (!fs::is_directory(dir, ec))
        return "the folder '" + dir.string() + "' of '" + path + "' does not exist; create it first";
      if (fs::exists(p, ec) ? access(path.c_str(), W_OK) != 0 : access(dir.c_str(), W_OK) != 0)
        return "cannot write '" + path + "' (permission denied); choose a writable path";
      return {};
    },
    "FILE");

}  // namespace

int main(int argc, char** argv) {
  using namespace eggroll::cli;
  eggroll::retain_freed_memory();
  CLI::App app{"eggroll: EGGROLL low-rank evolution strategies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", EGGROLL_CLI_VERSION);

  TrainArgs train_args;
  auto* t = app.add_subcommand("train", "Train a model (without CONFIG: the built-in demo)");
  t->add_option("config", train_args.config, "Config file (TOML)");
  t->add_option("--set", train_args.overrides, "Override a key: section.key=value (repeatable)")->allow_extra_args(false);
  t->add_option("--run-dir", train_args.run_dir, "Run folder (default runs/<config stem>-<UTC time>)");
  t->add_flag("--resume", train_args.resume, "Continue the run in --run-dir from its newest valid checkpoint");
  t->add_option("--json", train_args.json, "Write a JSON summary to FILE (- for standard output)")
      ->check(kJsonOutput);

  EvalArgs eval_args;
  auto* e = app.add_subcommand("eval", "Evaluate the unperturbed model of a run folder or checkpoint");
  e->add_option("target", eval_args.target, "Run folder or checkpoint file")->required();
  e->add_option("--json", eval_args.json, "Write the figures as JSON to FILE (- for standard output)")
      ->check(kJsonOutput);

  SampleArgs sample_args;
  auto* s = app.add_subcommand("sample", "Generate text from a language-model checkpoint");
  s->add_option("checkpoint", sample_args.checkpoint, "Checkpoint file (.safetensors)")->required();
  s->add_option("--prompt", sample_args.prompt, "Text the model reads first");
  s->add_option("--bytes", sample_args.bytes, "Bytes to generate (default 200)")->check(CLI::Range(0, 1 << 24));
  s->add_option("--temperature", sample_args.temperature, "Sampling temperature (0 = most likely byte; default 1)")
      ->check(CLI::Range(0.0, 100.0));
  s->add_option("--seed", sample_args.seed, "Seed of the sampling draws");
  s->add_option("--json", sample_args.json,
                "Write the text as JSON to FILE (- for standard output): \"text\" with any byte that is not "
                "UTF-8 as U+FFFD, \"bytes\" every byte as a number")
      ->check(kJsonOutput);

  std::string plot_dir, plot_out, plot_json;
  bool plot_time = false;
  auto* p = app.add_subcommand("plot", "Draw the learning curve of a run as a PNG (needs gnuplot)");
  p->add_option("run_dir", plot_dir, "Run folder")->required();
  p->add_option("--out", plot_out, "PNG file (default RUN_DIR/learning_curve.png)");
  p->add_flag("--time", plot_time, "Wall-clock minutes on the x axis instead of epochs");
  p->add_option("--json", plot_json, "Write {\"png\": path} to FILE (- for standard output)")
      ->check(kJsonOutput);

  BenchArgs bench_args;
  auto* b = app.add_subcommand("bench", "Speed: EGGROLL vs plain batched inference, and the machine's peak");
  b->add_option("--suite", bench_args.suite, "peak | forward | update | epoch | lm | memory (default forward)")
      ->check(CLI::IsMember({"peak", "forward", "update", "epoch", "lm", "memory"}));
  b->add_flag("--quick", bench_args.quick, "A subset that runs in about a minute");
  b->add_option("--reps", bench_args.reps, "Timed repetitions per case, after a warm-up of at least 0.1 s; each repetition times as many calls in a row as make 20 ms (default 5)")
      ->check(CLI::Range(1, 1000));
  b->add_option("--threads", bench_args.threads, "Threads (default: OpenMP's, OMP_NUM_THREADS)")->check(CLI::Range(1, 1024));
  b->add_option("--models", bench_args.models, "small, medium, large (default: the suite's sweep)")->delimiter(',');
  b->add_option("--dtypes", bench_args.dtypes, "f32, int8")->delimiter(',');
  b->add_option("--populations", bench_args.populations, "Populations, e.g. 256,4096")->delimiter(',');
  b->add_option("--ranks", bench_args.ranks, "Ranks, e.g. 1,4")->delimiter(',');
  b->add_option("--rows", bench_args.rows, "Rows per member R, e.g. 1,16")->delimiter(',');
  b->add_option("--noise", bench_args.noises, "generator, table")->delimiter(',');
  b->add_option("--table-log2", bench_args.table_log2, "es.table_log2_size of table noise (default 24)")
      ->check(CLI::Range(20, 30));
  b->add_option("--simd", bench_args.simd,
                "SIMD level of the kernels, as run.simd: auto (default), scalar, avx2, avx512, avx512_amx (the int8 "
                "matmul on AMX tiles; up to this machine's)")
      ->check(CLI::IsMember({"auto", "scalar", "avx2", "avx512", "avx512_vnni", "avx512_amx"}));
  b->add_option("--json", bench_args.json, "Write the records as JSON to FILE (- for standard output)")
      ->check(kJsonOutput);

  std::string info_json;
  auto* i = app.add_subcommand("info", "Version, backends, SIMD level, threads, GPUs");
  i->add_option("--json", info_json, "Write the information as JSON to FILE (- for standard output)")
      ->check(kJsonOutput);

  CLI11_PARSE(app, argc, argv);
  try {
    if (t->parsed()) return train(train_args);
    if (e->parsed()) return eval(eval_args);
    if (s->parsed()) return sample(sample_args);
    if (p->parsed()) return plot(plot_dir, plot_out, plot_json, plot_time);
    if (i->parsed()) return info(info_json);
    if (b->parsed()) return bench(bench_args);
  } catch (const eggroll::Error& err) {
    std::fprintf(stderr, "eggroll: error: %s\n", err.what());
    return 1;
  } catch (const std::exception& err) {
    std::fprintf(stderr, "eggroll: unexpected error: %s\n", err.what());
    return 2;
  }
  return 0;
}
