// Constructors of the built-in tasks, used by the task factory.
#pragma once
#include <memory>

#include "eggroll/task/task.hpp"

namespace eggroll {

std::unique_ptr<Task> make_function_task(const KindTable& cfg);
std::unique_ptr<Task> make_regression_task(const KindTable& cfg, std::uint64_t seed);
std::unique_ptr<Task> make_text_task(const KindTable& cfg, std::uint64_t seed);
std::unique_ptr<Task> make_rl_task(const KindTable& cfg, std::uint64_t seed);
std::unique_ptr<Task> make_classification_task(const KindTable& cfg, std::uint64_t seed);

}  // namespace eggroll
