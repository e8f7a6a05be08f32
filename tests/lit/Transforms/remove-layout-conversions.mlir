// RUN: tessera-opt %s -split-input-file -tile-remove-layout-conversions -canonicalize | FileCheck %s

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
#big = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#col = #tile.slice<dim = 1, parent = #big>

// Index math (ranges, splats, constants, elementwise ops, expand_dims, broadcasts) is rebuilt
// in the layout a conversion asks for instead of moving through shared memory.
// CHECK-LABEL: func.func @rebuild_index_math
// CHECK-NOT: tile.convert_layout
// CHECK: tile.make_range 0 to 128 : tensor<128xi32, #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4]
// CHECK: arith.muli {{.*}} : tensor<128xi32, #tile.slice
func.func @rebuild_index_math(%p: !tile.ptr<i32>, %n: i32) {
  %r = tile.make_range 0 to 128 : tensor<128xi32, #row>
  %s = tile.splat %n : i32 -> tensor<128xi32, #row>
  %m = arith.muli %r, %s : tensor<128xi32, #row>
  %c = tile.convert_layout %m : tensor<128xi32, #row> -> tensor<128xi32, #col>
  %e = tile.expand_dims %c {axis = 1 : i32} : tensor<128xi32, #col> -> tensor<128x1xi32, #big>
  %b = tile.broadcast %e : tensor<128x1xi32, #big> -> tensor<128x64xi32, #big>
  %ps = tile.splat %p : !tile.ptr<i32> -> tensor<128x64x!tile.ptr<i32>, #big>
  tile.store %ps, %b : tensor<128x64x!tile.ptr<i32>, #big>
  return
}

// -----

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
#big = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#col = #tile.slice<dim = 1, parent = #big>

// Loaded data is not rebuilt: its conversion stays; conversions that cancel fold away.
// CHECK-LABEL: func.func @keep_loaded_data
// CHECK: %[[L:.*]] = tile.load
// CHECK-NEXT: %[[C:.*]] = tile.convert_layout %[[L]] : tensor<128xf32, #{{.*}}> -> tensor<128xf32, #tile.slice
// CHECK-NOT: tile.convert_layout
// CHECK: tile.expand_dims %[[C]]
func.func @keep_loaded_data(%p: !tile.ptr<f32>) {
  %ps = tile.splat %p : !tile.ptr<f32> -> tensor<128x!tile.ptr<f32>, #row>
  %v = tile.load %ps : tensor<128x!tile.ptr<f32>, #row>
  %c = tile.convert_layout %v : tensor<128xf32, #row> -> tensor<128xf32, #col>
  %back = tile.convert_layout %c : tensor<128xf32, #col> -> tensor<128xf32, #row>
  %again = tile.convert_layout %back : tensor<128xf32, #row> -> tensor<128xf32, #col>
  %e = tile.expand_dims %again {axis = 1 : i32} : tensor<128xf32, #col> -> tensor<128x1xf32, #big>
  %q = tile.splat %p : !tile.ptr<f32> -> tensor<128x1x!tile.ptr<f32>, #big>
  tile.store %q, %e : tensor<128x1x!tile.ptr<f32>, #big>
  return
}

// -----

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
#big = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#col = #tile.slice<dim = 1, parent = #big>

// A row read from a stage (the backward's LSE, scaled) is read in the layout it is converted
// to, through the math on it: no conversion is left.
// CHECK-LABEL: func.func @read_stage_in_target_layout
// CHECK-NOT: tile.convert_layout
// CHECK: %[[R:.*]] = tile.shared_load %{{.*}} -> tensor<128xf32, #tile.slice<dim = 1
// CHECK-NEXT: arith.mulf %[[R]], %{{.*}} : tensor<128xf32, #tile.slice<dim = 1
// CHECK-NOT: tile.convert_layout
func.func @read_stage_in_target_layout(%p: !tile.ptr<f32>, %slot: i32) {
  %ring = tile.shared_alloc : !tile.shared<2 x tensor<128xf32>>
  %v = tile.shared_load %ring[%slot] : !tile.shared<2 x tensor<128xf32>> -> tensor<128xf32, #row>
  %log2e = arith.constant dense<1.442695> : tensor<128xf32, #row>
  %m = arith.mulf %v, %log2e : tensor<128xf32, #row>
  %c = tile.convert_layout %m : tensor<128xf32, #row> -> tensor<128xf32, #col>
  %e = tile.expand_dims %c {axis = 1 : i32} : tensor<128xf32, #col> -> tensor<128x1xf32, #big>
  %b = tile.broadcast %e : tensor<128x1xf32, #big> -> tensor<128x64xf32, #big>
  %ps = tile.splat %p : !tile.ptr<f32> -> tensor<128x64x!tile.ptr<f32>, #big>
  tile.store %ps, %b : tensor<128x64x!tile.ptr<f32>, #big>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [2, 2]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// A conversion moves through elementwise ops toward the store, and the store then happens in
// the value's layout, its pointers and mask rebuilt there: the accumulator never goes through
// shared memory.
// CHECK-LABEL: func.func @store_accumulator
// CHECK-NOT: tile.convert_layout
// CHECK: arith.truncf {{.*}} : tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2]>> to tensor<64x64xbf16, #tile.mma<warpsPerCTA = [2, 2]>>
// CHECK: tile.store {{.*}} : tensor<64x64x!tile.ptr<bf16>, #tile.mma<warpsPerCTA = [2, 2]>>
func.func @store_accumulator(%acc: tensor<64x64xf32, #mma>, %c: !tile.ptr<bf16>, %n: i32) {
  %cvt = tile.convert_layout %acc : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #b>
  %h = arith.truncf %cvt : tensor<64x64xf32, #b> to tensor<64x64xbf16, #b>
  %r = tile.make_range 0 to 64 : tensor<64xi32, #tile.slice<dim = 1, parent = #b>>
  %rows = tile.expand_dims %r {axis = 1 : i32} : tensor<64xi32, #tile.slice<dim = 1, parent = #b>> -> tensor<64x1xi32, #b>
  %ns = tile.splat %n : i32 -> tensor<64x1xi32, #b>
  %off = arith.muli %rows, %ns : tensor<64x1xi32, #b>
  %offs = tile.broadcast %off : tensor<64x1xi32, #b> -> tensor<64x64xi32, #b>
  %cs = tile.splat %c : !tile.ptr<bf16> -> tensor<64x64x!tile.ptr<bf16>, #b>
  %p = tile.addptr %cs, %offs : tensor<64x64x!tile.ptr<bf16>, #b>, tensor<64x64xi32, #b>
  %m1 = arith.cmpi slt, %rows, %ns : tensor<64x1xi32, #b>
  %m = tile.broadcast %m1 : tensor<64x1xi1, #b> -> tensor<64x64xi1, #b>
  tile.store %p, %h, %m : tensor<64x64x!tile.ptr<bf16>, #b>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [2, 2]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// Where the kernel stages its stores (tile.staged_stores) the conversion stays (moved past
// the truncation, which halves what goes through shared memory) and the store keeps its
// coalesced layout.
// CHECK-LABEL: func.func @staged_store
// CHECK: arith.truncf {{.*}} : tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2]>> to tensor<64x64xbf16, #tile.mma<warpsPerCTA = [2, 2]>>
// CHECK: tile.convert_layout {{.*}} : tensor<64x64xbf16, #tile.mma<warpsPerCTA = [2, 2]>> -> tensor<64x64xbf16, #tile.blocked
// CHECK: tile.store {{.*}} : tensor<64x64x!tile.ptr<bf16>, #tile.blocked
func.func @staged_store(%acc: tensor<64x64xf32, #mma>, %c: !tile.ptr<bf16>, %n: i32) attributes {tile.staged_stores} {
  %cvt = tile.convert_layout %acc : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #b>
  %h = arith.truncf %cvt : tensor<64x64xf32, #b> to tensor<64x64xbf16, #b>
  %r = tile.make_range 0 to 64 : tensor<64xi32, #tile.slice<dim = 1, parent = #b>>
  %rows = tile.expand_dims %r {axis = 1 : i32} : tensor<64xi32, #tile.slice<dim = 1, parent = #b>> -> tensor<64x1xi32, #b>
  %ns = tile.splat %n : i32 -> tensor<64x1xi32, #b>
  %off = arith.muli %rows, %ns : tensor<64x1xi32, #b>
  %offs = tile.broadcast %off : tensor<64x1xi32, #b> -> tensor<64x64xi32, #b>
  %cs = tile.splat %c : !tile.ptr<bf16> -> tensor<64x64x!tile.ptr<bf16>, #b>
  %p = tile.addptr %cs, %offs : tensor<64x64x!tile.ptr<bf16>, #b>, tensor<64x64xi32, #b>
  %m1 = arith.cmpi slt, %rows, %ns : tensor<64x1xi32, #b>
  %m = tile.broadcast %m1 : tensor<64x1xi1, #b> -> tensor<64x64xi1, #b>
  tile.store %p, %h, %m : tensor<64x64x!tile.ptr<bf16>, #b>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [2, 2]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// A loop-carried accumulator that the body converts to the mma layout and yields from it is
// carried in the mma layout; its zero initial value is rebuilt there.
// CHECK-LABEL: func.func @carry_accumulator
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2]>>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2]>>)
// CHECK-NOT: tile.convert_layout
// CHECK: scf.yield
func.func @carry_accumulator(%a: tensor<64x32xbf16, #tile.dot_op<opIdx = 0, parent = #mma>>,
                             %b: tensor<32x64xbf16, #tile.dot_op<opIdx = 1, parent = #mma>>, %n: i32)
    -> tensor<64x64xf32, #b> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32, #b>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32, #b>) : i32 {
    %in = tile.convert_layout %acc : tensor<64x64xf32, #b> -> tensor<64x64xf32, #mma>
    %d = tile.dot %a, %b, %in : tensor<64x32xbf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<32x64xbf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<64x64xf32, #mma>
    %back = tile.convert_layout %d : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #b>
    scf.yield %back : tensor<64x64xf32, #b>
  }
  return %out : tensor<64x64xf32, #b>
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#v = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// A loaded row (the LSEs of a backward pass) broadcast over a [keys, queries] accumulator:
// the conversion moves before expand_dims and broadcast, 64 values instead of 64x64.
// CHECK-LABEL: func.func @convert_before_broadcast
// CHECK: %[[V:.*]] = tile.load
// CHECK-NEXT: %[[C:.*]] = tile.convert_layout %[[V]] : tensor<64xf32, #{{.*}}> -> tensor<64xf32, #tile.slice<dim = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
// CHECK-NOT: tile.convert_layout
// CHECK: tile.expand_dims %[[C]] {axis = 0 : i32} : {{.*}} -> tensor<1x64xf32, #tile.mma<warpsPerCTA = [4, 1]>>
// CHECK: tile.broadcast {{.*}} -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [4, 1]>>
// CHECK: arith.subf {{.*}} : tensor<64x64xf32, #tile.mma<warpsPerCTA = [4, 1]>>
func.func @convert_before_broadcast(%s: tensor<64x64xf32, #mma>, %p: !tile.ptr<f32>) -> tensor<64x64xf32, #mma> {
  %ps = tile.splat %p : !tile.ptr<f32> -> tensor<64x!tile.ptr<f32>, #v>
  %lse = tile.load %ps : tensor<64x!tile.ptr<f32>, #v>
  %c = tile.convert_layout %lse : tensor<64xf32, #v> -> tensor<64xf32, #tile.slice<dim = 0, parent = #b>>
  %e = tile.expand_dims %c {axis = 0 : i32} : tensor<64xf32, #tile.slice<dim = 0, parent = #b>> -> tensor<1x64xf32, #b>
  %w = tile.broadcast %e : tensor<1x64xf32, #b> -> tensor<64x64xf32, #b>
  %m = tile.convert_layout %w : tensor<64x64xf32, #b> -> tensor<64x64xf32, #mma>
  %d = arith.subf %s, %m : tensor<64x64xf32, #mma>
  return %d : tensor<64x64xf32, #mma>
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#wide = #tile.mma<warpsPerCTA = [1, 4]>
#cols = #tile.blocked<sizePerThread = [8, 1], threadsPerWarp = [8, 4], warpsPerCTA = [1, 4], order = [0, 1]>
#rows = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// The transpose of an f16 accumulator (dS^T) as a dot's A operand: one trans from the
// accumulator straight into the fragments (stored once, read back by ldmatrix.trans), not two
// conversions around a register transpose.
// CHECK-LABEL: func.func @transpose_into_dot_operand
// CHECK-NOT: tile.convert_layout
// CHECK: tile.trans %{{.*}} {order = array<i32: 1, 0>} : tensor<64x32xf16, #tile.mma<warpsPerCTA = [4, 1]>> -> tensor<32x64xf16, #tile.dot_op<opIdx = 0, parent = #tile.mma<warpsPerCTA = [1, 4]>>>
// CHECK-NOT: tile.convert_layout
func.func @transpose_into_dot_operand(%ds: tensor<64x32xf16, #mma>) -> tensor<32x64xf16, #tile.dot_op<opIdx = 0, parent = #wide>> {
  %c = tile.convert_layout %ds : tensor<64x32xf16, #mma> -> tensor<64x32xf16, #cols>
  %t = tile.trans %c {order = array<i32: 1, 0>} : tensor<64x32xf16, #cols> -> tensor<32x64xf16, #rows>
  %a = tile.convert_layout %t : tensor<32x64xf16, #rows> -> tensor<32x64xf16, #tile.dot_op<opIdx = 0, parent = #wide>>
  return %a : tensor<32x64xf16, #tile.dot_op<opIdx = 0, parent = #wide>>
}
