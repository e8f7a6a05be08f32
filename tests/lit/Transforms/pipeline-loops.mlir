// RUN: tessera-opt %s -split-input-file -tile-pipeline-loops -canonicalize -cse | FileCheck %s

// Loads that only feed a dot become rings of num_stages shared-memory stages: the first two
// iterations are copied before the loop; each iteration waits for its own stage (at most one
// group still in flight), reads it, and starts the copy two iterations ahead into the stage
// the previous iteration finished with. Nothing is in flight after the loop.
// CHECK-LABEL: func.func @matmul_loop
// CHECK-DAG: %[[A:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<64x32xbf16>>
// CHECK-DAG: %[[B:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<32x64xbf16>>
// CHECK: tile.async_copy {{.*}} into %[[A]][%{{.*}}]
// CHECK: tile.async_copy {{.*}} into %[[B]][%{{.*}}]
// CHECK: tile.async_commit
// CHECK: tile.async_copy {{.*}} into %[[A]]
// CHECK: tile.async_copy {{.*}} into %[[B]]
// CHECK: tile.async_commit
// CHECK: scf.for
// CHECK: tile.async_wait 1
// CHECK-DAG: %[[X:.*]] = tile.shared_load %[[A]][%[[SLOT:.*]]] : !tile.shared<3 x tensor<64x32xbf16>> -> tensor<64x32xbf16>
// CHECK-DAG: %[[Y:.*]] = tile.shared_load %[[B]][%[[SLOT]]]
// CHECK: tile.async_copy {{.*}} into %[[A]]
// CHECK: tile.async_copy {{.*}} into %[[B]]
// CHECK: tile.async_commit
// CHECK: tile.dot %[[X]], %[[Y]]
// CHECK-NOT: tile.load
// CHECK: scf.yield
// CHECK: tile.async_wait 0{{$}}
func.func @matmul_loop(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %k: i32) -> tensor<64x64xf32> attributes {tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %as = tile.splat %a : !tile.ptr<bf16> -> tensor<64x32x!tile.ptr<bf16>>
  %bs = tile.splat %b : !tile.ptr<bf16> -> tensor<32x64x!tile.ptr<bf16>>
  %step_a = arith.constant dense<32> : tensor<64x32xi32>
  %step_b = arith.constant dense<2048> : tensor<32x64xi32>
  %out:3 = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %zero, %pa = %as, %pb = %bs)
      -> (tensor<64x64xf32>, tensor<64x32x!tile.ptr<bf16>>, tensor<32x64x!tile.ptr<bf16>>) : i32 {
    %x = tile.load %pa : tensor<64x32x!tile.ptr<bf16>>
    %y = tile.load %pb : tensor<32x64x!tile.ptr<bf16>>
    %d = tile.dot %x, %y, %acc : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
    %na = tile.addptr %pa, %step_a : tensor<64x32x!tile.ptr<bf16>>, tensor<64x32xi32>
    %nb = tile.addptr %pb, %step_b : tensor<32x64x!tile.ptr<bf16>>, tensor<32x64xi32>
    scf.yield %d, %na, %nb : tensor<64x64xf32>, tensor<64x32x!tile.ptr<bf16>>, tensor<32x64x!tile.ptr<bf16>>
  }
  return %out#0 : tensor<64x64xf32>
}

// -----

// With num_stages = 1 nothing changes; loads that feed anything but a dot stay loads.
// CHECK-LABEL: func.func @not_pipelined
// CHECK-NOT: tile.shared_alloc
// CHECK: tile.load
func.func @not_pipelined(%a: !tile.ptr<f32>, %k: i32) -> tensor<64xf32> attributes {tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64xf32>
  %as = tile.splat %a : !tile.ptr<f32> -> tensor<64x!tile.ptr<f32>>
  %out = scf.for %i = %c0 to %k step %c1 iter_args(%acc = %zero) -> (tensor<64xf32>) : i32 {
    %x = tile.load %as : tensor<64x!tile.ptr<f32>>
    %s = arith.addf %acc, %x : tensor<64xf32>
    scf.yield %s : tensor<64xf32>
  }
  return %out : tensor<64xf32>
}

// -----

// A tile loaded as stored and transposed for the dot (K in Q K^T) is staged as stored and
// read from its ring transposed.
// CHECK-LABEL: func.func @transposed_operand
// CHECK: %[[K:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<32x64xf16>>
// CHECK: scf.for
// CHECK: %[[KT:.*]] = tile.shared_load %[[K]][%{{.*}}] {transposed} : !tile.shared<3 x tensor<32x64xf16>> -> tensor<64x32xf16>
// CHECK-NOT: tile.trans
// CHECK: tile.dot %{{.*}}, %[[KT]]
func.func @transposed_operand(%q: tensor<64x64xf16>, %k: !tile.ptr<f16>, %n: i32) -> tensor<64x32xf32> attributes {tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero = arith.constant dense<0.0> : tensor<64x32xf32>
  %ks = tile.splat %k : !tile.ptr<f16> -> tensor<32x64x!tile.ptr<f16>>
  %out = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %zero) -> (tensor<64x32xf32>) : i32 {
    %off = tile.splat %i : i32 -> tensor<32x64xi32>
    %ptrs = tile.addptr %ks, %off : tensor<32x64x!tile.ptr<f16>>, tensor<32x64xi32>
    %kt = tile.load %ptrs : tensor<32x64x!tile.ptr<f16>>
    %t = tile.trans %kt {order = array<i32: 1, 0>} : tensor<32x64xf16> -> tensor<64x32xf16>
    %d = tile.dot %q, %t, %acc : tensor<64x64xf16> * tensor<64x32xf16> -> tensor<64x32xf32>
    scf.yield %d : tensor<64x32xf32>
  }
  return %out : tensor<64x32xf32>
}

// -----

// Addresses may divide by a value known only at run time (a persistent kernel's tile / query
// blocks): the iteration ahead divides by the same value, so the load is still staged.
// CHECK-LABEL: func.func @divided_address
// CHECK: %[[K:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<32x64xf16>>
// CHECK: arith.divsi
// CHECK: tile.async_copy {{.*}} into %[[K]]
// CHECK: scf.for
// CHECK: tile.async_wait 1
// CHECK: tile.shared_load %[[K]]
// CHECK-NOT: tile.load
// CHECK: tile.dot
func.func @divided_address(%q: tensor<64x32xf16>, %k: !tile.ptr<f16>, %n: i32, %blocks: i32) -> tensor<64x64xf32>
    attributes {tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %ks = tile.splat %k : !tile.ptr<f16> -> tensor<32x64x!tile.ptr<f16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %head = arith.divsi %i, %blocks : i32
    %off = tile.splat %head : i32 -> tensor<32x64xi32>
    %ptrs = tile.addptr %ks, %off : tensor<32x64x!tile.ptr<f16>>, tensor<32x64xi32>
    %kv = tile.load %ptrs : tensor<32x64x!tile.ptr<f16>>
    %d = tile.dot %q, %kv, %acc : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}

// -----

// With tile.invariant_operands_in_shared, a tile loaded before the loop and used only by
// dots in it is copied once into a one-stage buffer that every iteration's dot reads.
// CHECK-LABEL: func.func @invariant_operand
// CHECK: %[[Q:.*]] = tile.shared_alloc : !tile.shared<1 x tensor<64x64xf16>>
// CHECK: tile.async_copy {{.*}} into %[[Q]]
// CHECK: tile.async_commit
// CHECK: tile.async_wait 0
// CHECK-NOT: tile.load
// CHECK: scf.for
// CHECK: %[[X:.*]] = tile.shared_load %[[Q]][%{{.*}}] : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16>
// CHECK: tile.dot %[[X]]
func.func @invariant_operand(%q: !tile.ptr<f16>, %k: tensor<64x32xf16>, %n: i32) -> tensor<64x32xf32>
    attributes {tile.num_stages = 3 : i32, tile.invariant_operands_in_shared} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero = arith.constant dense<0.0> : tensor<64x32xf32>
  %qs = tile.splat %q : !tile.ptr<f16> -> tensor<64x64x!tile.ptr<f16>>
  %x = tile.load %qs : tensor<64x64x!tile.ptr<f16>>
  %out = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %zero) -> (tensor<64x32xf32>) : i32 {
    %d = tile.dot %x, %k, %acc : tensor<64x64xf16> * tensor<64x32xf16> -> tensor<64x32xf32>
    scf.yield %d : tensor<64x32xf32>
  }
  return %out : tensor<64x32xf32>
}

// -----

// A pipelined loop inside another (a backward pass's query loop inside its loop over the heads
// of a group): the copies start before the inner loop, in the outer body, and computing the
// addresses of iterations ahead copies no load or dot of the body (the accumulators are not
// addresses), so the outer loop has nothing to stage.
// CHECK-LABEL: func.func @nested_loops
// CHECK-NOT: tile.async_copy
// CHECK: scf.for
// CHECK: tile.shared_alloc
// CHECK-NOT: tile.dot
// CHECK: tile.async_copy
// CHECK: tile.async_copy
// CHECK: scf.for
// CHECK-NOT: tile.load
// CHECK: tile.dot
// CHECK-NOT: tile.load
// CHECK: scf.yield
func.func @nested_loops(%a: !tile.ptr<f16>, %b: tensor<32x64xf16>, %heads: i32, %n: i32) -> tensor<64x64xf32> attributes {tile.num_stages = 3 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %rows = tile.make_range 0 to 64 : tensor<64xi32>
  %out = scf.for %h = %c0 to %heads step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %base = tile.addptr %a, %h : !tile.ptr<f16>, i32
    %inner = scf.for %i = %c0 to %n step %c64 iter_args(%acc2 = %acc) -> (tensor<64x64xf32>) : i32 {
      %r = tile.splat %i : i32 -> tensor<64xi32>
      %ri = arith.addi %rows, %r : tensor<64xi32>
      %e = tile.expand_dims %ri {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
      %w = tile.broadcast %e : tensor<64x1xi32> -> tensor<64x32xi32>
      %ps = tile.splat %base : !tile.ptr<f16> -> tensor<64x32x!tile.ptr<f16>>
      %p = tile.addptr %ps, %w : tensor<64x32x!tile.ptr<f16>>, tensor<64x32xi32>
      %x = tile.load %p : tensor<64x32x!tile.ptr<f16>>
      %d = tile.dot %x, %b, %acc2 : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
      scf.yield %d : tensor<64x64xf32>
    }
    scf.yield %inner : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}

// -----

// Tiles addressed through a block index read from a table the kernel never writes (as in
// block-sparse attention) are staged too: the index of an iteration ahead is read early, once
// for all its copies, only where that iteration exists (masked, 0 otherwise).
// CHECK-LABEL: func.func @indexed_blocks
// CHECK: tile.shared_alloc : !tile.shared<2 x tensor<32x64xbf16>>
// CHECK: tile.shared_alloc : !tile.shared<2 x tensor<32x64xbf16>>
// CHECK: tile.load %{{.*}}, %{{.*}}, %{{.*}} : !tile.ptr<i32>
// CHECK-NOT: !tile.ptr<i32>
// CHECK-COUNT-2: tile.async_copy
// CHECK: scf.for
// CHECK: tile.load %{{.*}}, %{{.*}}, %{{.*}} : !tile.ptr<i32>
// CHECK-NOT: !tile.ptr<i32>
// CHECK-COUNT-2: tile.async_copy
// CHECK: tile.dot
func.func @indexed_blocks(%table: !tile.ptr<i32>, %b: !tile.ptr<bf16>, %n: i32, %x: tensor<64x32xbf16>) -> tensor<64x64xf32> attributes {tile.num_stages = 2 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %bs = tile.splat %b : !tile.ptr<bf16> -> tensor<32x64x!tile.ptr<bf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %at = tile.addptr %table, %i : !tile.ptr<i32>, i32
    %block = tile.load %at : !tile.ptr<i32>
    %offset = tile.splat %block : i32 -> tensor<32x64xi32>
    %p = tile.addptr %bs, %offset : tensor<32x64x!tile.ptr<bf16>>, tensor<32x64xi32>
    %y = tile.load %p : tensor<32x64x!tile.ptr<bf16>>
    %z = tile.load %p : tensor<32x64x!tile.ptr<bf16>>
    %d = tile.dot %x, %y, %acc : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
    %e = tile.dot %x, %z, %d : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
    scf.yield %e : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}

// -----

// Where the kernel also writes the table, its values may change: the tile stays a load.
// CHECK-LABEL: func.func @indexed_blocks_of_a_written_table
// CHECK-NOT: tile.async_copy
func.func @indexed_blocks_of_a_written_table(%table: !tile.ptr<i32>, %b: !tile.ptr<bf16>, %n: i32, %x: tensor<64x32xbf16>) -> tensor<64x64xf32> attributes {tile.num_stages = 2 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %bs = tile.splat %b : !tile.ptr<bf16> -> tensor<32x64x!tile.ptr<bf16>>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %at = tile.addptr %table, %i : !tile.ptr<i32>, i32
    %block = tile.load %at : !tile.ptr<i32>
    %offset = tile.splat %block : i32 -> tensor<32x64xi32>
    %p = tile.addptr %bs, %offset : tensor<32x64x!tile.ptr<bf16>>, tensor<32x64xi32>
    %y = tile.load %p : tensor<32x64x!tile.ptr<bf16>>
    %d = tile.dot %x, %y, %acc : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
    tile.store %at, %c0 : !tile.ptr<i32>
    scf.yield %d : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}

// -----

// With tile.tma, block loads of 16-byte-aligned kernel arguments whose shape and strides the
// launcher knows are copied by the TMA: one tensor map argument per tensor and block (how to
// build it: the pointer's and the extents' arguments, the last stride the constant 1, one box
// per 128-byte atom), one mbarrier per stage expecting both loads (the ring made at the
// kernel's start), each iteration waiting for its stage's phase (iteration / stages) % 2 with
// a CTA barrier before it refills; the loads name their fill number (the stage is that modulo
// the stages). After the loop a CTA barrier (async_wait 0) lets other rings reuse the memory;
// it waits for no copy, only orders refills (orders_refills).
// CHECK-LABEL: func.func @tma_loop
// CHECK-SAME: %[[A:[a-z0-9]+]]: !tile.ptr<f16> {tile.divisibility = 16 : i32}
// CHECK-SAME: %[[MAPA:[a-z0-9]+]]: !tile.tensor_map {tile.tensor_map = {box = array<i64: 128, 32>, element_bytes = 2 : i64, pointer = 0 : i64, shape_args = array<i64: 2, 4>, shape_values = array<i64: 0, 0>, stride_args = array<i64: 4, -1>, stride_values = array<i64: 0, 1>, swizzle_bytes = 64 : i64}}
// CHECK-SAME: %[[MAPB:[a-z0-9]+]]: !tile.tensor_map {tile.tensor_map = {box = array<i64: 32, 64>, element_bytes = 2 : i64, pointer = 1 : i64, shape_args = array<i64: 4, 3>, shape_values = array<i64: 0, 0>, stride_args = array<i64: 3, -1>, stride_values = array<i64: 0, 1>, swizzle_bytes = 128 : i64}}
// CHECK: %[[RA:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<128x32xf16>>
// CHECK-NEXT: %[[RB:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<32x64xf16>>
// CHECK-NEXT: %[[BARS:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<1xi64>>
// CHECK-NEXT: tile.init_barriers %[[BARS]] arrivals 2
// CHECK: tile.tma_load %[[MAPA]], %{{.*}} into %[[RA]][%c0_i32], %[[BARS]] if
// CHECK: tile.tma_load %[[MAPB]], %{{.*}} into %[[RB]][%c0_i32], %[[BARS]] if
// CHECK: tile.tma_load %[[MAPA]], %{{.*}} into %[[RA]][%c1_i32]
// CHECK: tile.tma_load %[[MAPB]], %{{.*}} into %[[RB]][%c1_i32]
// CHECK: scf.for %[[I:.*]] = {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[PA:.*]] = %{{.*}}, %[[PB:.*]] = %{{.*}})
// CHECK: %[[IT:.*]] = arith.divsi %[[I]]
// CHECK: %[[SLOT:.*]] = arith.remsi %[[IT]], %c3
// CHECK: %[[AHEAD:.*]] = arith.addi %[[IT]], %c2
// CHECK: %[[PHASE:.*]] = arith.divsi %[[IT]], %c3
// CHECK: %[[PARITY:.*]] = arith.andi %[[PHASE]], %c1
// CHECK: tile.wait_barrier %[[BARS]][%[[SLOT]]], %[[PARITY]] {sync}
// CHECK-DAG: %[[X:.*]] = tile.shared_load %[[RA]][%[[SLOT]]]
// CHECK-DAG: %[[Y:.*]] = tile.shared_load %[[RB]][%[[SLOT]]]
// CHECK: tile.tma_load %[[MAPA]], %{{.*}} into %[[RA]][%[[AHEAD]]]
// CHECK: tile.tma_load %[[MAPB]], %{{.*}} into %[[RB]][%[[AHEAD]]]
// CHECK: tile.dot %[[X]], %[[Y]]
// CHECK-NOT: tile.block_load
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: tile.async_wait 0 {orders_refills}
// CHECK-NEXT: return
func.func @tma_loop(%a: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %b: !tile.ptr<f16> {tile.divisibility = 16 : i32},
                    %m: i32, %n: i32 {tile.divisibility = 16 : i32}, %k: i32 {tile.divisibility = 16 : i32})
    -> tensor<128x64xf32> attributes {tile.num_stages = 3 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %one = arith.constant 1 : i64
  %m64 = arith.extsi %m : i32 to i64
  %n64 = arith.extsi %n : i32 to i64
  %k64 = arith.extsi %k : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<128x64xf32>
  %pa0 = tile.make_block_ptr %a, [%m64, %k64], [%k64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<128x32xf16>>
  %pb0 = tile.make_block_ptr %b, [%k64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<32x64xf16>>
  %out:3 = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %zero, %pa = %pa0, %pb = %pb0)
      -> (tensor<128x64xf32>, !tile.block_ptr<tensor<128x32xf16>>, !tile.block_ptr<tensor<32x64xf16>>) : i32 {
    %x = tile.block_load %pa {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<128x32xf16>> -> tensor<128x32xf16>
    %y = tile.block_load %pb {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<32x64xf16>> -> tensor<32x64xf16>
    %d = tile.dot %x, %y, %acc : tensor<128x32xf16> * tensor<32x64xf16> -> tensor<128x64xf32>
    %na = tile.advance %pa, [%c0, %c32] : !tile.block_ptr<tensor<128x32xf16>>
    %nb = tile.advance %pb, [%c32, %c0] : !tile.block_ptr<tensor<32x64xf16>>
    scf.yield %d, %na, %nb : tensor<128x64xf32>, !tile.block_ptr<tensor<128x32xf16>>, !tile.block_ptr<tensor<32x64xf16>>
  }
  return %out#0 : tensor<128x64xf32>
}

// -----

// Block loads the TMA cannot copy stay as they are: no tile.tma on the kernel; a tensor that
// is not 16-byte aligned; a row stride the launcher cannot tell is a multiple of 16 bytes.
// CHECK-LABEL: func.func @no_tma
// CHECK-NOT: tile.tensor_map
// CHECK-NOT: tile.tma_load
// CHECK: tile.block_load
// CHECK: tile.block_load
// CHECK: tile.block_load
func.func @no_tma(%a: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %b: !tile.ptr<f16>, %n: i32 {tile.divisibility = 16 : i32},
                  %odd: i32) -> tensor<64x64xf32> attributes {tile.num_stages = 3 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %one = arith.constant 1 : i64
  %n64 = arith.extsi %n : i32 to i64
  %odd64 = arith.extsi %odd : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %unaligned = tile.make_block_ptr %b, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x32xf16>>
  %strided = tile.make_block_ptr %a, [%n64, %n64], [%odd64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<32x64xf16>>
  %column = tile.make_block_ptr %a, [%n64, %n64], [%one, %n64], [%c0, %c0] {order = array<i32: 0, 1>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<32x64xf16>>
  %out = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %pa = tile.advance %unaligned, [%c0, %i] : !tile.block_ptr<tensor<64x32xf16>>
    %pb = tile.advance %strided, [%i, %c0] : !tile.block_ptr<tensor<32x64xf16>>
    %pc = tile.advance %column, [%i, %c0] : !tile.block_ptr<tensor<32x64xf16>>
    %x = tile.block_load %pa {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x32xf16>> -> tensor<64x32xf16>
    %y = tile.block_load %pb {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<32x64xf16>> -> tensor<32x64xf16>
    %z = tile.block_load %pc {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<32x64xf16>> -> tensor<32x64xf16>
    %d = tile.dot %x, %y, %acc : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    %e = tile.dot %x, %z, %d : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    scf.yield %e : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}

// -----

// A [1, 64, 1, 64] block of a [b, n, h, d] tensor (attention's K in BHSD or BSHD): its map
// lists the unit dimensions first, then the rows and the columns (b, h, n, d), whatever the
// strides, so that the box's real dimensions are the map's innermost.
// CHECK-LABEL: func.func @tma_4d
// CHECK-SAME: !tile.tensor_map {tile.tensor_map = {box = array<i64: 1, 1, 64, 64>, element_bytes = 2 : i64, pointer = 0 : i64, shape_args = array<i64: 1, 3, 2, -1>, shape_values = array<i64: 0, 0, 0, 64>, stride_args = array<i64: 4, 5, 6, -1>, stride_values = array<i64: 0, 0, 0, 1>, swizzle_bytes = 128 : i64}}
// CHECK: tile.tma_load
func.func @tma_4d(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %b: i32, %n: i32, %h: i32,
                  %sb: i32 {tile.divisibility = 16 : i32}, %sh: i32 {tile.divisibility = 16 : i32},
                  %sn: i32 {tile.divisibility = 16 : i32}, %q: tensor<64x64xf16>)
    -> tensor<64x64xf32> attributes {tile.num_stages = 3 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %d = arith.constant 64 : i64
  %b64 = arith.extsi %b : i32 to i64
  %n64 = arith.extsi %n : i32 to i64
  %h64 = arith.extsi %h : i32 to i64
  %sb64 = arith.extsi %sb : i32 to i64
  %sn64 = arith.extsi %sn : i32 to i64
  %sh64 = arith.extsi %sh : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %p0 = tile.make_block_ptr %k, [%b64, %n64, %h64, %d], [%sb64, %sn64, %sh64, %one], [%c0, %c0, %c0, %c0] {order = array<i32: 3, 2, 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<1x64x1x64xf16>>
  %out = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %p = tile.advance %p0, [%c0, %i, %c0, %c0] : !tile.block_ptr<tensor<1x64x1x64xf16>>
    %block = tile.block_load %p {boundary_check = array<i32: 1>} : !tile.block_ptr<tensor<1x64x1x64xf16>> -> tensor<1x64x1x64xf16>
    %tile = tile.reshape %block : tensor<1x64x1x64xf16> -> tensor<64x64xf16>
    %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}

// -----

// A block load addressed through a block index read from a table the kernel never writes
// (block-sparse attention through the TMA) is copied by the TMA too: the index of an iteration
// ahead is read early, only where that iteration exists.
// CHECK-LABEL: func.func @tma_indexed_blocks
// CHECK: tile.init_barriers
// CHECK: tile.load %{{.*}}, %{{.*}}, %{{.*}} : !tile.ptr<i32>
// CHECK: tile.tma_load
// CHECK: scf.for
// CHECK: tile.wait_barrier
// CHECK: tile.load %{{.*}}, %{{.*}}, %{{.*}} : !tile.ptr<i32>
// CHECK: tile.tma_load
// CHECK-NOT: tile.block_load
// CHECK: scf.yield
func.func @tma_indexed_blocks(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %table: !tile.ptr<i32>,
                              %n: i32 {tile.divisibility = 16 : i32}, %count: i32, %q: tensor<64x64xf16>)
    -> tensor<64x64xf32> attributes {tile.num_stages = 2 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %p0 = tile.make_block_ptr %k, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %out = scf.for %j = %c0 to %count step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %at = tile.addptr %table, %j : !tile.ptr<i32>, i32
    %block = tile.load %at : !tile.ptr<i32>
    %row = arith.muli %block, %c64 : i32
    %p = tile.advance %p0, [%row, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %tile = tile.block_load %p {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}

// -----

// A block index the loop carries, read by each iteration for the next (a persistent kernel
// loading its next tile's number a tile ahead): the copy for the iteration ahead is addressed
// by the index that iteration will carry, the table read again, not by the one carried now.
// CHECK-LABEL: func.func @tma_carried_index
// CHECK: scf.for %[[J:[^ ]*]] =
// CHECK: %[[AHEAD:.*]] = arith.addi %[[J]], %c1_i32
// CHECK: tile.wait_barrier
// CHECK: %[[AT:.*]] = tile.addptr %{{.*}}, %[[AHEAD]]
// CHECK: %[[BLOCK:.*]] = tile.load %[[AT]], %{{.*}}, %{{.*}} : !tile.ptr<i32>
// CHECK: %[[ROW:.*]] = arith.muli %[[BLOCK]], %c64_i32
// CHECK: %[[P:.*]] = tile.advance %{{.*}}, [%[[ROW]], %c0_i32]
// CHECK: tile.tma_load %{{.*}}, %[[P]] into
// CHECK: scf.yield
func.func @tma_carried_index(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %table: !tile.ptr<i32>,
                             %n: i32 {tile.divisibility = 16 : i32}, %count: i32, %q: tensor<64x64xf16>)
    -> tensor<64x64xf32> attributes {tile.num_stages = 2 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %p0 = tile.make_block_ptr %k, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %any = arith.cmpi slt, %c0, %count : i32
  %first = tile.load %table, %any, %c0 : !tile.ptr<i32>
  %out:2 = scf.for %j = %c0 to %count step %c1 iter_args(%acc = %zero, %block = %first) -> (tensor<64x64xf32>, i32) : i32 {
    %j1 = arith.addi %j, %c1 : i32
    %at = tile.addptr %table, %j1 : !tile.ptr<i32>, i32
    %more = arith.cmpi slt, %j1, %count : i32
    %next = tile.load %at, %more, %c0 : !tile.ptr<i32>
    %row = arith.muli %block, %c64 : i32
    %p = tile.advance %p0, [%row, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %tile = tile.block_load %p {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s, %next : tensor<64x64xf32>, i32
  }
  return %out#0 : tensor<64x64xf32>
}

// -----

// Loops that load the same blocks fill one ring, its fills numbered across them: the masked
// loop's numbers continue the unmasked one's, and a loop around them (a GQA group's heads,
// or programs walking tiles) carries the count, so that the second loop's and the next outer
// iteration's first stages land where and when the ring expects them.
// CHECK-LABEL: func.func @ring_across_loops
// CHECK: %[[RING:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
// CHECK-NEXT: %[[BARS:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
// CHECK-NEXT: tile.init_barriers %[[BARS]] arrivals 1
// CHECK-NOT: tile.shared_alloc
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[FILLED:.*]] = %c0_i32) -> (i32)
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[RING]][%[[FILLED]]], %[[BARS]]
// CHECK: scf.for %[[I:[a-z0-9]+]] =
// CHECK: %[[IT:.*]] = arith.divsi %[[I]], %c64
// CHECK: %[[FILL:.*]] = arith.addi %[[FILLED]], %[[IT]]
// CHECK: %[[SLOT:.*]] = arith.remsi %[[FILL]], %c2
// CHECK: %[[AHEAD:.*]] = arith.addi %[[FILL]], %c1
// CHECK: tile.wait_barrier %[[BARS]][%[[SLOT]]]
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[RING]][%[[AHEAD]]]
// CHECK: tile.async_wait 0
// CHECK: %[[TRIPS:.*]] = arith.maxsi
// CHECK: %[[MIDDLE:.*]] = arith.addi %[[FILLED]], %[[TRIPS]]
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[RING]][%[[MIDDLE]]], %[[BARS]]
// CHECK: scf.for
// CHECK: arith.addi %[[MIDDLE]]
// CHECK: tile.wait_barrier %[[BARS]]
// CHECK: tile.async_wait 0
// CHECK: %[[REST:.*]] = arith.maxsi
// CHECK: %[[END:.*]] = arith.addi %[[MIDDLE]], %[[REST]]
// CHECK: tile.store
// CHECK: scf.yield %[[END]] : i32
func.func @ring_across_loops(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %n: i32 {tile.divisibility = 16 : i32},
                             %tiles: i32, %split: i32, %q: tensor<64x64xf16>, %out: !tile.ptr<f32>)
    attributes {tile.num_stages = 2 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %p0 = tile.make_block_ptr %k, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %pid = tile.program_id x
  %programs = tile.num_programs x
  scf.for %t = %pid to %tiles step %programs : i32 {
    %first = scf.for %i = %c0 to %split step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
      %row = arith.addi %i, %t : i32
      %p = tile.advance %p0, [%row, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      %tile = tile.block_load %p {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
      %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    %second = scf.for %i = %split to %n step %c64 iter_args(%acc = %first) -> (tensor<64x64xf32>) : i32 {
      %p = tile.advance %p0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      %tile = tile.block_load %p {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
      %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    %ptrs = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
    tile.store %ptrs, %second : tensor<64x64x!tile.ptr<f32>>
  }
  return
}

// -----

// A loop around loops that fill a TMA ring (programs walking tiles) stages its own operand
// loads (the next tile's queries) one iteration ahead only: two stages, whatever num_stages
// the ring has.
// CHECK-LABEL: func.func @tile_queries
// CHECK-DAG: %[[RING:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<64x64xf16>>
// CHECK-DAG: %[[Q:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
// CHECK: tile.async_copy {{.*}} into %[[Q]][%{{.*}}]
// CHECK: scf.for
// CHECK: tile.async_wait 0
// CHECK: %[[QT:.*]] = tile.shared_load %[[Q]]
// CHECK: tile.async_copy {{.*}} into %[[Q]]
// CHECK: scf.for
// CHECK: tile.dot %[[QT]]
func.func @tile_queries(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %n: i32 {tile.divisibility = 16 : i32},
                        %tiles: i32, %qs: tensor<64x64x!tile.ptr<f16>>, %out: !tile.ptr<f32>)
    attributes {tile.num_stages = 3 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %p0 = tile.make_block_ptr %k, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %pid = tile.program_id x
  %programs = tile.num_programs x
  scf.for %t = %pid to %tiles step %programs : i32 {
    %rows = arith.muli %t, %c64 : i32
    %offsets = tile.splat %rows : i32 -> tensor<64x64xi32>
    %qp = tile.addptr %qs, %offsets : tensor<64x64x!tile.ptr<f16>>, tensor<64x64xi32>
    %q = tile.load %qp : tensor<64x64x!tile.ptr<f16>>
    %acc = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
      %p = tile.advance %p0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      %tile = tile.block_load %p {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
      %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    %ptrs = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
    tile.store %ptrs, %acc : tensor<64x64x!tile.ptr<f32>>
  }
  return
}

// -----

// Its own block loads (the next tile's queries through a block pointer) go through a TMA ring
// of their own, two stages numbered by the iteration: the first tile's filled before the loop,
// each iteration waiting for its tile, reading it and filling the next one's. The tile is read
// once, whole, at the top of the iteration; with tile.invariant_operands_in_shared each dot in
// the inner loop reads the stage.
// CHECK-LABEL: func.func @tile_queries_through_tma
// CHECK-DAG: %[[Q:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
// CHECK-DAG: %[[QBAR:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
// CHECK: tile.tma_load %{{.*}} into %[[Q]][%{{.*}}], %[[QBAR]]
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[QBAR]]
// CHECK-NEXT: %[[QT:.*]] = tile.shared_load %[[Q]][%{{.*}}] {whole}
// CHECK: tile.tma_load %{{.*}} into %[[Q]][%{{.*}}], %[[QBAR]]
// CHECK: scf.for
// CHECK-NOT: tile.shared_load %[[Q]]
// CHECK: tile.dot %[[QT]]
// CHECK-LABEL: func.func @tile_queries_through_tma_in_shared
// CHECK: tile.wait_barrier %[[QBAR:[a-z0-9]+]]
// CHECK-NOT: tile.shared_load
// CHECK: tile.tma_load %{{.*}} into %[[Q:[a-z0-9]+]][%{{.*}}], %[[QBAR]]
// CHECK: scf.for
// CHECK: %[[QT:.*]] = tile.shared_load %[[Q]][%{{.*}}] :
// CHECK-NEXT: tile.dot %[[QT]]
func.func @tile_queries_through_tma(%q: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %k: !tile.ptr<f16> {tile.divisibility = 16 : i32},
                                    %n: i32 {tile.divisibility = 16 : i32}, %tiles: i32, %out: !tile.ptr<f32>)
    attributes {tile.num_stages = 3 : i32, tile.tma, tile.warp_specialize} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %d = arith.constant 64 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %pk0 = tile.make_block_ptr %k, [%n64, %d], [%d, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %pid = tile.program_id x
  %programs = tile.num_programs x
  scf.for %t = %pid to %tiles step %programs : i32 {
    %rows = arith.muli %t, %c64 : i32
    %pq = tile.make_block_ptr %q, [%n64, %d], [%d, %one], [%rows, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
    %qb = tile.block_load %pq {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %acc = scf.for %i = %c0 to %n step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
      %pk = tile.advance %pk0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      %kb = tile.block_load %pk {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
      %s = tile.dot %qb, %kb, %a : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    %ptrs = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
    tile.store %ptrs, %acc : tensor<64x64x!tile.ptr<f32>>
  }
  return
}
func.func @tile_queries_through_tma_in_shared(%q: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %k: !tile.ptr<f16> {tile.divisibility = 16 : i32},
                                              %n: i32 {tile.divisibility = 16 : i32}, %tiles: i32, %out: !tile.ptr<f32>)
    attributes {tile.num_stages = 3 : i32, tile.tma, tile.warp_specialize, tile.invariant_operands_in_shared} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %d = arith.constant 64 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %pk0 = tile.make_block_ptr %k, [%n64, %d], [%d, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %pid = tile.program_id x
  %programs = tile.num_programs x
  scf.for %t = %pid to %tiles step %programs : i32 {
    %rows = arith.muli %t, %c64 : i32
    %pq = tile.make_block_ptr %q, [%n64, %d], [%d, %one], [%rows, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
    %qb = tile.block_load %pq {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %acc = scf.for %i = %c0 to %n step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
      %pk = tile.advance %pk0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      %kb = tile.block_load %pk {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
      %s = tile.dot %qb, %kb, %a : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    %ptrs = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
    tile.store %ptrs, %acc : tensor<64x64x!tile.ptr<f32>>
  }
  return
}

// -----

// A loop in a branch (the DSL's if_) fills the ring too: the branch yields the count after it
// (the other branch the count before), and the loop after the branch continues from there.
// CHECK-LABEL: func.func @ring_in_branch
// CHECK: %[[RING:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
// CHECK: %[[BRANCH:.*]]:2 = scf.if %{{.*}} -> (tensor<64x64xf32>, i32) {
// CHECK-NEXT: scf.yield %{{.*}}, %c0_i32 : tensor<64x64xf32>, i32
// CHECK: } else {
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[RING]][%c0_i32]
// CHECK: scf.for
// CHECK: tile.wait_barrier
// CHECK: %[[TRIPS:.*]] = arith.maxsi
// CHECK: scf.yield %{{.*}}, %[[TRIPS]] : tensor<64x64xf32>, i32
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[RING]][%[[BRANCH]]#1]
// CHECK: scf.for
// CHECK: arith.addi %[[BRANCH]]#1
func.func @ring_in_branch(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %n: i32 {tile.divisibility = 16 : i32},
                          %skip: i1, %q: tensor<64x64xf16>) -> tensor<64x64xf32>
    attributes {tile.num_stages = 2 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %p0 = tile.make_block_ptr %k, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %first = scf.if %skip -> (tensor<64x64xf32>) {
    scf.yield %zero : tensor<64x64xf32>
  } else {
    %r = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
      %p = tile.advance %p0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      %tile = tile.block_load %p {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
      %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    scf.yield %r : tensor<64x64xf32>
  }
  %second = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %first) -> (tensor<64x64xf32>) : i32 {
    %p = tile.advance %p0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %tile = tile.block_load %p {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %q, %tile, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  return %second : tensor<64x64xf32>
}

// -----

// A row of 32-bit elements (the backward's LSE: a [1, 64] block of a [rows, n] tensor) joins
// the ring of the loop's tiles: an unswizzled map, one box; each use reads it from the stage
// where it is (after the dot here), in whatever layout it wants. A row of 64 bytes (its
// stages would not be 128-byte aligned) stays a block load.
// CHECK-LABEL: func.func @tma_rows
// CHECK-SAME: %[[MAPK:[a-z0-9]+]]: !tile.tensor_map {tile.tensor_map = {box = array<i64: 64, 64>
// CHECK-SAME: %[[MAPL:[a-z0-9]+]]: !tile.tensor_map {tile.tensor_map = {box = array<i64: 1, 64>, element_bytes = 4 : i64, pointer = 1 : i64, shape_args = array<i64: 3, 2>, shape_values = array<i64: 0, 0>, stride_args = array<i64: 2, -1>, stride_values = array<i64: 0, 1>, swizzle_bytes = 0 : i64}}
// CHECK: %[[RL:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<64xf32>>
// CHECK: tile.init_barriers %{{.*}} arrivals 2
// CHECK: scf.for
// CHECK: tile.wait_barrier
// CHECK: tile.tma_load %[[MAPK]]
// CHECK: tile.tma_load %[[MAPL]]
// CHECK: tile.block_load %{{.*}} : !tile.block_ptr<tensor<1x16xf32>>
// CHECK: tile.dot
// CHECK-NEXT: %[[ROW:.*]] = tile.shared_load %[[RL]][%{{.*}}] : !tile.shared<2 x tensor<64xf32>> -> tensor<64xf32>
// CHECK-NEXT: tile.expand_dims %[[ROW]]
func.func @tma_rows(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %lse: !tile.ptr<f32> {tile.divisibility = 16 : i32},
                    %n: i32 {tile.divisibility = 16 : i32}, %rows: i32, %q: tensor<64x64xf16>)
    -> (tensor<64x64xf32>, tensor<16xf32>) attributes {tile.num_stages = 2 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %d = arith.constant 64 : i64
  %n64 = arith.extsi %n : i32 to i64
  %rows64 = arith.extsi %rows : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %zeros = arith.constant dense<0.0> : tensor<16xf32>
  %pk0 = tile.make_block_ptr %k, [%n64, %d], [%d, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %pl0 = tile.make_block_ptr %lse, [%rows64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f32> -> !tile.block_ptr<tensor<1x64xf32>>
  %ps0 = tile.make_block_ptr %lse, [%rows64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f32> -> !tile.block_ptr<tensor<1x16xf32>>
  %out:2 = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %zero, %sum = %zeros) -> (tensor<64x64xf32>, tensor<16xf32>) : i32 {
    %pk = tile.advance %pk0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %pl = tile.advance %pl0, [%c0, %i] : !tile.block_ptr<tensor<1x64xf32>>
    %ps = tile.advance %ps0, [%c0, %i] : !tile.block_ptr<tensor<1x16xf32>>
    %kb = tile.block_load %pk {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %lb = tile.block_load %pl {boundary_check = array<i32: 1>} : !tile.block_ptr<tensor<1x64xf32>> -> tensor<1x64xf32>
    %sb = tile.block_load %ps {boundary_check = array<i32: 1>} : !tile.block_ptr<tensor<1x16xf32>> -> tensor<1x16xf32>
    %row = tile.reshape %lb : tensor<1x64xf32> -> tensor<64xf32>
    %s = tile.dot %q, %kb, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    %e = tile.expand_dims %row {axis = 0 : i32} : tensor<64xf32> -> tensor<1x64xf32>
    %b = tile.broadcast %e : tensor<1x64xf32> -> tensor<64x64xf32>
    %t = arith.subf %s, %b : tensor<64x64xf32>
    %small = tile.reshape %sb : tensor<1x16xf32> -> tensor<16xf32>
    %next = arith.addf %sum, %small : tensor<16xf32>
    scf.yield %t, %next : tensor<64x64xf32>, tensor<16xf32>
  }
  return %out#0, %out#1 : tensor<64x64xf32>, tensor<16xf32>
}

// -----

// In a warp-specialized kernel, a block load after the loops that only feeds a dot there (the
// forward's last deferred P @ V, in a branch taken where any block was visited) gets a stage
// and an mbarrier of its own: its TMA load goes before the branch, shares the loop's map, and
// is issued only where the branch runs (its address computed there, the branch's condition
// its `active`); the branch waits for the phase and reads the stage. A load whose address
// needs a division that could trap there (by a run-time value) stays a block load. The
// function is marked, so that compile() can lower it again without the stage where it would
// not fit.
// CHECK-LABEL: func.func @tma_after_loops
// CHECK-SAME: %[[MAPV:[a-z0-9]+]]: !tile.tensor_map {tile.tensor_map = {box = array<i64: 64, 64>
// CHECK-SAME: tile.staged_outside_loops
// CHECK-NOT: !tile.tensor_map
// CHECK: %[[STAGE:.*]] = tile.shared_alloc : !tile.shared<1 x tensor<64x64xf16>>
// CHECK-NEXT: %[[BAR:.*]] = tile.shared_alloc : !tile.shared<1 x tensor<1xi64>>
// CHECK-NEXT: tile.init_barriers %[[BAR]] arrivals 1
// CHECK: %[[RUNS:.*]] = arith.cmpi sgt, %[[END:[a-z0-9]+]], %c0
// CHECK: scf.for
// CHECK: tile.async_wait 0
// CHECK-NEXT: %[[LAST:.*]] = arith.subi %[[END]], %c64
// CHECK-NEXT: %[[AT:.*]] = tile.advance %{{.*}}, [%[[LAST]], %c0
// CHECK-NEXT: tile.tma_load %[[MAPV]], %[[AT]] into %[[STAGE]][%[[ZERO:.*]]], %[[BAR]] if %[[RUNS]]
// CHECK-NEXT: scf.if %[[RUNS]]
// CHECK-NEXT: tile.wait_barrier %[[BAR]][%[[ZERO]]], %[[ZERO]] :
// CHECK-NEXT: %[[V:.*]] = tile.shared_load %[[STAGE]][%[[ZERO]]] : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16>
// CHECK-NEXT: tile.dot %{{.*}}, %[[V]]
// CHECK-NEXT: arith.divsi
// CHECK-NEXT: tile.advance
// CHECK-NEXT: tile.block_load
func.func @tma_after_loops(%v: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %n: i32 {tile.divisibility = 16 : i32},
                           %end: i32, %blocks: i32, %p: tensor<64x64xf16>)
    -> (tensor<64x64xf32>, tensor<64x64xf32>) attributes {tile.num_stages = 2 : i32, tile.tma, tile.warp_specialize} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %d = arith.constant 64 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %pv0 = tile.make_block_ptr %v, [%n64, %d], [%d, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %acc = scf.for %i = %c0 to %end step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
    %pv = tile.advance %pv0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %vb = tile.block_load %pv {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %p, %vb, %a : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  %runs = arith.cmpi sgt, %end, %c0 : i32
  %out = scf.if %runs -> (tensor<64x64xf32>) {
    %last = arith.subi %end, %c64 : i32
    %pv = tile.advance %pv0, [%last, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %vb = tile.block_load %pv {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %p, %vb, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  } else {
    scf.yield %acc : tensor<64x64xf32>
  }
  %divided = scf.if %runs -> (tensor<64x64xf32>) {
    %block = arith.divsi %end, %blocks : i32
    %pv = tile.advance %pv0, [%block, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %vb = tile.block_load %pv {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %p, %vb, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  } else {
    scf.yield %acc : tensor<64x64xf32>
  }
  return %out, %divided : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// A block load before the loops whose tile feeds their dots (the forward's Q) also gets a stage
// and an mbarrier of its own, issued first: no thread copies it and no CTA barrier waits for
// it. Where the kernel keeps such operands in registers, the tile is read from the stage once,
// whole, before the loop; with tile.invariant_operands_in_shared each dot reads the stage.
// CHECK-LABEL: func.func @tma_before_loops
// CHECK-SAME: tile.staged_outside_loops
// CHECK: %[[STAGE:.*]] = tile.shared_alloc : !tile.shared<1 x tensor<64x64xf16>>
// CHECK-NEXT: %[[BAR:.*]] = tile.shared_alloc : !tile.shared<1 x tensor<1xi64>>
// CHECK: tile.tma_load %{{.*}} into %[[STAGE]][%[[ZERO:.*]]], %[[BAR]]
// CHECK-NEXT: tile.wait_barrier %[[BAR]][%[[ZERO]]], %[[ZERO]] :
// CHECK-NEXT: %[[Q:.*]] = tile.shared_load %[[STAGE]][%[[ZERO]]] {whole}
// CHECK: scf.for
// CHECK-NOT: tile.shared_load %[[STAGE]]
// CHECK: tile.dot %[[Q]], %{{.*}}
// CHECK-LABEL: func.func @tma_before_loops_in_shared
// CHECK: tile.tma_load %{{.*}} into %[[STAGE:[a-z0-9]+]][%[[ZERO:.*]]], %[[BAR:[a-z0-9]+]]
// CHECK-NEXT: tile.wait_barrier %[[BAR]][%[[ZERO]]], %[[ZERO]] :
// CHECK: scf.for
// CHECK: %[[Q:.*]] = tile.shared_load %[[STAGE]][%[[ZERO]]] :
// CHECK-NEXT: tile.dot %[[Q]], %{{.*}}
func.func @tma_before_loops(%q: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %k: !tile.ptr<f16> {tile.divisibility = 16 : i32},
                            %n: i32 {tile.divisibility = 16 : i32}, %row: i32, %end: i32)
    -> tensor<64x64xf32> attributes {tile.num_stages = 2 : i32, tile.tma, tile.warp_specialize} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %d = arith.constant 64 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %pq = tile.make_block_ptr %q, [%n64, %d], [%d, %one], [%row, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %qb = tile.block_load %pq {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
  %pk0 = tile.make_block_ptr %k, [%n64, %d], [%d, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %acc = scf.for %i = %c0 to %end step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
    %pk = tile.advance %pk0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %kb = tile.block_load %pk {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %qb, %kb, %a : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  return %acc : tensor<64x64xf32>
}
func.func @tma_before_loops_in_shared(%q: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %k: !tile.ptr<f16> {tile.divisibility = 16 : i32},
                                      %n: i32 {tile.divisibility = 16 : i32}, %row: i32, %end: i32)
    -> tensor<64x64xf32> attributes {tile.num_stages = 2 : i32, tile.tma, tile.warp_specialize, tile.invariant_operands_in_shared} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %d = arith.constant 64 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %pq = tile.make_block_ptr %q, [%n64, %d], [%d, %one], [%row, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %qb = tile.block_load %pq {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
  %pk0 = tile.make_block_ptr %k, [%n64, %d], [%d, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %acc = scf.for %i = %c0 to %end step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
    %pk = tile.advance %pk0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %kb = tile.block_load %pk {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %qb, %kb, %a : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  return %acc : tensor<64x64xf32>
}

// -----

// A loop that loads only some of the blocks another loop's ring holds (the forward's last
// deferred P @ V, V alone) fills that ring: its copy lands in V's buffer, numbered after the
// first loop's fills, and arrives for K's too, whose buffer that stage leaves as it is.
// CHECK-LABEL: func.func @ring_partly_filled
// CHECK: %[[KS:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
// CHECK-NEXT: %[[VS:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
// CHECK-NEXT: %[[BARS:.*]] = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
// CHECK-NEXT: tile.init_barriers %[[BARS]] arrivals 2
// CHECK-NOT: tile.shared_alloc
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[BARS]]
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[KS]][%{{.*}}], %[[BARS]] if %{{[0-9a-z_]+}} : !tile.block_ptr
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[VS]][%{{.*}}], %[[BARS]] if %{{[0-9a-z_]+}} : !tile.block_ptr
// CHECK: %[[TRIPS:.*]] = arith.maxsi
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[VS]][%[[TRIPS]]], %[[BARS]] if %{{.*}} {arrivals = 2 : i32}
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[BARS]]
// CHECK: tile.shared_load %[[VS]]
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %[[VS]][%{{.*}}], %[[BARS]] if %{{.*}} {arrivals = 2 : i32}
func.func @ring_partly_filled(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %v: !tile.ptr<f16> {tile.divisibility = 16 : i32},
                              %n: i32 {tile.divisibility = 16 : i32}, %last: i32, %q: tensor<64x64xf16>) -> tensor<64x64xf32>
    attributes {tile.num_stages = 2 : i32, tile.tma} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %k0 = tile.make_block_ptr %k, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %v0 = tile.make_block_ptr %v, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %both = scf.for %i = %c0 to %last step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %kp = tile.advance %k0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %vp = tile.advance %v0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %kt = tile.block_load %kp {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %vt = tile.block_load %vp {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %s = tile.dot %q, %kt, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    %o = tile.dot %q, %vt, %s : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %o : tensor<64x64xf32>
  }
  %end = arith.addi %last, %c64 : i32
  %tail = scf.for %i = %last to %end step %c64 iter_args(%acc = %both) -> (tensor<64x64xf32>) : i32 {
    %vp = tile.advance %v0, [%i, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    %vt = tile.block_load %vp {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x64xf16>> -> tensor<64x64xf16>
    %o = tile.dot %q, %vt, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %o : tensor<64x64xf32>
  }
  return %tail : tensor<64x64xf32>
}
