// Acrobot-v1 (Sutton 1996; Sutton and Barto's book dynamics, as in Gymnasium's acrobot.py): two
// links, torque on the second joint, one rk4 step of 0.2 s with the torque as a fifth state.
#include <cmath>
#include <numbers>

#include "task/rl/env_dynamics.hpp"

namespace eggroll::rl {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kDt = 0.2;
constexpr double kLinkLength1 = 1.0;
constexpr double kLinkMass1 = 1.0;
constexpr double kLinkMass2 = 1.0;
constexpr double kLinkCom1 = 0.5;
constexpr double kLinkCom2 = 0.5;
constexpr double kLinkMoi = 1.0;
constexpr double kMaxVel1 = 4 * kPi;
constexpr double kMaxVel2 = 9 * kPi;
constexpr double kGravity = 9.8;
constexpr double kTorques[3] = {-1.0, 0.0, 1.0};

// The derivative of s = (theta1, theta2, dtheta1, dtheta2) under torque a ("book" variant):
//   d1 = m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 cos t2) + I1 + I2
//   d2 = m2 (lc2^2 + l1 lc2 cos t2) + I2
//   phi2 = m2 lc2 g cos(t1 + t2 - pi/2)
//   phi1 = -m2 l1 lc2 dt2^2 sin t2 - 2 m2 l1 lc2 dt2 dt1 sin t2 + (m1 lc1 + m2 l1) g cos(t1 - pi/2) + phi2
//   ddt2 = (a + d2/d1 phi1 - m2 l1 lc2 dt1^2 sin t2 - phi2) / (m2 lc2^2 + I2 - d2^2/d1)
//   ddt1 = -(d2 ddt2 + phi1) / d1
void dsdt(const double s[4], double a, double out[4]) {
  const double m1 = kLinkMass1, m2 = kLinkMass2, l1 = kLinkLength1, lc1 = kLinkCom1, lc2 = kLinkCom2;
  const double i1 = kLinkMoi, i2 = kLinkMoi, g = kGravity;
  const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  const double d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * std::cos(theta2)) + i1 + i2;
  const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * std::cos(theta2)) + i2;
  const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - kPi / 2.0);
  const double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * std::sin(theta2) -
                      2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - kPi / 2) + phi2;
  const double ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * std::sin(theta2) - phi2) /
                          (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  out[0] = dtheta1;
  out[1] = dtheta2;
  out[2] = ddtheta1;
  out[3] = ddtheta2;
}

}  // namespace

double acrobot_wrap(double x) {
  const double diff = kPi - -kPi;
  // Far-off values (only reachable through set_state) are brought near first so the loops end.
  if (std::isfinite(x) && std::fabs(x) > 64 * kPi) x = std::remainder(x, diff);
  while (x > kPi) x = x - diff;
  while (x < -kPi) x = x + diff;
  return x;
}

// rk4 over [0, dt]: y1 = y0 + dt/6 (k1 + 2 k2 + 2 k3 + k4), k2 at y0 + dt/2 k1, k3 at y0 + dt/2 k2,
// k4 at y0 + dt k3; the torque's derivative is 0 so it stays a.
StepOutcome acrobot_step(double& theta1, double& theta2, double& dtheta1, double& dtheta2, int action) {
  const double a = kTorques[action];
  const double dt = kDt - 0.0, dt2 = dt / 2.0;
  const double y0[4] = {theta1, theta2, dtheta1, dtheta2};
  double k1[4], k2[4], k3[4], k4[4], y[4];
  dsdt(y0, a, k1);
  for (int j = 0; j < 4; ++j) y[j] = y0[j] + dt2 * k1[j];
  dsdt(y, a, k2);
  for (int j = 0; j < 4; ++j) y[j] = y0[j] + dt2 * k2[j];
  dsdt(y, a, k3);
  for (int j = 0; j < 4; ++j) y[j] = y0[j] + dt * k3[j];
  dsdt(y, a, k4);
  double ns[4];
  for (int j = 0; j < 4; ++j) ns[j] = y0[j] + dt / 6.0 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);
  theta1 = acrobot_wrap(ns[0]);
  theta2 = acrobot_wrap(ns[1]);
  dtheta1 = clip(ns[2], -kMaxVel1, kMaxVel1);
  dtheta2 = clip(ns[3], -kMaxVel2, kMaxVel2);
  const bool terminated = -std::cos(theta1) - std::cos(theta2 + theta1) > 1.0;
  return {terminated ? 0.0 : -1.0, terminated};
}

void acrobot_observe(double theta1, double theta2, double dtheta1, double dtheta2, float* obs) {
  obs[0] = static_cast<float>(std::cos(theta1));
  obs[1] = static_cast<float>(std::sin(theta1));
  obs[2] = static_cast<float>(std::cos(theta2));
  obs[3] = static_cast<float>(std::sin(theta2));
  obs[4] = static_cast<float>(dtheta1);
  obs[5] = static_cast<float>(dtheta2);
}

}  // namespace eggroll::rl
