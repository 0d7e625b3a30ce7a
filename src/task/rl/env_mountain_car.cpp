// MountainCar-v0 and MountainCarContinuous-v0 (Moore 1990, as in Gymnasium's mountain_car.py
// and continuous_mountain_car.py): an underpowered car in a valley, hill height sin(3 x).
#include <cmath>

#include "task/rl/env_dynamics.hpp"

namespace eggroll::rl {
namespace {

constexpr double kMinPosition = -1.2;
constexpr double kMaxPosition = 0.6;
constexpr double kMaxSpeed = 0.07;
constexpr double kGoalVelocity = 0;
constexpr double kGravity = 0.0025;
// MountainCar-v0
constexpr double kGoalPosition = 0.5;
constexpr double kForce = 0.001;
// MountainCarContinuous-v0
constexpr double kGoalPositionContinuous = 0.45;
constexpr double kPower = 0.0015;
constexpr double kMinAction = -1.0;
constexpr double kMaxAction = 1.0;

}  // namespace

// v' = clip(v + ((a - 1) force - cos(3 x) gravity), -0.07, 0.07); x' = clip(x + v', -1.2, 0.6);
// v' = 0 when x' is at the left wall moving left.
StepOutcome mountain_car_step(double& position, double& velocity, int action) {
  velocity += (action - 1) * kForce + std::cos(3 * position) * (-kGravity);
  velocity = clip(velocity, -kMaxSpeed, kMaxSpeed);
  position += velocity;
  position = clip(position, kMinPosition, kMaxPosition);
  if (position == kMinPosition && velocity < 0) velocity = 0;
  const bool terminated = position >= kGoalPosition && velocity >= kGoalVelocity;
  return {-1.0, terminated};
}

// f = clip(a, -1, 1); v' = clip(v + f power - 0.0025 cos(3 x), -0.07, 0.07); x' = clip(x + v',
// -1.2, 0.6); left wall as above; reward = 100 [terminated] - 0.1 a^2 with the raw action a.
// Computed in float64 from the float32 state, stored back in float32.
StepOutcome mountain_car_continuous_step(float& position32, float& velocity32, float action) {
  double position = position32, velocity = velocity32;
  const double a = action;
  const double force = clip(a, kMinAction, kMaxAction);
  velocity += force * kPower - 0.0025 * std::cos(3 * position);
  if (velocity > kMaxSpeed) velocity = kMaxSpeed;
  if (velocity < -kMaxSpeed) velocity = -kMaxSpeed;
  position += velocity;
  if (position > kMaxPosition) position = kMaxPosition;
  if (position < kMinPosition) position = kMinPosition;
  if (position == kMinPosition && velocity < 0) velocity = 0;
  const bool terminated = position >= kGoalPositionContinuous && velocity >= kGoalVelocity;
  const double reward = (terminated ? 100.0 : 0.0) - (a * a) * 0.1;
  position32 = static_cast<float>(position);
  velocity32 = static_cast<float>(velocity);
  return {reward, terminated};
}

}  // namespace eggroll::rl
