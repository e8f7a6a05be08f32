// Every tile op, round-tripped through the custom and the generic syntax.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s
// RUN: tessera-opt %s --mlir-print-op-generic | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @grid
func.func @grid() -> (i32, i32, i32) {
  // CHECK: tile.program_id x
  %0 = tile.program_id x
  // CHECK: tile.program_id z
  %1 = tile.program_id z
  // CHECK: tile.num_programs y
  %2 = tile.num_programs y
  return %0, %1, %2 : i32, i32, i32
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%s: f32, %t: tensor<1x64xf32>, %u: tensor<16x8xf16>, %w: tensor<2x4x8xi32>)
    -> (tensor<128xi32>, tensor<64x64xf32>, tensor<128x64xf32>, tensor<1x16x8xf16>,
        tensor<128xf16>, tensor<8x16xf16>, tensor<8x2x4xi32>) {
  // CHECK: tile.make_range 0 to 128 : tensor<128xi32>
  %r = tile.make_range 0 to 128 : tensor<128xi32>
  // CHECK: tile.splat %{{.*}} : f32 -> tensor<64x64xf32>
  %sp = tile.splat %s : f32 -> tensor<64x64xf32>
  // CHECK: tile.broadcast %{{.*}} : tensor<1x64xf32> -> tensor<128x64xf32>
  %b = tile.broadcast %t : tensor<1x64xf32> -> tensor<128x64xf32>
  // CHECK: tile.expand_dims %{{.*}} {axis = 0 : i32} : tensor<16x8xf16> -> tensor<1x16x8xf16>
  %e = tile.expand_dims %u {axis = 0 : i32} : tensor<16x8xf16> -> tensor<1x16x8xf16>
  // CHECK: tile.reshape %{{.*}} : tensor<16x8xf16> -> tensor<128xf16>
  %re = tile.reshape %u : tensor<16x8xf16> -> tensor<128xf16>
  // CHECK: tile.trans %{{.*}} {order = array<i32: 1, 0>} : tensor<16x8xf16> -> tensor<8x16xf16>
  %tr = tile.trans %u {order = array<i32: 1, 0>} : tensor<16x8xf16> -> tensor<8x16xf16>
  // CHECK: tile.trans %{{.*}} {order = array<i32: 2, 0, 1>} : tensor<2x4x8xi32> -> tensor<8x2x4xi32>
  %tr3 = tile.trans %w {order = array<i32: 2, 0, 1>} : tensor<2x4x8xi32> -> tensor<8x2x4xi32>
  return %r, %sp, %b, %e, %re, %tr, %tr3 : tensor<128xi32>, tensor<64x64xf32>, tensor<128x64xf32>,
      tensor<1x16x8xf16>, tensor<128xf16>, tensor<8x16xf16>, tensor<8x2x4xi32>
}

// CHECK-LABEL: func.func @memory
func.func @memory(%base: !tile.ptr<f32>, %n: i64, %m: tensor<128xi1>, %o: tensor<128xf32>,
                  %ip: !tile.ptr<i32>, %iv: tensor<128xi32>) {
  %r = tile.make_range 0 to 128 : tensor<128xi32>
  // CHECK: tile.addptr %{{.*}}, %{{.*}} : !tile.ptr<f32>, i64
  %p0 = tile.addptr %base, %n : !tile.ptr<f32>, i64
  %ps = tile.splat %p0 : !tile.ptr<f32> -> tensor<128x!tile.ptr<f32>>
  // CHECK: tile.addptr %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
  %p = tile.addptr %ps, %r : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
  // CHECK: tile.load %{{.*}} : tensor<128x!tile.ptr<f32>>
  %a = tile.load %p : tensor<128x!tile.ptr<f32>>
  // CHECK: tile.load %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<f32>>
  %b = tile.load %p, %m : tensor<128x!tile.ptr<f32>>
  // CHECK: tile.load %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<f32>>
  %c = tile.load %p, %m, %o : tensor<128x!tile.ptr<f32>>
  // CHECK: tile.load %{{.*}} : !tile.ptr<f32>
  %s = tile.load %base : !tile.ptr<f32>
  // CHECK: tile.store %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<f32>>
  tile.store %p, %a : tensor<128x!tile.ptr<f32>>
  // CHECK: tile.store %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<f32>>
  tile.store %p, %b, %m : tensor<128x!tile.ptr<f32>>
  // CHECK: tile.atomic_rmw add, acq_rel, gpu, %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<f32>>
  %old = tile.atomic_rmw add, acq_rel, gpu, %p, %c, %m : tensor<128x!tile.ptr<f32>>
  // CHECK: tile.atomic_rmw max, relaxed, cta, %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<f32>>
  %old2 = tile.atomic_rmw max, relaxed, cta, %p, %c : tensor<128x!tile.ptr<f32>>
  %tile = tile.reshape %c : tensor<128xf32> -> tensor<4x32xf32>
  // CHECK: tile.bulk_add %{{.*}}, %{{.*}} {swizzled} : !tile.ptr<f32>, tensor<4x32xf32>
  tile.bulk_add %base, %tile {swizzled} : !tile.ptr<f32>, tensor<4x32xf32>
  %ips = tile.splat %ip : !tile.ptr<i32> -> tensor<128x!tile.ptr<i32>>
  %ipp = tile.addptr %ips, %r : tensor<128x!tile.ptr<i32>>, tensor<128xi32>
  // CHECK: tile.atomic_rmw xor, release, sys, %{{.*}}, %{{.*}} : tensor<128x!tile.ptr<i32>>
  %old3 = tile.atomic_rmw xor, release, sys, %ipp, %iv : tensor<128x!tile.ptr<i32>>
  // CHECK: tile.atomic_rmw xchg, acquire, gpu, %{{.*}}, %{{.*}} : !tile.ptr<i32>
  %z = arith.constant 0 : i32
  %old4 = tile.atomic_rmw xchg, acquire, gpu, %ip, %z : !tile.ptr<i32>
  // CHECK: tile.atomic_rmw and
  %old5 = tile.atomic_rmw and, acq_rel, gpu, %ipp, %iv : tensor<128x!tile.ptr<i32>>
  // CHECK: tile.atomic_rmw or
  %old6 = tile.atomic_rmw or, acq_rel, gpu, %ipp, %iv : tensor<128x!tile.ptr<i32>>
  // CHECK: tile.atomic_rmw min
  %old7 = tile.atomic_rmw min, acq_rel, gpu, %ipp, %iv : tensor<128x!tile.ptr<i32>>
  return
}

// CHECK-LABEL: func.func @block_pointers
func.func @block_pointers(%k: !tile.ptr<f16>, %n: i64, %d: i64, %sn: i64, %c1: i64,
                          %start: i32, %c0: i32, %c64: i32, %v: tensor<64x128xf16>) {
  // CHECK: tile.make_block_ptr %{{.*}}, [%{{.*}}, %{{.*}}], [%{{.*}}, %{{.*}}], [%{{.*}}, %{{.*}}] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  %bp = tile.make_block_ptr %k, [%n, %d], [%sn, %c1], [%start, %c0] {order = array<i32: 1, 0>}
      : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  // CHECK: tile.advance %{{.*}}, [%{{.*}}, %{{.*}}] : !tile.block_ptr<tensor<64x128xf16>>
  %next = tile.advance %bp, [%c64, %c0] : !tile.block_ptr<tensor<64x128xf16>>
  // CHECK: tile.block_load %{{.*}} {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16>
  %t = tile.block_load %next {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16>
  // CHECK: tile.block_load %{{.*}} {boundary_check = array<i32>, padding = #tile.padding<nan>}
  %t2 = tile.block_load %next {boundary_check = array<i32>, padding = #tile.padding<nan>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16>
  // CHECK: tile.block_store %{{.*}}, %{{.*}} {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x128xf16>>, tensor<64x128xf16>
  tile.block_store %bp, %v {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x128xf16>>, tensor<64x128xf16>
  return
}

// CHECK-LABEL: func.func @compute
func.func @compute(%a: tensor<128x64xf16>, %b: tensor<64x128xf16>, %acc: tensor<128x128xf32>,
                   %fa: tensor<32x32xf32>, %fb: tensor<32x32xf32>, %fc: tensor<32x32xf32>,
                   %ia: tensor<16x32xi8>, %ib: tensor<32x16xi8>, %ic: tensor<16x16xi32>,
                   %x: tensor<128x64xf32>, %y: tensor<64xf32>) {
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
  %d0 = tile.dot %a, %b, %acc : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} {input_precision = #tile.precision<tf32>} : tensor<32x32xf32> * tensor<32x32xf32> -> tensor<32x32xf32>
  %d1 = tile.dot %fa, %fb, %fc {input_precision = #tile.precision<tf32>} : tensor<32x32xf32> * tensor<32x32xf32> -> tensor<32x32xf32>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x32xi8> * tensor<32x16xi8> -> tensor<16x16xi32>
  %d2 = tile.dot %ia, %ib, %ic : tensor<16x32xi8> * tensor<32x16xi8> -> tensor<16x16xi32>
  // CHECK: tile.reduce sum %{{.*}} {axis = 1 : i32} : tensor<128x64xf32> -> tensor<128xf32>
  %s = tile.reduce sum %x {axis = 1 : i32} : tensor<128x64xf32> -> tensor<128xf32>
  // CHECK: tile.reduce max %{{.*}} {axis = 0 : i32} : tensor<128x64xf32> -> tensor<64xf32>
  %m = tile.reduce max %x {axis = 0 : i32} : tensor<128x64xf32> -> tensor<64xf32>
  // CHECK: tile.reduce min %{{.*}} {axis = 0 : i32} : tensor<64xf32> -> f32
  %n = tile.reduce min %y {axis = 0 : i32} : tensor<64xf32> -> f32
  // CHECK: tile.reduce argmax %{{.*}} {axis = 1 : i32} : tensor<128x64xf32> -> tensor<128xi32>
  %am = tile.reduce argmax %x {axis = 1 : i32} : tensor<128x64xf32> -> tensor<128xi32>
  // CHECK: tile.reduce argmin %{{.*}} {axis = 0 : i32} : tensor<64xf32> -> i32
  %an = tile.reduce argmin %y {axis = 0 : i32} : tensor<64xf32> -> i32
  // CHECK: tile.print "row sums " %{{.*}}, %{{.*}} : tensor<128xf32>, f32
  tile.print "row sums " %s, %n : tensor<128xf32>, f32
  // CHECK: tile.print "here"
  tile.print "here"
  return
}

#blocked = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#rows = #tile.slice<dim = 1, parent = #blocked>
#flat = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// CHECK-LABEL: func.func @layouts
// CHECK: tile.convert_layout %{{.*}} : tensor<64xf32, #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>>> -> tensor<64xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
func.func @layouts(%x: tensor<64xf32, #rows>) -> tensor<64xf32, #flat> {
  %y = tile.convert_layout %x : tensor<64xf32, #rows> -> tensor<64xf32, #flat>
  return %y : tensor<64xf32, #flat>
}

// A row sum left in each thread, then its lanes added up (tile-defer-lane-sums).
// CHECK-LABEL: func.func @partial_sums
// CHECK: %[[P:.*]] = tile.reduce sum %{{.*}} {axis = 1 : i32, within_threads} : tensor<64x32xf32, #{{.*}}> -> tensor<64xf32, #{{.*}}>
// CHECK: tile.combine_lanes %[[P]] {lanes = 7 : i32} : tensor<64xf32, #{{.*}}>
func.func @partial_sums(%x: tensor<64x32xf32, #blocked>) -> tensor<64xf32, #rows> {
  %p = tile.reduce sum %x {axis = 1 : i32, within_threads} : tensor<64x32xf32, #blocked> -> tensor<64xf32, #rows>
  %s = tile.combine_lanes %p {lanes = 7 : i32} : tensor<64xf32, #rows>
  return %s : tensor<64xf32, #rows>
}

// CHECK-LABEL: func.func @pipelines
func.func @pipelines(%p: tensor<64x32x!tile.ptr<bf16>>, %m: tensor<64x32xi1>, %slot: i32) -> tensor<64x32xbf16> {
  // CHECK: %[[BUF:.*]] = tile.shared_alloc : !tile.shared<3 x tensor<64x32xbf16>>
  %buf = tile.shared_alloc : !tile.shared<3 x tensor<64x32xbf16>>
  // CHECK: tile.async_copy %{{.*}}, %{{.*}} into %[[BUF]][%{{.*}}] : tensor<64x32x!tile.ptr<bf16>>, tensor<64x32xi1>, !tile.shared<3 x tensor<64x32xbf16>>
  tile.async_copy %p, %m into %buf[%slot] : tensor<64x32x!tile.ptr<bf16>>, tensor<64x32xi1>, !tile.shared<3 x tensor<64x32xbf16>>
  // CHECK: tile.async_commit
  tile.async_commit
  // CHECK: tile.async_wait 1
  tile.async_wait 1
  // CHECK: tile.shared_load %[[BUF]][%{{.*}}] : !tile.shared<3 x tensor<64x32xbf16>> -> tensor<64x32xbf16>
  %t = tile.shared_load %buf[%slot] : !tile.shared<3 x tensor<64x32xbf16>> -> tensor<64x32xbf16>
  // CHECK: tile.shared_store %{{.*}}, %[[BUF]][%{{.*}}] : tensor<64x32xbf16>, !tile.shared<3 x tensor<64x32xbf16>>
  tile.shared_store %t, %buf[%slot] : tensor<64x32xbf16>, !tile.shared<3 x tensor<64x32xbf16>>
  return %t : tensor<64x32xbf16>
}

// Warp specialization: the roles, register budgets and the consumers' release of a stage.
// CHECK-LABEL: func.func @warp_roles
// CHECK: %[[P:.*]] = tile.in_producer_warps
// CHECK: tile.in_producer_warps first
// CHECK: tile.set_max_registers 40
// CHECK: tile.set_max_registers 232 {increase}
// CHECK: tile.arrive_barrier %{{.*}}[%{{.*}}] if %[[P]] : !tile.shared<2 x tensor<1xi64>>
func.func @warp_roles(%slot: i32) {
  %producer = tile.in_producer_warps
  %first = tile.in_producer_warps first
  tile.set_max_registers 40
  tile.set_max_registers 232 {increase}
  %empty = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
  tile.arrive_barrier %empty[%slot] if %producer : !tile.shared<2 x tensor<1xi64>>
  return
}

// The kernel form the DSL produces: a func.func marked tile.kernel with loops over tiles.
// CHECK-LABEL: func.func @kernel
// CHECK-SAME: attributes {tile.kernel}
func.func @kernel(%x: !tile.ptr<f32>, %n: i32) attributes {tile.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0.0> : tensor<128xf32>
  %r = tile.make_range 0 to 128 : tensor<128xi32>
  %ps = tile.splat %x : !tile.ptr<f32> -> tensor<128x!tile.ptr<f32>>
  %p = tile.addptr %ps, %r : tensor<128x!tile.ptr<f32>>, tensor<128xi32>
  // CHECK: scf.for {{.*}} iter_args
  %sum = scf.for %i = %c0 to %n step %c128 iter_args(%acc = %zero) -> (tensor<128xf32>) : i32 {
    %v = tile.load %p : tensor<128x!tile.ptr<f32>>
    %e = math.exp %v : tensor<128xf32>
    %a = arith.addf %acc, %e : tensor<128xf32>
    scf.yield %a : tensor<128xf32>
  }
  tile.store %p, %sum : tensor<128x!tile.ptr<f32>>
  return
}
