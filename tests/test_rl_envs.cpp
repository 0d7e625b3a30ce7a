// Tests of the classic-control environments (include/eggroll/task/rl/env.hpp): one step of each
// against the published equations written out again here in float64, termination, truncation,
// the batch's lockstep and errors, and deterministic initial states from (seed, epoch, group, episode).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <utility>
#include <vector>

#include "eggroll/core/error.hpp"
#include "eggroll/noise/noise.hpp"
#include "eggroll/task/rl/env.hpp"

namespace eggroll {
namespace {

constexpr double kPi = std::numbers::pi;
using State = std::array<double, 4>;

// ---- the environments' equations, by hand ----

// CartPole-v1: g 9.8, m_c 1, m_p 0.1, half length 0.5, force 10, tau 0.02, explicit Euler.
State cartpole_by_hand(State s, int action, bool* terminated) {
  const double g = 9.8, mc = 1.0, mp = 0.1, l = 0.5, tau = 0.02, m = mp + mc;
  const double f = action == 1 ? 10.0 : -10.0;
  const double c = std::cos(s[2]), sn = std::sin(s[2]);
  const double temp = (f + mp * l * (s[3] * s[3]) * sn) / m;
  const double thetaacc = (g * sn - c * temp) / (l * (4.0 / 3.0 - mp * (c * c) / m));
  const double xacc = temp - mp * l * thetaacc * c / m;
  State n = {s[0] + tau * s[1], s[1] + tau * xacc, s[2] + tau * s[3], s[3] + tau * thetaacc};
  const double limit = 12 * 2 * kPi / 360;
  *terminated = n[0] < -2.4 || n[0] > 2.4 || n[2] < -limit || n[2] > limit;
  return n;
}

// Acrobot-v1 "book" dynamics: unit links and masses, centres of mass at 0.5, moments 1, g 9.8.
State acrobot_dsdt(const State& s, double a) {
  const double t1 = s[0], t2 = s[1], w1 = s[2], w2 = s[3], g = 9.8;
  const double d1 = 0.25 + (1.0 + 0.25 + 1.0 * std::cos(t2)) + 1.0 + 1.0;
  const double d2 = (0.25 + 0.5 * std::cos(t2)) + 1.0;
  const double phi2 = 0.5 * g * std::cos(t1 + t2 - kPi / 2);
  const double phi1 = -0.5 * (w2 * w2) * std::sin(t2) - 1.0 * w2 * w1 * std::sin(t2) +
                      1.5 * g * std::cos(t1 - kPi / 2) + phi2;
  const double dd2 = (a + d2 / d1 * phi1 - 0.5 * (w1 * w1) * std::sin(t2) - phi2) / (1.25 - d2 * d2 / d1);
  const double dd1 = -(d2 * dd2 + phi1) / d1;
  return {w1, w2, dd1, dd2};
}

// One rk4 step of 0.2 with torque -1, 0, +1, then wrap and bound.
State acrobot_by_hand(State s, int action, bool* terminated) {
  const double a = action - 1.0, h = 0.2;
  auto plus = [](const State& y, double c, const State& k) {
    return State{y[0] + c * k[0], y[1] + c * k[1], y[2] + c * k[2], y[3] + c * k[3]};
  };
  const State k1 = acrobot_dsdt(s, a);
  const State k2 = acrobot_dsdt(plus(s, h / 2, k1), a);
  const State k3 = acrobot_dsdt(plus(s, h / 2, k2), a);
  const State k4 = acrobot_dsdt(plus(s, h, k3), a);
  State n;
  for (int j = 0; j < 4; ++j) n[j] = s[j] + h / 6 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);
  for (int j = 0; j < 2; ++j) {
    while (n[j] > kPi) n[j] -= 2 * kPi;
    while (n[j] < -kPi) n[j] += 2 * kPi;
  }
  n[2] = std::min(std::max(n[2], -4 * kPi), 4 * kPi);
  n[3] = std::min(std::max(n[3], -9 * kPi), 9 * kPi);
  *terminated = -std::cos(n[0]) - std::cos(n[1] + n[0]) > 1.0;
  return n;
}

// Pendulum-v1: g 10, m = l = 1, dt 0.05, |u| <= 2, |thdot| <= 8.
std::array<double, 2> pendulum_by_hand(double th, double thdot, double a, double* reward) {
  const double u = std::min(std::max(a, -2.0), 2.0);
  double an = std::fmod(th + kPi, 2 * kPi);
  if (an < 0) an += 2 * kPi;
  an -= kPi;
  *reward = -(an * an + 0.1 * (thdot * thdot) + 0.001 * (u * u));
  double w = thdot + (15.0 * std::sin(th) + 3.0 * u) * 0.05;
  w = std::min(std::max(w, -8.0), 8.0);
  return {th + w * 0.05, w};
}

// MountainCar-v0: force 0.001, gravity 0.0025, |v| <= 0.07, x in [-1.2, 0.6], goal 0.5.
std::array<double, 2> mountain_car_by_hand(double x, double v, int action, bool* terminated) {
  v = v + ((action - 1) * 0.001 + std::cos(3 * x) * -0.0025);
  v = std::min(std::max(v, -0.07), 0.07);
  x = std::min(std::max(x + v, -1.2), 0.6);
  if (x == -1.2 && v < 0) v = 0;
  *terminated = x >= 0.5 && v >= 0;
  return {x, v};
}

// MountainCarContinuous-v0: power 0.0015, goal 0.45; the reward uses the unclipped action.
std::array<double, 2> mcc_by_hand(double x, double v, double a, bool* terminated, double* reward) {
  const double f = std::min(std::max(a, -1.0), 1.0);
  v = v + (f * 0.0015 - 0.0025 * std::cos(3 * x));
  v = std::min(std::max(v, -0.07), 0.07);
  x = std::min(std::max(x + v, -1.2), 0.6);
  if (x == -1.2 && v < 0) v = 0;
  *terminated = x >= 0.45 && v >= 0;
  *reward = (*terminated ? 100.0 : 0.0) - a * a * 0.1;
  return {x, v};
}

// ---- helpers ----

// Steps a one-environment batch from state s with action a; returns the new state.
std::vector<double> step_from(VecEnv& env, const std::vector<double>& s, float a) {
  env.set_state(0, s.data());
  env.step(&a);
  std::vector<double> out(static_cast<std::size_t>(env.spec().state_dim));
  env.state(0, out.data());
  return out;
}

// ---- names and spaces ----

TEST(RlEnvs, NamesAndSpecs) {
  EXPECT_EQ(env_from_name("CartPole-v1"), EnvKind::cartpole);
  EXPECT_EQ(env_from_name("cartpole"), EnvKind::cartpole);
  EXPECT_EQ(env_from_name("Acrobot-v1"), EnvKind::acrobot);
  EXPECT_EQ(env_from_name("pendulum"), EnvKind::pendulum);
  EXPECT_EQ(env_from_name("MountainCar-v0"), EnvKind::mountain_car);
  EXPECT_EQ(env_from_name("mountain_car_continuous"), EnvKind::mountain_car_continuous);
  EXPECT_EQ(env_name(EnvKind::mountain_car_continuous), "MountainCarContinuous-v0");
  try {
    env_from_name("LunarLander-v2");
    ADD_FAILURE() << "no error for an unknown environment";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("LunarLander-v2"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("MountainCarContinuous-v0"));
  }
  struct Want {
    EnvKind kind;
    int obs_dim, n_actions;
    float low, high;
    int max_steps;
  };
  const Want wants[] = {{EnvKind::cartpole, 4, 2, 0, 1, 500},     {EnvKind::acrobot, 6, 3, 0, 2, 500},
                        {EnvKind::pendulum, 3, 0, -2, 2, 200},    {EnvKind::mountain_car, 2, 3, 0, 2, 200},
                        {EnvKind::mountain_car_continuous, 2, 0, -1, 1, 999}};
  for (const Want& w : wants) {
    const EnvSpec e = env_spec(w.kind);
    EXPECT_EQ(e.obs_dim, w.obs_dim) << env_name(w.kind);
    EXPECT_EQ(e.discrete, w.n_actions > 0) << env_name(w.kind);
    EXPECT_EQ(e.n_actions, w.n_actions) << env_name(w.kind);
    EXPECT_EQ(e.action_low, w.low) << env_name(w.kind);
    EXPECT_EQ(e.action_high, w.high) << env_name(w.kind);
    EXPECT_EQ(e.max_steps, w.max_steps) << env_name(w.kind);
  }
}

// ---- one step against the equations ----

TEST(RlEnvs, CartPoleStepMatchesEquations) {
  VecEnv env(EnvKind::cartpole, 1);
  const std::vector<State> states = {{0.01, -0.02, 0.03, 0.04}, {-1.3, 0.7, -0.15, 1.9}, {2.0, -1.1, 0.19, -2.5}};
  for (const State& s : states)
    for (int a = 0; a < 2; ++a) {
      bool term = false;
      const State want = cartpole_by_hand(s, a, &term);
      const std::vector<double> got = step_from(env, {s.begin(), s.end()}, static_cast<float>(a));
      for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(got[j], want[j]) << "value " << j << " action " << a;
      EXPECT_EQ(env.terminated(0), term);
      EXPECT_EQ(env.rewards()[0], 1.0);
      float obs[4];
      env.observe(obs);
      for (int j = 0; j < 4; ++j) EXPECT_EQ(obs[j], static_cast<float>(want[j]));
    }
}

TEST(RlEnvs, AcrobotStepMatchesRk4) {
  VecEnv env(EnvKind::acrobot, 1);
  const std::vector<State> states = {
      {0.05, -0.08, 0.02, 0.09}, {1.2, -2.3, 3.0, -6.0},  // inside the bounds
      {3.0, -3.0, 5.0, -5.0},                            // both angles wrap once
      {3.1, 3.05, 12.0, 25.0}, {-3.1, 0.4, -12.5, -28.0}};  // both speeds bounded
  for (const State& s : states)
    for (int a = 0; a < 3; ++a) {
      bool term = false;
      const State want = acrobot_by_hand(s, a, &term);
      const std::vector<double> got = step_from(env, {s.begin(), s.end()}, static_cast<float>(a));
      for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(got[j], want[j]) << "value " << j << " action " << a;
      EXPECT_EQ(env.terminated(0), term);
      EXPECT_EQ(env.rewards()[0], term ? 0.0 : -1.0);
      EXPECT_LE(std::fabs(got[0]), kPi);
      EXPECT_LE(std::fabs(got[3]), 9 * kPi);
      float obs[6];
      env.observe(obs);
      const double expect_obs[6] = {std::cos(want[0]), std::sin(want[0]), std::cos(want[1]), std::sin(want[1]),
                                    want[2], want[3]};
      for (int j = 0; j < 6; ++j) EXPECT_EQ(obs[j], static_cast<float>(expect_obs[j]));
    }
}

TEST(RlEnvs, PendulumStepMatchesEquations) {
  VecEnv env(EnvKind::pendulum, 1);
  const std::vector<std::array<double, 3>> cases = {{0.3, -0.5, 0.75f},  {3.0, 7.9, 2.0f},   {-2.9, -7.95, -3.5f},
                                                     {5.5, 1.25, 1.5f},  {-7.0, 0.0, -0.25f}, {kPi, 0.1, 9.0f}};
  for (const auto& [th, w, a] : cases) {
    double reward = 0;
    const auto want = pendulum_by_hand(th, w, a, &reward);
    const std::vector<double> got = step_from(env, {th, w}, static_cast<float>(a));
    EXPECT_DOUBLE_EQ(got[0], want[0]) << "th " << th;
    EXPECT_DOUBLE_EQ(got[1], want[1]) << "th " << th;
    EXPECT_DOUBLE_EQ(env.rewards()[0], reward) << "th " << th;
    EXPECT_FALSE(env.terminated(0));
    float obs[3];
    env.observe(obs);
    EXPECT_EQ(obs[0], static_cast<float>(std::cos(want[0])));
    EXPECT_EQ(obs[1], static_cast<float>(std::sin(want[0])));
    EXPECT_EQ(obs[2], static_cast<float>(want[1]));
  }
  // Clipped speed: from 7.9 with full torque at th = 1.5 the speed reaches the limit 8.
  step_from(env, {1.5, 7.9}, 2.0f);
  std::vector<double> s(2);
  env.state(0, s.data());
  EXPECT_EQ(s[1], 8.0);
}

TEST(RlEnvs, MountainCarStepMatchesEquations) {
  VecEnv env(EnvKind::mountain_car, 1);
  const std::vector<std::array<double, 2>> states = {{-0.5, 0.0}, {-0.9, -0.035}, {0.2, 0.069}, {-1.19, -0.05}};
  for (const auto& s : states)
    for (int a = 0; a < 3; ++a) {
      bool term = false;
      const auto want = mountain_car_by_hand(s[0], s[1], a, &term);
      const std::vector<double> got = step_from(env, {s[0], s[1]}, static_cast<float>(a));
      EXPECT_DOUBLE_EQ(got[0], want[0]);
      EXPECT_DOUBLE_EQ(got[1], want[1]);
      EXPECT_EQ(env.terminated(0), term);
      EXPECT_EQ(env.rewards()[0], -1.0);
    }
}

TEST(RlEnvs, MountainCarContinuousStepMatchesEquations) {
  VecEnv env(EnvKind::mountain_car_continuous, 1);
  const std::vector<std::array<float, 3>> cases = {
      {-0.5f, 0.0f, 0.3f}, {-0.9f, -0.035f, -0.8f}, {0.2f, 0.069f, 2.5f}, {-1.19f, -0.05f, -4.0f}, {0.44f, 0.02f, 1.0f}};
  for (const auto& [x, v, a] : cases) {
    bool term = false;
    double reward = 0;
    const auto want = mcc_by_hand(x, v, a, &term, &reward);
    const std::vector<double> got = step_from(env, {x, v}, a);
    EXPECT_EQ(got[0], static_cast<double>(static_cast<float>(want[0])));  // stored in float32
    EXPECT_EQ(got[1], static_cast<double>(static_cast<float>(want[1])));
    EXPECT_EQ(env.terminated(0), term);
    EXPECT_DOUBLE_EQ(env.rewards()[0], reward);
  }
  // The reward charges the raw action: a = 2.5 pushes as 1 but costs 0.625.
  step_from(env, {-0.5, 0.0}, 2.5f);
  EXPECT_DOUBLE_EQ(env.rewards()[0], -0.625);
}

// ---- termination ----

TEST(RlEnvs, CartPoleTerminatesOnAngleAndPosition) {
  VecEnv env(EnvKind::cartpole, 6);
  const double states[6][4] = {{0.0, 0.0, 0.205, -0.5},   // theta 0.195: still up
                               {2.39, 1.0, 0.0, 0.0},     // x 2.41 > 2.4
                               {-2.39, -1.0, 0.0, 0.0},   // x -2.41 < -2.4
                               {0.0, 0.0, 0.205, 0.5},    // theta 0.215 > 0.2094
                               {0.0, 0.0, -0.205, -0.5},  // theta -0.215 < -0.2094
                               {2.39, 0.4, 0.0, 0.0}};    // x 2.398: still in
  for (int i = 0; i < 6; ++i) env.set_state(i, states[i]);
  const float actions[6] = {1, 1, 0, 1, 0, 1};
  env.step(actions);
  const bool want[6] = {false, true, true, true, true, false};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(env.terminated(i), want[i]) << "env " << i;
    EXPECT_EQ(env.rewards()[i], 1.0) << "the terminating step is rewarded too";
  }
  // Done environments stay as they are, with reward 0, while the others move on.
  std::vector<double> before(4), after(4);
  env.state(1, before.data());
  env.step(actions);
  env.state(1, after.data());
  EXPECT_EQ(before, after);
  EXPECT_EQ(env.steps(1), 1);
  EXPECT_EQ(env.rewards()[1], 0.0);
  EXPECT_EQ(env.steps(0), 2);
  EXPECT_EQ(env.rewards()[0], 1.0);
}

TEST(RlEnvs, AcrobotTerminatesWhenTheTipIsHigh) {
  VecEnv env(EnvKind::acrobot, 2);
  const double up[4] = {kPi - 0.05, 0.05, 0.0, 0.0}, down[4] = {0.0, 0.0, 0.0, 0.0};
  env.set_state(0, up);
  env.set_state(1, down);
  const float actions[2] = {1, 2};
  env.step(actions);
  EXPECT_TRUE(env.terminated(0));
  EXPECT_EQ(env.rewards()[0], 0.0);
  EXPECT_FALSE(env.done(1));
  EXPECT_EQ(env.rewards()[1], -1.0);
}

TEST(RlEnvs, MountainCarGoalAndLeftWall) {
  VecEnv env(EnvKind::mountain_car, 5);
  const double states[5][2] = {{0.49, 0.03},    // reaches 0.52 moving right
                               {-1.19, -0.05},  // hits the left wall
                               {0.45, 0.02},    // 0.47: short of the goal
                               {0.6, 0.0},      // stays at 0.6 with velocity 5.7e-4 >= 0
                               {0.55, -0.01}};  // past the goal but moving left
  for (int i = 0; i < 5; ++i) env.set_state(i, states[i]);
  const float actions[5] = {2, 0, 2, 1, 0};
  env.step(actions);
  const bool want[5] = {true, false, false, true, false};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(env.terminated(i), want[i]) << "env " << i;
  std::vector<double> s(2);
  env.state(1, s.data());
  EXPECT_EQ(s[0], -1.2);
  EXPECT_EQ(s[1], 0.0) << "the left wall stops the car";
  env.state(3, s.data());
  EXPECT_GT(s[1], 0.0);
  EXPECT_LT(s[1], 0.001);

  VecEnv cont(EnvKind::mountain_car_continuous, 3);
  const double cgoal[2] = {0.44, 0.03}, cwall[2] = {-1.19, -0.05}, cback[2] = {0.5, -0.01};
  cont.set_state(0, cgoal);
  cont.set_state(1, cwall);
  cont.set_state(2, cback);
  const float cactions[3] = {0.5f, -1.0f, -1.0f};
  cont.step(cactions);
  EXPECT_TRUE(cont.terminated(0));
  EXPECT_FALSE(cont.terminated(1));
  EXPECT_FALSE(cont.terminated(2));
  EXPECT_DOUBLE_EQ(cont.rewards()[2], -0.1);
  EXPECT_DOUBLE_EQ(cont.rewards()[0], 100.0 - 0.5 * 0.5 * 0.1);
  cont.state(1, s.data());
  EXPECT_EQ(s[0], static_cast<double>(-1.2f));
  EXPECT_EQ(s[1], 0.0);
}

// ---- truncation ----

// Runs env 0 with policy(state) until done; returns the steps taken.
template <typename Policy>
std::int64_t run_until_done(VecEnv& env, Policy policy) {
  std::vector<double> s(static_cast<std::size_t>(env.spec().state_dim));
  for (int t = 0; t < 2000 && !env.done(0); ++t) {
    env.state(0, s.data());
    const float a = policy(s);
    env.step(&a);
    EXPECT_EQ(env.truncated(0), env.steps(0) == env.spec().max_steps) << "step " << t;
  }
  return env.steps(0);
}

TEST(RlEnvs, TruncationAtTheTimeLimit) {
  VecEnv cartpole(EnvKind::cartpole, 1);
  const double balanced[4] = {0.0, 0.0, 0.0, 0.0};
  cartpole.set_state(0, balanced);
  // A PD controller on the pole with a weak pull back to the centre keeps it up for 500 steps.
  auto balance = [](const std::vector<double>& s) {
    return 10 * s[2] + 2 * s[3] + 0.1 * s[0] + 0.5 * s[1] > 0 ? 1.0f : 0.0f;
  };
  EXPECT_EQ(run_until_done(cartpole, balance), 500);
  EXPECT_TRUE(cartpole.truncated(0));
  EXPECT_FALSE(cartpole.terminated(0));
  EXPECT_EQ(cartpole.rewards()[0], 1.0);

  // The others under a fixed action that never reaches a goal (Pendulum has none).
  const std::pair<EnvKind, float> idle[] = {{EnvKind::pendulum, 0.5f}, {EnvKind::mountain_car, 1.0f},
                                            {EnvKind::mountain_car_continuous, 0.0f}, {EnvKind::acrobot, 1.0f}};
  for (const auto& [kind, a] : idle) {
    VecEnv env(kind, 1);
    env.reset(0, 1, 0, 0, 0);
    EXPECT_EQ(run_until_done(env, [a](const std::vector<double>&) { return a; }), env.spec().max_steps)
        << env_name(kind);
    EXPECT_TRUE(env.truncated(0));
    EXPECT_FALSE(env.terminated(0));
  }
}

// ---- the batch ----

TEST(RlEnvs, BatchMatchesSingleEnvironments) {
  // n environments in one batch against n one-environment runs from the same keys and actions.
  const int n = 7, n_steps = 20;
  auto action = [](int i, int t) { return static_cast<float>((i + t) % 3); };
  VecEnv batch(EnvKind::acrobot, n);
  for (int i = 0; i < n; ++i) batch.reset(i, 42, 3, i, 0);
  for (int t = 0; t < n_steps; ++t) {
    float actions[n];
    for (int i = 0; i < n; ++i) actions[i] = action(i, t);
    batch.step(actions);
  }
  for (int i = 0; i < n; ++i) {
    VecEnv single(EnvKind::acrobot, 1);
    single.reset(0, 42, 3, i, 0);
    for (int t = 0; t < n_steps; ++t) {
      const float a = action(i, t);
      single.step(&a);
    }
    std::vector<double> want(4), got(4);
    single.state(0, want.data());
    batch.state(i, got.data());
    EXPECT_EQ(got, want) << "env " << i;
    EXPECT_EQ(batch.rewards()[i], single.rewards()[0]);
    EXPECT_EQ(batch.steps(i), n_steps);
  }
  float obs[n * 6];
  batch.observe(obs);
  std::vector<double> s(4);
  batch.state(3, s.data());
  EXPECT_EQ(obs[3 * 6 + 1], static_cast<float>(std::sin(s[0])));
  EXPECT_EQ(obs[3 * 6 + 5], static_cast<float>(s[3]));
}

TEST(RlEnvs, LargeBatchMatchesSingleEnvironments) {
  // Large batches step in parallel threads; each environment must still see only its own action.
  const int n = 5000;
  VecEnv batch(EnvKind::pendulum, n);
  std::vector<float> actions(n);
  for (int i = 0; i < n; ++i) {
    batch.reset(i, 5, 1, i, 2);
    actions[i] = static_cast<float>(i % 9) * 0.5f - 2.0f;
  }
  batch.step(actions.data());
  for (int i : {0, 1, 2047, 4096, n - 1}) {
    VecEnv single(EnvKind::pendulum, 1);
    single.reset(0, 5, 1, i, 2);
    single.step(&actions[i]);
    std::vector<double> want(2), got(2);
    single.state(0, want.data());
    batch.state(i, got.data());
    EXPECT_EQ(got, want) << "env " << i;
    EXPECT_EQ(batch.rewards()[i], single.rewards()[0]) << "env " << i;
  }
}

TEST(RlEnvs, RejectsBadActionsAndUnresetEnvironments) {
  VecEnv env(EnvKind::cartpole, 2);
  const float ok[2] = {0, 1};
  EXPECT_THROW(env.step(ok), Error);
  env.reset(0, 1, 0, 0, 0);
  env.reset(1, 1, 0, 1, 0);
  std::vector<double> before(4), after(4);
  env.state(0, before.data());
  for (float bad : {0.5f, 2.0f, -1.0f, std::nanf("")}) {
    const float actions[2] = {0, bad};
    EXPECT_THROW(env.step(actions), Error) << bad;
  }
  env.state(0, after.data());
  EXPECT_EQ(before, after) << "a rejected batch moves no environment";
  EXPECT_EQ(env.steps(0), 0);
  EXPECT_THROW(VecEnv(EnvKind::pendulum, 0), Error);
  const double inf[4] = {0, INFINITY, 0, 0};
  EXPECT_THROW(env.set_state(0, inf), Error);
}

// ---- initial states ----

TEST(RlEnvs, InitialStatesFollowTheKey) {
  // The state is lo + (hi - lo) * u with u from two words of the env stream at episode * 16.
  VecEnv env(EnvKind::cartpole, 1);
  env.reset(0, 7, 2, 5, 3);
  std::uint32_t w[8];
  fill_bits(noise_stream(7, param_id("env"), 2, 5, NoiseTag::init), 3 * 16, 8, w);
  std::vector<double> s(4);
  env.state(0, s.data());
  for (int k = 0; k < 4; ++k) {
    const std::uint64_t bits = (static_cast<std::uint64_t>(w[2 * k]) << 32) | w[2 * k + 1];
    EXPECT_EQ(s[k], -0.05 + 0.1 * (static_cast<double>(bits >> 11) * 0x1p-53));
  }
  EXPECT_EQ(env.steps(0), 0);
  EXPECT_FALSE(env.done(0));

  // Same key, same state (members of a group share it); any other key, another state.
  auto initial = [](std::uint64_t seed, std::uint64_t epoch, std::uint64_t group, std::uint64_t episode) {
    VecEnv e(EnvKind::pendulum, 3);
    e.reset(2, seed, epoch, group, episode);
    std::vector<double> out(2);
    e.state(2, out.data());
    return out;
  };
  EXPECT_EQ(initial(1, 2, 3, 4), initial(1, 2, 3, 4));
  EXPECT_NE(initial(1, 2, 3, 4), initial(9, 2, 3, 4));
  EXPECT_NE(initial(1, 2, 3, 4), initial(1, 5, 3, 4));
  EXPECT_NE(initial(1, 2, 3, 4), initial(1, 2, 6, 4));
  EXPECT_NE(initial(1, 2, 3, 4), initial(1, 2, 3, 5));
}

TEST(RlEnvs, InitialStateRanges) {
  struct Range {
    EnvKind kind;
    double lo[4], hi[4];
  };
  const float a = 0.1f;  // Acrobot keeps float32 values, so its bounds are the float32 of 0.1
  const Range ranges[] = {
      {EnvKind::cartpole, {-0.05, -0.05, -0.05, -0.05}, {0.05, 0.05, 0.05, 0.05}},
      {EnvKind::acrobot, {-a, -a, -a, -a}, {a, a, a, a}},
      {EnvKind::pendulum, {-kPi, -1.0}, {kPi, 1.0}},
      {EnvKind::mountain_car, {-0.6, 0.0}, {-0.4, 0.0}},
      {EnvKind::mountain_car_continuous, {-0.6f, 0.0}, {-0.4f, 0.0}},
  };
  const int n = 4000;
  for (const Range& r : ranges) {
    VecEnv env(r.kind, n);
    const int dim = env.spec().state_dim;
    std::vector<double> lo(dim, INFINITY), hi(dim, -INFINITY), mean(dim, 0.0), s(dim);
    for (int i = 0; i < n; ++i) {
      env.reset(i, 11, 0, i / 8, i % 8);
      env.state(i, s.data());
      for (int k = 0; k < dim; ++k) {
        EXPECT_GE(s[k], r.lo[k]);
        EXPECT_LE(s[k], r.hi[k]);
        lo[k] = std::min(lo[k], s[k]);
        hi[k] = std::max(hi[k], s[k]);
        mean[k] += s[k] / n;
        if (r.kind == EnvKind::acrobot) {
          EXPECT_EQ(s[k], static_cast<double>(static_cast<float>(s[k])));
        }
      }
    }
    for (int k = 0; k < dim; ++k) {
      const double width = r.hi[k] - r.lo[k];
      EXPECT_NEAR(lo[k], r.lo[k], 0.01 * width + 1e-300) << env_name(r.kind) << " value " << k;
      EXPECT_NEAR(hi[k], r.hi[k], 0.01 * width + 1e-300) << env_name(r.kind) << " value " << k;
      // The mean of 4000 uniforms is within 4 standard errors (width / sqrt(12 n)) of the centre.
      EXPECT_NEAR(mean[k], (r.lo[k] + r.hi[k]) / 2, 4 * width / std::sqrt(12.0 * n) + 1e-300);
    }
  }
}

}  // namespace
}  // namespace eggroll
