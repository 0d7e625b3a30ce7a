// CartPole-v1 (Barto, Sutton and Anderson 1983, as in Gymnasium's cartpole.py): a pole hinged on
// a cart pushed left or right with force 10; explicit Euler steps of tau = 0.02 s.
#include <cmath>
#include <numbers>

#include "task/rl/env_dynamics.hpp"

namespace eggroll::rl {
namespace {

constexpr double kGravity = 9.8;
constexpr double kMassCart = 1.0;
constexpr double kMassPole = 0.1;
constexpr double kTotalMass = kMassPole + kMassCart;
constexpr double kLength = 0.5;  // half the pole's length
constexpr double kPoleMassLength = kMassPole * kLength;
constexpr double kForceMag = 10.0;
constexpr double kTau = 0.02;
constexpr double kThetaThreshold = 12 * 2 * std::numbers::pi / 360;
constexpr double kXThreshold = 2.4;

}  // namespace

// temp     = (F + m_p l thdot^2 sin th) / (m_c + m_p)
// thetaacc = (g sin th - cos th temp) / (l (4/3 - m_p cos^2 th / (m_c + m_p)))
// xacc     = temp - m_p l thetaacc cos th / (m_c + m_p)
// then x, x_dot, theta, theta_dot each advance by tau times their old derivative.
StepOutcome cartpole_step(double& x, double& x_dot, double& theta, double& theta_dot, int action) {
  const double force = action == 1 ? kForceMag : -kForceMag;
  const double costheta = std::cos(theta);
  const double sintheta = std::sin(theta);
  const double temp = (force + kPoleMassLength * (theta_dot * theta_dot) * sintheta) / kTotalMass;
  const double thetaacc = (kGravity * sintheta - costheta * temp) /
                          (kLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
  const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
  x = x + kTau * x_dot;
  x_dot = x_dot + kTau * xacc;
  theta = theta + kTau * theta_dot;
  theta_dot = theta_dot + kTau * thetaacc;
  const bool terminated =
      x < -kXThreshold || x > kXThreshold || theta < -kThetaThreshold || theta > kThetaThreshold;
  return {1.0, terminated};
}

void cartpole_observe(double x, double x_dot, double theta, double theta_dot, float* obs) {
  obs[0] = static_cast<float>(x);
  obs[1] = static_cast<float>(x_dot);
  obs[2] = static_cast<float>(theta);
  obs[3] = static_cast<float>(theta_dot);
}

}  // namespace eggroll::rl
