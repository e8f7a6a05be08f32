// RUN: tessera-opt %s -tile-prefetch-loads -canonicalize -cse | FileCheck %s

// The first iteration's load moves before the loop (masked off if the loop never runs); each
// iteration loads the next one's tile, at the advanced pointers and the next induction
// value, before its own math, and carries it.
// CHECK-LABEL: func.func @sum_blocks
// CHECK-SAME: (%[[X:.*]]: !tile.ptr<f32>, %[[N:.*]]: i32)
// CHECK: arith.cmpi sgt, %[[N]], %{{.*}} : i32
// CHECK: %[[FIRST:.*]] = tile.load
// CHECK: scf.for %[[I:[a-z0-9]+]] = {{.*}} iter_args(%[[ACC:[a-z0-9]+]] = %{{[a-z0-9_]+}}, %[[P:[a-z0-9]+]] = %{{[a-z0-9_]+}}, %[[CUR:[a-z0-9]+]] = %[[FIRST]])
// CHECK-DAG: %[[NEXTI:.*]] = arith.addi %[[I]], %{{.*}} : i32
// CHECK-DAG: %[[NEXTP:.*]] = tile.addptr %[[P]]
// CHECK-DAG: arith.cmpi slt, %[[NEXTI]], %[[N]] : i32
// CHECK: %[[NEXT:.*]] = tile.load %[[NEXTP]]
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[CUR]]
// CHECK: scf.yield %[[SUM]], %[[NEXTP]], %[[NEXT]]
func.func @sum_blocks(%x: !tile.ptr<f32>, %n: i32) -> tensor<128xf32> {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0.0> : tensor<128xf32>
  %r = tile.make_range 0 to 128 : tensor<128xi32>
  %xs = tile.splat %x : !tile.ptr<f32> -> tensor<128x!tile.ptr<f32>>
  %p0 = tile.addptr %xs, %r : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
  %steps = tile.splat %c128 : i32 -> tensor<128xi32>
  %out:2 = scf.for %i = %c0 to %n step %c128 iter_args(%acc = %zero, %p = %p0) -> (tensor<128xf32>, tensor<128x!tile.ptr<f32>>) : i32 {
    %is = tile.splat %i : i32 -> tensor<128xi32>
    %idx = arith.addi %is, %r : tensor<128xi32>
    %ns = tile.splat %n : i32 -> tensor<128xi32>
    %m = arith.cmpi slt, %idx, %ns : tensor<128xi32>
    %v = tile.load %p, %m, %zero : tensor<128x!tile.ptr<f32>>
    %s = arith.addf %acc, %v : tensor<128xf32>
    %pn = tile.addptr %p, %steps : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
    scf.yield %s, %pn : tensor<128xf32>, tensor<128x!tile.ptr<f32>>
  }
  return %out#0 : tensor<128xf32>
}
