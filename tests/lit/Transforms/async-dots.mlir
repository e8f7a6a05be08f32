// RUN: tessera-opt %s -split-input-file -tile-async-dots | FileCheck %s

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// FlashAttention-3's order: this block's scores and the previous block's P @ V are both
// issued; the scores are waited for with P @ V still in flight (pending 1), so the softmax
// overlaps it; P @ V is waited for (pending 0) where the rescale reads it.
// CHECK-LABEL: func.func @overlap_softmax
// CHECK: scf.for
// CHECK: %[[S:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[O:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[SW:.*]] = tile.dot_wait %[[S]] : {{.*}} {pending = 1 : i32}
// CHECK-NEXT: arith.mulf %[[SW]]
// CHECK: %[[OW:.*]] = tile.dot_wait %[[O]] : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: arith.mulf %[[OW]]
// CHECK-NOT: tile.dot_wait
// CHECK: scf.yield
func.func @overlap_softmax(%p0: tensor<128x64xf16, #a>, %n: i32) -> tensor<128x64xf32, #mma>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %scale = arith.constant dense<0.5> : tensor<128x64xf32, #mma>
  %q = tile.shared_alloc : !tile.shared<1 x tensor<128x64xf16>>
  %k = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %v = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %out:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %p = %p0)
      -> (tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>) : i32 {
    %qs = tile.shared_load %q[%c0] : !tile.shared<1 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
    %kt = tile.shared_load %k[%c0] {transposed} : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %s = tile.dot %qs, %kt, %zero : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    %o = tile.dot %p, %vs, %acc : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    %scaled = arith.mulf %s, %scale : tensor<128x64xf32, #mma>
    %next = arith.truncf %scaled : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
    %pa = tile.convert_layout %next : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
    %rescaled = arith.mulf %o, %scale : tensor<128x64xf32, #mma>
    scf.yield %rescaled, %pa : tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>
  }
  return %out#0 : tensor<128x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>
#blk = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [8, 1], order = [1, 0]>

// A matmul's k loop: the accumulator stays in flight into the next iteration. After its dot,
// the body waits for the previous iteration's (pending 1) in every warpgroup (barrier) and
// only then refills the stage that dot read; the result is waited for after the loop.
// CHECK-LABEL: func.func @matmul_in_flight
// CHECK: scf.for
// CHECK: tile.async_wait 1
// CHECK: %[[D:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: tile.dot_wait {barrier, pending = 1 : i32}
// CHECK-NEXT: tile.async_copy
// CHECK-NEXT: tile.async_commit
// CHECK-NEXT: scf.yield %[[D]]
// CHECK: %[[R:.*]] = tile.dot_wait %{{.*}} : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: tile.async_wait 0
// CHECK-NEXT: return %[[R]]
func.func @matmul_in_flight(%ptrs: tensor<128x64x!tile.ptr<f16>, #blk>, %mask: tensor<128x64xi1, #blk>, %n: i32)
    -> tensor<128x64xf32, #mma> attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %ra = tile.shared_alloc : !tile.shared<3 x tensor<128x64xf16>>
  %rb = tile.shared_alloc : !tile.shared<3 x tensor<64x64xf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x64xf32, #mma>) : i32 {
    tile.async_wait 1
    %x = tile.shared_load %ra[%i] : !tile.shared<3 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
    %y = tile.shared_load %rb[%i] : !tile.shared<3 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    tile.async_copy %ptrs, %mask into %ra[%i] : tensor<128x64x!tile.ptr<f16>, #blk>, tensor<128x64xi1, #blk>, !tile.shared<3 x tensor<128x64xf16>>
    tile.async_commit
    %d = tile.dot %x, %y, %acc : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    scf.yield %d : tensor<128x64xf32, #mma>
  }
  tile.async_wait 0
  return %out : tensor<128x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// The same with TMA rings: the TMA refill moves after the barrier wait of the dots, so the
// stage's wait no longer needs its own CTA barrier.
// CHECK-LABEL: func.func @matmul_in_flight_tma
// CHECK: scf.for
// CHECK: tile.wait_barrier %{{.*}}, %{{.*}} : !tile.shared<3 x tensor<1xi64>>
// CHECK: %[[D:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: tile.dot_wait {barrier, pending = 1 : i32}
// CHECK-NEXT: tile.tma_load
// CHECK-NEXT: scf.yield %[[D]]
// CHECK: tile.dot_wait %{{.*}} : {{.*}} {pending = 0 : i32}
func.func @matmul_in_flight_tma(%map: !tile.tensor_map, %bp: !tile.block_ptr<tensor<128x64xf16>>, %n: i32)
    -> tensor<128x64xf32, #mma> attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %true = arith.constant true
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %ra = tile.shared_alloc : !tile.shared<3 x tensor<128x64xf16>>
  %rb = tile.shared_alloc : !tile.shared<3 x tensor<64x64xf16>>
  %bars = tile.shared_alloc : !tile.shared<3 x tensor<1xi64>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x64xf32, #mma>) : i32 {
    tile.wait_barrier %bars[%i], %c0 {sync} : !tile.shared<3 x tensor<1xi64>>
    %x = tile.shared_load %ra[%i] : !tile.shared<3 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
    %y = tile.shared_load %rb[%i] : !tile.shared<3 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    tile.tma_load %map, %bp into %ra[%i], %bars if %true : !tile.block_ptr<tensor<128x64xf16>>, !tile.shared<3 x tensor<128x64xf16>>, !tile.shared<3 x tensor<1xi64>>
    %d = tile.dot %x, %y, %acc : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    scf.yield %d : tensor<128x64xf32, #mma>
  }
  return %out : tensor<128x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>
#blk = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [8, 1], order = [1, 0]>

// A wait for copy groups after a refill: moving the refill past it would change what it
// waits for, so the dot is waited for in its own iteration.
// CHECK-LABEL: func.func @refill_before_copy_wait
// CHECK: tile.async_commit
// CHECK-NEXT: tile.async_wait 0
// CHECK: %[[D:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[W:.*]] = tile.dot_wait %[[D]] : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: scf.yield %[[W]]
func.func @refill_before_copy_wait(%ptrs: tensor<128x64x!tile.ptr<f16>, #blk>, %mask: tensor<128x64xi1, #blk>, %n: i32)
    -> tensor<128x64xf32, #mma> attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %ra = tile.shared_alloc : !tile.shared<2 x tensor<128x64xf16>>
  %rb = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x64xf32, #mma>) : i32 {
    tile.async_copy %ptrs, %mask into %ra[%i] : tensor<128x64x!tile.ptr<f16>, #blk>, tensor<128x64xi1, #blk>, !tile.shared<2 x tensor<128x64xf16>>
    tile.async_commit
    tile.async_wait 0
    %x = tile.shared_load %ra[%i] : !tile.shared<2 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
    %y = tile.shared_load %rb[%i] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %d = tile.dot %x, %y, %acc : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    scf.yield %d : tensor<128x64xf32, #mma>
  }
  return %out : tensor<128x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// A dot chained into the next one as its accumulator is not waited for; a loop with dots of
// its own ends the overlap (its groups cannot be counted from outside). Inside it the carried
// accumulator, read by another op before the next iteration's dot, stays in flight to the
// next iteration's start and is waited for there and after the loop. Without
// tile.warpgroup_mma dots stay synchronous.
// CHECK-LABEL: func.func @chain_and_inner_loop
// CHECK: %[[X:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[Y:.*]] = tile.dot {{.*}}, %[[X]] {async}
// CHECK-NEXT: %[[YW:.*]] = tile.dot_wait %[[Y]] : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: %[[OUT:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[YW]])
// CHECK-NEXT: tile.shared_load
// CHECK-NEXT: %[[ACCW:.*]] = tile.dot_wait %[[ACC]] : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: arith.addf %[[ACCW]], %[[ACCW]]
// CHECK-NEXT: %[[D:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: scf.yield %[[D]]
// CHECK: tile.dot_wait %[[OUT]] : {{.*}} {pending = 0 : i32}
// CHECK-LABEL: func.func @synchronous
// CHECK-NOT: async
// CHECK-NOT: tile.dot_wait
func.func @chain_and_inner_loop(%p: tensor<128x64xf16, #a>, %n: i32) -> tensor<128x64xf32, #mma>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %v = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
  %x = tile.dot %p, %vs, %zero : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
  %y = tile.dot %p, %vs, %x : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %y) -> (tensor<128x64xf32, #mma>) : i32 {
    %ws = tile.shared_load %v[%i] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %twice = arith.addf %acc, %acc : tensor<128x64xf32, #mma>
    %d = tile.dot %p, %ws, %twice : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    scf.yield %d : tensor<128x64xf32, #mma>
  }
  return %out : tensor<128x64xf32, #mma>
}
func.func @synchronous(%p: tensor<128x64xf16, #a>) -> tensor<128x64xf32, #mma>
    attributes {tile.kernel, tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %v = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
  %x = tile.dot %p, %vs, %zero : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
  return %x : tensor<128x64xf32, #mma>
}

// -----

#kv = #tile.mma<warpsPerCTA = [8, 1]>
#s = #tile.mma<warpsPerCTA = [4, 2]>

// A dot reading a stage stored from registers (P^T for dV) is waited for before the next
// store into that stage, not before a store into another one.
// CHECK-LABEL: func.func @store_into_read_stage
// CHECK: %[[D:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: tile.shared_store %{{.*}}, %[[OTHER:.*]][
// CHECK-NEXT: %[[DW:.*]] = tile.dot_wait %[[D]] : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: tile.shared_store %{{.*}}, %[[READ:.*]][
// CHECK: return %[[DW]]
func.func @store_into_read_stage(%p: tensor<64x128xf16, #s>, %acc: tensor<128x128xf32, #kv>) -> tensor<128x128xf32, #kv>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %ps = tile.shared_alloc : !tile.shared<1 x tensor<64x128xf16>>
  %other = tile.shared_alloc : !tile.shared<1 x tensor<64x128xf16>>
  %dos = tile.shared_alloc : !tile.shared<2 x tensor<64x128xf16>>
  tile.shared_store %p, %ps[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
  %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
  %dout = tile.shared_load %dos[%c0] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
  %d = tile.dot %pt, %dout, %acc : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
  tile.shared_store %p, %other[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
  tile.shared_store %p, %ps[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
  return %d : tensor<128x128xf32, #kv>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// The backward's tail: dV, dQ and dK issued in that order; dQ is read with dK in flight
// (pending 1), which also finishes dV: dV's own wait, later, needs no more than that one
// group in flight (pending 1, not 2: ptxas serializes every wgmma after a wait_group 2 that
// follows a wait_group 1).
// CHECK-LABEL: func.func @wait_already_done
// CHECK: %[[DV:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[DQ:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[DK:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[DQW:.*]] = tile.dot_wait %[[DQ]] : {{.*}} {pending = 1 : i32}
// CHECK-NEXT: arith.mulf %[[DQW]]
// CHECK-NEXT: %[[DVW:.*]] = tile.dot_wait %[[DV]] : {{.*}} {pending = 1 : i32}
// CHECK-NEXT: %[[DKW:.*]] = tile.dot_wait %[[DK]] : {{.*}} {pending = 0 : i32}
func.func @wait_already_done(%x: tensor<128x64xf16, #a>, %acc: tensor<128x64xf32, #mma>)
    -> (tensor<128x64xf32, #mma>, tensor<128x64xf32, #mma>, tensor<128x64xf32, #mma>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %scale = arith.constant dense<0.5> : tensor<128x64xf32, #mma>
  %s = tile.shared_alloc : !tile.shared<1 x tensor<64x64xf16>>
  %y = tile.shared_load %s[%c0] : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
  %dv = tile.dot %x, %y, %acc : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
  %dq = tile.dot %x, %y, %acc : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
  %dk = tile.dot %x, %y, %acc : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
  %added = arith.mulf %dq, %scale : tensor<128x64xf32, #mma>
  return %dv, %added, %dk : tensor<128x64xf32, #mma>, tensor<128x64xf32, #mma>, tensor<128x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// FlashAttention-3's order with the accumulator rescaled before the next scores are issued:
// nothing in the iteration reads P @ V, so it stays in flight through the softmax and is
// waited for at the next iteration's start, before the rescale reads it, and after the loop.
// CHECK-LABEL: func.func @overlap_softmax_rescale_first
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %[[ALPHA:.*]] = %{{.*}})
// CHECK-NEXT: %[[AW:.*]] = tile.dot_wait %[[ACC]] : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: arith.mulf %[[AW]], %[[ALPHA]]
// CHECK: %[[S:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[O:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[SW:.*]] = tile.dot_wait %[[S]] : {{.*}} {pending = 1 : i32}
// CHECK-NOT: tile.dot_wait
// CHECK: scf.yield %[[O]]
// CHECK: %[[R:.*]] = tile.dot_wait %{{.*}}#0 : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: return %[[R]]
func.func @overlap_softmax_rescale_first(%p0: tensor<128x64xf16, #a>, %n: i32) -> tensor<128x64xf32, #mma>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %one = arith.constant dense<1.0> : tensor<128x64xf32, #mma>
  %scale = arith.constant dense<0.5> : tensor<128x64xf32, #mma>
  %q = tile.shared_alloc : !tile.shared<1 x tensor<128x64xf16>>
  %k = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %v = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %out:3 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %p = %p0, %alpha = %one)
      -> (tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>, tensor<128x64xf32, #mma>) : i32 {
    %rescaled = arith.mulf %acc, %alpha : tensor<128x64xf32, #mma>
    %qs = tile.shared_load %q[%c0] : !tile.shared<1 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
    %kt = tile.shared_load %k[%c0] {transposed} : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %s = tile.dot %qs, %kt, %zero : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    %o = tile.dot %p, %vs, %rescaled : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    %scaled = arith.mulf %s, %scale : tensor<128x64xf32, #mma>
    %next = arith.truncf %scaled : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
    %pa = tile.convert_layout %next : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
    scf.yield %o, %pa, %scaled : tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>, tensor<128x64xf32, #mma>
  }
  return %out#0 : tensor<128x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// The plain order: the next iteration rescales the accumulator only after its scores are
// issued, so P @ V is waited for in its own iteration (in flight across the next Q K^T it
// would hold the registers the softmax needs).
// CHECK-LABEL: func.func @plain_order_waits_in_its_iteration
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK-NOT: tile.dot_wait %[[ACC]]
// CHECK: tile.dot {{.*}} {async}
// CHECK: arith.mulf %[[ACC]]
// CHECK-NEXT: %[[O:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[OW:.*]] = tile.dot_wait %[[O]] : {{.*}} {pending = 0 : i32}
// CHECK-NEXT: scf.yield %[[OW]]
func.func @plain_order_waits_in_its_iteration(%n: i32) -> tensor<128x64xf32, #mma>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %scale = arith.constant dense<0.5> : tensor<128x64xf32, #mma>
  %q = tile.shared_alloc : !tile.shared<1 x tensor<128x64xf16>>
  %k = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %v = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x64xf32, #mma>) : i32 {
    %qs = tile.shared_load %q[%c0] : !tile.shared<1 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
    %kt = tile.shared_load %k[%c0] {transposed} : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %s = tile.dot %qs, %kt, %zero : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    %scaled = arith.mulf %s, %scale : tensor<128x64xf32, #mma>
    %next = arith.truncf %scaled : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
    %pa = tile.convert_layout %next : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
    %rescaled = arith.mulf %acc, %scale : tensor<128x64xf32, #mma>
    %o = tile.dot %pa, %vs, %rescaled : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    scf.yield %o : tensor<128x64xf32, #mma>
  }
  return %out : tensor<128x64xf32, #mma>
}
