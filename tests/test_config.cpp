// Tests of the TOML config: defaults, every key's validation and its message, kind tables,
// overrides, syntax errors, files, round trips through config_to_toml, and config_diff.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "eggroll/core/error.hpp"
#include "eggroll/io/config.hpp"

namespace eggroll {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// Stand-ins for the real model and task kinds, which are registered by their factories.
void register_test_kinds() {
  register_kind_schema({"model", "mlp", {
      {"hidden", std::vector<std::int64_t>{16, 16}, "hidden layer widths", 1, 65536, {}},
      {"activation", std::string("relu"), "nonlinearity", {}, {}, {"relu", "tanh"}},
      {"bias", true, "add a bias", {}, {}, {}},
      {"init_scale", 1.0, "initial weight scale", 0.0, {}, {}},
  }});
  register_kind_schema({"model", "gru", {{"width", std::int64_t{32}, "state width", 1, 4096, {}}}});
  register_kind_schema({"task", "regression", {
      {"n_samples", std::int64_t{256}, "training points", 1, {}, {}},
      {"noise", 0.1, "label noise", 0.0, 1.0, {}},
      {"label", std::string("a \"quoted\" \\ name\n"), "free text", {}, {}, {}},
  }});
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { register_test_kinds(); }
};

// The message of the Error that f throws; fails the test when it throws nothing.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an eggroll::Error";
  return "";
}

std::string parse_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { parse_config(text, "bad.toml", overrides); });
}

TEST_F(ConfigTest, EmptyTextGivesDefaults) {
  Config c = parse_config("", "empty.toml");
  EXPECT_EQ(c.run.seed, 0u);
  EXPECT_EQ(c.run.epochs, 100);
  EXPECT_EQ(c.run.simd, "auto");
  EXPECT_EQ(c.es.noiser, "eggroll");
  EXPECT_EQ(c.es.population, 256);
  EXPECT_EQ(c.es.sigma, 0.05);
  EXPECT_EQ(c.es.memory_budget, std::int64_t{1} << 30);
  EXPECT_EQ(c.optim.betas, (std::vector<double>{0.9, 0.999}));
  EXPECT_EQ(c.dist.check_every, 0);
  EXPECT_EQ(c.model.kind, "mlp");
  EXPECT_EQ(c.model.get_ints("hidden"), (std::vector<std::int64_t>{16, 16}));
  EXPECT_EQ(c.model.get_string("activation"), "relu");
  EXPECT_TRUE(c.model.get_bool("bias"));
  EXPECT_EQ(c.task.kind, "regression");
  EXPECT_EQ(c.task.get_int("n_samples"), 256);
  EXPECT_EQ(c.task.get_double("noise"), 0.1);
}

TEST_F(ConfigTest, ReadsEverySection) {
  Config c = parse_config(R"(
[run]
seed = 9223372036854775807
epochs = 7
threads = 2
checkpoint_every = 3
keep_checkpoints = 2
eval_every = 0
max_bad_epochs = 9
simd = "avx2"
[es]
noiser = "open_es"
population = 64
rank = 8
sigma = 0.25
noise_reuse = 0
fixed_noise = true
antithetic = false
shaping = "centered_rank"
group_size = 3
noise_source = "table"
table_log2_size = 20
freeze_nonmatrix = true
memory_budget = 1048576
sigma_shift = 7
alpha = 30
alpha_decay_epochs = 50
[optim]
name = "adamw"
lr = 0.003
momentum = 0.5
nesterov = true
betas = [0.8, 0.95]
eps = 1e-6
weight_decay = 0.01
lr_schedule = "cosine"
lr_end = 0.0001
sigma_schedule = "exponential"
sigma_end = 0.99
schedule_epochs = 40
warmup_epochs = 5
clip_norm = 1.5
[dist]
check_every = 11
[model]
kind = "gru"
width = 64
[task]
kind = "regression"
noise = 0.5
)", "full.toml");
  EXPECT_EQ(c.run.seed, 9223372036854775807ull);
  EXPECT_EQ(c.run.epochs, 7);
  EXPECT_EQ(c.run.threads, 2);
  EXPECT_EQ(c.run.checkpoint_every, 3);
  EXPECT_EQ(c.run.keep_checkpoints, 2);
  EXPECT_EQ(c.run.eval_every, 0);
  EXPECT_EQ(c.run.max_bad_epochs, 9);
  EXPECT_EQ(c.run.simd, "avx2");
  EXPECT_EQ(c.es.noiser, "open_es");
  EXPECT_EQ(c.es.population, 64);
  EXPECT_EQ(c.es.rank, 8);
  EXPECT_EQ(c.es.sigma, 0.25);
  EXPECT_EQ(c.es.noise_reuse, 0);
  EXPECT_TRUE(c.es.fixed_noise);
  EXPECT_FALSE(c.es.antithetic);
  EXPECT_EQ(c.es.shaping, "centered_rank");
  EXPECT_EQ(c.es.group_size, 3);
  EXPECT_EQ(c.es.noise_source, "table");
  EXPECT_EQ(c.es.table_log2_size, 20);
  EXPECT_TRUE(c.es.freeze_nonmatrix);
  EXPECT_EQ(c.es.memory_budget, 1048576);
  EXPECT_EQ(c.es.sigma_shift, 7);
  EXPECT_EQ(c.es.alpha, 30);
  EXPECT_EQ(c.es.alpha_decay_epochs, 50);
  EXPECT_EQ(c.optim.name, "adamw");
  EXPECT_EQ(c.optim.lr, 0.003);
  EXPECT_EQ(c.optim.momentum, 0.5);
  EXPECT_TRUE(c.optim.nesterov);
  EXPECT_EQ(c.optim.betas, (std::vector<double>{0.8, 0.95}));
  EXPECT_EQ(c.optim.eps, 1e-6);
  EXPECT_EQ(c.optim.weight_decay, 0.01);
  EXPECT_EQ(c.optim.lr_schedule, "cosine");
  EXPECT_EQ(c.optim.lr_end, 0.0001);
  EXPECT_EQ(c.optim.sigma_schedule, "exponential");
  EXPECT_EQ(c.optim.sigma_end, 0.99);
  EXPECT_EQ(c.optim.schedule_epochs, 40);
  EXPECT_EQ(c.optim.warmup_epochs, 5);
  EXPECT_EQ(c.optim.clip_norm, 1.5);
  EXPECT_EQ(c.dist.check_every, 11);
  EXPECT_EQ(c.model.kind, "gru");
  EXPECT_EQ(c.model.get_int("width"), 64);
  EXPECT_EQ(c.model.values.size(), 1u);
  EXPECT_EQ(c.task.get_double("noise"), 0.5);
  EXPECT_EQ(c.task.get_int("n_samples"), 256);  // default filled
}

TEST_F(ConfigTest, IntegersAreAcceptedWhereNumbersAreExpected) {
  Config c = parse_config("[es]\nsigma = 1\n[optim]\nbetas = [0, 0.5]\nlr = 2\n[model]\nkind = \"mlp\"\ninit_scale = 3\n", "x.toml");
  EXPECT_EQ(c.es.sigma, 1.0);
  EXPECT_EQ(c.optim.betas, (std::vector<double>{0.0, 0.5}));
  EXPECT_EQ(c.optim.lr, 2.0);
  EXPECT_EQ(std::get<double>(c.model.values.at("init_scale")), 3.0);
}

TEST_F(ConfigTest, FloatWhereIntegerIsExpectedIsAnError) {
  std::string msg = parse_error("[es]\nrank = 1.5\n");
  EXPECT_THAT(msg, HasSubstr("bad.toml: es.rank = 1.5: expected an integer in [1, 1024]"));
  EXPECT_THAT(parse_error("[model]\nkind = \"gru\"\nwidth = 2.0\n"), HasSubstr("model.width = 2.0: expected an integer"));
}

// Each bad value names its key and value, says what is allowed, and names the file.
TEST_F(ConfigTest, EveryRangeIsChecked) {
  struct Case { std::string text, expected; };
  const std::vector<Case> cases = {
      {"[run]\nepochs = 0", "run.epochs = 0: expected an integer >= 1"},
      {"[run]\nthreads = -1", "run.threads = -1: expected an integer in [0, 2147483647]"},
      {"[run]\nthreads = 3000000000", "run.threads = 3000000000: expected an integer in [0, 2147483647]"},
      {"[run]\ncheckpoint_every = -1", "run.checkpoint_every = -1: expected an integer >= 0"},
      {"[run]\nkeep_checkpoints = 0", "run.keep_checkpoints = 0: expected an integer in [1, 2147483647]"},
      {"[run]\neval_every = -5", "run.eval_every = -5: expected an integer >= 0"},
      {"[run]\nmax_bad_epochs = 0", "run.max_bad_epochs = 0: expected an integer in [1, 2147483647]"},
      {"[run]\nsimd = \"sse\"", "run.simd = \"sse\": expected one of auto, avx512_amx, avx512, avx2, scalar"},
      {"[run]\nseed = -1", "run.seed = -1: expected an integer >= 0"},
      {"[run]\nseed = \"42\"", "run.seed = \"42\": expected an integer >= 0"},
      {"[es]\nnoiser = \"foo\"", "es.noiser = \"foo\": expected one of eggroll, open_es, eggroll_sign, "
                                 "eggroll_baseline, sparse, noop, q_eggroll"},
      {"[es]\npopulation = 0", "es.population = 0: expected an integer >= 1"},
      {"[es]\nrank = 0", "es.rank = 0: expected an integer in [1, 1024]"},
      {"[es]\nrank = 1025", "es.rank = 1025: expected an integer in [1, 1024]"},
      {"[es]\nsigma = 0", "es.sigma = 0: expected a finite number > 0"},
      {"[es]\nsigma = -0.1", "es.sigma = -0.1: expected a finite number > 0"},
      {"[es]\nsigma = nan", "es.sigma = nan: expected a finite number > 0"},
      {"[es]\nsigma = inf", "es.sigma = inf: expected a finite number > 0"},
      {"[es]\nnoise_reuse = -1", "es.noise_reuse = -1: expected an integer >= 0 (0 only with es.fixed_noise = true)"},
      {"[es]\nfixed_noise = 1", "es.fixed_noise = 1: expected a boolean (true or false)"},
      {"[es]\nantithetic = \"yes\"", "es.antithetic = \"yes\": expected a boolean"},
      {"[es]\nshaping = \"rank\"", "es.shaping = \"rank\": expected one of zscore, group_zscore, centered_rank, "
                                  "antithetic_sign, raw"},
      {"[es]\ngroup_size = 1", "es.group_size = 1: expected an integer >= 2"},
      {"[es]\nnoise_source = \"file\"", "es.noise_source = \"file\": expected one of generator, table"},
      {"[es]\ntable_log2_size = 19", "es.table_log2_size = 19: expected an integer in [20, 30]"},
      {"[es]\ntable_log2_size = 31", "es.table_log2_size = 31: expected an integer in [20, 30]"},
      {"[es]\nmemory_budget = 1048575", "es.memory_budget = 1048575: expected an integer >= 1048576 bytes (1 MiB)"},
      {"[es]\nsigma_shift = 8", "es.sigma_shift = 8: expected an integer in [0, 7]"},
      {"[es]\nalpha = 0", "es.alpha = 0: expected an integer in [1, 30]"},
      {"[es]\nalpha = 31", "es.alpha = 31: expected an integer in [1, 30]"},
      {"[es]\nalpha_decay_epochs = 0", "es.alpha_decay_epochs = 0: expected an integer >= 1"},
      {"[optim]\nname = \"rmsprop\"", "optim.name = \"rmsprop\": expected one of sgd, adam, adamw"},
      {"[optim]\nlr = -0.1", "optim.lr = -0.1: expected a finite number >= 0"},
      {"[optim]\nlr = inf", "optim.lr = inf: expected a finite number >= 0"},
      {"[optim]\nmomentum = 1.0", "optim.momentum = 1.0: expected a finite number in [0, 1)"},
      {"[optim]\nnesterov = 0", "optim.nesterov = 0: expected a boolean"},
      {"[optim]\nbetas = [0.9]", "optim.betas = [0.9]: expected a list of 2 finite numbers, each in [0, 1)"},
      {"[optim]\nbetas = [0.9, 1.0]", "optim.betas = [0.9, 1.0]: expected a list of 2 finite numbers"},
      {"[optim]\nbetas = [0.9, nan]", "optim.betas = [0.9, nan]: expected a list of 2 finite numbers"},
      {"[optim]\nbetas = 0.9", "optim.betas = 0.9: expected a list of 2"},
      {"[optim]\nbetas = [\"a\", \"b\"]", "optim.betas = [\"a\", \"b\"]: expected a list of 2"},
      {"[optim]\neps = 0", "optim.eps = 0: expected a finite number > 0"},
      {"[optim]\nweight_decay = -1", "optim.weight_decay = -1: expected a finite number >= 0"},
      {"[optim]\nlr_schedule = \"step\"", "optim.lr_schedule = \"step\": expected one of constant, linear, cosine, exponential"},
      {"[optim]\nsigma_schedule = \"step\"", "optim.sigma_schedule = \"step\": expected one of constant"},
      {"[optim]\nlr_end = -1", "optim.lr_end = -1: expected a finite number >= 0"},
      {"[optim]\nsigma_end = nan", "optim.sigma_end = nan: expected a finite number >= 0"},
      {"[optim]\nschedule_epochs = -1", "optim.schedule_epochs = -1: expected an integer >= 0"},
      {"[optim]\nwarmup_epochs = -1", "optim.warmup_epochs = -1: expected an integer >= 0"},
      {"[optim]\nclip_norm = -inf", "optim.clip_norm = -inf: expected a finite number >= 0"},
      {"[dist]\ncheck_every = -1", "dist.check_every = -1: expected an integer >= 0"},
  };
  for (const Case& c : cases) {
    std::string msg = parse_error(c.text);
    EXPECT_THAT(msg, HasSubstr("bad.toml: " + c.expected)) << "input: " << c.text;
  }
}

TEST_F(ConfigTest, OddPopulationWithAntitheticPairs) {
  EXPECT_THAT(parse_error("[es]\npopulation = 7\n"),
              HasSubstr("bad.toml: es.population = 7: population 7 is odd but es.antithetic = true: "
                        "use an even population or set es.antithetic = false"));
  EXPECT_EQ(parse_config("[es]\npopulation = 7\nantithetic = false\n", "x").es.population, 7);
  EXPECT_EQ(parse_config("[es]\npopulation = 7\nnoiser = \"noop\"\n", "x").es.population, 7);
}

TEST_F(ConfigTest, GroupSizeMustHoldWholePairs) {
  EXPECT_THAT(parse_error("[es]\ngroup_size = 3\n"),
              HasSubstr("es.group_size = 3: group size 3 is odd but es.antithetic = true"));
  EXPECT_EQ(parse_config("[es]\ngroup_size = 4\n", "x").es.group_size, 4);
}

TEST_F(ConfigTest, NoiseReuseZeroNeedsFixedNoise) {
  std::string msg = parse_error("[es]\nnoise_reuse = 0\n");
  EXPECT_THAT(msg, HasSubstr("bad.toml: es.noise_reuse = 0:"));
  EXPECT_THAT(msg, HasSubstr("set es.fixed_noise = true or use es.noise_reuse >= 1"));
  EXPECT_EQ(parse_config("[es]\nnoise_reuse = 0\nfixed_noise = true\n", "x").es.noise_reuse, 0);
}

TEST_F(ConfigTest, UnknownKeySuggestsTheClosestAndListsTheSection) {
  std::string msg = parse_error("[es]\nrnak = 2\n");
  EXPECT_THAT(msg, HasSubstr("bad.toml: es.rnak = 2: unknown key in [es]; did you mean es.rank?"));
  EXPECT_THAT(msg, HasSubstr("allowed keys: noiser, population, rank, sigma, noise_reuse"));
  std::string far = parse_error("[dist]\nzzzzzzzzzz = true\n");
  EXPECT_THAT(far, HasSubstr("dist.zzzzzzzzzz = true: unknown key in [dist]; allowed keys: check_every"));
  EXPECT_THAT(far, ::testing::Not(HasSubstr("did you mean")));
}

TEST_F(ConfigTest, UnknownSectionsAndTopLevelKeys) {
  std::string msg = parse_error("[optimizer]\nlr = 0.1\n");
  EXPECT_THAT(msg, HasSubstr("bad.toml: optimizer = {...}: unknown section [optimizer]; did you mean [optim]?"));
  EXPECT_THAT(msg, HasSubstr("allowed sections: run, es, optim, dist, model, task"));
  EXPECT_THAT(parse_error("seed = 3\n"), HasSubstr("bad.toml: seed = 3: keys must be inside a section; did you mean run.seed?"));
  EXPECT_THAT(parse_error("es = 3\n"), HasSubstr("es = 3: es must be a table"));
}

TEST_F(ConfigTest, ModelAndTaskKinds) {
  std::string unknown = parse_error("[model]\nkind = \"transformer\"\n");
  EXPECT_THAT(unknown, HasSubstr("bad.toml: model.kind = \"transformer\": unknown model kind; known kinds: gru, mlp"));
  EXPECT_THAT(parse_error("[model]\nhidden = [8]\n"), HasSubstr("bad.toml: [model] has no key 'kind'"));
  EXPECT_THAT(parse_error("[task]\nkind = 3\n"), HasSubstr("task.kind = 3: expected a string naming one of regression"));
  std::string typo = parse_error("[model]\nkind = \"mlp\"\nhiden = [8]\n");
  EXPECT_THAT(typo, HasSubstr("model.hiden = [8]: unknown key for model kind 'mlp'; did you mean model.hidden?"));
  EXPECT_THAT(typo, HasSubstr("allowed keys: kind, hidden, activation, bias, init_scale"));
  EXPECT_THAT(parse_error("[model]\nkind = \"mlp\"\nhidden = [16, 0]\n"),
              HasSubstr("model.hidden = [16, 0]: expected a list of integers, each in [1, 65536]"));
  EXPECT_THAT(parse_error("[model]\nkind = \"mlp\"\nactivation = \"gelu\"\n"),
              HasSubstr("model.activation = \"gelu\": expected one of relu, tanh"));
  EXPECT_THAT(parse_error("[task]\nkind = \"regression\"\nnoise = 1.5\n"),
              HasSubstr("task.noise = 1.5: expected a finite number in [0, 1]"));
  // A key of another kind is unknown here.
  EXPECT_THAT(parse_error("[model]\nkind = \"gru\"\nhidden = [8]\n"),
              HasSubstr("model.hidden = [8]: unknown key for model kind 'gru'; allowed keys: kind, width"));
}

TEST_F(ConfigTest, KindTableGettersSayWhatIsWrong) {
  Config c = parse_config("[model]\nkind = \"mlp\"\nhidden = [4, 5, 6]\n", "x");
  EXPECT_EQ(c.model.get_ints("hidden"), (std::vector<std::int64_t>{4, 5, 6}));
  EXPECT_EQ(c.task.get_double("n_samples"), 256.0);  // an integer read as a number
  EXPECT_THAT(error_of([&] { c.model.get_int("activation"); }),
              HasSubstr("key 'activation' of kind 'mlp' holds a string, not an integer"));
  EXPECT_THAT(error_of([&] { c.model.get_bool("hidden"); }), HasSubstr("holds a list of integers, not a boolean"));
  EXPECT_THAT(error_of([&] { c.model.get_string("width"); }),
              HasSubstr("kind 'mlp' has no key 'width' (its keys: activation, bias, hidden, init_scale)"));
  EXPECT_THAT(error_of([&] { c.task.get_ints("noise"); }), HasSubstr("holds a number, not a list of integers"));
}

TEST_F(ConfigTest, OverridesAreParsedAndValidated) {
  Config c = parse_config("[es]\nrank = 2\n", "x.toml",
                          {"es.rank=4", "optim.name=adam", "optim.betas = [0.8, 0.99]", "run.simd = scalar",
                           "model.activation=tanh", "es.sigma=1e-3", "run.seed=17"});
  EXPECT_EQ(c.es.rank, 4);
  EXPECT_EQ(c.optim.name, "adam");
  EXPECT_EQ(c.optim.betas, (std::vector<double>{0.8, 0.99}));
  EXPECT_EQ(c.run.simd, "scalar");
  EXPECT_EQ(c.es.sigma, 1e-3);
  EXPECT_EQ(c.run.seed, 17u);
  EXPECT_EQ(c.model.kind, "mlp");  // [model] came only from the override: default kind
  EXPECT_EQ(c.model.get_string("activation"), "tanh");
  EXPECT_EQ(parse_config("", "x", {"model.kind=gru", "model.width=8"}).model.get_int("width"), 8);
  EXPECT_EQ(parse_config("", "x", {"es.rank=4", "es.rank=6"}).es.rank, 6);  // the last one wins
}

TEST_F(ConfigTest, BadOverridesNameThemselves) {
  std::string unknown = parse_error("", {"es.rnk=3"});
  EXPECT_THAT(unknown, HasSubstr("bad.toml: override 'es.rnk=3': es.rnk = 3: unknown key in [es]; did you mean es.rank?"));
  EXPECT_THAT(parse_error("[es]\nrank = 2\n", {"es.rank=0"}),
              HasSubstr("override 'es.rank=0': es.rank = 0: expected an integer in [1, 1024]"));
  EXPECT_THAT(parse_error("", {"es.population=9"}), HasSubstr("override 'es.population=9': es.population = 9: population 9 is odd"));
  for (std::string bad : {"es.rank", "rank=3", "=3", ".rank=3", "es.=3"})
    EXPECT_THAT(parse_error("", {bad}), HasSubstr("override '" + bad + "' is malformed: expected section.key=value"));
  EXPECT_THAT(parse_error("", {"optimizer.lr=1"}),
              HasSubstr("override 'optimizer.lr=1': unknown section [optimizer]; did you mean [optim]?"));
  EXPECT_THAT(parse_error("", {"model.kind=rnn"}), HasSubstr("override 'model.kind=rnn': model.kind = \"rnn\": unknown model kind"));
}

TEST_F(ConfigTest, SyntaxErrorsGiveLineAndColumn) {
  std::string msg = parse_error("[run]\nepochs = = 3\n");
  EXPECT_THAT(msg, HasSubstr("bad.toml:2:"));
  EXPECT_THAT(msg, HasSubstr("TOML syntax error"));
  EXPECT_THAT(parse_error("[es]\nrank = 1\nrank = 2\n"), HasSubstr("bad.toml:3:"));
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() /
            ("eggroll_test_config_" + std::to_string(::getpid()) + "_" + std::to_string(stamp) + "_" +
             std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

TEST_F(ConfigTest, LoadConfigReadsFilesAndNamesThem) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { load_config(dir.file("nope.toml")); }),
              HasSubstr("config file '" + dir.file("nope.toml") + "' not found"));
  EXPECT_THAT(error_of([&] { load_config(dir.file("nope.toml")); }), HasSubstr("eggroll train"));
  std::string path = dir.file("run.toml");
  std::ofstream(path) << "[es]\nrank = 3\n[optim]\nlr = 0.5\n";
  Config c = load_config(path, {"optim.lr=0.25"});
  EXPECT_EQ(c.es.rank, 3);
  EXPECT_EQ(c.optim.lr, 0.25);
  std::ofstream(path) << "[es]\nrank = 0\n";
  EXPECT_THAT(error_of([&] { load_config(path); }), HasSubstr(path + ": es.rank = 0"));
}

TEST_F(ConfigTest, ResolvedTomlRoundTrips) {
  Config a = parse_config("[es]\nsigma = 0.30000000000000004\n[optim]\neps = 1e-300\n", "x",
                          {"run.seed=9223372036854775807", "model.hidden=[3, 1, 4]", "optim.lr=123456789.0"});
  std::string text = config_to_toml(a);
  Config b = parse_config(text, "resolved.toml");
  EXPECT_EQ(config_to_toml(b), text);
  EXPECT_EQ(b.es.sigma, 0.1 + 0.2);
  EXPECT_EQ(b.optim.eps, 1e-300);
  EXPECT_EQ(b.optim.lr, 123456789.0);
  EXPECT_EQ(b.run.seed, 9223372036854775807ull);
  EXPECT_EQ(b.model.get_ints("hidden"), (std::vector<std::int64_t>{3, 1, 4}));
  EXPECT_EQ(b.task.get_string("label"), "a \"quoted\" \\ name\n");
  EXPECT_TRUE(config_diff(a, b).empty());
  // Every key, sections and keys in declaration order.
  EXPECT_EQ(text.rfind("[run]\nseed = 9223372036854775807\nepochs = 100\n", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr("\n[model]\nkind = \"mlp\"\nhidden = [3, 1, 4]\nactivation = \"relu\"\nbias = true\n"
                              "init_scale = 1.0\n"));
  EXPECT_THAT(text, HasSubstr("\n[task]\nkind = \"regression\"\nn_samples = 256\nnoise = 0.1\n"));
  EXPECT_THAT(text, HasSubstr("betas = [0.9, 0.999]\n"));
  std::vector<std::string> order = {"[run]", "[es]", "[optim]", "[dist]", "[model]", "[task]"};
  for (std::size_t i = 1; i < order.size(); ++i) EXPECT_LT(text.find(order[i - 1]), text.find(order[i]));
  EXPECT_THAT(text, HasSubstr("alpha_decay_epochs = 1000\n"));
  EXPECT_THAT(text, HasSubstr("clip_norm = 0.0\n"));
  EXPECT_THAT(text, HasSubstr("check_every = 0\n"));
}

TEST_F(ConfigTest, DiffListsChangedKeys) {
  Config a = parse_config("", "a");
  Config b = parse_config("", "b", {"es.rank=4", "model.activation=tanh", "run.epochs=100"});
  EXPECT_EQ(config_diff(a, b), (std::vector<std::string>{"es.rank", "model.activation"}));
  EXPECT_TRUE(config_diff(a, a).empty());
  Config g = parse_config("[model]\nkind = \"gru\"\n", "g");
  EXPECT_EQ(config_diff(a, g), (std::vector<std::string>{"model.kind", "model.hidden", "model.activation",
                                                         "model.bias", "model.init_scale", "model.width"}));
}

TEST_F(ConfigTest, RegistryListsAndReplacesKinds) {
  EXPECT_EQ(kind_names("model"), (std::vector<std::string>{"gru", "mlp"}));
  EXPECT_EQ(kind_names("task"), (std::vector<std::string>{"regression"}));
  ASSERT_NE(find_kind_schema("model", "gru"), nullptr);
  EXPECT_EQ(find_kind_schema("model", "regression"), nullptr);
  register_kind_schema({"model", "gru", {{"width", std::int64_t{5}, "state width", 1, {}, {}}}});
  EXPECT_EQ(parse_config("[model]\nkind = \"gru\"\n", "x").model.get_int("width"), 5);
  EXPECT_THAT(error_of([] { register_kind_schema({"optim", "x", {}}); }), HasSubstr("must be \"model\" or \"task\""));
  EXPECT_THAT(error_of([] { register_kind_schema({"task", "t", {{"kind", std::string("a"), "", {}, {}, {}}}}); }),
              HasSubstr("not 'kind'"));
  EXPECT_THAT(error_of([] { register_kind_schema({"task", "t", {{"n", std::int64_t{0}, "", 1, {}, {}}}}); }),
              HasSubstr("default 0 is not an integer >= 1"));
  EXPECT_EQ(find_kind_schema("task", "t"), nullptr);
}

}  // namespace
}  // namespace eggroll
