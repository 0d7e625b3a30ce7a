// eggroll plot: the learning curve of a run (main figure per epoch, evaluation figure on the
// epochs that evaluated) drawn by gnuplot into a PNG.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

#include "commands.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/io/metrics.hpp"

namespace fs = std::filesystem;

namespace eggroll::cli {
namespace {

// The figure to draw: the first known name the first record carries; classification runs
// (records with test_accuracy) draw accuracy, whatever their score, since that is what they are
// judged by.
std::string main_figure(const std::vector<nlohmann::json>& records) {
  for (const auto& r : records)
    if (r.contains("test_accuracy") && records.front().contains("accuracy")) return "accuracy";
  for (const char* k : {"loss", "mean_return", "accuracy", "train_bits_per_byte"})
    if (records.front().contains(k)) return k;
  return "score_mean";
}

std::string eval_figure(const std::string& main) {
  if (main == "loss") return "eval_loss";
  if (main == "accuracy") return "test_accuracy";
  if (main == "train_bits_per_byte") return "val_bits_per_byte";
  if (main == "mean_return") return "eval_mean_return";
  return "";
}

double number(const nlohmann::json& r, const std::string& k) {
  return r.contains(k) && r[k].is_number() ? r[k].get<double>() : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

int plot(const std::string& run_dir, const std::string& out_arg, const std::string& json, bool time_axis) {
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  check(fs::exists(metrics), "plot: '", metrics.string(), "' not found: is '", run_dir, "' a run folder?");
  auto records = read_metrics(metrics.string());
  check(!records.empty(), "plot: '", metrics.string(), "' has no records yet");
  check(std::system("command -v gnuplot >/dev/null 2>&1") == 0,
        "plot: gnuplot is not installed (apt-get install gnuplot-nox)");
  const std::string main = main_figure(records), eval = eval_figure(main);
  const std::string out = out_arg.empty() ? (fs::path(run_dir) / "learning_curve.png").string() : out_arg;

  const fs::path data = fs::temp_directory_path() / ("eggroll-plot-" + std::to_string(::getpid()) + ".dat");
  double lo = INFINITY, hi = -INFINITY;
  {
    std::ofstream f(data);
    for (auto& r : records) {
      double m = number(r, main), e = eval.empty() ? NAN : number(r, eval);
      for (double v : {m, e})
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
      f << number(r, "epoch") + 1 << ' ' << number(r, "wall_s") << ' ' << (std::isfinite(m) ? std::to_string(m) : "?")
        << ' ' << (std::isfinite(e) ? std::to_string(e) : "?") << '\n';
    }
  }
  const bool log_y = lo > 0 && hi / lo > 50 && main != "train_bits_per_byte";

  std::string script = "set terminal pngcairo size 900,560 enhanced font 'sans,11'\n";
  // Rising figures (accuracy, return) keep the key out of the curve's way at the bottom.
  const bool rising = main == "accuracy" || main == "mean_return";
  script += "set output '" + out + "'\nset datafile missing '?'\nset grid\nset key " +
            (rising ? "bottom right" : "top right") + "\n";
  script += "set title '" + fs::path(run_dir).filename().string() + "' noenhanced\n";
  const std::string x = time_axis ? "($2/60)" : "1";
  script += std::string("set xlabel '") + (time_axis ? "wall time (minutes)" : "epoch") + "'\nset ylabel '" + main +
            "' noenhanced\n";
  if (log_y) script += "set logscale y\n";
  script += "plot '" + data.string() + "' using " + x + ":3 with lines lw 2 title '" + main + " (members mean)' noenhanced";
  if (!eval.empty())
    script += ", '' using " + x + ":4 with linespoints pt 7 ps 0.6 lw 2 title '" + eval + " (unperturbed)' noenhanced";
  // Constant reference lines a task reports with its evaluations (language models: baselines).
  const nlohmann::json* last_eval = nullptr;
  for (auto& r : records)
    if (!eval.empty() && r.contains(eval)) last_eval = &r;
  if (last_eval)
    for (auto& [k, v] : last_eval->items())
      if (k.rfind("baseline_", 0) == 0 && v.is_number())
        script += ", " + std::to_string(v.get<double>()) + " with lines dt 2 lw 1.5 title '" + k + "' noenhanced";
  script += "\n";
  FILE* gp = ::popen("gnuplot 2>&1", "w");
  check(gp != nullptr, "plot: cannot start gnuplot");
  std::fwrite(script.data(), 1, script.size(), gp);
  const int status = ::pclose(gp);
  fs::remove(data);
  check(status == 0, "plot: gnuplot failed (exit status ", status, ")");
  std::printf("%s\n", out.c_str());
  if (!json.empty()) write_json(json, {{"png", out}, {"main_figure", main}, {"records", records.size()}});
  return 0;
}

}  // namespace eggroll::cli
