// RUN: tessera-opt %s -split-input-file -tile-ping-pong -verify-diagnostics | FileCheck %s

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// The forward's loop after tile-async-dots and tile-specialize-warps: the consumers give
// warpgroup 0 the first turn after taking their registers; each iteration takes the turn
// before the scores' product and passes it after P @ V's, both issued before the first wait
// (the softmax then runs while the other warpgroup's products do). The dot after the loop
// and the producer's branch take no turns.
// CHECK-LABEL: func.func @forward_loop
// CHECK: scf.if %{{.*}} {
// CHECK-NOT: tile.warpgroup_turn
// CHECK: } else {
// CHECK-NEXT: tile.set_max_registers 240 {increase}
// CHECK-NEXT: tile.warpgroup_turn first
// CHECK: scf.for
// CHECK: tile.shared_load
// CHECK: tile.warpgroup_turn take
// CHECK-NEXT: %[[S:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: %[[O:.*]] = tile.dot {{.*}} {async}
// CHECK-NEXT: tile.warpgroup_turn pass
// CHECK-NEXT: tile.dot_wait %[[S]]
// CHECK-NOT: tile.warpgroup_turn
// CHECK: scf.yield
// CHECK-NOT: tile.warpgroup_turn
// CHECK: return
func.func @forward_loop(%p0: tensor<128x64xf16, #a>, %n: i32) -> tensor<128x64xf32, #mma>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.producer_warps = 4 : i32, tile.ping_pong = "dots", tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %scale = arith.constant dense<0.5> : tensor<128x64xf32, #mma>
  %q = tile.shared_alloc : !tile.shared<1 x tensor<128x64xf16>>
  %k = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %v = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %producer = tile.in_producer_warps
  %out = scf.if %producer -> (tensor<128x64xf32, #mma>) {
    tile.set_max_registers 24
    scf.yield %zero : tensor<128x64xf32, #mma>
  } else {
    tile.set_max_registers 240 {increase}
    %loop:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %p = %p0)
        -> (tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>) : i32 {
      %qs = tile.shared_load %q[%c0] : !tile.shared<1 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
      %kt = tile.shared_load %k[%c0] {transposed} : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
      %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
      %s = tile.dot %qs, %kt, %zero {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %o = tile.dot %p, %vs, %acc {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %sw = tile.dot_wait %s : tensor<128x64xf32, #mma> {pending = 1 : i32}
      %scaled = arith.mulf %sw, %scale : tensor<128x64xf32, #mma>
      %next = arith.truncf %scaled : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %pa = tile.convert_layout %next : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      %ow = tile.dot_wait %o : tensor<128x64xf32, #mma> {pending = 0 : i32}
      %rescaled = arith.mulf %ow, %scale : tensor<128x64xf32, #mma>
      scf.yield %rescaled, %pa : tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>
    }
    %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %last = tile.dot %loop#1, %vs, %loop#0 {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
    %done = tile.dot_wait %last : tensor<128x64xf32, #mma> {pending = 0 : i32}
    scf.yield %done : tensor<128x64xf32, #mma>
  }
  return %out : tensor<128x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// A store to shared memory between the dots waits for all consumer warps (its barrier): with
// the other warpgroup waiting for its turn, that would deadlock. The loop takes no turns.
// CHECK-LABEL: func.func @store_between_dots
// CHECK: tile.warpgroup_turn first
// CHECK-NOT: tile.warpgroup_turn
// CHECK: return
func.func @store_between_dots(%n: i32)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.producer_warps = 4 : i32, tile.ping_pong = "dots", tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %q = tile.shared_alloc : !tile.shared<1 x tensor<128x64xf16>>
  %k = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %producer = tile.in_producer_warps
  scf.if %producer {
  } else {
    %loop = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<128x64xf32, #mma>) : i32 {
      %qs = tile.shared_load %q[%c0] : !tile.shared<1 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
      %kt = tile.shared_load %k[%c0] {transposed} : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
      %s = tile.dot %qs, %kt, %zero {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %h = arith.truncf %acc : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      tile.shared_store %h, %q[%c0] : tensor<128x64xf16, #mma>, !tile.shared<1 x tensor<128x64xf16>>
      %o = tile.dot %qs, %kt, %acc {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %sw = tile.dot_wait %s : tensor<128x64xf32, #mma> {pending = 1 : i32}
      %ow = tile.dot_wait %o : tensor<128x64xf32, #mma> {pending = 0 : i32}
      %sum = arith.addf %sw, %ow : tensor<128x64xf32, #mma>
      scf.yield %sum : tensor<128x64xf32, #mma>
    }
  }
  return
}

// -----

// Four consumer warps are one warpgroup: nobody to take turns with.
// expected-error@+1 {{ping_pong: needs two consumer warpgroups (num_warps = 8)}}
func.func @one_warpgroup() attributes {tile.kernel, tile.num_warps = 4 : i32, tile.producer_warps = 4 : i32, tile.ping_pong = "dots"} {
  %producer = tile.in_producer_warps
  scf.if %producer {
  } else {
  }
  return
}

// -----

// Without TMA loads tile-specialize-warps left the kernel's warps as they were: no turns.
// CHECK-LABEL: func.func @not_specialized
// CHECK-NOT: tile.warpgroup_turn
func.func @not_specialized() attributes {tile.kernel, tile.num_warps = 8 : i32, tile.ping_pong = "dots"} {
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// Turns at the exponentials: each iteration takes the turn before its first exponential (the
// rescale's) and passes it after the product that reads its last (the probabilities', P @ V);
// the scores' product and the row maximum run outside the turn.
// CHECK-LABEL: func.func @softmax_turns
// CHECK: tile.warpgroup_turn first
// CHECK: scf.for
// CHECK: = tile.dot %
// CHECK: tile.dot_wait
// CHECK: tile.reduce
// CHECK-NOT: tile.warpgroup_turn
// CHECK: tile.warpgroup_turn take
// CHECK-NEXT: math.exp2
// CHECK-NEXT: arith.subf
// CHECK-NEXT: math.exp2
// CHECK-NOT: tile.warpgroup_turn
// CHECK: = tile.dot %
// CHECK-NEXT: tile.warpgroup_turn pass
// CHECK-NEXT: tile.dot_wait
// CHECK: scf.yield
// CHECK-NOT: tile.warpgroup_turn
// CHECK: return
func.func @softmax_turns(%n: i32, %v0: tensor<64x64xf16, #b>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.producer_warps = 4 : i32, tile.ping_pong = "exponentials", tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %m0 = arith.constant dense<0.0> : tensor<128xf32, #tile.slice<dim = 1, parent = #mma>>
  %q = tile.shared_alloc : !tile.shared<1 x tensor<128x64xf16>>
  %k = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %producer = tile.in_producer_warps
  scf.if %producer {
  } else {
    %loop:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %m = %m0)
        -> (tensor<128x64xf32, #mma>, tensor<128xf32, #tile.slice<dim = 1, parent = #mma>>) : i32 {
      %qs = tile.shared_load %q[%c0] : !tile.shared<1 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
      %kt = tile.shared_load %k[%c0] {transposed} : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
      %s = tile.dot %qs, %kt, %zero {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %sw = tile.dot_wait %s : tensor<128x64xf32, #mma> {pending = 0 : i32}
      %rowmax = tile.reduce max %sw {axis = 1 : i32} : tensor<128x64xf32, #mma> -> tensor<128xf32, #tile.slice<dim = 1, parent = #mma>>
      %mnew = arith.maximumf %m, %rowmax : tensor<128xf32, #tile.slice<dim = 1, parent = #mma>>
      %dm = arith.subf %m, %mnew : tensor<128xf32, #tile.slice<dim = 1, parent = #mma>>
      %alpha = math.exp2 %dm : tensor<128xf32, #tile.slice<dim = 1, parent = #mma>>
      %shifted = arith.subf %sw, %zero : tensor<128x64xf32, #mma>
      %p = math.exp2 %shifted : tensor<128x64xf32, #mma>
      %ph = arith.truncf %p : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %pa = tile.convert_layout %ph : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      %o = tile.dot %pa, %v0, %acc {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %ow = tile.dot_wait %o : tensor<128x64xf32, #mma> {pending = 0 : i32}
      scf.yield %ow, %mnew : tensor<128x64xf32, #mma>, tensor<128xf32, #tile.slice<dim = 1, parent = #mma>>
    }
  }
  return
}

// -----

// expected-error@+1 {{ping_pong: takes turns at "dots" or "exponentials"}}
func.func @turns_at_what() attributes {tile.kernel, tile.num_warps = 8 : i32, tile.producer_warps = 4 : i32, tile.ping_pong = "loads"} {
  %producer = tile.in_producer_warps
  scf.if %producer {
  } else {
  }
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>
#a = #tile.dot_op<opIdx = 0, parent = #mma>
#b = #tile.dot_op<opIdx = 1, parent = #mma>

// With the accumulator rescaled before the scores are issued, the body first waits for the
// previous iteration's P @ V; that wait is not the end of the dots the turn covers.
// CHECK-LABEL: func.func @wait_before_the_dots
// CHECK: scf.for
// CHECK: tile.dot_wait %{{.*}} {pending = 0 : i32}
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: tile.warpgroup_turn take
// CHECK-NEXT: tile.dot {{.*}} {async}
// CHECK-NEXT: tile.dot {{.*}} {async}
// CHECK-NEXT: tile.warpgroup_turn pass
// CHECK-NEXT: tile.dot_wait %{{.*}} {pending = 1 : i32}
func.func @wait_before_the_dots(%p0: tensor<128x64xf16, #a>, %n: i32) -> tensor<128x64xf32, #mma>
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.producer_warps = 4 : i32, tile.ping_pong = "dots", tile.warpgroup_mma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
  %scale = arith.constant dense<0.5> : tensor<128x64xf32, #mma>
  %q = tile.shared_alloc : !tile.shared<1 x tensor<128x64xf16>>
  %k = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %v = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %producer = tile.in_producer_warps
  %out = scf.if %producer -> (tensor<128x64xf32, #mma>) {
    tile.set_max_registers 24
    scf.yield %zero : tensor<128x64xf32, #mma>
  } else {
    tile.set_max_registers 240 {increase}
    %qs = tile.shared_load %q[%c0] : !tile.shared<1 x tensor<128x64xf16>> -> tensor<128x64xf16, #a>
    %kt = tile.shared_load %k[%c0] {transposed} : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %vs = tile.shared_load %v[%c0] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #b>
    %loop:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %p = %p0)
        -> (tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>) : i32 {
      %aw = tile.dot_wait %acc : tensor<128x64xf32, #mma> {pending = 0 : i32}
      %rescaled = arith.mulf %aw, %scale : tensor<128x64xf32, #mma>
      %s = tile.dot %qs, %kt, %zero {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %o = tile.dot %p, %vs, %rescaled {async} : tensor<128x64xf16, #a> * tensor<64x64xf16, #b> -> tensor<128x64xf32, #mma>
      %sw = tile.dot_wait %s : tensor<128x64xf32, #mma> {pending = 1 : i32}
      %scaled = arith.mulf %sw, %scale : tensor<128x64xf32, #mma>
      %next = arith.truncf %scaled : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %pa = tile.convert_layout %next : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      scf.yield %o, %pa : tensor<128x64xf32, #mma>, tensor<128x64xf16, #a>
    }
    %last = tile.dot_wait %loop#0 : tensor<128x64xf32, #mma> {pending = 0 : i32}
    scf.yield %last : tensor<128x64xf32, #mma>
  }
  return %out : tensor<128x64xf32, #mma>
}
