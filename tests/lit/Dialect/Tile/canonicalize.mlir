// Every folder and canonicalization pattern of the tile dialect.
// RUN: tessera-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @splat_constant
// CHECK-NEXT: %[[C:.*]] = arith.constant dense<2.000000e+00> : tensor<64xf32>
// CHECK-NEXT: return %[[C]]
func.func @splat_constant() -> tensor<64xf32> {
  %c = arith.constant 2.0 : f32
  %t = tile.splat %c : f32 -> tensor<64xf32>
  return %t : tensor<64xf32>
}

// -----

// CHECK-LABEL: func.func @shape_ops_of_splat
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-DAG: tile.splat %[[X]] : f32 -> tensor<128x64xf32>
// CHECK-DAG: tile.splat %[[X]] : f32 -> tensor<1x64xf32>
// CHECK-DAG: tile.splat %[[X]] : f32 -> tensor<8x8xf32>
// CHECK-DAG: tile.splat %[[X]] : f32 -> tensor<64x1xf32>
// CHECK-NOT: tile.broadcast
// CHECK-NOT: tile.expand_dims
// CHECK-NOT: tile.reshape
// CHECK-NOT: tile.trans
func.func @shape_ops_of_splat(%x: f32) -> (tensor<128x64xf32>, tensor<1x64xf32>, tensor<8x8xf32>, tensor<64x1xf32>) {
  %s = tile.splat %x : f32 -> tensor<1x64xf32>
  %b = tile.broadcast %s : tensor<1x64xf32> -> tensor<128x64xf32>
  %v = tile.splat %x : f32 -> tensor<64xf32>
  %e = tile.expand_dims %v {axis = 0 : i32} : tensor<64xf32> -> tensor<1x64xf32>
  %r = tile.reshape %v : tensor<64xf32> -> tensor<8x8xf32>
  %t = tile.trans %s {order = array<i32: 1, 0>} : tensor<1x64xf32> -> tensor<64x1xf32>
  return %b, %e, %r, %t : tensor<128x64xf32>, tensor<1x64xf32>, tensor<8x8xf32>, tensor<64x1xf32>
}

// -----

// CHECK-LABEL: func.func @shape_ops_of_constants
// CHECK-DAG: arith.constant dense<1.000000e+00> : tensor<128x64xf32>
// CHECK-DAG: arith.constant dense<1.000000e+00> : tensor<64x1xf32>
// CHECK-DAG: arith.constant dense<1.000000e+00> : tensor<8x8xf32>
// CHECK-NOT: tile.
func.func @shape_ops_of_constants() -> (tensor<128x64xf32>, tensor<64x1xf32>, tensor<8x8xf32>) {
  %c = arith.constant dense<1.0> : tensor<1x64xf32>
  %b = tile.broadcast %c : tensor<1x64xf32> -> tensor<128x64xf32>
  %v = arith.constant dense<1.0> : tensor<64xf32>
  %e = tile.expand_dims %v {axis = 1 : i32} : tensor<64xf32> -> tensor<64x1xf32>
  %r = tile.reshape %v : tensor<64xf32> -> tensor<8x8xf32>
  return %b, %e, %r : tensor<128x64xf32>, tensor<64x1xf32>, tensor<8x8xf32>
}

// -----

// CHECK-LABEL: func.func @trans_constant
// CHECK: arith.constant dense<3> : tensor<8x4xi32>
// CHECK-NOT: tile.trans
func.func @trans_constant() -> tensor<8x4xi32> {
  %c = arith.constant dense<3> : tensor<4x8xi32>
  %t = tile.trans %c {order = array<i32: 1, 0>} : tensor<4x8xi32> -> tensor<8x4xi32>
  return %t : tensor<8x4xi32>
}

// -----

// CHECK-LABEL: func.func @identity_shape_ops
// CHECK-SAME: (%[[X:.*]]: tensor<16x8xf16>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identity_shape_ops(%x: tensor<16x8xf16>) -> (tensor<16x8xf16>, tensor<16x8xf16>, tensor<16x8xf16>, tensor<16x8xf16>) {
  %b = tile.broadcast %x : tensor<16x8xf16> -> tensor<16x8xf16>
  %r = tile.reshape %x : tensor<16x8xf16> -> tensor<16x8xf16>
  %t = tile.trans %x {order = array<i32: 0, 1>} : tensor<16x8xf16> -> tensor<16x8xf16>
  %t1 = tile.trans %x {order = array<i32: 1, 0>} : tensor<16x8xf16> -> tensor<8x16xf16>
  %t2 = tile.trans %t1 {order = array<i32: 1, 0>} : tensor<8x16xf16> -> tensor<16x8xf16>
  return %b, %r, %t, %t2 : tensor<16x8xf16>, tensor<16x8xf16>, tensor<16x8xf16>, tensor<16x8xf16>
}

// -----

// CHECK-LABEL: func.func @combine_chains
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[Y:.*]]: tensor<1x1x8xf32>)
// CHECK-DAG: %[[T:.*]] = tile.trans %[[X]] {order = array<i32: 1, 2, 0>} : tensor<2x4x8xf32> -> tensor<4x8x2xf32>
// CHECK-DAG: %[[R:.*]] = tile.reshape %[[X]] : tensor<2x4x8xf32> -> tensor<64xf32>
// CHECK-DAG: %[[B:.*]] = tile.broadcast %[[Y]] : tensor<1x1x8xf32> -> tensor<2x4x8xf32>
// CHECK: return %[[T]], %[[R]], %[[B]]
func.func @combine_chains(%x: tensor<2x4x8xf32>, %y: tensor<1x1x8xf32>) -> (tensor<4x8x2xf32>, tensor<64xf32>, tensor<2x4x8xf32>) {
  // result[i] = x[inner[outer[i]]]: inner (2, 0, 1) then outer (2, 0, 1) is (1, 2, 0).
  %t1 = tile.trans %x {order = array<i32: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  %t2 = tile.trans %t1 {order = array<i32: 2, 0, 1>} : tensor<8x2x4xf32> -> tensor<4x8x2xf32>
  %r1 = tile.reshape %x : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %r2 = tile.reshape %r1 : tensor<8x8xf32> -> tensor<64xf32>
  %b1 = tile.broadcast %y : tensor<1x1x8xf32> -> tensor<1x4x8xf32>
  %b2 = tile.broadcast %b1 : tensor<1x4x8xf32> -> tensor<2x4x8xf32>
  return %t2, %r2, %b2 : tensor<4x8x2xf32>, tensor<64xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @addptr
// CHECK-SAME: (%[[P:.*]]: tensor<128x!tile.ptr<f32>>, %[[A:.*]]: tensor<128xi32>, %[[B:.*]]: tensor<128xi32>)
// CHECK: %[[S:.*]] = arith.addi %[[A]], %[[B]] : tensor<128xi32>
// CHECK: %[[Q:.*]] = tile.addptr %[[P]], %[[S]]
// CHECK: return %[[P]], %[[Q]]
func.func @addptr(%p: tensor<128x!tile.ptr<f32>>, %a: tensor<128xi32>, %b: tensor<128xi32>) -> (tensor<128x!tile.ptr<f32>>, tensor<128x!tile.ptr<f32>>) {
  %zero = arith.constant dense<0> : tensor<128xi32>
  %same = tile.addptr %p, %zero : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
  %p1 = tile.addptr %p, %a : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
  %p2 = tile.addptr %p1, %b : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
  return %same, %p2 : tensor<128x!tile.ptr<f32>>, tensor<128x!tile.ptr<f32>>
}

// -----

// The ops that lose their mask keep their discardable attributes (here tile.vector).
// CHECK-LABEL: func.func @constant_masks
// CHECK-SAME: (%[[P:.*]]: tensor<128x!tile.ptr<f32>>, %[[O:.*]]: tensor<128xf32>)
// CHECK: %[[L:.*]] = tile.load %[[P]] {tile.vector = 4 : i32} : tensor<128x!tile.ptr<f32>>
// CHECK-NEXT: tile.store %[[P]], %[[L]] {tile.vector = 2 : i32} : tensor<128x!tile.ptr<f32>>
// CHECK-NEXT: return %[[L]], %[[O]]
func.func @constant_masks(%p: tensor<128x!tile.ptr<f32>>, %o: tensor<128xf32>) -> (tensor<128xf32>, tensor<128xf32>) {
  %true = arith.constant dense<true> : tensor<128xi1>
  %false = arith.constant dense<false> : tensor<128xi1>
  %all = tile.load %p, %true, %o {tile.vector = 4 : i32} : tensor<128x!tile.ptr<f32>>
  %none = tile.load %p, %false, %o : tensor<128x!tile.ptr<f32>>
  tile.store %p, %all, %true {tile.vector = 2 : i32} : tensor<128x!tile.ptr<f32>>
  tile.store %p, %all, %false : tensor<128x!tile.ptr<f32>>
  return %all, %none : tensor<128xf32>, tensor<128xf32>
}

// -----

// A masked-off load without `other` is undefined, but stays a load: nothing to fold to.
// CHECK-LABEL: func.func @false_mask_without_other
// CHECK: tile.load %{{.*}}, %{{.*}} : !tile.ptr<f32>
func.func @false_mask_without_other(%p: !tile.ptr<f32>) -> f32 {
  %false = arith.constant false
  %v = tile.load %p, %false : !tile.ptr<f32>
  return %v : f32
}

// -----

// CHECK-LABEL: func.func @advance
// CHECK-SAME: (%[[BP:.*]]: !tile.block_ptr<tensor<64x64xf16>>, %[[A:.*]]: i32, %[[B:.*]]: i32)
// CHECK-DAG: %[[S0:.*]] = arith.addi %[[A]], %[[B]] : i32
// CHECK-DAG: %[[S1:.*]] = arith.addi %[[B]], %[[A]] : i32
// CHECK: %[[N:.*]] = tile.advance %[[BP]], [%[[S0]], %[[S1]]]
// CHECK: return %[[BP]], %[[N]]
func.func @advance(%bp: !tile.block_ptr<tensor<64x64xf16>>, %a: i32, %b: i32) -> (!tile.block_ptr<tensor<64x64xf16>>, !tile.block_ptr<tensor<64x64xf16>>) {
  %c0 = arith.constant 0 : i32
  %same = tile.advance %bp, [%c0, %c0] : !tile.block_ptr<tensor<64x64xf16>>
  %n1 = tile.advance %bp, [%a, %b] : !tile.block_ptr<tensor<64x64xf16>>
  %n2 = tile.advance %n1, [%b, %a] : !tile.block_ptr<tensor<64x64xf16>>
  return %same, %n2 : !tile.block_ptr<tensor<64x64xf16>>, !tile.block_ptr<tensor<64x64xf16>>
}

// -----

// CHECK-LABEL: func.func @reduce_unit_axis
// CHECK-SAME: (%[[X:.*]]: tensor<128x1xf32>)
// CHECK-DAG: %[[Z:.*]] = arith.constant dense<0> : tensor<128xi32>
// CHECK-DAG: %[[R:.*]] = tile.reshape %[[X]] : tensor<128x1xf32> -> tensor<128xf32>
// CHECK-NOT: tile.reduce
// CHECK: return %[[R]], %[[Z]]
func.func @reduce_unit_axis(%x: tensor<128x1xf32>) -> (tensor<128xf32>, tensor<128xi32>) {
  %s = tile.reduce max %x {axis = 1 : i32} : tensor<128x1xf32> -> tensor<128xf32>
  %a = tile.reduce argmax %x {axis = 1 : i32} : tensor<128x1xf32> -> tensor<128xi32>
  return %s, %a : tensor<128xf32>, tensor<128xi32>
}
