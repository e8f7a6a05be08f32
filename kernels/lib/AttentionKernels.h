// The attention kernels as DSL programs (internal to the library).
#ifndef TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H
#define TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H

#include <tessera/dsl.h>

namespace tessera::kernels::detail {

/// Flash attention forward over strided [batch, n, heads, head_dim] Q, K, V, O and a
/// contiguous [batch, heads_q, n_q] LSE. Meta parameters: BLOCK_M, BLOCK_N, HEAD_DIM (the
/// head dim padded to a power of two >= 16), CAUSAL (0/1). Grid: (cdiv(n_q, BLOCK_M),
/// batch * heads_q).
dsl::Kernel attention_forward_kernel(dsl::DType dtype);

} // namespace tessera::kernels::detail

#endif // TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H
