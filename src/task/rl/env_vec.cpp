// VecEnv: n classic-control environments in lockstep (struct-of-arrays state), their names and
// spaces, and initial states drawn from the counter-based noise key (seed, epoch, group, episode).
#include <cctype>
#include <cmath>
#include <numbers>

#include "eggroll/core/error.hpp"
#include "eggroll/noise/noise.hpp"
#include "eggroll/task/rl/env.hpp"
#include "task/rl/env_dynamics.hpp"

namespace eggroll {
namespace {

struct EnvName {
  EnvKind kind;
  const char* id;          // the Gymnasium id
  const char* short_name;  // the lower-case alias
};
constexpr EnvName kEnvNames[] = {
    {EnvKind::cartpole, "CartPole-v1", "cartpole"},
    {EnvKind::acrobot, "Acrobot-v1", "acrobot"},
    {EnvKind::pendulum, "Pendulum-v1", "pendulum"},
    {EnvKind::mountain_car, "MountainCar-v0", "mountain_car"},
    {EnvKind::mountain_car_continuous, "MountainCarContinuous-v0", "mountain_car_continuous"},
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Words per episode in the stream: room for 8 uniforms of two 32-bit words each.
constexpr std::uint64_t kWordsPerEpisode = 16;

// Uniform in [lo, hi) from two words: lo + (hi - lo) * (b >> 11) 2^-53, b = w0 2^32 + w1.
double uniform(const std::uint32_t* words, double lo, double hi) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(words[0]) << 32) | words[1];
  return lo + (hi - lo) * (static_cast<double>(bits >> 11) * 0x1p-53);
}

}  // namespace

EnvKind env_from_name(const std::string& name) {
  const std::string key = lower(name);
  for (const EnvName& e : kEnvNames)
    if (key == lower(e.id) || key == e.short_name) return e.kind;
  std::string known;
  for (const EnvName& e : kEnvNames) known += std::string(known.empty() ? "" : ", ") + e.id + " (" + e.short_name + ")";
  throw_error("unknown environment \"", name, "\": expected one of ", known);
}

std::string env_name(EnvKind kind) {
  for (const EnvName& e : kEnvNames)
    if (e.kind == kind) return e.id;
  throw_error("env_name: environment kind ", static_cast<int>(kind), " is not one of the five known kinds");
}

EnvSpec env_spec(EnvKind kind) {
  switch (kind) {
    case EnvKind::cartpole: return {4, 1, true, 2, 0.0f, 1.0f, 500, 4};
    case EnvKind::acrobot: return {6, 1, true, 3, 0.0f, 2.0f, 500, 4};
    case EnvKind::pendulum: return {3, 1, false, 0, -2.0f, 2.0f, 200, 2};
    case EnvKind::mountain_car: return {2, 1, true, 3, 0.0f, 2.0f, 200, 2};
    case EnvKind::mountain_car_continuous: return {2, 1, false, 0, -1.0f, 1.0f, 999, 2};
  }
  throw_error("env_spec: environment kind ", static_cast<int>(kind), " is not one of the five known kinds");
}

VecEnv::VecEnv(EnvKind kind, std::int64_t n) : kind_(kind), spec_(env_spec(kind)), n_(n) {
  check(n >= 1, "VecEnv of ", env_name(kind), ": n = ", n, " environments, expected n >= 1");
  const std::size_t size = static_cast<std::size_t>(n);
  if (kind == EnvKind::mountain_car_continuous)
    state32_.assign(size * spec_.state_dim, 0.0f);
  else
    state64_.assign(size * spec_.state_dim, 0.0);
  rewards_.assign(size, 0.0);
  steps_.assign(size, 0);
  terminated_.assign(size, 0);
  truncated_.assign(size, 0);
  started_.assign(size, 0);
}

void VecEnv::check_index(std::int64_t i, const char* what) const {
  check(i >= 0 && i < n_, "VecEnv::", what, ": environment index ", i, " out of range [0, ", n_, ")");
}

void VecEnv::start_episode(std::int64_t i) {
  rewards_[i] = 0.0;
  steps_[i] = 0;
  terminated_[i] = truncated_[i] = 0;
  started_[i] = 1;
}

void VecEnv::reset(std::int64_t i, std::uint64_t seed, std::uint64_t epoch, std::uint64_t group,
                   std::uint64_t episode) {
  check_index(i, "reset");
  check(episode < (std::uint64_t{1} << 30), "VecEnv::reset: episode ", episode, " too large: expected < 2^30");
  std::uint32_t w[8];
  fill_bits(noise_stream(seed, param_id("env"), epoch, group, NoiseTag::init), episode * kWordsPerEpisode, 8, w);
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  switch (kind_) {
    case EnvKind::cartpole:
      for (int k = 0; k < 4; ++k) s[k] = uniform(w + 2 * k, -0.05, 0.05);
      break;
    case EnvKind::acrobot:  // Gymnasium draws in float64 and keeps the float32 rounding
      for (int k = 0; k < 4; ++k) s[k] = static_cast<float>(uniform(w + 2 * k, -0.1, 0.1));
      break;
    case EnvKind::pendulum:
      s[0] = uniform(w, -std::numbers::pi, std::numbers::pi);
      s[1] = uniform(w + 2, -1.0, 1.0);
      break;
    case EnvKind::mountain_car:
    case EnvKind::mountain_car_continuous:
      s[0] = uniform(w, -0.6, -0.4);
      break;
  }
  set_state(i, s);
}

void VecEnv::set_state(std::int64_t i, const double* state) {
  check_index(i, "set_state");
  for (int k = 0; k < spec_.state_dim; ++k) {
    check(std::isfinite(state[k]), "VecEnv::set_state: ", env_name(kind_), " state value ", k, " of environment ",
          i, " is ", state[k], ": expected a finite value");
    if (kind_ == EnvKind::mountain_car_continuous)
      state32_[k * n_ + i] = static_cast<float>(state[k]);
    else
      state64_[k * n_ + i] = state[k];
  }
  start_episode(i);
}

void VecEnv::state(std::int64_t i, double* out) const {
  check_index(i, "state");
  for (int k = 0; k < spec_.state_dim; ++k)
    out[k] = kind_ == EnvKind::mountain_car_continuous ? static_cast<double>(state32_[k * n_ + i])
                                                       : state64_[k * n_ + i];
}

void VecEnv::observe(float* obs) const {
  const std::int64_t n = n_;
  const double* s = state64_.data();
  for (std::int64_t i = 0; i < n; ++i) {
    float* o = obs + i * spec_.obs_dim;
    switch (kind_) {
      case EnvKind::cartpole: rl::cartpole_observe(s[i], s[n + i], s[2 * n + i], s[3 * n + i], o); break;
      case EnvKind::acrobot: rl::acrobot_observe(s[i], s[n + i], s[2 * n + i], s[3 * n + i], o); break;
      case EnvKind::pendulum: rl::pendulum_observe(s[i], s[n + i], o); break;
      case EnvKind::mountain_car:
        o[0] = static_cast<float>(s[i]);
        o[1] = static_cast<float>(s[n + i]);
        break;
      case EnvKind::mountain_car_continuous:
        o[0] = state32_[i];
        o[1] = state32_[n + i];
        break;
    }
  }
}

void VecEnv::step_one(std::int64_t i, float action) {
  const std::int64_t n = n_;
  double* s = state64_.data();
  const int index = static_cast<int>(action);  // validated for the discrete kinds
  rl::StepOutcome out{0.0, false};
  switch (kind_) {
    case EnvKind::cartpole: out = rl::cartpole_step(s[i], s[n + i], s[2 * n + i], s[3 * n + i], index); break;
    case EnvKind::acrobot: out = rl::acrobot_step(s[i], s[n + i], s[2 * n + i], s[3 * n + i], index); break;
    case EnvKind::pendulum: out = rl::pendulum_step(s[i], s[n + i], action); break;
    case EnvKind::mountain_car: out = rl::mountain_car_step(s[i], s[n + i], index); break;
    case EnvKind::mountain_car_continuous:
      out = rl::mountain_car_continuous_step(state32_[i], state32_[n + i], action);
      break;
  }
  rewards_[i] = out.reward;
  steps_[i] += 1;
  terminated_[i] = out.terminated ? 1 : 0;
  truncated_[i] = steps_[i] >= spec_.max_steps ? 1 : 0;
}

void VecEnv::step(const float* actions) {
  // Every check comes before any environment moves, so a throw leaves the batch as it was.
  for (std::int64_t i = 0; i < n_; ++i) {
    check(started_[i] != 0, "VecEnv::step: ", env_name(kind_), " environment ", i,
          " was never reset: call reset(i, seed, epoch, group, episode) or set_state first");
    if (!spec_.discrete || done(i)) continue;
    const float a = actions[i * spec_.action_dim];
    check(a == std::floor(a) && a >= 0.0f && a < static_cast<float>(spec_.n_actions), "VecEnv::step: ",
          env_name(kind_), " action of environment ", i, " is ", a, ": expected an integer 0 .. ",
          spec_.n_actions - 1, " held as a float");
  }
#pragma omp parallel for schedule(static) if (n_ >= 4096)
  for (std::int64_t i = 0; i < n_; ++i) {
    if (done(i))
      rewards_[i] = 0.0;
    else
      step_one(i, actions[i * spec_.action_dim]);
  }
}

bool VecEnv::all_done() const {
  for (std::int64_t i = 0; i < n_; ++i)
    if (!done(i)) return false;
  return true;
}

}  // namespace eggroll
