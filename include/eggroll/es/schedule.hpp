// Schedules for the learning rate and sigma over epochs (ALGORITHM.md 1.4): constant, linear,
// cosine and exponential, with an optional linear warmup.
#pragma once
#include <cstdint>
#include <string>

namespace eggroll {

// Value at epoch e >= 0, with H = max(horizon, 1) and c = min(e, H):
//   constant     start
//   linear       start + (end - start) * c / H                     (end from epoch H on)
//   cosine       end + (start - end) * 0.5 * (1 + cos(pi * c / H)) (end from epoch H on)
//   exponential  start * end^e   (end is the per-epoch multiplicative factor, e.g. 0.999, > 0;
//                                 the horizon is not used)
// Warmup W >= 0: for e < W the value above is multiplied by (e + 1) / W, so epoch 0 runs at
// 1/W of the value and epoch W at the full value.
enum class ScheduleKind { constant, linear, cosine, exponential };

// "constant", "linear", "cosine", "exponential"; an unknown name throws an Error listing them.
ScheduleKind schedule_kind_from_name(const std::string& name);
std::string schedule_kind_name(ScheduleKind kind);

struct Schedule {
  ScheduleKind kind = ScheduleKind::constant;
  double start = 0.0;
  double end = 0.0;
  std::int64_t horizon = 1;   // epochs; <= 0 is treated as 1
  std::int64_t warmup = 0;    // epochs

  // Throws an Error for epoch < 0, warmup < 0, or an exponential factor end <= 0.
  double at(std::int64_t epoch) const;
};

}  // namespace eggroll
