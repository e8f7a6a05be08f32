// RUN: tessera-opt %s -split-input-file -tile-assign-layouts | FileCheck %s

// Loads, ranges and elementwise ops take the default blocked layout of their shape: 16-byte
// vectors along the last dimension, lanes then warps.
// CHECK-LABEL: func.func @elementwise
// CHECK: tile.make_range 0 to 1024 : tensor<1024xi32, #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
// CHECK: tile.load {{.*}} : tensor<1024x!tile.ptr<f32>, #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
// CHECK: arith.addf {{.*}} : tensor<1024xf32, #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
func.func @elementwise(%x: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i32} {
  %r = tile.make_range 0 to 1024 : tensor<1024xi32>
  %s = tile.splat %x : !tile.ptr<f32> -> tensor<1024x!tile.ptr<f32>>
  %p = tile.addptr %s, %r : tensor<1024x!tile.ptr<f32>>, tensor<1024xi32>
  %v = tile.load %p : tensor<1024x!tile.ptr<f32>>
  %w = arith.addf %v, %v : tensor<1024xf32>
  tile.store %p, %w : tensor<1024x!tile.ptr<f32>>
  return
}

// -----

// A reduction gives the slice of its source's layout; expand_dims of that slice gives the
// parent back, and broadcasting it is a register move in the same layout: no conversion.
// CHECK-LABEL: func.func @row_reduction
// CHECK: tile.reduce max {{.*}} -> tensor<128xf32, #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>>>
// CHECK: tile.expand_dims {{.*}} -> tensor<128x1xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>>
// CHECK: tile.broadcast {{.*}} -> tensor<128x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>>
// CHECK-NOT: tile.convert_layout
func.func @row_reduction(%x: !tile.ptr<f32>) attributes {tile.num_warps = 4 : i32} {
  %ps = tile.splat %x : !tile.ptr<f32> -> tensor<128x64x!tile.ptr<f32>>
  %y = tile.load %ps : tensor<128x64x!tile.ptr<f32>>
  %m = tile.reduce max %y {axis = 1 : i32} : tensor<128x64xf32> -> tensor<128xf32>
  %e = tile.expand_dims %m {axis = 1 : i32} : tensor<128xf32> -> tensor<128x1xf32>
  %b = tile.broadcast %e : tensor<128x1xf32> -> tensor<128x64xf32>
  %z = arith.subf %y, %b : tensor<128x64xf32>
  tile.store %ps, %z : tensor<128x64x!tile.ptr<f32>>
  return
}

// -----

// An operand in another layout than its op needs is converted; loop-carried tiles keep their
// initial layout and the yielded value is converted to it.
// CHECK-LABEL: func.func @conversions
// CHECK: %[[R:.*]] = tile.reduce sum
// CHECK: tile.convert_layout %[[R]] : tensor<64xf32, #tile.slice<{{.*}}>> -> tensor<64xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
// CHECK: scf.for {{.*}} -> (tensor<64xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>)
// CHECK: tile.convert_layout {{.*}} -> tensor<64xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
// CHECK-NEXT: scf.yield
func.func @conversions(%x: !tile.ptr<f32>, %n: i32) attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<64xf32>
  %ps = tile.splat %x : !tile.ptr<f32> -> tensor<64x32x!tile.ptr<f32>>
  %v = tile.load %ps : tensor<64x32x!tile.ptr<f32>>
  %r = tile.reduce sum %v {axis = 1 : i32} : tensor<64x32xf32> -> tensor<64xf32>
  %s = arith.addf %zero, %r : tensor<64xf32>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %s) -> (tensor<64xf32>) : i32 {
    %t = tile.reduce max %v {axis = 1 : i32} : tensor<64x32xf32> -> tensor<64xf32>
    scf.yield %t : tensor<64xf32>
  }
  %p1 = tile.splat %x : !tile.ptr<f32> -> tensor<64x!tile.ptr<f32>>
  tile.store %p1, %out : tensor<64x!tile.ptr<f32>>
  return
}

// -----

// A dot of bf16 into f32 goes on tensor cores: the accumulator in the mma layout (4 warps as
// 2 x 2 for a square tile), the operands converted to its fragments.
// CHECK-LABEL: func.func @tensor_core_dot
// CHECK: tile.convert_layout {{.*}} -> tensor<64x32xbf16, #tile.dot_op<opIdx = 0, parent = #tile.mma<warpsPerCTA = [2, 2]>>>
// CHECK: tile.convert_layout {{.*}} -> tensor<32x64xbf16, #tile.dot_op<opIdx = 1, parent = #tile.mma<warpsPerCTA = [2, 2]>>>
// CHECK: tile.dot {{.*}} -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2]>>
func.func @tensor_core_dot(%a: !tile.ptr<bf16>, %c: !tile.ptr<f32>) attributes {tile.num_warps = 4 : i32} {
  %as = tile.splat %a : !tile.ptr<bf16> -> tensor<64x32x!tile.ptr<bf16>>
  %x = tile.load %as : tensor<64x32x!tile.ptr<bf16>>
  %bs = tile.splat %a : !tile.ptr<bf16> -> tensor<32x64x!tile.ptr<bf16>>
  %y = tile.load %bs : tensor<32x64x!tile.ptr<bf16>>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = tile.dot %x, %y, %zero : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
  %cs = tile.splat %c : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
  tile.store %cs, %d : tensor<64x64x!tile.ptr<f32>>
  return
}

// -----

// Where Hopper's warpgroup MMA may run (tile.warpgroup_mma), the same dot gives every warp 16
// rows (one warpgroup of 64), the layout of wgmma's accumulators.
// CHECK-LABEL: func.func @warpgroup_dot
// CHECK: tile.dot {{.*}} -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [4, 1]>>
func.func @warpgroup_dot(%a: !tile.ptr<bf16>, %c: !tile.ptr<f32>) attributes {tile.num_warps = 4 : i32, tile.warpgroup_mma} {
  %as = tile.splat %a : !tile.ptr<bf16> -> tensor<64x32x!tile.ptr<bf16>>
  %x = tile.load %as : tensor<64x32x!tile.ptr<bf16>>
  %bs = tile.splat %a : !tile.ptr<bf16> -> tensor<32x64x!tile.ptr<bf16>>
  %y = tile.load %bs : tensor<32x64x!tile.ptr<bf16>>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = tile.dot %x, %y, %zero : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
  %cs = tile.splat %c : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
  tile.store %cs, %d : tensor<64x64x!tile.ptr<f32>>
  return
}

// -----

// With 8 warps and 64 rows, two warpgroups of 64 rows split the 128 columns (wgmma's m64 on
// a 64-column slice each), instead of mma.sync's squarest split.
// CHECK-LABEL: func.func @warpgroups_split_columns
// CHECK: tile.dot {{.*}} -> tensor<64x128xf32, #tile.mma<warpsPerCTA = [4, 2]>>
func.func @warpgroups_split_columns(%a: !tile.ptr<bf16>, %c: !tile.ptr<f32>) attributes {tile.num_warps = 8 : i32, tile.warpgroup_mma} {
  %as = tile.splat %a : !tile.ptr<bf16> -> tensor<64x32x!tile.ptr<bf16>>
  %x = tile.load %as : tensor<64x32x!tile.ptr<bf16>>
  %bs = tile.splat %a : !tile.ptr<bf16> -> tensor<32x128x!tile.ptr<bf16>>
  %y = tile.load %bs : tensor<32x128x!tile.ptr<bf16>>
  %zero = arith.constant dense<0.0> : tensor<64x128xf32>
  %d = tile.dot %x, %y, %zero : tensor<64x32xbf16> * tensor<32x128xbf16> -> tensor<64x128xf32>
  %cs = tile.splat %c : !tile.ptr<f32> -> tensor<64x128x!tile.ptr<f32>>
  tile.store %cs, %d : tensor<64x128x!tile.ptr<f32>>
  return
}

// -----

// A dot's accumulator added into memory with atomics (attention's dQ shares): the atomic takes
// the accumulator's mma layout, costlier to leave than the pointers' (index math, rebuilt in
// any layout), so the values stay where the dot put them.
// CHECK-LABEL: func.func @atomic_add_of_a_dot
// CHECK: %[[D:.*]] = tile.dot {{.*}} -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [4, 1]>>
// CHECK-NOT: tile.convert_layout %[[D]]
// CHECK: tile.atomic_rmw add, relaxed, gpu, %{{.*}}, %[[D]] : tensor<64x64x!tile.ptr<f32>, #tile.mma<warpsPerCTA = [4, 1]>>
func.func @atomic_add_of_a_dot(%a: !tile.ptr<bf16>, %c: !tile.ptr<f32>) attributes {tile.num_warps = 4 : i32, tile.warpgroup_mma} {
  %as = tile.splat %a : !tile.ptr<bf16> -> tensor<64x32x!tile.ptr<bf16>>
  %x = tile.load %as : tensor<64x32x!tile.ptr<bf16>>
  %bs = tile.splat %a : !tile.ptr<bf16> -> tensor<32x64x!tile.ptr<bf16>>
  %y = tile.load %bs : tensor<32x64x!tile.ptr<bf16>>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = tile.dot %x, %y, %zero : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
  %cs = tile.splat %c : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
  %old = tile.atomic_rmw add, relaxed, gpu, %cs, %d : tensor<64x64x!tile.ptr<f32>>
  return
}

// -----

// An attention-like chain: the first dot's accumulator feeds the second dot, so every warp
// owns whole rows ([4, 1]); the row max stays in the slice of the mma layout; the running
// accumulator and max are carried through the loop in the layouts the body yields them in
// (mma and its slice), so the only conversion left in the loop is P to the second dot's
// A fragment, which moves no data.
// CHECK-LABEL: func.func @chained_dots
// CHECK: scf.for {{.*}} -> (tensor<64x64xf32, #tile.mma<warpsPerCTA = [4, 1]>>, tensor<64xf32, #tile.slice<dim = 1, parent = #tile.mma<warpsPerCTA = [4, 1]>>>)
// CHECK: %[[S:.*]] = tile.dot {{.*}} -> tensor<64x32xf32, #tile.mma<warpsPerCTA = [4, 1]>>
// CHECK: tile.reduce max %[[S]] {{.*}} -> tensor<64xf32, #tile.slice<dim = 1, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
// CHECK: tile.broadcast {{.*}} : tensor<64x1xf32, #tile.mma<warpsPerCTA = [4, 1]>> -> tensor<64x32xf32, #tile.mma<warpsPerCTA = [4, 1]>>
// CHECK: tile.convert_layout {{.*}} : tensor<64x32xf16, #tile.mma<warpsPerCTA = [4, 1]>> -> tensor<64x32xf16, #tile.dot_op<opIdx = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
// CHECK: tile.dot {{.*}} -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [4, 1]>>
// CHECK-NOT: tile.convert_layout
// CHECK: scf.yield
func.func @chained_dots(%q: tensor<64x64xf16>, %k: tensor<64x32xf16>, %v: tensor<32x64xf16>, %n: i32, %o: !tile.ptr<f32>)
    attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x32xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64xf32>
  %out:2 = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %zero, %m = %ninf) -> (tensor<64x64xf32>, tensor<64xf32>) : i32 {
    %s = tile.dot %q, %k, %zero_s : tensor<64x64xf16> * tensor<64x32xf16> -> tensor<64x32xf32>
    %rowmax = tile.reduce max %s {axis = 1 : i32} : tensor<64x32xf32> -> tensor<64xf32>
    %m2 = arith.maximumf %m, %rowmax : tensor<64xf32>
    %e = tile.expand_dims %m2 {axis = 1 : i32} : tensor<64xf32> -> tensor<64x1xf32>
    %eb = tile.broadcast %e : tensor<64x1xf32> -> tensor<64x32xf32>
    %d = arith.subf %s, %eb : tensor<64x32xf32>
    %p = math.exp2 %d : tensor<64x32xf32>
    %p16 = arith.truncf %p : tensor<64x32xf32> to tensor<64x32xf16>
    %acc2 = tile.dot %p16, %v, %acc : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    scf.yield %acc2, %m2 : tensor<64x64xf32>, tensor<64xf32>
  }
  %os = tile.splat %o : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
  tile.store %os, %out#0 : tensor<64x64x!tile.ptr<f32>>
  return
}
