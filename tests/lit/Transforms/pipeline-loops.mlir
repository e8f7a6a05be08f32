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
// CHECK: tile.async_wait 0
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
