// ParamStore: registration, lookup and freezing of named parameters.
#include "eggroll/model/params.hpp"

#include "eggroll/noise/noise.hpp"

namespace eggroll {

std::string param_kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::matrix: return "matrix";
    case ParamKind::vector: return "vector";
    case ParamKind::embedding: return "embedding";
    case ParamKind::excluded: return "excluded";
  }
  return "?";
}

Param& ParamStore::add(const std::string& name, ParamKind kind, Tensor value) {
  check(!name.empty(), "a parameter needs a name");
  check(find(name) == nullptr, "parameter '", name, "' is registered twice: parameter names must be unique");
  if (kind == ParamKind::matrix || kind == ParamKind::embedding)
    check(value.ndim() == 2, "parameter '", name, "' of kind ", param_kind_name(kind),
          " must be 2-D, got shape ", shape_string(value.shape()));
  Param p{name, kind, std::move(value), param_id(name), kind == ParamKind::excluded};
  params_.push_back(std::move(p));
  return params_.back();
}

Param* ParamStore::find(const std::string& name) {
  for (auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

const Param* ParamStore::find(const std::string& name) const {
  return const_cast<ParamStore*>(this)->find(name);
}

Param& ParamStore::at(const std::string& name) {
  Param* p = find(name);
  if (!p) {
    std::string known;
    for (auto& q : params_) known += (known.empty() ? "" : ", ") + q.name;
    throw_error("no parameter named '", name, "' (parameters: ", known, ")");
  }
  return *p;
}

const Param& ParamStore::at(const std::string& name) const { return const_cast<ParamStore*>(this)->at(name); }

std::int64_t ParamStore::numel() const {
  std::int64_t n = 0;
  for (auto& p : params_) n += p.value.numel();
  return n;
}

void ParamStore::freeze_nonmatrix() {
  for (auto& p : params_)
    if (!p.low_rank()) p.frozen = true;
}

}  // namespace eggroll
