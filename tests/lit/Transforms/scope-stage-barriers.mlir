// RUN: tessera-opt %s -split-input-file -tile-scope-stage-barriers | FileCheck %s

#s = #tile.mma<warpsPerCTA = [4, 2]>
#kv = #tile.mma<warpsPerCTA = [8, 1]>

// The backward step adding dQ, as tile-async-dots leaves it. P^T is read back by dV's dot,
// each warpgroup the keys it computed: its barriers span the warpgroup. dS is read whole by
// every warpgroup's dQ dot: a barrier of all warps after its store. Before either store none:
// dV's and dQ's dots are retired (pending 1 with dK's issued after them) before the bulk
// add's barrier, dK's (pending 0, the iteration's end) before P's warpgroup barrier, which
// is enough for dK: each warpgroup reads dS^T's rows of its own keys.
// CHECK-LABEL: func.func @adding_dq
// CHECK: scf.for
// CHECK: tile.shared_store {{.*}} {readers_synced, warpgroup_local}
// CHECK: tile.shared_store {{.*}} {readers_synced} :
// CHECK: scf.yield
func.func @adding_dq(%n: i32, %p: tensor<64x128xf16, #s>, %ds: tensor<64x128xf16, #s>, %dq_out: !tile.ptr<f32>)
    -> (tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero_kv = arith.constant dense<0.0> : tensor<128x128xf32, #kv>
  %zero_s = arith.constant dense<0.0> : tensor<64x128xf32, #s>
  %ps = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %dss = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %ks = tile.shared_alloc {tile.smem_offset = 32768 : i64} : !tile.shared<1 x tensor<128x128xf16>>
  %dos = tile.shared_alloc {tile.smem_offset = 65536 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %out:2 = scf.for %i = %c0 to %n step %c1 iter_args(%dk = %zero_kv, %dv = %zero_kv)
      -> (tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>) : i32 {
    tile.shared_store %p, %ps[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
    %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
    %dov = tile.shared_load %dos[%c0] : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
    %dv2 = tile.dot %pt, %dov, %dv {async} : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
    tile.shared_store %ds, %dss[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
    %dsa = tile.shared_load %dss[%c0] : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #s>>
    %kb = tile.shared_load %ks[%c0] : !tile.shared<1 x tensor<128x128xf16>> -> tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #s>>
    %dq = tile.dot %dsa, %kb, %zero_s {async} : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #s>> * tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #s>> -> tensor<64x128xf32, #s>
    %dst = tile.shared_load %dss[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
    %dk2 = tile.dot %dst, %dov, %dk {async} : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
    %dqw = tile.dot_wait %dq : tensor<64x128xf32, #s> {pending = 1 : i32}
    tile.bulk_add %dq_out, %dqw : !tile.ptr<f32>, tensor<64x128xf32, #s>
    %dvw = tile.dot_wait %dv2 : tensor<128x128xf32, #kv> {pending = 1 : i32}
    %dkw = tile.dot_wait %dk2 : tensor<128x128xf32, #kv> {pending = 0 : i32}
    scf.yield %dkw, %dvw : tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>
  }
  return %out#0, %out#1 : tensor<128x128xf32, #kv>, tensor<128x128xf32, #kv>
}

// -----

#s = #tile.mma<warpsPerCTA = [4, 2]>
#kv = #tile.mma<warpsPerCTA = [8, 1]>

// Without the bulk add nothing follows the retiring wait before P's store comes round: its
// barrier before stays (each warpgroup's own). dS, which every warpgroup reads whole, keeps
// its barrier of all warps before when only a warpgroup's barrier (P's) follows the wait
// retiring its last reader. On 4 warps (one warpgroup), or where another ring shares the
// stage's memory, the barriers stay as they are.
// CHECK-LABEL: func.func @read_until_the_end
// CHECK: tile.shared_store {{.*}} {warpgroup_local} :
// CHECK-LABEL: func.func @whole_reads_need_all
// CHECK: tile.shared_store {{.*}} {warpgroup_local} :
// CHECK: tile.shared_store {{[^{]*}} :
// CHECK-LABEL: func.func @one_warpgroup
// CHECK: tile.shared_store {{[^{]*}} :
// CHECK-LABEL: func.func @memory_shared
// CHECK: tile.shared_store {{[^{]*}} :
func.func @read_until_the_end(%n: i32, %p: tensor<64x128xf16, #s>) -> tensor<128x128xf32, #kv>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32, #kv>
  %ps = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %dos = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%dv = %zero) -> (tensor<128x128xf32, #kv>) : i32 {
    tile.shared_store %p, %ps[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
    %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
    %dov = tile.shared_load %dos[%c0] : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
    %dv2 = tile.dot %pt, %dov, %dv {async} : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
    %dvw = tile.dot_wait %dv2 : tensor<128x128xf32, #kv> {pending = 0 : i32}
    scf.yield %dvw : tensor<128x128xf32, #kv>
  }
  return %out : tensor<128x128xf32, #kv>
}

func.func @whole_reads_need_all(%n: i32, %p: tensor<64x128xf16, #s>, %ds: tensor<64x128xf16, #s>)
    -> (tensor<128x128xf32, #kv>, tensor<64x128xf32, #s>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32, #kv>
  %zero_s = arith.constant dense<0.0> : tensor<64x128xf32, #s>
  %ps = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %dss = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %ks = tile.shared_alloc {tile.smem_offset = 32768 : i64} : !tile.shared<1 x tensor<128x128xf16>>
  %dos = tile.shared_alloc {tile.smem_offset = 65536 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %out:2 = scf.for %i = %c0 to %n step %c1 iter_args(%dv = %zero, %dq = %zero_s)
      -> (tensor<128x128xf32, #kv>, tensor<64x128xf32, #s>) : i32 {
    tile.shared_store %p, %ps[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
    %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
    %dov = tile.shared_load %dos[%c0] : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
    %dv2 = tile.dot %pt, %dov, %dv {async} : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
    tile.shared_store %ds, %dss[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
    %dsa = tile.shared_load %dss[%c0] : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #s>>
    %kb = tile.shared_load %ks[%c0] : !tile.shared<1 x tensor<128x128xf16>> -> tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #s>>
    %dq2 = tile.dot %dsa, %kb, %dq {async} : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #s>> * tensor<128x128xf16, #tile.dot_op<opIdx = 1, parent = #s>> -> tensor<64x128xf32, #s>
    %dvw = tile.dot_wait %dv2 : tensor<128x128xf32, #kv> {pending = 1 : i32}
    %dqw = tile.dot_wait %dq2 : tensor<64x128xf32, #s> {pending = 0 : i32}
    scf.yield %dvw, %dqw : tensor<128x128xf32, #kv>, tensor<64x128xf32, #s>
  }
  return %out#0, %out#1 : tensor<128x128xf32, #kv>, tensor<64x128xf32, #s>
}

#s4 = #tile.mma<warpsPerCTA = [4, 1]>
func.func @one_warpgroup(%n: i32, %p: tensor<64x64xf16, #s4>) -> tensor<64x64xf32, #s4>
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32, #s4>
  %ps = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x64xf16>>
  %vs = tile.shared_alloc {tile.smem_offset = 8192 : i64} : !tile.shared<1 x tensor<64x64xf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32, #s4>) : i32 {
    tile.shared_store %p, %ps[%c0] : tensor<64x64xf16, #s4>, !tile.shared<1 x tensor<64x64xf16>>
    %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16, #tile.dot_op<opIdx = 0, parent = #s4>>
    %vb = tile.shared_load %vs[%c0] : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #s4>>
    %d = tile.dot %pt, %vb, %acc {async} : tensor<64x64xf16, #tile.dot_op<opIdx = 0, parent = #s4>> * tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #s4>> -> tensor<64x64xf32, #s4>
    %dw = tile.dot_wait %d : tensor<64x64xf32, #s4> {pending = 0 : i32}
    scf.yield %dw : tensor<64x64xf32, #s4>
  }
  return %out : tensor<64x64xf32, #s4>
}

func.func @memory_shared(%n: i32, %p: tensor<64x128xf16, #s>, %dq_out: !tile.ptr<f32>) -> tensor<128x128xf32, #kv>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32, #kv>
  %ps = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %dos = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%dv = %zero) -> (tensor<128x128xf32, #kv>) : i32 {
    tile.shared_store %p, %ps[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
    %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
    %dov = tile.shared_load %dos[%c0] : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
    %dv2 = tile.dot %pt, %dov, %dv {async} : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
    %dvw = tile.dot_wait %dv2 : tensor<128x128xf32, #kv> {pending = 0 : i32}
    scf.yield %dvw : tensor<128x128xf32, #kv>
  }
  return %out : tensor<128x128xf32, #kv>
}
