// RUN: tessera-opt %s -split-input-file -tile-allocate-shared-memory | FileCheck %s

#big = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#row = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Scratch lives only while its op runs, so every op starts at offset 0 and the kernel needs
// the largest: a reduction across 4 warps of 64 partial f32 values and their i32 indices
// (4 * 64 * 8 = 2048 bytes) beats converting 128 f32 (512 bytes).
// CHECK-LABEL: func.func @scratch
// CHECK-SAME: tile.shared_memory = 2048 : i64
// CHECK: tile.reduce argmax {{.*}}tile.smem_offset = 0 : i64
// CHECK: tile.convert_layout {{.*}}tile.smem_offset = 0 : i64
// CHECK: tile.reduce sum
// CHECK-NOT: smem_offset
// CHECK: return
func.func @scratch(%x: tensor<128x64xf32, #big>, %y: tensor<128xf32, #tile.slice<dim = 1, parent = #big>>) {
  %a = tile.reduce argmax %x {axis = 0 : i32} : tensor<128x64xf32, #big> -> tensor<64xi32, #tile.slice<dim = 0, parent = #big>>
  %c = tile.convert_layout %y : tensor<128xf32, #tile.slice<dim = 1, parent = #big>> -> tensor<128xf32, #row>
  // Along dimension 1 the reduction stays inside each warp: no scratch.
  %s = tile.reduce sum %x {axis = 1 : i32} : tensor<128x64xf32, #big> -> tensor<128xf32, #tile.slice<dim = 1, parent = #big>>
  return
}

// -----

// A kernel that needs no shared memory says so.
// CHECK-LABEL: func.func @none
// CHECK-SAME: tile.shared_memory = 0 : i64
func.func @none() {
  return
}

// -----

// Pipeline rings get their own ranges (1024-byte aligned) before any scratch while they are in
// use at the same time; a ring of a later loop reuses the memory of an earlier loop's.
// CHECK-LABEL: func.func @rings
// CHECK-SAME: tile.shared_memory = 36864 : i64
// CHECK: tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<3 x tensor<128x32xbf16>>
// CHECK: tile.shared_alloc {tile.smem_offset = 24576 : i64} : !tile.shared<3 x tensor<32x64xbf16>>
// CHECK: tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xbf16>>
func.func @rings(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %a = tile.shared_alloc : !tile.shared<3 x tensor<128x32xbf16>>
  %b = tile.shared_alloc : !tile.shared<3 x tensor<32x64xbf16>>
  scf.for %i = %c0 to %n step %c1 : i32 {
    %x = tile.shared_load %a[%c0] : !tile.shared<3 x tensor<128x32xbf16>> -> tensor<128x32xbf16>
    %y = tile.shared_load %b[%c0] : !tile.shared<3 x tensor<32x64xbf16>> -> tensor<32x64xbf16>
  }
  %c = tile.shared_alloc : !tile.shared<2 x tensor<64x64xbf16>>
  scf.for %i = %c0 to %n step %c1 : i32 {
    %z = tile.shared_load %c[%c0] : !tile.shared<2 x tensor<64x64xbf16>> -> tensor<64x64xbf16>
  }
  return
}

// -----

// A ring of mbarriers is never reused by a later loop's ring (its memory would need
// mbarrier.inval first): the second loop's ring goes after it.
// CHECK-LABEL: func.func @barrier_rings
// CHECK-SAME: tile.shared_memory = 2048 : i64
// CHECK: tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<1xi64>>
// CHECK: tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<16x16xbf16>>
func.func @barrier_rings(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %bars = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
  scf.for %i = %c0 to %n step %c1 : i32 {
    tile.wait_barrier %bars[%c0], %c0 : !tile.shared<2 x tensor<1xi64>>
  }
  %c = tile.shared_alloc : !tile.shared<2 x tensor<16x16xbf16>>
  scf.for %i = %c0 to %n step %c1 : i32 {
    %z = tile.shared_load %c[%c0] : !tile.shared<2 x tensor<16x16xbf16>> -> tensor<16x16xbf16>
  }
  return
}

// -----

// In a warp-specialized kernel the rings its TMA loads fill are never reused either: its
// producer fills the second loop's ring while the consumers still read the first's.
// CHECK-LABEL: func.func @specialized_rings
// CHECK: tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<16x64xf16>>
// CHECK: tile.shared_alloc {tile.smem_offset = 4096 : i64} : !tile.shared<2 x tensor<1xi64>>
// CHECK: tile.shared_alloc {tile.smem_offset = 5120 : i64} : !tile.shared<2 x tensor<16x64xf16>>
func.func @specialized_rings(%map: !tile.tensor_map, %bp: !tile.block_ptr<tensor<16x64xf16>>, %n: i32, %on: i1)
    attributes {tile.warp_specialize} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %first = tile.shared_alloc : !tile.shared<2 x tensor<16x64xf16>>
  %bars = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
  %second = tile.shared_alloc : !tile.shared<2 x tensor<16x64xf16>>
  scf.for %i = %c0 to %n step %c1 : i32 {
    tile.tma_load %map, %bp into %first[%i], %bars if %on : !tile.block_ptr<tensor<16x64xf16>>, !tile.shared<2 x tensor<16x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %x = tile.shared_load %first[%c0] : !tile.shared<2 x tensor<16x64xf16>> -> tensor<16x64xf16>
  }
  scf.for %i = %c0 to %n step %c1 : i32 {
    tile.tma_load %map, %bp into %second[%i], %bars if %on : !tile.block_ptr<tensor<16x64xf16>>, !tile.shared<2 x tensor<16x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %x = tile.shared_load %second[%c0] : !tile.shared<2 x tensor<16x64xf16>> -> tensor<16x64xf16>
  }
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#row = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A bulk add with the copy engine (tile.tma) keeps its staging (32 x 16 x 4 bytes) for the
// whole kernel, after the rings: scratch starts past it, since the engine reads the staging
// after the op has moved on. Without tile.tma it needs none.
// CHECK-LABEL: func.func @bulk_add_staging
// CHECK-SAME: tile.shared_memory = 2560 : i64
// CHECK: tile.bulk_add {{.*}}tile.smem_offset = 0 : i64
// CHECK: tile.convert_layout {{.*}}tile.smem_offset = 2048 : i64
func.func @bulk_add_staging(%p: !tile.ptr<f32>, %v: tensor<32x16xf32, #b>, %y: tensor<128xf32, #tile.slice<dim = 1, parent = #b>>) attributes {tile.tma} {
  tile.bulk_add %p, %v : !tile.ptr<f32>, tensor<32x16xf32, #b>
  %c = tile.convert_layout %y : tensor<128xf32, #tile.slice<dim = 1, parent = #b>> -> tensor<128xf32, #row>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>

// CHECK-LABEL: func.func @bulk_add_by_threads
// CHECK-SAME: tile.shared_memory = 0 : i64
// CHECK-NOT: smem_offset
func.func @bulk_add_by_threads(%p: !tile.ptr<f32>, %v: tensor<32x16xf32, #b>) {
  tile.bulk_add %p, %v : !tile.ptr<f32>, tensor<32x16xf32, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>

// A bulk add in the body of a loop that runs once alternates between two buffers (2 x 2048).
// CHECK-LABEL: func.func @bulk_add_alternating
// CHECK-SAME: tile.shared_memory = 4096 : i64
// CHECK: tile.bulk_add {{.*}}tile.smem_offset = 0 : i64
func.func @bulk_add_alternating(%p: !tile.ptr<f32>, %v: tensor<32x16xf32, #b>, %n: i32) attributes {tile.tma} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    tile.bulk_add %p, %v : !tile.ptr<f32>, tensor<32x16xf32, #b>
  }
  return
}

// -----

// Only rings of 2-D tiles need the swizzle's 1024-byte alignment: a ring of rows (1-D, a row
// statistic's unswizzled TMA copies) is 128-byte aligned, a ring of mbarriers 8-byte, so both
// pack into the first KB here.
// CHECK-LABEL: func.func @alignments
// CHECK-SAME: tile.shared_memory = 9216 : i64
// CHECK: tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64xf32>>
// CHECK: tile.shared_alloc {tile.smem_offset = 512 : i64} : !tile.shared<2 x tensor<1xi64>>
// CHECK: tile.shared_alloc {tile.smem_offset = 640 : i64} : !tile.shared<1 x tensor<32xf32>>
// CHECK: tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<1 x tensor<64x64xf16>>
func.func @alignments(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %rows = tile.shared_alloc : !tile.shared<2 x tensor<64xf32>>
  %bars = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
  %more = tile.shared_alloc : !tile.shared<1 x tensor<32xf32>>
  %tile = tile.shared_alloc : !tile.shared<1 x tensor<64x64xf16>>
  scf.for %i = %c0 to %n step %c1 : i32 {
    %r = tile.shared_load %rows[%c0] : !tile.shared<2 x tensor<64xf32>> -> tensor<64xf32>
    tile.wait_barrier %bars[%c0], %c0 : !tile.shared<2 x tensor<1xi64>>
    %m = tile.shared_load %more[%c0] : !tile.shared<1 x tensor<32xf32>> -> tensor<32xf32>
    %t = tile.shared_load %tile[%c0] : !tile.shared<1 x tensor<64x64xf16>> -> tensor<64x64xf16>
  }
  return
}
