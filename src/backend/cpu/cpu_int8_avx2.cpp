// The cpu int8 kernels at the AVX2 level (compiled with -mavx2; chosen at run time).
#include "backend/int8_ops.hpp"

namespace eggroll::cpu_int8::detail {
#if defined(__x86_64__)
void qmm_avx2(const QmmArgs& args) { qmm_scalar(args); }
void update_avx2(const UpdateArgs& args) { update_scalar(args); }
#endif
}  // namespace eggroll::cpu_int8::detail
