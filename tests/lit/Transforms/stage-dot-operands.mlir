// RUN: tessera-opt %s -split-input-file -tile-stage-dot-operands | FileCheck %s

#s = #tile.mma<warpsPerCTA = [4, 2]>
#kv = #tile.mma<warpsPerCTA = [8, 1]>
#q = #tile.mma<warpsPerCTA = [4, 2]>

// A backward step with score tiles of a row per query (FlashAttention-3's orientation): P^T
// feeds dV's dot and dS^T dK's (transposes of tiles each warpgroup holds half of), dS dQ's (a
// conversion to the other warpgroups' rows). Each source tile is stored once, right after it
// is computed, into a stage of its own; each dot reads its operand from there (transposed:
// MN-major), and the moves go.
// CHECK-LABEL: func.func @backward_step
// CHECK-DAG: %[[DS:.*]] = tile.shared_alloc : !tile.shared<1 x tensor<64x128xf16>>
// CHECK-DAG: %[[P:.*]] = tile.shared_alloc : !tile.shared<1 x tensor<64x128xf16>>
// CHECK: scf.for
// CHECK: %[[P16:.*]] = arith.truncf
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: tile.shared_store %[[P16]], %[[P]][%[[C0]]]
// CHECK: %[[PT:.*]] = tile.shared_load %[[P]][%[[C0]]] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16
// CHECK-NEXT: tile.dot %[[PT]]
// CHECK: %[[DS16:.*]] = arith.truncf
// CHECK-NEXT: %[[C1:.*]] = arith.constant 0 : i32
// CHECK-NEXT: tile.shared_store %[[DS16]], %[[DS]][%[[C1]]]
// CHECK: %[[DSA:.*]] = tile.shared_load %[[DS]][%[[C1]]] : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16
// CHECK-NEXT: tile.dot %[[DSA]]
// CHECK: %[[DST:.*]] = tile.shared_load %[[DS]][%[[C1]]] {transposed}
// CHECK-NEXT: tile.dot %[[DST]]
// CHECK-NOT: tile.trans
// CHECK-NOT: tile.convert_layout
// CHECK: scf.yield
func.func @backward_step(%n: i32, %dq_out: !tile.ptr<f32>) -> (tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero_s = arith.constant dense<0.0> : tensor<64x128xf32, #s>
  %zero_kv = arith.constant dense<0.0> : tensor<128x128xf32, #kv>
  %zero_q = arith.constant dense<0.0> : tensor<64x128xf32, #q>
  %half = arith.constant dense<0.5> : tensor<64x128xf32, #s>
  %qs = tile.shared_alloc : !tile.shared<2 x tensor<64x128xf16>>
  %ks = tile.shared_alloc : !tile.shared<1 x tensor<128x128xf16>>
  %dos = tile.shared_alloc : !tile.shared<2 x tensor<64x128xf16>>
  %out:2 = scf.for %i = %c0 to %n step %c1 iter_args(%dk = %zero_kv, %dv = %zero_kv)
      -> (tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>) : i32 {
    %qa = tile.shared_load %qs[%c0] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #s>>
    %kt = tile.shared_load %ks[%c0] {transposed} : !tile.shared<1 x tensor<128x128xf16>> -> tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #s>>
    %s = tile.dot %qa, %kt, %zero_s : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #s>> * tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #s>> -> tensor<64x128xf32, #s>
    %p = arith.mulf %s, %half : tensor<64x128xf32, #s>
    %p16 = arith.truncf %p : tensor<64x128xf32, #s> to tensor<64x128xf16, #s>
    %pt = tile.trans %p16 {order = array<i32: 1, 0>} : tensor<64x128xf16, #s> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
    %dov = tile.shared_load %dos[%c0] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
    %dv2 = tile.dot %pt, %dov, %dv : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
    %ds = arith.mulf %p, %s : tensor<64x128xf32, #s>
    %ds16 = arith.truncf %ds : tensor<64x128xf32, #s> to tensor<64x128xf16, #s>
    %dsa = tile.convert_layout %ds16 : tensor<64x128xf16, #s> -> tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #q>>
    %kb = tile.shared_load %ks[%c0] : !tile.shared<1 x tensor<128x128xf16>> -> tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #q>>
    %dq = tile.dot %dsa, %kb, %zero_q : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #q>> * tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #q>> -> tensor<64x128xf32, #q>
    tile.bulk_add %dq_out, %dq : !tile.ptr<f32>, tensor<64x128xf32, #q>
    %dst = tile.trans %ds16 {order = array<i32: 1, 0>} : tensor<64x128xf16, #s> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
    %qb = tile.shared_load %qs[%c0] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
    %dk2 = tile.dot %dst, %qb, %dk : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
    scf.yield %dk2, %dv2 : tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>
  }
  return %out#0, %out#1 : tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>
}

// -----

#s = #tile.mma<warpsPerCTA = [4, 1]>
#kv = #tile.mma<warpsPerCTA = [4, 1]>

// A tile the kernel did not compute in the dot's block (here an argument) is left to the
// trans; without tile.warpgroup_mma (mma.sync) nothing is staged either.
// CHECK-LABEL: func.func @source_elsewhere
// CHECK-NOT: tile.shared_store
// CHECK: tile.trans
// CHECK-LABEL: func.func @mma_sync
// CHECK-NOT: tile.shared_store
// CHECK: tile.trans
func.func @source_elsewhere(%p: tensor<64x128xf16, #s>, %v: tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #kv>>)
    -> tensor<128x64xf32, #kv> attributes {tile.kernel, tile.num_warps = 4 : i32, tile.warpgroup_mma} {
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #kv>
  %vs = tile.shared_alloc : !tile.shared<1 x tensor<64x64xf16>>
  %c0 = arith.constant 0 : i32
  %vb = tile.shared_load %vs[%c0] : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
  %pt = tile.trans %p {order = array<i32: 1, 0>} : tensor<64x128xf16, #s> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
  %d = tile.dot %pt, %vb, %zero : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x64xf32, #kv>
  return %d : tensor<128x64xf32, #kv>
}
func.func @mma_sync(%p: tensor<64x128xf16, #s>, %v: tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #kv>>)
    -> tensor<128x64xf32, #kv> attributes {tile.kernel, tile.num_warps = 4 : i32} {
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #kv>
  %vs = tile.shared_alloc : !tile.shared<1 x tensor<64x64xf16>>
  %c0 = arith.constant 0 : i32
  %vb = tile.shared_load %vs[%c0] : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
  %q = arith.addf %p, %p : tensor<64x128xf16, #s>
  %pt = tile.trans %q {order = array<i32: 1, 0>} : tensor<64x128xf16, #s> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
  %d = tile.dot %pt, %vb, %zero : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x64xf32, #kv>
  return %d : tensor<128x64xf32, #kv>
}
