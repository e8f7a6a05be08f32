// RUN: tessera-opt %s -split-input-file -tile-specialize-warps -verify-diagnostics | FileCheck %s

// A matmul's TMA ring with 8 consumer warps: the barriers are initialized before the split
// (the empty ring after the kernel's shared memory, one arrival per consumer warp); the
// producer gives registers back and its first warp runs the prologue's loads and a loop of
// the same iterations carrying only the block pointers. Each fill f waits, where active, for
// its stage's empty barrier to complete the phase of the consumers' release of fill
// f - stages: parity ((f + 1) / stages + 1) % 2 (the first fills find a fresh barrier, whose
// phase of parity 1 counts as complete; those of the prologue, constants below the stages,
// wait for nothing). The consumers take the registers, release the stage where they refilled
// it, in every iteration, and lose the refill's CTA barrier.
// CHECK-LABEL: func.func @matmul_ring
// CHECK-SAME: tile.producer_warps = 4 : i32
// CHECK-SAME: tile.shared_memory = 24624 : i64
// CHECK-DAG: %[[TILES:.*]] = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<3 x tensor<64x64xf16>>
// CHECK-DAG: %[[FULL:.*]] = tile.shared_alloc {tile.smem_offset = 24576 : i64} : !tile.shared<3 x tensor<1xi64>>
// CHECK-DAG: %[[EMPTY:.*]] = tile.shared_alloc {tile.smem_offset = 24600 : i64} : !tile.shared<3 x tensor<1xi64>>
// CHECK: tile.init_barriers %[[EMPTY]] arrivals 8
// CHECK: tile.init_barriers %[[FULL]] arrivals 1
// CHECK: %[[PRODUCER:.*]] = tile.in_producer_warps
// CHECK-NEXT: scf.if %[[PRODUCER]] {
// CHECK-NEXT: tile.set_max_registers 24
// CHECK-NEXT: %[[FIRST:.*]] = tile.in_producer_warps first
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: tile.tma_load %{{.*}}, %{{.*}} into %[[TILES]][%c0_i32], %[[FULL]] if
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: tile.tma_load %{{.*}}, %{{.*}} into %[[TILES]][%c1_i32]
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (!tile.block_ptr<tensor<64x64xf16>>)
// CHECK: %[[AHEAD:.*]] = arith.addi %{{.*}}, %c2_i32
// CHECK: %[[SLOT:.*]] = arith.remui %[[AHEAD]], %{{.*}}
// CHECK: %[[NEXT:.*]] = arith.addi %[[AHEAD]], %{{.*}}
// CHECK: %[[RELEASE:.*]] = arith.divui %[[NEXT]], %{{.*}}
// CHECK: %[[ODD:.*]] = arith.andi %[[RELEASE]], %{{.*}}
// CHECK: %[[PARITY:.*]] = arith.xori %[[ODD]], %{{.*}}
// CHECK: scf.if %[[ACTIVE:.*]] {
// CHECK-NEXT: tile.wait_barrier %[[EMPTY]][%[[SLOT]]], %[[PARITY]] :
// CHECK-NEXT: tile.tma_load %{{.*}}, %{{.*}} into %[[TILES]][%[[AHEAD]]], %[[FULL]] if %[[ACTIVE]]
// CHECK: } else {
// CHECK-NEXT: tile.set_max_registers 240 {increase}
// CHECK-NOT: tile.tma_load
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[FULL]][%{{.*}}], %{{.*}} :
// CHECK: tile.dot_wait {pending = 1 : i32}
// CHECK: %[[RELEASED:.*]] = arith.remui %{{.*}}, %c3_i32
// CHECK: tile.arrive_barrier %[[EMPTY]][%[[RELEASED]]] if %true :
// CHECK-NOT: tile.tma_load
func.func @matmul_ring(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32)
    attributes {tile.warp_specialize, tile.num_warps = 8 : i32, tile.shared_memory = 24600 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<3 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 24576 : i64} : !tile.shared<3 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<3 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %first = arith.cmpi sgt, %k, %c0 : i32
  tile.tma_load %map, %bp into %tiles[%c0], %bars if %first : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<3 x tensor<64x64xf16>>, !tile.shared<3 x tensor<1xi64>>
  %bp1 = tile.advance %bp, [%c64, %c0] : !tile.block_ptr<tensor<64x64xf16>>
  %second = arith.cmpi sgt, %k, %c64 : i32
  tile.tma_load %map, %bp1 into %tiles[%c1], %bars if %second : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<3 x tensor<64x64xf16>>, !tile.shared<3 x tensor<1xi64>>
  %out:2 = scf.for %i = %c0 to %k step %c64 iter_args(%acc = %zero, %at = %bp) -> (tensor<64x64xf32>, !tile.block_ptr<tensor<64x64xf16>>) : i32 {
    %it = arith.divsi %i, %c64 : i32
    %slot = arith.remsi %it, %c3 : i32
    %ahead = arith.addi %it, %c2 : i32
    %phase = arith.divsi %it, %c3 : i32
    %parity = arith.andi %phase, %c1 : i32
    tile.wait_barrier %bars[%slot], %parity : !tile.shared<3 x tensor<1xi64>>
    %b = tile.shared_load %tiles[%slot] : !tile.shared<3 x tensor<64x64xf16>> -> tensor<64x64xf16>
    %d = tile.dot %b, %b, %acc {async} : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    tile.dot_wait {barrier, pending = 1 : i32}
    %next = arith.addi %i, %c128 : i32
    %active = arith.cmpi slt, %next, %k : i32
    %far = tile.advance %at, [%c128, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %far into %tiles[%ahead], %bars if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<3 x tensor<64x64xf16>>, !tile.shared<3 x tensor<1xi64>>
    %step = tile.advance %at, [%c64, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    scf.yield %d, %step : tensor<64x64xf32>, !tile.block_ptr<tensor<64x64xf16>>
  }
  %done = tile.dot_wait %out#0 : tensor<64x64xf32> {pending = 0 : i32}
  tile.async_wait 0
  return
}

// -----

// The wait after a TMA loop that only ordered its refills (orders_refills) goes from the
// consumers: the producer never joins its barrier, and the empty barriers order the fills.
// CHECK-LABEL: func.func @refill_wait
// CHECK: } else {
// CHECK: scf.for
// CHECK: tile.dot_wait {pending = 0 : i32}
// CHECK-NOT: tile.async_wait
// CHECK: return
func.func @refill_wait(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 16400 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %first = arith.cmpi sgt, %k, %c0 : i32
  tile.tma_load %map, %bp into %tiles[%c0], %bars if %first : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
  %out:2 = scf.for %i = %c0 to %k step %c64 iter_args(%acc = %zero, %at = %bp) -> (tensor<64x64xf32>, !tile.block_ptr<tensor<64x64xf16>>) : i32 {
    %it = arith.divsi %i, %c64 : i32
    %slot = arith.remsi %it, %c2 : i32
    %ahead = arith.addi %it, %c1 : i32
    %parity = arith.andi %it, %c1 : i32
    tile.wait_barrier %bars[%slot], %parity : !tile.shared<2 x tensor<1xi64>>
    %b = tile.shared_load %tiles[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
    %d = tile.dot %b, %b, %acc {async} : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    tile.dot_wait {barrier, pending = 0 : i32}
    %next = arith.addi %i, %c64 : i32
    %active = arith.cmpi slt, %next, %k : i32
    %step = tile.advance %at, [%c64, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %step into %tiles[%ahead], %bars if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    scf.yield %d, %step : tensor<64x64xf32>, !tile.block_ptr<tensor<64x64xf16>>
  }
  tile.async_wait 0 {orders_refills}
  return
}

// -----

// It stays where the consumers write shared memory after their first loop (here a stage of
// the result), which may be memory a lagging warp still reads.
// CHECK-LABEL: func.func @refill_wait_before_a_store
// CHECK: } else {
// CHECK: scf.for
// CHECK: tile.async_wait 0 {orders_refills}
// CHECK: tile.shared_store
func.func @refill_wait_before_a_store(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 24592 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<2 x tensor<1xi64>>
  %result = tile.shared_alloc {tile.smem_offset = 16400 : i64} : !tile.shared<1 x tensor<64x64xf16>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %first = arith.cmpi sgt, %k, %c0 : i32
  tile.tma_load %map, %bp into %tiles[%c0], %bars if %first : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
  %out:2 = scf.for %i = %c0 to %k step %c64 iter_args(%acc = %zero, %at = %bp) -> (tensor<64x64xf32>, !tile.block_ptr<tensor<64x64xf16>>) : i32 {
    %it = arith.divsi %i, %c64 : i32
    %slot = arith.remsi %it, %c2 : i32
    %ahead = arith.addi %it, %c1 : i32
    %parity = arith.andi %it, %c1 : i32
    tile.wait_barrier %bars[%slot], %parity : !tile.shared<2 x tensor<1xi64>>
    %b = tile.shared_load %tiles[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
    %d = tile.dot %b, %b, %acc {async} : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
    tile.dot_wait {barrier, pending = 0 : i32}
    %next = arith.addi %i, %c64 : i32
    %active = arith.cmpi slt, %next, %k : i32
    %step = tile.advance %at, [%c64, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %step into %tiles[%ahead], %bars if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    scf.yield %d, %step : tensor<64x64xf32>, !tile.block_ptr<tensor<64x64xf16>>
  }
  tile.async_wait 0 {orders_refills}
  %half = arith.truncf %out#0 : tensor<64x64xf32> to tensor<64x64xf16>
  tile.shared_store %half, %result[%c0] : tensor<64x64xf16>, !tile.shared<1 x tensor<64x64xf16>>
  return
}

// -----

// Two rings one after the other, 4 consumer warps (no register reallocation: 256 threads may
// hold 255 registers each anyway): each has its empty barriers, and its fills wait on them
// alone (the rings of a warp-specialized kernel never share memory). The empty rings fill the
// gap that the second tile ring's 1024-byte alignment leaves. Every ring is initialized after
// the last buffer, one after another (they share a fence and a CTA barrier).
// CHECK-LABEL: func.func @two_rings
// CHECK-NOT: tile.set_max_registers
// CHECK-DAG: %[[FULL1:.*]] = tile.shared_alloc {tile.smem_offset = 16384 : i64}
// CHECK-DAG: %[[FULL2:.*]] = tile.shared_alloc {tile.smem_offset = 33792 : i64}
// CHECK-DAG: %[[EMPTY1:.*]] = tile.shared_alloc {tile.smem_offset = 16400 : i64} : !tile.shared<2 x tensor<1xi64>>
// CHECK-DAG: %[[EMPTY2:.*]] = tile.shared_alloc {tile.smem_offset = 16416 : i64} : !tile.shared<2 x tensor<1xi64>>
// CHECK: tile.init_barriers %[[EMPTY1]] arrivals 4
// CHECK-NEXT: tile.init_barriers %[[FULL1]] arrivals 1
// CHECK-NEXT: tile.init_barriers %[[EMPTY2]] arrivals 4
// CHECK-NEXT: tile.init_barriers %[[FULL2]] arrivals 1
// CHECK-NEXT: tile.in_producer_warps
// CHECK: scf.if
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[EMPTY1]]
// CHECK-NOT: tile.wait_barrier
// CHECK: tile.tma_load %{{.*}}, %{{.*}} into %{{.*}}[%c0_i32], %[[FULL2]]
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[EMPTY2]]
// CHECK: } else {
// CHECK: tile.wait_barrier %[[FULL1]][%{{.*}}], %{{.*}} :
// CHECK: tile.arrive_barrier %[[EMPTY1]]
// CHECK: tile.wait_barrier %[[FULL2]][%{{.*}}], %{{.*}} :
// CHECK: tile.arrive_barrier %[[EMPTY2]]
func.func @two_rings(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 33808 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %first = arith.cmpi sgt, %k, %c0 : i32
  %tiles1 = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars1 = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<2 x tensor<1xi64>>
  %tiles2 = tile.shared_alloc {tile.smem_offset = 17408 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars2 = tile.shared_alloc {tile.smem_offset = 33792 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars1 arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars2 arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  tile.tma_load %map, %bp into %tiles1[%c0], %bars1 if %first : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
  scf.for %i = %c0 to %k step %c64 : i32 {
    %it = arith.divsi %i, %c64 : i32
    %slot = arith.remsi %it, %c2 : i32
    %ahead = arith.addi %it, %c1 : i32
    %parity = arith.andi %it, %c1 : i32
    tile.wait_barrier %bars1[%slot], %parity {sync} : !tile.shared<2 x tensor<1xi64>>
    %next = arith.addi %i, %c64 : i32
    %active = arith.cmpi slt, %next, %k : i32
    %far = tile.advance %bp, [%next, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %far into %tiles1[%ahead], %bars1 if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %x = tile.shared_load %tiles1[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
  }
  tile.async_wait 0
  tile.tma_load %map, %bp into %tiles2[%c0], %bars2 if %first : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
  scf.for %i = %c0 to %k step %c64 : i32 {
    %it = arith.divsi %i, %c64 : i32
    %slot = arith.remsi %it, %c2 : i32
    %ahead = arith.addi %it, %c1 : i32
    %parity = arith.andi %it, %c1 : i32
    tile.wait_barrier %bars2[%slot], %parity {sync} : !tile.shared<2 x tensor<1xi64>>
    %next = arith.addi %i, %c64 : i32
    %active = arith.cmpi slt, %next, %k : i32
    %far = tile.advance %bp, [%next, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %far into %tiles2[%ahead], %bars2 if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %x = tile.shared_load %tiles2[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
  }
  tile.async_wait 0
  return
}

// -----

// Two programs an SM (tile.programs_per_sm): each starts with 32768 / 256 threads = 128
// registers a thread; the producer keeps 24 and its 4 consumer warps take the rest, 232.
// CHECK-LABEL: func.func @two_programs_an_sm
// CHECK: scf.if
// CHECK-NEXT: tile.set_max_registers 24
// CHECK: } else {
// CHECK-NEXT: tile.set_max_registers 232 {increase}
func.func @two_programs_an_sm(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.programs_per_sm = 2 : i32, tile.shared_memory = 2048 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %first = arith.cmpi sgt, %k, %c0 : i32
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  tile.tma_load %map, %bp into %tiles[%c0], %bars if %first : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
  scf.for %i = %c0 to %k step %c64 : i32 {
    %it = arith.divsi %i, %c64 : i32
    %slot = arith.remsi %it, %c2 : i32
    %parity = arith.andi %it, %c1 : i32
    tile.wait_barrier %bars[%slot], %parity {sync} : !tile.shared<2 x tensor<1xi64>>
    %next = arith.addi %i, %c64 : i32
    %active = arith.cmpi slt, %next, %k : i32
    %far = tile.advance %bp, [%next, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %far into %tiles[%slot], %bars if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %x = tile.shared_load %tiles[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
  }
  tile.async_wait 0
  return
}

// -----

// Without TMA loads there is nothing to produce: the kernel keeps its warps.
// CHECK-LABEL: func.func @nothing_to_produce
// CHECK-NOT: tile.producer_warps
// CHECK-NOT: tile.in_producer_warps
func.func @nothing_to_produce() attributes {tile.warp_specialize, tile.num_warps = 4 : i32} {
  return
}

// -----

// Loops in a loop (programs walking tiles here; block-sparse dK/dV's loop over a GQA group's
// heads): each tile's two loops (unmasked and masked blocks) fill one ring whose fills are
// numbered across loops and tiles (carried by the tile loop).
// The producer mirrors the tile loop, carrying only the fill count: the next loop's and the
// next tile's first fills wait for the consumers' releases like any refill, so they are
// issued while the consumers still compute on the previous loop's last stages.
// CHECK-LABEL: func.func @walking_tiles
// CHECK: scf.if %{{.*}} {
// CHECK: scf.for %[[TILE:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[FILLED:.*]] = %{{.*}}) -> (i32)
// CHECK: scf.if
// CHECK-NEXT: tile.wait_barrier %[[EMPTY:.*]][%{{.*}}], %{{.*}} :
// CHECK-NEXT: tile.tma_load %{{.*}}, %{{.*}} into %{{.*}}[%[[FILLED]]]
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[EMPTY]]
// CHECK-NEXT: tile.tma_load
// CHECK: %[[MIDDLE:.*]] = arith.addi %[[FILLED]], %{{.*}} : i32
// CHECK: scf.if
// CHECK-NEXT: tile.wait_barrier %[[EMPTY]]
// CHECK-NEXT: tile.tma_load %{{.*}}, %{{.*}} into %{{.*}}[%[[MIDDLE]]]
// CHECK: scf.for
// CHECK: tile.wait_barrier %[[EMPTY]]
// CHECK-NEXT: tile.tma_load
// CHECK: %[[END:.*]] = arith.addi %[[MIDDLE]], %{{.*}} : i32
// CHECK: scf.yield %[[END]] : i32
// CHECK: } else {
// CHECK: scf.for
// CHECK: scf.for
// CHECK: tile.arrive_barrier %[[EMPTY]]
// CHECK: scf.for
// CHECK: tile.arrive_barrier %[[EMPTY]]
// CHECK: tile.store
func.func @walking_tiles(%k: !tile.ptr<f16>, %n: i32, %tiles: i32, %split: i32, %q: tensor<64x64xf16>,
                         %out: !tile.ptr<f32>, %map: !tile.tensor_map)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 16400 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c63 = arith.constant 63 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %ring = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  %n64 = arith.extsi %n : i32 to i64
  %bp = tile.make_block_ptr %k, [%n64, %n64], [%n64, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %pid = tile.program_id x
  %programs = tile.num_programs x
  %filled = scf.for %t = %pid to %tiles step %programs iter_args(%base = %c0) -> (i32) : i32 {
    %any = arith.cmpi sgt, %split, %c0 : i32
    %at0 = tile.advance %bp, [%t, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %at0 into %ring[%base], %bars if %any : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %first = scf.for %i = %c0 to %split step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
      %it = arith.divsi %i, %c64 : i32
      %fill = arith.addi %base, %it : i32
      %slot = arith.remsi %fill, %c2 : i32
      %ahead = arith.addi %fill, %c1 : i32
      %phase = arith.divsi %fill, %c2 : i32
      %parity = arith.andi %phase, %c1 : i32
      tile.wait_barrier %bars[%slot], %parity {sync} : !tile.shared<2 x tensor<1xi64>>
      %x = tile.shared_load %ring[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
      %next = arith.addi %i, %c64 : i32
      %active = arith.cmpi slt, %next, %split : i32
      %row = arith.addi %next, %t : i32
      %far = tile.advance %bp, [%row, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      tile.tma_load %map, %far into %ring[%ahead], %bars if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
      %s = tile.dot %q, %x, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    tile.async_wait 0
    %rounded = arith.addi %split, %c63 : i32
    %trips = arith.divsi %rounded, %c64 : i32
    %middle = arith.addi %base, %trips : i32
    %more = arith.cmpi slt, %split, %n : i32
    %at1 = tile.advance %bp, [%split, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %at1 into %ring[%middle], %bars if %more : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %second = scf.for %i = %split to %n step %c64 iter_args(%acc = %first) -> (tensor<64x64xf32>) : i32 {
      %from = arith.subi %i, %split : i32
      %it = arith.divsi %from, %c64 : i32
      %fill = arith.addi %middle, %it : i32
      %slot = arith.remsi %fill, %c2 : i32
      %ahead = arith.addi %fill, %c1 : i32
      %phase = arith.divsi %fill, %c2 : i32
      %parity = arith.andi %phase, %c1 : i32
      tile.wait_barrier %bars[%slot], %parity {sync} : !tile.shared<2 x tensor<1xi64>>
      %x = tile.shared_load %ring[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
      %next = arith.addi %i, %c64 : i32
      %active = arith.cmpi slt, %next, %n : i32
      %far = tile.advance %bp, [%next, %c0] : !tile.block_ptr<tensor<64x64xf16>>
      tile.tma_load %map, %far into %ring[%ahead], %bars if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
      %s = tile.dot %q, %x, %acc : tensor<64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    tile.async_wait 0
    %span = arith.subi %n, %split : i32
    %rest = arith.addi %span, %c63 : i32
    %trips2 = arith.divsi %rest, %c64 : i32
    %end = arith.addi %middle, %trips2 : i32
    %ptrs = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>>
    tile.store %ptrs, %second : tensor<64x64x!tile.ptr<f32>>
    scf.yield %end : i32
  }
  return
}

// -----

// A ring initialized inside a loop is set up again and again: not specialized either.
// expected-error @+1 {{warp_specialize: TMA rings must be initialized in the kernel's body}}
func.func @ring_in_loop(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 2048 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %one = arith.constant 1 : i64
  %true = arith.constant true
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  scf.for %t = %c0 to %k step %c1 : i32 {
    tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
    tile.wait_barrier %bars[%c0], %c0 {sync} : !tile.shared<2 x tensor<1xi64>>
    tile.tma_load %map, %bp into %tiles[%c0], %bars if %true : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
  }
  return
}

// -----

// A TMA load whose block pointer comes from a tile the loop carries cannot be computed by the
// producer.
func.func @tile_dependent(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32, %rows: tensor<64xi32>)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 2048 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %one = arith.constant 1 : i64
  %true = arith.constant true
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  // expected-error @+1 {{warp_specialize: a TMA load's operand depends on a tile the loop carries}}
  %r = scf.for %i = %c0 to %k step %c1 iter_args(%carried = %rows) -> (tensor<64xi32>) : i32 {
    tile.wait_barrier %bars[%c0], %c0 {sync} : !tile.shared<2 x tensor<1xi64>>
    %row = tile.reduce max %carried {axis = 0 : i32} : tensor<64xi32> -> i32
    %at = tile.advance %bp, [%row, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %at into %tiles[%c0], %bars if %true : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    scf.yield %carried : tensor<64xi32>
  }
  return
}

// -----

// A cp.async ring beside the TMA's (a persistent kernel's Q) stays with the consumers, whose
// waits end in their own barrier; the producer issues only the TMA loads.
// CHECK-LABEL: func.func @cp_async_ring
// CHECK: scf.if %{{.*}} {
// CHECK: scf.for
// CHECK-NOT: tile.async_copy
// CHECK: tile.tma_load
// CHECK: } else {
// CHECK: scf.for
// CHECK-NOT: tile.tma_load
// CHECK: tile.async_copy
// CHECK: return
func.func @cp_async_ring(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %k: i32, %ptrs: tensor<64x64x!tile.ptr<f16>>,
                         %mask: tensor<64x64xi1>)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 4096 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %one = arith.constant 1 : i64
  %true = arith.constant true
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %copies = tile.shared_alloc {tile.smem_offset = 2048 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  scf.for %i = %c0 to %k step %c1 : i32 {
    tile.wait_barrier %bars[%c0], %c0 {sync} : !tile.shared<2 x tensor<1xi64>>
    tile.tma_load %map, %bp into %tiles[%c0], %bars if %true : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    tile.async_copy %ptrs, %mask into %copies[%c0] : tensor<64x64x!tile.ptr<f16>>, tensor<64x64xi1>, !tile.shared<2 x tensor<64x64xf16>>
  }
  return
}

// -----

// Block-sparse attention's ring: the loop's trip count and each refill's block come from a
// table of block indices the kernel never writes; the producer reads them too (the refill's
// index only where the iteration ahead exists, as the consumers did).
// CHECK-LABEL: func.func @indexed_ring
// CHECK: scf.if %[[FIRST:.*]] {
// CHECK: %[[COUNT:.*]] = tile.load %{{.*}} : !tile.ptr<i32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[COUNT]]
// CHECK: %[[BLOCK:.*]] = tile.load %{{.*}}, %[[ACTIVE:.*]], %{{.*}} : !tile.ptr<i32>
// CHECK: scf.if %[[ACTIVE]] {
// CHECK-NEXT: tile.wait_barrier
// CHECK-NEXT: tile.tma_load
// CHECK: } else {
// CHECK-NOT: tile.tma_load
// CHECK: tile.arrive_barrier
func.func @indexed_ring(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %table: !tile.ptr<i32>, %n: i64)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 2048 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %count = tile.load %table : !tile.ptr<i32>
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  scf.for %j = %c0 to %count step %c1 : i32 {
    %slot = arith.remsi %j, %c2 : i32
    %parity = arith.andi %j, %c1 : i32
    tile.wait_barrier %bars[%slot], %parity {sync} : !tile.shared<2 x tensor<1xi64>>
    %next = arith.addi %j, %c1 : i32
    %active = arith.cmpi slt, %next, %count : i32
    %at = tile.addptr %table, %next : !tile.ptr<i32>, i32
    %block = tile.load %at, %active, %c0 : !tile.ptr<i32>
    %row = arith.muli %block, %c64 : i32
    %far = tile.advance %bp, [%row, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    tile.tma_load %map, %far into %tiles[%slot], %bars if %active : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    %x = tile.shared_load %tiles[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
  }
  tile.async_wait 0
  return
}

// -----

// Where the kernel writes the table, the producer's read could see another value than the
// consumers': not specialized.
func.func @indexed_ring_of_a_written_table(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %table: !tile.ptr<i32>, %n: i64)
    attributes {tile.warp_specialize, tile.num_warps = 4 : i32, tile.shared_memory = 2048 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c8 = arith.constant 8 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %true = arith.constant true
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%c0, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x64xf16>>
  %tiles = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  scf.for %j = %c0 to %c8 step %c1 : i32 {
    %slot = arith.remsi %j, %c2 : i32
    %parity = arith.andi %j, %c1 : i32
    tile.wait_barrier %bars[%slot], %parity {sync} : !tile.shared<2 x tensor<1xi64>>
    %at = tile.addptr %table, %j : !tile.ptr<i32>, i32
    %block = tile.load %at : !tile.ptr<i32>
    %row = arith.muli %block, %c64 : i32
    %far = tile.advance %bp, [%row, %c0] : !tile.block_ptr<tensor<64x64xf16>>
    // expected-error @+1 {{warp_specialize: a TMA load's operand is not index math the producer can compute}}
    tile.tma_load %map, %far into %tiles[%slot], %bars if %true : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
    tile.store %at, %c0 : !tile.ptr<i32>
    %x = tile.shared_load %tiles[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16>
  }
  tile.async_wait 0
  return
}
