// The attention kernels as DSL programs (internal to the library).
#ifndef TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H
#define TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H

#include "tessera/kernels/block_sparse.h"

#include <tessera/dsl.h>

namespace tessera::kernels::detail {

/// Flash attention forward over strided [batch, n, heads, head_dim] Q, K, V, O and a
/// contiguous [batch, heads_q, n_q] LSE. Meta parameters: BLOCK_M, BLOCK_N, HEAD_DIM (the
/// head dim padded to a power of two >= 16), CAUSAL (0/1). Grid: (cdiv(n_q, BLOCK_M),
/// batch * heads_q).
dsl::Kernel attention_forward_kernel(dsl::DType dtype);

/// Block-sparse attention forward with the forward's arguments plus the mask's index arrays
/// (BlockMask::device_indices), the modifiers' aux pointers and the mask's heads and block
/// counts; meta parameters as the forward plus MASK_BLOCK_M/N (BLOCK_M/N divide them).
dsl::Kernel block_sparse_forward_kernel(dsl::DType dtype, const Modifiers &modifiers);

/// The backward pass (FlashAttention 2, deterministic): delta = rowsum(dO * O) per query row
/// (grid (cdiv(n_q, BLOCK_M), batch * heads_q)); dK, dV per key block of a KV head, summing
/// the query heads of its group in order (grid (cdiv(n_kv, BLOCK_N), batch * heads_kv)); dQ
/// per query block (grid as the forward's). Same layouts and meta parameters as the forward.
dsl::Kernel attention_backward_delta_kernel(dsl::DType dtype);
dsl::Kernel attention_backward_dkdv_kernel(dsl::DType dtype);
dsl::Kernel attention_backward_dq_kernel(dsl::DType dtype);

} // namespace tessera::kernels::detail

#endif // TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H
