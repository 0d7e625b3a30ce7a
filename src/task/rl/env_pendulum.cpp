// Pendulum-v1 (as in Gymnasium's pendulum.py): a torque-limited pendulum to swing up and hold
// upright; semi-implicit Euler with dt = 0.05, g = 10, m = l = 1.
#include <cmath>
#include <numbers>

#include "task/rl/env_dynamics.hpp"

namespace eggroll::rl {
namespace {

constexpr double kMaxSpeed = 8;
constexpr double kMaxTorque = 2.0;
constexpr double kDt = 0.05;
constexpr double kGravity = 10.0;
constexpr double kMass = 1.0;
constexpr double kLength = 1.0;

}  // namespace

double pendulum_angle_normalize(double x) {
  const double period = 2 * std::numbers::pi;
  // NumPy's floored float remainder: fmod, moved into [0, period), and +0 for an exact multiple.
  double mod = std::fmod(x + std::numbers::pi, period);
  if (mod != 0.0) {
    if (mod < 0.0) mod += period;
  } else {
    mod = 0.0;
  }
  return mod - std::numbers::pi;
}

// u = clip(a, -2, 2); cost = angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2;
// thdot' = clip(thdot + (3 g / (2 l) sin th + 3 / (m l^2) u) dt, -8, 8); th' = th + thdot' dt.
StepOutcome pendulum_step(double& theta, double& theta_dot, float action) {
  const double g = kGravity, m = kMass, l = kLength, dt = kDt;
  const double u = clip(static_cast<double>(action), -kMaxTorque, kMaxTorque);
  const double an = pendulum_angle_normalize(theta);
  const double costs = an * an + 0.1 * (theta_dot * theta_dot) + 0.001 * (u * u);
  double new_theta_dot = theta_dot + (3 * g / (2 * l) * std::sin(theta) + 3.0 / (m * (l * l)) * u) * dt;
  new_theta_dot = clip(new_theta_dot, -kMaxSpeed, kMaxSpeed);
  theta = theta + new_theta_dot * dt;
  theta_dot = new_theta_dot;
  return {-costs, false};
}

void pendulum_observe(double theta, double theta_dot, float* obs) {
  obs[0] = static_cast<float>(std::cos(theta));
  obs[1] = static_cast<float>(std::sin(theta));
  obs[2] = static_cast<float>(theta_dot);
}

}  // namespace eggroll::rl
