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
