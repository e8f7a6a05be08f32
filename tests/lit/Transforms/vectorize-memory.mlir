// RUN: tessera-opt %s -split-input-file -tile-vectorize-memory | FileCheck %s

#b = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// 16-byte-aligned pointers and a bound divisible by 16: 4 f32 per access. Without those
// facts the compiler cannot prove a vector stays aligned and in one mask state: 1.
// CHECK-LABEL: func.func @vector_add
// CHECK: tile.load {{.*}} {tile.vector = 4 : i32}
// CHECK: tile.store {{.*}} {tile.vector = 4 : i32}
// CHECK: tile.atomic_rmw {{.*}} {tile.vector = 4 : i32}
func.func @vector_add(%x: !tile.ptr<f32> {tile.divisibility = 16 : i32}, %n: i32 {tile.divisibility = 16 : i32}) {
  %c1024 = arith.constant 1024 : i32
  %pid = tile.program_id x
  %base = arith.muli %pid, %c1024 : i32
  %r = tile.make_range 0 to 1024 : tensor<1024xi32, #b>
  %bs = tile.splat %base : i32 -> tensor<1024xi32, #b>
  %offs = arith.addi %bs, %r : tensor<1024xi32, #b>
  %ns = tile.splat %n : i32 -> tensor<1024xi32, #b>
  %mask = arith.cmpi slt, %offs, %ns : tensor<1024xi32, #b>
  %ps = tile.splat %x : !tile.ptr<f32> -> tensor<1024x!tile.ptr<f32>, #b>
  %p = tile.addptr %ps, %offs : tensor<1024x!tile.ptr<f32>, #b>, tensor<1024xi32, #b>
  %v = tile.load %p, %mask : tensor<1024x!tile.ptr<f32>, #b>
  tile.store %p, %v, %mask : tensor<1024x!tile.ptr<f32>, #b>
  %old = tile.atomic_rmw add, relaxed, gpu, %p, %v, %mask : tensor<1024x!tile.ptr<f32>, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// CHECK-LABEL: func.func @unknown_bound
// CHECK: tile.load {{.*}} {tile.vector = 1 : i32}
// CHECK: tile.load {{.*}} {tile.vector = 4 : i32}
func.func @unknown_bound(%x: !tile.ptr<f32> {tile.divisibility = 16 : i32}, %n: i32) {
  %r = tile.make_range 0 to 1024 : tensor<1024xi32, #b>
  %ns = tile.splat %n : i32 -> tensor<1024xi32, #b>
  %mask = arith.cmpi slt, %r, %ns : tensor<1024xi32, #b>
  %ps = tile.splat %x : !tile.ptr<f32> -> tensor<1024x!tile.ptr<f32>, #b>
  %p = tile.addptr %ps, %r : tensor<1024x!tile.ptr<f32>, #b>, tensor<1024xi32, #b>
  %masked = tile.load %p, %mask : tensor<1024x!tile.ptr<f32>, #b>
  %all = tile.load %p : tensor<1024x!tile.ptr<f32>, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// f16 goes 8 wide (16 bytes); a pointer known only to be element-aligned stays scalar.
// CHECK-LABEL: func.func @halves
// CHECK: tile.load {{.*}} {tile.vector = 8 : i32}
// CHECK: tile.load {{.*}} {tile.vector = 1 : i32}
func.func @halves(%x: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %y: !tile.ptr<f16>) {
  %r = tile.make_range 0 to 2048 : tensor<2048xi32, #b>
  %xs = tile.splat %x : !tile.ptr<f16> -> tensor<2048x!tile.ptr<f16>, #b>
  %xp = tile.addptr %xs, %r : tensor<2048x!tile.ptr<f16>, #b>, tensor<2048xi32, #b>
  %a = tile.load %xp : tensor<2048x!tile.ptr<f16>, #b>
  %ys = tile.splat %y : !tile.ptr<f16> -> tensor<2048x!tile.ptr<f16>, #b>
  %yp = tile.addptr %ys, %r : tensor<2048x!tile.ptr<f16>, #b>, tensor<2048xi32, #b>
  %c = tile.load %yp : tensor<2048x!tile.ptr<f16>, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// Block loads and stores vectorize along the fastest dimension (stride 1) where the base, the
// row stride and the offset keep 16-byte vectors aligned and a checked extent is divisible by
// the vector: here 8 f16. An extent of unknown divisibility along it, checked, keeps them
// scalar; unchecked it does not matter; a row stride of unknown divisibility (the next row's
// vectors may be misaligned) and a fastest stride that is not 1 keep them scalar too.
// CHECK-LABEL: func.func @block_rows
// CHECK: tile.block_load {{.*}}tile.vector = 8 : i32
// CHECK: tile.block_store {{.*}}tile.vector = 8 : i32
// CHECK: tile.block_load {{.*}}tile.vector = 1 : i32
// CHECK: tile.block_load {{.*}}tile.vector = 8 : i32
// CHECK: tile.block_load {{.*}}tile.vector = 1 : i32
// CHECK: tile.block_load {{.*}}tile.vector = 1 : i32
func.func @block_rows(%k: !tile.ptr<f16> {tile.divisibility = 16 : i32}, %n: i64, %d: i64 {tile.divisibility = 16 : i32},
                      %sn: i64 {tile.divisibility = 16 : i32}, %odd: i64, %start: i32) {
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i64
  %bp = tile.make_block_ptr %k, [%n, %d], [%sn, %one], [%start, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  %t = tile.block_load %bp {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16, #b>
  tile.block_store %bp, %t {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x128xf16>>, tensor<64x128xf16, #b>
  %ragged = tile.make_block_ptr %k, [%n, %odd], [%sn, %one], [%start, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  %r1 = tile.block_load %ragged {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16, #b>
  %r0 = tile.block_load %ragged {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16, #b>
  %strided = tile.make_block_ptr %k, [%n, %d], [%odd, %one], [%start, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  %s = tile.block_load %strided {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16, #b>
  %gather = tile.make_block_ptr %k, [%n, %d], [%sn, %sn], [%start, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  %g = tile.block_load %gather {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16, #b>
  return
}
