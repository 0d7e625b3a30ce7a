// Image classification on an MNIST-format dataset (Fashion-MNIST by default): every member is
// scored on the same minibatch of an epoch (-mean cross-entropy or accuracy); the minibatch
// order is a permutation drawn from (seed, pass), and its cursor is task state.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "eggroll/io/idx.hpp"
#include "eggroll/noise/noise.hpp"
#include "task/builtin_tasks.hpp"

namespace eggroll {
namespace {

constexpr std::int64_t kClasses = 10;
// Rows handed to one forward call: members are evaluated in groups of at most this many rows,
// so the input (rows, 784) stays near 25 MB whatever the population and batch size.
constexpr std::int64_t kMaxForwardRows = 8192;
// Rows per forward call when evaluating the unperturbed model on the test split.
constexpr std::int64_t kEvalRows = 1000;
// Fashion-MNIST's training-set pixel mean and standard deviation (pixels scaled to [0, 1]).
constexpr double kPixelMean = 0.2860, kPixelStd = 0.3530;

// Keeps the first n images (0 = all) of a split.
void truncate_split(ImageDataset& d, std::int64_t n, const char* key) {
  if (n == 0) return;
  check(n <= d.n, "task.", key, " = ", n, " but the dataset has only ", d.n, " images in that split; use 0 for all");
  d.n = n;
  d.pixels.resize(static_cast<std::size_t>(n * d.rows * d.cols));
  d.labels.resize(static_cast<std::size_t>(n));
}

// Replaces each factor x factor block of pixels by its mean (rounded): (n, r, c) -> (n, r/f, c/f).
void average_pool(ImageDataset& d, std::int64_t factor, const std::string& path) {
  if (factor == 1) return;
  check(d.rows % factor == 0 && d.cols % factor == 0, "task.pool = ", factor, " does not divide the ", d.rows, "x",
        d.cols, " images of '", path, "'; use a divisor of both sides");
  const std::int64_t rows = d.rows / factor, cols = d.cols / factor, area = factor * factor;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(d.n * rows * cols));
  for (std::int64_t i = 0; i < d.n; ++i)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        std::int64_t sum = 0;
        for (std::int64_t u = 0; u < factor; ++u)
          for (std::int64_t v = 0; v < factor; ++v) sum += d.pixels[(i * d.rows + r * factor + u) * d.cols + c * factor + v];
        out[(i * rows + r) * cols + c] = static_cast<std::uint8_t>((sum + area / 2) / area);
      }
  d.pixels = std::move(out);
  d.rows = rows;
  d.cols = cols;
}

class ClassificationTask final : public Task {
 public:
  ClassificationTask(const KindTable& cfg, std::uint64_t seed) : seed_(seed) {
    const std::string path = cfg.get_string("path");
    train_ = load_mnist_split(path, true);
    test_ = load_mnist_split(path, false);
    check(train_.rows == test_.rows && train_.cols == test_.cols, "'", path, "': training images are ", train_.rows,
          "x", train_.cols, " but test images are ", test_.rows, "x", test_.cols, "; expected one image size");
    truncate_split(train_, cfg.get_int("n_train"), "n_train");
    truncate_split(test_, cfg.get_int("n_test"), "n_test");
    average_pool(train_, cfg.get_int("pool"), path);
    average_pool(test_, cfg.get_int("pool"), path);
    in_ = train_.rows * train_.cols;
    batch_ = cfg.get_int("batch_size");
    check(batch_ <= train_.n, "task.batch_size = ", batch_, " is larger than the ", train_.n,
          " training images; lower it or raise task.n_train");
    accuracy_score_ = cfg.get_string("score") == "accuracy";
    const bool normalize = cfg.get_bool("normalize");
    for (int p = 0; p < 256; ++p)
      pixel_value_[p] = static_cast<float>(normalize ? (p / 255.0 - kPixelMean) / kPixelStd : p / 255.0);
    order_.resize(static_cast<std::size_t>(train_.n));
    shuffle();
  }

  std::string kind() const override { return "fashion_mnist"; }
  std::int64_t input_dim() const override { return in_; }
  std::int64_t output_dim() const override { return kClasses; }
  // The score is the minibatch accuracy (figure = score) or -mean cross-entropy (figure = loss).
  std::string main_figure() const override { return accuracy_score_ ? "accuracy" : "loss"; }
  double figure_from_score(double score) const override { return accuracy_score_ ? score : -score; }
  std::string eval_figure() const override { return "test_accuracy"; }

  void begin_epoch(std::int64_t) override {
    if (cursor_ + batch_ > train_.n) {
      cursor_ = 0;
      ++pass_;
      shuffle();
    }
    batch_x_.resize(static_cast<std::size_t>(batch_ * in_));
    batch_labels_.resize(static_cast<std::size_t>(batch_));
    for (std::int64_t t = 0; t < batch_; ++t) {
      const std::int64_t row = order_[cursor_ + t];
      to_floats(train_.pixels.data() + row * in_, batch_x_.data() + t * in_);
      batch_labels_[t] = train_.labels[row];
    }
    cursor_ += batch_;
    sum_loss_ = sum_accuracy_ = 0.0;
    n_scored_ = 0;
  }

  std::vector<double> evaluate(Model& model, ForwardContext& ctx) override;
  std::map<std::string, double> evaluate_unperturbed(Model& model, Backend& backend) override;

  // The figure the score does not give, as the members' mean on this epoch's minibatch.
  std::map<std::string, double> epoch_figures() override {
    if (n_scored_ == 0) return {};
    const double n = static_cast<double>(n_scored_);
    if (accuracy_score_) return {{"loss", sum_loss_ / n}};
    return {{"accuracy", sum_accuracy_ / n}};
  }

  std::map<std::string, Tensor> state() const override {
    Tensor s(DType::i32, {2});
    s.data<std::int32_t>()[0] = static_cast<std::int32_t>(cursor_);
    s.data<std::int32_t>()[1] = static_cast<std::int32_t>(pass_);
    return {{"cursor", std::move(s)}};
  }

  void load_state(const std::map<std::string, Tensor>& state) override {
    auto it = state.find("cursor");
    check(it != state.end() && it->second.dtype() == DType::i32 && it->second.numel() == 2,
          "checkpoint lacks a valid task state 'state/cursor' (i32, 2 values) for the fashion_mnist task");
    cursor_ = it->second.data<std::int32_t>()[0];
    pass_ = it->second.data<std::int32_t>()[1];
    check(cursor_ >= 0 && cursor_ <= train_.n && pass_ >= 0, "checkpoint task state 'state/cursor' = (", cursor_,
          ", ", pass_, ") is out of range for ", train_.n, " training images; was task.n_train changed?");
    shuffle();
  }

 private:
  void to_floats(const std::uint8_t* pixels, float* out) const {
    for (std::int64_t k = 0; k < in_; ++k) out[k] = pixel_value_[pixels[k]];
  }

  // order_ = a permutation of the training images drawn from (seed, pass) (Fisher-Yates).
  void shuffle() {
    std::iota(order_.begin(), order_.end(), 0);
    std::vector<std::uint32_t> bits(order_.size());
    fill_bits(noise_stream(seed_, param_id("task.fashion_mnist.order"), static_cast<std::uint64_t>(pass_), 0,
                           NoiseTag::init),
              0, bits.size(), bits.data());
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[bits[i - 1] % i]);
  }

  std::uint64_t seed_;
  ImageDataset train_, test_;
  std::int64_t in_ = 0, batch_ = 0;
  bool accuracy_score_ = false;
  float pixel_value_[256] = {};
  std::vector<std::int64_t> order_;
  std::int64_t cursor_ = 0, pass_ = 0;
  std::vector<float> batch_x_;            // (batch, in) this epoch's minibatch
  std::vector<std::int32_t> batch_labels_;
  double sum_loss_ = 0.0, sum_accuracy_ = 0.0;  // over the members scored this epoch
  std::int64_t n_scored_ = 0;
};

// Each thread takes a block of members (for_member_blocks) and runs it in groups of at most
// kMaxForwardRows rows; each group reads the minibatch once (shared input) or, for models that
// do not take a shared input, repeated per member. The scoring (an exp per class and row) runs
// on the same thread as its group's forward. The epoch's sums of the members' losses and
// accuracies are added in member order afterwards, so they do not depend on the split.
std::vector<double> ClassificationTask::evaluate(Model& model, ForwardContext& ctx) {
  check(!batch_labels_.empty(), "fashion_mnist: evaluate called before begin_epoch");
  const std::int64_t members = ctx.members();
  const std::int64_t group = std::max<std::int64_t>(1, kMaxForwardRows / batch_);
  std::vector<double> scores(static_cast<std::size_t>(members)), losses(scores.size()), accuracies(scores.size());
  for_member_blocks(ctx, [&](ForwardContext& block) {
    const std::int64_t first = block.member_begin - ctx.member_begin;
    std::vector<double> row_loss;  // per row of a group: cross-entropy and whether it was right
    std::vector<std::uint8_t> row_correct;
    for (std::int64_t g0 = 0; g0 < block.members(); g0 += group) {
      ForwardContext sub = block;
      sub.rows_per_member = batch_;
      sub.member_begin = block.member_begin + g0;
      sub.n_members = std::min(group, block.members() - g0);
      // Models whose first op is a linear layer compute the minibatch's x W^T once for every member.
      sub.shared_input = model.accepts_shared_input();
      Tensor x(DType::f32, {(sub.shared_input ? 1 : sub.n_members) * batch_, in_});
      for (std::int64_t j = 0; j < x.dim(0) / batch_; ++j)
        std::copy(batch_x_.begin(), batch_x_.end(), x.data<float>() + j * batch_ * in_);
      const Tensor logits = model.forward(sub, x);
      const std::int64_t rows = sub.n_members * batch_;
      row_loss.resize(static_cast<std::size_t>(rows));
      row_correct.resize(row_loss.size());
      sub.backend.cross_entropy(rows, kClasses, logits.data<float>(), batch_labels_.data(), batch_, row_loss.data(),
                                row_correct.data());
      for (std::int64_t j = 0; j < sub.n_members; ++j) {
        double loss = 0.0;
        std::int64_t correct = 0;
        for (std::int64_t t = j * batch_; t < (j + 1) * batch_; ++t) {
          loss += row_loss[static_cast<std::size_t>(t)];
          correct += row_correct[static_cast<std::size_t>(t)];
        }
        const auto i = static_cast<std::size_t>(first + g0 + j);
        losses[i] = loss / static_cast<double>(batch_);
        accuracies[i] = static_cast<double>(correct) / static_cast<double>(batch_);
        scores[i] = accuracy_score_ ? accuracies[i] : -losses[i];
      }
    }
  });
  for (std::size_t i = 0; i < scores.size(); ++i) {
    sum_loss_ += losses[i];
    sum_accuracy_ += accuracies[i];
  }
  ctx.rows_per_member = batch_;
  n_scored_ += members;
  return scores;
}

// The unperturbed model on the test split, kEvalRows images per forward call.
std::map<std::string, double> ClassificationTask::evaluate_unperturbed(Model& model, Backend& backend) {
  double loss = 0.0;
  std::int64_t correct = 0;
  for (std::int64_t b = 0; b < test_.n; b += kEvalRows) {
    const std::int64_t rows = std::min(kEvalRows, test_.n - b);
    Tensor x(DType::f32, {rows, in_});
    for (std::int64_t t = 0; t < rows; ++t) to_floats(test_.pixels.data() + (b + t) * in_, x.data<float>() + t * in_);
    ForwardContext ctx{backend};
    const Tensor logits = model.forward(ctx, x);
    const std::vector<std::int32_t> labels(test_.labels.begin() + b, test_.labels.begin() + b + rows);
    std::vector<double> row_loss(static_cast<std::size_t>(rows));
    std::vector<std::uint8_t> row_correct(row_loss.size());
    backend.cross_entropy(rows, kClasses, logits.data<float>(), labels.data(), rows, row_loss.data(), row_correct.data());
    for (std::int64_t t = 0; t < rows; ++t) {
      loss += row_loss[static_cast<std::size_t>(t)];
      correct += row_correct[static_cast<std::size_t>(t)];
    }
  }
  const double n = static_cast<double>(test_.n);
  return {{"test_accuracy", static_cast<double>(correct) / n}, {"test_loss", loss / n}};
}

}  // namespace

std::unique_ptr<Task> make_classification_task(const KindTable& cfg, std::uint64_t seed) {
  return std::make_unique<ClassificationTask>(cfg, seed);
}

}  // namespace eggroll
