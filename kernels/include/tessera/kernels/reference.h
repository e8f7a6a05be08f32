// An independent attention for checking tessera's: a naive CUDA C++ kernel compiled by NVRTC,
// in fp64 with the full score row, sharing no code with the DSL kernels.
#ifndef TESSERA_KERNELS_REFERENCE_H
#define TESSERA_KERNELS_REFERENCE_H

#include "tessera/dsl/dtype.h"

#include <cstdint>
#include <vector>

namespace tessera::kernels {

struct ReferenceShape {
  int64_t batch = 1, n_q = 0, n_kv = 0, heads_q = 1, heads_kv = 1, head_dim = 0;
  double scale = 1;
  bool causal = false; ///< bottom-right aligned, as attention_forward
};

/// On the GPU, from contiguous f32 device arrays q [batch, n_q, heads_q, head_dim] and k, v
/// [batch, n_kv, heads_kv, head_dim]: `o` (f32, like q) and `lse` (f32 [batch, heads_q, n_q],
/// natural log, -inf for rows that see no key) computed in fp64; and, when `naive` is not
/// null, the output of a naive implementation in `dtype` (probabilities and output rounded
/// to it), whose error is the baseline of DESIGN.md's bars. Synchronous.
void attention_reference(const ReferenceShape &shape, const float *q, const float *k, const float *v, float *o,
                         float *lse, float *naive = nullptr, dsl::DType dtype = dsl::DType::f16);

/// How far `got` is from `want`, element by element.
struct ErrorStats {
  double max = 0, mean = 0;
  bool finite = true; ///< no NaN or Inf in `got` (poisoned outputs not written show as NaN)
};
ErrorStats error_stats(const std::vector<float> &got, const std::vector<float> &want);

/// DESIGN.md's forward bar: max error within 2x, mean within 1.1x, the naive same-dtype
/// implementation's (plus a floor of a fraction of the dtype's resolution); finite.
bool within_forward_bars(const ErrorStats &ours, const ErrorStats &naive, dsl::DType dtype);
/// The floor of the bar for `dtype`'s max error (a tenth of it for the mean).
double forward_error_floor(dsl::DType dtype);

} // namespace tessera::kernels

#endif // TESSERA_KERNELS_REFERENCE_H
