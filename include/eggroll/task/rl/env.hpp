// Batched classic-control environments with Gymnasium's exact dynamics: CartPole-v1, Acrobot-v1,
// Pendulum-v1, MountainCar-v0 and MountainCarContinuous-v0, n copies stepped in lockstep.
//
// Each environment follows the published equations, constants, integrator, termination rule,
// time limit (TimeLimit wrapper: truncated once steps >= max_steps), spaces and rewards:
//   CartPole-v1        state (x, x_dot, theta, theta_dot) f64; explicit Euler as Gymnasium's "euler"
//                      kinematics_integrator, tau 0.02; reward 1 every step, the terminating one too;
//                      terminated at |x| > 2.4 or |theta| > 12 * 2 * pi / 360; 500 steps.
//   Acrobot-v1         state (theta1, theta2, dtheta1, dtheta2) f64; one rk4 step over [0, 0.2] of
//                      the "book" dynamics, the torque held as a fifth state; theta wrapped to
//                      [-pi, pi], velocities bounded by 4 pi and 9 pi; reward -1, 0 on the
//                      terminating step; terminated at -cos(t1) - cos(t1 + t2) > 1; 500 steps.
//                      Initial states are rounded to float32 as Gymnasium's reset does.
//   Pendulum-v1        state (theta, theta_dot) f64; u = clip(a, -2, 2); reward -(angle_normalize(th)^2
//                      + 0.1 thdot^2 + 0.001 u^2); never terminates; 200 steps. u enters in float64
//                      (NumPy 2 with a float32 action rounds 3 u and 0.001 u^2 to float32).
//   MountainCar-v0     state (position, velocity) f64; reward -1; terminated at position >= 0.5 and
//                      velocity >= 0; 200 steps.
//   MountainCarContinuous-v0  state (position, velocity) f32; the step's arithmetic is float64 from
//                      the float32 state and the result is stored back in float32 (NumPy 1
//                      promotion; NumPy 2 rounds some intermediates to float32, a difference of
//                      about one float32 ulp). The force is clip(a, -1, 1) but the reward uses the
//                      raw action as Gymnasium does: reward = 100 [terminated] - 0.1 a^2;
//                      terminated at position >= 0.45 and velocity >= 0; 999 steps.
// Observations are float32 (CartPole, MountainCar*: the state; Acrobot: cos t1, sin t1, cos t2,
// sin t2, dtheta1, dtheta2; Pendulum: cos th, sin th, thdot). sin and cos are the C++ library's,
// which may differ from NumPy's SIMD versions (Acrobot, Pendulum) in the last bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eggroll {

enum class EnvKind { cartpole, acrobot, pendulum, mountain_car, mountain_car_continuous };

// Accepts Gymnasium ids ("CartPole-v1") and short names ("cartpole", "mountain_car_continuous");
// throws eggroll::Error listing the accepted names otherwise.
EnvKind env_from_name(const std::string& name);
// The Gymnasium id, e.g. "CartPole-v1".
std::string env_name(EnvKind kind);

struct EnvSpec {
  int obs_dim;      // float32 observation values per environment
  int action_dim;   // action values per environment (1 for every kind here)
  bool discrete;    // the action is an index 0 .. n_actions - 1 held as an integral float
  int n_actions;    // discrete actions (0 for continuous kinds)
  float action_low, action_high;  // the Box bounds; 0 and n_actions - 1 for discrete kinds
  int max_steps;    // the time limit: truncated once an episode has taken this many steps
  int state_dim;    // internal state values (set_state / state)
};
EnvSpec env_spec(EnvKind kind);

// n environments of one kind stepped in lockstep. State is kept as a struct of arrays: value k of
// environment i at [k * n + i], double for every kind except MountainCarContinuous (float).
class VecEnv {
 public:
  VecEnv(EnvKind kind, std::int64_t n);

  EnvKind kind() const { return kind_; }
  const EnvSpec& spec() const { return spec_; }
  std::int64_t size() const { return n_; }

  // Starts env i's episode from the initial state drawn from the key (seed, epoch, group,
  // episode): words [episode * 16, episode * 16 + 8) of noise_stream(seed, param_id("env"),
  // epoch, group, NoiseTag::init), two words per uniform. Members of one group share the states.
  void reset(std::int64_t i, std::uint64_t seed, std::uint64_t epoch, std::uint64_t group,
             std::uint64_t episode);
  // Starts env i's episode from an explicit state of spec().state_dim values (tests, replays);
  // MountainCarContinuous rounds them to float32.
  void set_state(std::int64_t i, const double* state);
  // Writes env i's state_dim state values to out.
  void state(std::int64_t i, double* out) const;

  // obs (n, obs_dim) float32: the observation of every environment's current state.
  void observe(float* obs) const;
  // actions (n, action_dim): discrete actions as integral floats, continuous values as they are.
  // Environments that are done are left as they are and get reward 0. Throws (stepping nothing)
  // when an environment was never reset or a discrete action is not one of 0 .. n_actions - 1.
  void step(const float* actions);

  const double* rewards() const { return rewards_.data(); }  // (n) the last step's rewards
  bool done(std::int64_t i) const { return terminated_[i] || truncated_[i]; }
  bool terminated(std::int64_t i) const { return terminated_[i] != 0; }
  bool truncated(std::int64_t i) const { return truncated_[i] != 0; }
  std::int64_t steps(std::int64_t i) const { return steps_[i]; }
  bool all_done() const;

 private:
  void check_index(std::int64_t i, const char* what) const;
  void start_episode(std::int64_t i);
  void step_one(std::int64_t i, float action);

  EnvKind kind_;
  EnvSpec spec_;
  std::int64_t n_;
  std::vector<double> state64_;  // (state_dim, n), all kinds but MountainCarContinuous
  std::vector<float> state32_;   // (state_dim, n), MountainCarContinuous
  std::vector<double> rewards_;
  std::vector<std::int64_t> steps_;
  std::vector<std::uint8_t> terminated_, truncated_, started_;
};

}  // namespace eggroll
