// The registry of built-in task kinds: their config schemas and the factory.
#include "eggroll/io/idx.hpp"
#include "task/builtin_tasks.hpp"

namespace eggroll {

void register_task_kinds() {
  static const bool done = [] {
    for (const char* kind : {"sphere", "rastrigin"})
      register_kind_schema({"task", kind, {
          {"dim", std::int64_t{64}, "dimension of the solution", 1.0, 1e8, {}},
          {"rows", std::int64_t{0}, "rows of the solution matrix (0 = the largest divisor of dim <= sqrt(dim))", 0.0, 1e8, {}},
          {"shift", 0.0, "location of the optimum in every coordinate", -1e6, 1e6, {}},
      }});
    register_kind_schema({"task", "regression", {
        {"input_dim", std::int64_t{4}, "input features", 1.0, 1e6, {}},
        {"output_dim", std::int64_t{1}, "outputs", 1.0, 1e6, {}},
        {"n_train", std::int64_t{4096}, "training samples", 1.0, 1e8, {}},
        {"n_val", std::int64_t{1024}, "validation samples", 1.0, 1e8, {}},
        {"batch_size", std::int64_t{64}, "samples per epoch, shared by every member", 1.0, 1e6, {}},
        {"frequency", 1.5, "std of the target's frequencies a", 0.0, 100.0, {}},
    }});
    register_kind_schema({"task", "text", {
        {"path", std::string("/usr/share/games/fortunes"), "text files, folders or globs, comma-separated", {}, {}, {}},
        {"exclude", std::string("*.dat,*.u8"), "file-name globs to skip, comma-separated", {}, {}, {}},
        {"separator", std::string("%"), "a line that ends a document (\"\" = one document per file)", {}, {}, {}},
        {"val_fraction", 0.05, "fraction of documents held out for validation", 0.0, 0.9, {}},
        {"max_bytes", std::int64_t{0}, "read at most this much text (0 = all)", 0.0, 1e12, {}},
        {"tokens_per_epoch", std::int64_t{100}, "tokens each member reads per epoch (truncated ES)", 1.0, 1e6, {}},
        {"val_bytes", std::int64_t{32768}, "validation text evaluated (whole documents up to this size)", 2.0, 1e9, {}},
        {"eval_streams", std::int64_t{64}, "validation segments evaluated side by side", 1.0, 65536.0, {}},
        {"diagnostics_every", std::int64_t{0}, "per-layer activation statistics every k epochs (0 = off)", 0.0, 1e9, {}},
    }});
    register_kind_schema({"task", "fashion_mnist", {
        {"path", std::string(kFashionMnistPath), "folder of MNIST-format IDX files (train-/t10k-images-idx3-ubyte[.gz], ...-labels-idx1-ubyte[.gz])", {}, {}, {}},
        {"batch_size", std::int64_t{256}, "training images per epoch, shared by every member", 1.0, 1e6, {}},
        {"score", std::string("cross_entropy"), "member score: -mean cross-entropy or minibatch accuracy", {}, {}, {"cross_entropy", "accuracy"}},
        {"n_train", std::int64_t{0}, "use the first n training images (0 = all)", 0.0, 1e9, {}},
        {"n_test", std::int64_t{0}, "evaluate on the first n test images (0 = all)", 0.0, 1e9, {}},
        {"pool", std::int64_t{1}, "average-pool images by this factor (2: 28x28 -> 14x14, input_dim 196)", 1.0, 28.0, {}},
        {"normalize", true, "standardise pixels ((p/255 - 0.2860)/0.3530, Fashion-MNIST's mean and std) instead of p/255", {}, {}, {}},
    }});
    register_kind_schema({"task", "rl", {
        {"env", std::string("CartPole-v1"), "environment", {}, {},
         {"CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0"}},
        {"episodes", std::int64_t{1}, "episodes per member per epoch (score = mean return)", 1.0, 1e6, {}},
        {"action", std::string("argmax"), "discrete action choice", {}, {}, {"argmax", "sample"}},
        {"obs_norm", false, "normalise observations by running statistics (frozen within an epoch)", {}, {}, {}},
        {"action_scale", 1.0, "continuous actions = clip(action_scale * output)", 0.0, 1e6, {}},
        {"eval_episodes", std::int64_t{100}, "episodes of the unperturbed policy in eval", 1.0, 1e6, {}},
    }});
    return true;
  }();
  (void)done;
}

std::unique_ptr<Task> make_task(const KindTable& task, std::uint64_t seed) {
  if (task.kind == "sphere" || task.kind == "rastrigin") return make_function_task(task);
  if (task.kind == "regression") return make_regression_task(task, seed);
  if (task.kind == "text") return make_text_task(task, seed);
  if (task.kind == "rl") return make_rl_task(task, seed);
  if (task.kind == "fashion_mnist") return make_classification_task(task, seed);
  throw_error("task.kind = \"", task.kind, "\": expected sphere, rastrigin, regression, text, rl or fashion_mnist");
}

}  // namespace eggroll
