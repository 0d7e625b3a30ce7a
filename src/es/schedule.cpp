// lr and sigma schedules; the formulas are in eggroll/es/schedule.hpp.
#include "eggroll/es/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "eggroll/core/error.hpp"

namespace eggroll {

ScheduleKind schedule_kind_from_name(const std::string& name) {
  if (name == "constant") return ScheduleKind::constant;
  if (name == "linear") return ScheduleKind::linear;
  if (name == "cosine") return ScheduleKind::cosine;
  if (name == "exponential") return ScheduleKind::exponential;
  throw_error("unknown schedule '", name,
              "': expected one of constant, linear, cosine, exponential "
              "(set optim.lr_schedule or optim.sigma_schedule)");
}

std::string schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::linear: return "linear";
    case ScheduleKind::cosine: return "cosine";
    case ScheduleKind::exponential: return "exponential";
  }
  throw_error("invalid ScheduleKind value ", static_cast<int>(kind));
}

double Schedule::at(std::int64_t epoch) const {
  check(epoch >= 0, "schedule evaluated at epoch ", epoch, ": expected epoch >= 0");
  check(warmup >= 0, "schedule warmup = ", warmup, ": expected >= 0 (set optim.warmup_epochs)");
  const std::int64_t h = std::max<std::int64_t>(horizon, 1);
  const double progress = static_cast<double>(std::min(epoch, h)) / static_cast<double>(h);
  double value = start;
  switch (kind) {
    case ScheduleKind::constant:
      break;
    case ScheduleKind::linear:
      value = start + (end - start) * progress;
      break;
    case ScheduleKind::cosine:
      value = end + (start - end) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
      break;
    case ScheduleKind::exponential:
      check(end > 0.0, "exponential schedule with factor end = ", end,
            ": expected the per-epoch multiplicative factor > 0, e.g. 0.999 "
            "(set optim.lr_end or optim.sigma_end)");
      value = start * std::pow(end, static_cast<double>(epoch));
      break;
  }
  if (epoch < warmup) value *= static_cast<double>(epoch + 1) / static_cast<double>(warmup);
  return value;
}

}  // namespace eggroll
