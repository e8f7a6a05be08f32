// RUN: tessera-opt %s -split-input-file -tile-defer-lane-sums | FileCheck %s

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#row = #tile.slice<dim = 1, parent = #mma>

// The forward's two key loops (unmasked blocks, then masked ones) carry the softmax's
// denominator, s = s * alpha + sum(p): both sums stay in each thread (the 4 lanes of an mma row,
// lane bits 0 and 1, hold partial sums), the second loop starts from the first's partial sums,
// and the lanes add up once, after it, for what reads the sum there.
// CHECK-LABEL: func.func @two_loops
// CHECK: %[[FIRST:.*]]:2 = scf.for
// CHECK: tile.reduce sum %{{.*}} {axis = 1 : i32, within_threads}
// CHECK: %[[SECOND:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %[[FIRST]]#0, %{{.*}} = %[[FIRST]]#1)
// CHECK: tile.reduce sum %{{.*}} {axis = 1 : i32, within_threads}
// CHECK: %[[TOTAL:.*]] = tile.combine_lanes %[[SECOND]]#1 {lanes = 3 : i32}
// CHECK-NOT: tile.combine_lanes
// CHECK: arith.divf %{{.*}}, %[[TOTAL]]
func.func @two_loops(%s0: tensor<64x64xf32, #mma>, %n: i32) -> tensor<64xf32, #row> attributes {tile.kernel, tile.defer_lane_sums} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zeros = arith.constant dense<0.0> : tensor<64xf32, #row>
  %one = arith.constant dense<1.0> : tensor<64xf32, #row>
  %first:2 = scf.for %i = %c0 to %n step %c1 iter_args(%m = %zeros, %s = %zeros) -> (tensor<64xf32, #row>, tensor<64xf32, #row>) : i32 {
    %p = math.exp2 %s0 : tensor<64x64xf32, #mma>
    %mx = tile.reduce max %p {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %alpha = math.exp2 %mx : tensor<64xf32, #row>
    %sum = tile.reduce sum %p {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %scaled = arith.mulf %s, %alpha : tensor<64xf32, #row>
    %next = arith.addf %scaled, %sum : tensor<64xf32, #row>
    scf.yield %mx, %next : tensor<64xf32, #row>, tensor<64xf32, #row>
  }
  %second:2 = scf.for %i = %c0 to %n step %c1 iter_args(%m = %first#0, %s = %first#1) -> (tensor<64xf32, #row>, tensor<64xf32, #row>) : i32 {
    %p = math.exp2 %s0 : tensor<64x64xf32, #mma>
    %sum = tile.reduce sum %p {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %scaled = arith.mulf %m, %s : tensor<64xf32, #row>
    %next = arith.addf %sum, %scaled : tensor<64xf32, #row>
    scf.yield %m, %next : tensor<64xf32, #row>, tensor<64xf32, #row>
  }
  %r = arith.divf %one, %second#1 : tensor<64xf32, #row>
  return %r : tensor<64xf32, #row>
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#row = #tile.slice<dim = 1, parent = #mma>

// A plain running sum, s = s + sum(x); its result read both after the loop and as the start of
// a loop that is not a carried sum (it reads s otherwise): the lanes add up after the first loop
// for both, and the second loop's sum keeps its shuffles.
// CHECK-LABEL: func.func @plain_sum
// CHECK: %[[FIRST:.*]] = scf.for
// CHECK: tile.reduce sum %{{.*}} {axis = 1 : i32, within_threads}
// CHECK: %[[TOTAL:.*]] = tile.combine_lanes %[[FIRST]] {lanes = 3 : i32}
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[TOTAL]])
// CHECK: tile.reduce sum %{{.*}} {axis = 1 : i32} :
// CHECK: return %[[TOTAL]]
func.func @plain_sum(%x: tensor<64x64xf32, #mma>, %n: i32, %out: tensor<64x!tile.ptr<f32>, #row>) -> tensor<64xf32, #row> attributes {tile.kernel, tile.defer_lane_sums} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zeros = arith.constant dense<0.0> : tensor<64xf32, #row>
  %first = scf.for %i = %c0 to %n step %c1 iter_args(%s = %zeros) -> (tensor<64xf32, #row>) : i32 {
    %sum = tile.reduce sum %x {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %next = arith.addf %s, %sum : tensor<64xf32, #row>
    scf.yield %next : tensor<64xf32, #row>
  }
  %second = scf.for %i = %c0 to %n step %c1 iter_args(%s = %first) -> (tensor<64xf32, #row>) : i32 {
    tile.store %out, %s : tensor<64x!tile.ptr<f32>, #row>
    %sum = tile.reduce sum %x {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %next = arith.addf %s, %sum : tensor<64xf32, #row>
    scf.yield %next : tensor<64xf32, #row>
  }
  return %first : tensor<64xf32, #row>
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#row = #tile.slice<dim = 1, parent = #mma>
#across = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [32, 1], warpsPerCTA = [1, 4], order = [1, 0]>

// Left alone: a sum that starts from anything but zeros or another's partial sums, one rescaled
// by its own running value (read twice, and not alike in the lanes), one whose warps lie along
// the axis (partials would meet in shared memory), and every sum of a kernel without
// tile.defer_lane_sums.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: within_threads
// CHECK-NOT: tile.combine_lanes
// CHECK: return
func.func @left_alone(%x: tensor<64x64xf32, #mma>, %y: tensor<64x64xf32, #across>, %start: tensor<64xf32, #row>, %n: i32, %out: tensor<64x!tile.ptr<f32>, #row>) attributes {tile.kernel, tile.defer_lane_sums} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zeros = arith.constant dense<0.0> : tensor<64xf32, #row>
  %zeros_y = arith.constant dense<0.0> : tensor<64xf32, #tile.slice<dim = 1, parent = #across>>
  %a = scf.for %i = %c0 to %n step %c1 iter_args(%s = %start) -> (tensor<64xf32, #row>) : i32 {
    %sum = tile.reduce sum %x {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %next = arith.addf %s, %sum : tensor<64xf32, #row>
    scf.yield %next : tensor<64xf32, #row>
  }
  %b = scf.for %i = %c0 to %n step %c1 iter_args(%s = %zeros) -> (tensor<64xf32, #row>) : i32 {
    %sum = tile.reduce sum %x {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %scaled = arith.mulf %s, %s : tensor<64xf32, #row>
    %next = arith.addf %scaled, %sum : tensor<64xf32, #row>
    scf.yield %next : tensor<64xf32, #row>
  }
  %c = scf.for %i = %c0 to %n step %c1 iter_args(%s = %zeros_y) -> (tensor<64xf32, #tile.slice<dim = 1, parent = #across>>) : i32 {
    %sum = tile.reduce sum %y {axis = 1 : i32} : tensor<64x64xf32, #across> -> tensor<64xf32, #tile.slice<dim = 1, parent = #across>>
    %next = arith.addf %s, %sum : tensor<64xf32, #tile.slice<dim = 1, parent = #across>>
    scf.yield %next : tensor<64xf32, #tile.slice<dim = 1, parent = #across>>
  }
  tile.store %out, %a : tensor<64x!tile.ptr<f32>, #row>
  tile.store %out, %b : tensor<64x!tile.ptr<f32>, #row>
  return
}
// CHECK-LABEL: func.func @not_asked
// CHECK-NOT: within_threads
// CHECK: return
func.func @not_asked(%x: tensor<64x64xf32, #mma>, %n: i32) -> tensor<64xf32, #row> attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zeros = arith.constant dense<0.0> : tensor<64xf32, #row>
  %a = scf.for %i = %c0 to %n step %c1 iter_args(%s = %zeros) -> (tensor<64xf32, #row>) : i32 {
    %sum = tile.reduce sum %x {axis = 1 : i32} : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
    %next = arith.addf %s, %sum : tensor<64xf32, #row>
    scf.yield %next : tensor<64xf32, #row>
  }
  return %a : tensor<64xf32, #row>
}
