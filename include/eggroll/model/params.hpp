// ParamStore: the named tensors of a model, each with a kind that says how ES perturbs it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eggroll/core/tensor.hpp"

namespace eggroll {

enum class ParamKind {
  matrix,     // (m, n), applied as x W^T: low-rank noise A B^T
  vector,     // biases, norm weights: full-rank noise of the same shape
  embedding,  // (vocab, d) table: low-rank noise, read by row lookup
  excluded,   // never perturbed, never updated
};
std::string param_kind_name(ParamKind kind);

struct Param {
  std::string name;
  ParamKind kind;
  Tensor value;
  std::uint64_t id = 0;   // param_id(name): the noise key
  bool frozen = false;    // not perturbed and not updated (es.freeze_nonmatrix, excluded)

  std::int64_t rows() const { return value.dim(0); }                  // m
  std::int64_t cols() const { return value.ndim() > 1 ? value.dim(1) : 1; }  // n
  bool low_rank() const { return kind == ParamKind::matrix || kind == ParamKind::embedding; }
  bool perturbed() const { return !frozen && kind != ParamKind::excluded; }
};

class ParamStore {
 public:
  // Adds a parameter; matrix and embedding need a 2-D value. Names must be unique.
  Param& add(const std::string& name, ParamKind kind, Tensor value);
  Param& at(const std::string& name);
  const Param& at(const std::string& name) const;
  Param* find(const std::string& name);
  const Param* find(const std::string& name) const;
  std::vector<Param>& all() { return params_; }
  const std::vector<Param>& all() const { return params_; }
  std::size_t size() const { return params_.size(); }
  std::int64_t numel() const;
  // Marks every non-matrix parameter frozen (es.freeze_nonmatrix).
  void freeze_nonmatrix();

 private:
  std::vector<Param> params_;  // in registration order: the fixed order of every reduction
};

}  // namespace eggroll
