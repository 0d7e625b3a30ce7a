// One step of each classic-control environment on one environment's state, written in the
// order of Gymnasium's arithmetic so that float64 results match it; used by VecEnv (env_vec.cpp).
#pragma once
#include <cstdint>

namespace eggroll::rl {

// min(max(x, lo), hi) as Python's min and max and NumPy's clip compute it: a NaN x stays NaN.
inline double clip(double x, double lo, double hi) {
  const double above = lo > x ? lo : x;
  return hi < above ? hi : above;
}

struct StepOutcome {
  double reward;
  bool terminated;
};

// CartPole-v1: action 0 pushes left, 1 pushes right.
StepOutcome cartpole_step(double& x, double& x_dot, double& theta, double& theta_dot, int action);
void cartpole_observe(double x, double x_dot, double theta, double theta_dot, float* obs);

// Acrobot-v1: action 0, 1, 2 applies torque -1, 0, +1 at the second joint.
StepOutcome acrobot_step(double& theta1, double& theta2, double& dtheta1, double& dtheta2, int action);
void acrobot_observe(double theta1, double theta2, double dtheta1, double dtheta2, float* obs);
// The wrap of Gymnasium's acrobot.py: shifts x by 2 pi until it lies in [-pi, pi].
double acrobot_wrap(double x);

// Pendulum-v1: action is the torque before clipping to [-2, 2].
StepOutcome pendulum_step(double& theta, double& theta_dot, float action);
void pendulum_observe(double theta, double theta_dot, float* obs);
// ((x + pi) mod 2 pi) - pi with the floored modulo of Python and NumPy.
double pendulum_angle_normalize(double x);

// MountainCar-v0: action 0, 1, 2 accelerates left, not at all, right.
StepOutcome mountain_car_step(double& position, double& velocity, int action);
// MountainCarContinuous-v0: float32 state, float64 step arithmetic, raw action in the reward.
StepOutcome mountain_car_continuous_step(float& position, float& velocity, float action);

}  // namespace eggroll::rl
