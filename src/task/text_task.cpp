// Byte-level language modelling (ALGORITHM.md 2.5, 2.7) for the EGG model: truncated ES over
// N / group_size streams of the training text, each member keeping its own recurrent state
// across epochs; validation bits per byte of the unperturbed model, with n-gram and compressor
// baselines on the same validation text.
#include <algorithm>
#include <filesystem>
#include <sstream>

#include "eggroll/io/text_baselines.hpp"
#include "eggroll/io/text_corpus.hpp"
#include "eggroll/model/weight_packs.hpp"
#include "eggroll/model/egg.hpp"
#include "task/builtin_tasks.hpp"

namespace eggroll {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

EggModel& as_egg(Model& model) {
  auto* egg = dynamic_cast<EggModel*>(&model);
  check(egg != nullptr, "task.kind = \"text\" needs model.kind = \"egg\", got \"", model.kind(), "\"");
  return *egg;
}

class TextTask final : public Task {
 public:
  TextTask(const KindTable& cfg, std::uint64_t seed) {
    CorpusSpec spec;
    spec.paths = split_list(cfg.get_string("path"));
    spec.exclude = split_list(cfg.get_string("exclude"));
    spec.separator = cfg.get_string("separator");
    spec.val_fraction = cfg.get_double("val_fraction");
    spec.seed = seed;
    spec.max_bytes = cfg.get_int("max_bytes");
    check(!spec.paths.empty(), "task.path is empty: give a file, a folder or a glob of text");
    for (const std::string& p : spec.paths)
      check(p.rfind("/usr/share/games/fortunes", 0) != 0 || std::filesystem::exists(p), "task.path '", p,
            "' does not exist: install Debian's fortunes package (apt-get install fortunes), or point task.path at ",
            "other text");
    TextCorpus corpus = load_text_corpus(spec);
    cap_validation(corpus, cfg.get_int("val_bytes"));
    train_ = token_stream(corpus.train_docs);
    val_ = token_stream(corpus.val_docs);
    for (std::size_t i = 0; i < train_.size(); ++i)
      if (train_[i] == 0) doc_starts_.push_back(static_cast<std::int64_t>(i));
    tokens_per_epoch_ = cfg.get_int("tokens_per_epoch");
    eval_streams_ = cfg.get_int("eval_streams");
    diagnostics_every_ = cfg.get_int("diagnostics_every");
    baselines_ = text_baselines(corpus);
  }

  std::string kind() const override { return "text"; }
  std::int64_t input_dim() const override { return EggModel::kVocab; }
  std::int64_t output_dim() const override { return EggModel::kVocab; }
  std::string required_model() const override { return "egg"; }
  std::string main_figure() const override { return "train_bits_per_byte"; }
  std::string eval_figure() const override { return "val_bits_per_byte"; }
  double figure_from_score(double score) const override {
    return -score / (16.0 * static_cast<double>(tokens_per_epoch_));
  }

  void set_population(std::int64_t population, std::int64_t group_size) override {
    check(group_size >= 1 && population % group_size == 0, "task.kind = \"text\": es.group_size = ", group_size,
          " must divide es.population = ", population, " (members of a group read one stream)");
    population_ = population;
    group_size_ = group_size;
    const std::int64_t n_streams = population / group_size;
    cursors_.resize(static_cast<std::size_t>(n_streams));
    for (std::int64_t g = 0; g < n_streams; ++g)  // stream g starts at its own document
      cursors_[g] = doc_starts_[static_cast<std::size_t>(g * static_cast<std::int64_t>(doc_starts_.size()) / n_streams)];
    cursor_epoch_ = 0;
    states_.clear();
  }

  void begin_epoch(std::int64_t epoch) override {
    const auto len = static_cast<std::int64_t>(train_.size());
    for (; cursor_epoch_ < epoch; ++cursor_epoch_)
      for (auto& c : cursors_) c = (c + tokens_per_epoch_) % len;
  }

  std::vector<double> evaluate(Model& model, ForwardContext& ctx) override;
  std::map<std::string, double> evaluate_unperturbed(Model& model, Backend& backend) override;
  std::map<std::string, double> epoch_figures() override { return std::exchange(diagnostics_, {}); }
  std::map<std::string, Tensor> state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;

 private:
  // Keeps whole validation documents up to max_bytes (at least one).
  static void cap_validation(TextCorpus& corpus, std::int64_t max_bytes) {
    std::int64_t total = 0;
    std::size_t keep = 0;
    while (keep < corpus.val_docs.size() && (keep == 0 || total + static_cast<std::int64_t>(corpus.val_docs[keep].size()) <= max_bytes))
      total += static_cast<std::int64_t>(corpus.val_docs[keep++].size());
    corpus.val_docs.resize(keep);
  }
  void ensure_states(const EggModel& egg) {
    if (!states_.empty()) return;
    for (std::int64_t l = 0; l < egg.spec().layers; ++l) states_.emplace_back(DType::i8, Shape{population_, egg.spec().width});
  }
  void run_streams(const EggModel& egg, ForwardContext& ctx, double* scores,
                   std::vector<EggModel::LayerStats>* stats);
  void record_diagnostics(const std::vector<EggModel::LayerStats>& stats);

  std::vector<std::uint8_t> train_, val_;
  std::vector<std::int64_t> doc_starts_;
  std::int64_t tokens_per_epoch_ = 100, eval_streams_ = 32, diagnostics_every_ = 0;
  std::int64_t population_ = 0, group_size_ = 2;
  std::vector<std::int64_t> cursors_;  // per stream: position in train_ of the next input token
  std::int64_t cursor_epoch_ = 0;      // the epoch the cursors point at
  std::vector<Tensor> states_;         // per layer (population, width): each member's recurrent state
  TextBaselines baselines_;
  std::map<std::string, double> diagnostics_;
};

std::vector<double> TextTask::evaluate(Model& model, ForwardContext& ctx) {
  EggModel& egg = as_egg(model);
  ensure_states(egg);
  ctx.rows_per_member = 1;
  std::vector<double> scores(static_cast<std::size_t>(ctx.members()), 0.0);
  const bool diagnose = diagnostics_every_ > 0 && ctx.view->epoch() % diagnostics_every_ == 0 && ctx.member(0) == 0;
  std::vector<EggModel::LayerStats> stats;
  for_member_blocks(ctx, [&](ForwardContext& block) {
    const bool first = block.member_begin == ctx.member_begin;
    run_streams(egg, block, scores.data() + (block.member_begin - ctx.member_begin), diagnose && first ? &stats : nullptr);
  });
  if (diagnose) record_diagnostics(stats);
  return scores;
}

// T tokens for the members of one block: each reads its group's stream from the epoch's cursor,
// carrying its own recurrent state (copied in and out of states_).
void TextTask::run_streams(const EggModel& egg, ForwardContext& ctx, double* scores,
                           std::vector<EggModel::LayerStats>* stats) {
  const std::int64_t b = ctx.member(0), rows = ctx.members(), d = egg.spec().width;
  const auto len = static_cast<std::int64_t>(train_.size());
  std::vector<Tensor> state;
  for (auto& s : states_) {
    state.emplace_back(DType::i8, Shape{rows, d});
    std::copy_n(s.data<std::int8_t>() + b * d, rows * d, state.back().data<std::int8_t>());
  }
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows)), targets(tokens.size()), ll(tokens.size());
  for (std::int64_t t = 0; t < tokens_per_epoch_; ++t) {
    for (std::int64_t j = 0; j < rows; ++j) {
      const std::int64_t pos = (cursors_[(b + j) / group_size_] + t) % len;
      tokens[j] = train_[pos];
      targets[j] = train_[(pos + 1) % len];
    }
    Tensor logits = egg.step(ctx, tokens, state, t + 1 == tokens_per_epoch_ ? stats : nullptr);
    ctx.backend.qloglik(rows, logits.data<std::int8_t>(), targets.data(), ll.data());
    for (std::int64_t j = 0; j < rows; ++j) scores[j] += ll[j];
  }
  for (std::size_t l = 0; l < states_.size(); ++l)  // disjoint rows per block
    std::copy_n(state[l].data<std::int8_t>(), rows * d, states_[l].data<std::int8_t>() + b * d);
}

void TextTask::record_diagnostics(const std::vector<EggModel::LayerStats>& stats) {
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const std::string name = i + 1 == stats.size() ? "logits" : "l" + std::to_string(i / 2) + (i % 2 ? "_mlp" : "_gru");
    diagnostics_["diag_" + name + "_mean_abs"] = stats[i].mean_abs;
    diagnostics_["diag_" + name + "_saturated_pct"] = stats[i].saturated_pct;
    diagnostics_["diag_" + name + "_entropy_bits"] = stats[i].entropy_bits;
  }
}

// Bits per byte of the unperturbed model on the validation text, cut into eval_streams equal
// segments run side by side, each from a zero state.
std::map<std::string, double> TextTask::evaluate_unperturbed(Model& model, Backend& backend) {
  EggModel& egg = as_egg(model);
  const std::int64_t streams = std::max<std::int64_t>(1, std::min<std::int64_t>(eval_streams_, static_cast<std::int64_t>(val_.size()) / 2));
  const std::int64_t seg = static_cast<std::int64_t>(val_.size()) / streams;
  WeightPacks packs;  // the weights packed once for every step
  ForwardContext ctx{backend};
  ctx.packs = &packs;
  std::vector<Tensor> state;
  for (std::int64_t l = 0; l < egg.spec().layers; ++l) state.emplace_back(DType::i8, Shape{streams, egg.spec().width});
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(streams)), targets(tokens.size()), ll(tokens.size());
  double total = 0;
  for (std::int64_t t = 0; t + 1 < seg; ++t) {
    for (std::int64_t s = 0; s < streams; ++s) {
      tokens[s] = val_[s * seg + t];
      targets[s] = val_[s * seg + t + 1];
    }
    Tensor logits = egg.step(ctx, tokens, state);
    backend.qloglik(streams, logits.data<std::int8_t>(), targets.data(), ll.data());
    for (std::int64_t s = 0; s < streams; ++s) total += ll[s];
  }
  const double predicted = static_cast<double>(streams * (seg - 1));
  return {{"val_bits_per_byte", -total / (16.0 * predicted)},
          {"baseline_unigram_bpb", baselines_.unigram_bpb},
          {"baseline_bigram_bpb", baselines_.bigram_bpb},
          {"baseline_gzip_bpb", baselines_.gzip_bpb},
          {"baseline_xz_bpb", baselines_.xz_bpb}};
}

std::map<std::string, Tensor> TextTask::state() const {
  std::map<std::string, Tensor> out;
  Tensor c(DType::i32, {static_cast<std::int64_t>(cursors_.size()) + 1});
  c.data<std::int32_t>()[0] = static_cast<std::int32_t>(cursor_epoch_);
  for (std::size_t g = 0; g < cursors_.size(); ++g) c.data<std::int32_t>()[g + 1] = static_cast<std::int32_t>(cursors_[g]);
  out.emplace("cursors", std::move(c));
  for (std::size_t l = 0; l < states_.size(); ++l) out.emplace("h." + std::to_string(l), states_[l]);
  return out;
}

void TextTask::load_state(const std::map<std::string, Tensor>& state) {
  auto it = state.find("cursors");
  check(it != state.end() && it->second.dtype() == DType::i32 &&
            it->second.numel() == static_cast<std::int64_t>(cursors_.size()) + 1,
        "checkpoint lacks a valid 'state/cursors' for ", cursors_.size(), " text streams: it belongs to another run");
  cursor_epoch_ = it->second.data<std::int32_t>()[0];
  for (std::size_t g = 0; g < cursors_.size(); ++g) {
    cursors_[g] = it->second.data<std::int32_t>()[g + 1];
    check(cursors_[g] >= 0 && cursors_[g] < static_cast<std::int64_t>(train_.size()), "checkpoint stream cursor ",
          cursors_[g], " is outside the training text of ", train_.size(), " tokens: the text changed since");
  }
  states_.clear();
  for (std::size_t l = 0; state.count("h." + std::to_string(l)); ++l) {
    const Tensor& h = state.at("h." + std::to_string(l));
    check(h.dtype() == DType::i8 && h.ndim() == 2 && h.dim(0) == population_, "checkpoint state 'state/h.", l,
          "' has shape ", shape_string(h.shape()), ", expected (", population_, ", width)");
    states_.push_back(h);
  }
}

}  // namespace

std::unique_ptr<Task> make_text_task(const KindTable& cfg, std::uint64_t seed) {
  return std::make_unique<TextTask>(cfg, seed);
}

}  // namespace eggroll
