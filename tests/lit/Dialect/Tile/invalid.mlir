// Every verifier error of the tile dialect, with the message naming what is wrong.
// RUN: tessera-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{tile.ptr points to integers or floats, not 'index'}}
func.func @ptr_to_index(%p: !tile.ptr<index>) { return }

// -----

// expected-error @+1 {{tile.block_ptr blocks hold integers or floats, not '!tile.ptr<f32>'}}
func.func @block_of_pointers(%p: !tile.block_ptr<tensor<16x!tile.ptr<f32>>>) { return }

// -----

func.func @range_empty() {
  // expected-error @+1 {{range [4, 4) must be non-empty}}
  %r = tile.make_range 4 to 4 : tensor<0xi32>
  return
}

// -----

func.func @range_not_power_of_two() {
  // expected-error @+1 {{range [0, 100) has 100 elements; tile sizes must be powers of two}}
  %r = tile.make_range 0 to 100 : tensor<100xi32>
  return
}

// -----

func.func @range_wrong_result() {
  // expected-error @+1 {{result i32[64] does not hold the 128 elements of [0, 128)}}
  %r = tile.make_range 0 to 128 : tensor<64xi32>
  return
}

// -----

func.func @splat_type(%x: f32) {
  // expected-error @+1 {{splat of f32 cannot produce f16[128]}}
  %t = tile.splat %x : f32 -> tensor<128xf16>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<64xf32>) {
  // expected-error @+1 {{cannot broadcast f32[64] to f32[128x64]: rank and element type must match}}
  %t = tile.broadcast %x : tensor<64xf32> -> tensor<128x64xf32>
  return
}

// -----

func.func @broadcast_dim(%x: tensor<2x64xf32>) {
  // expected-error @+1 {{cannot broadcast f32[2x64] to f32[128x64]: dimension 2 is neither 128 nor 1}}
  %t = tile.broadcast %x : tensor<2x64xf32> -> tensor<128x64xf32>
  return
}

// -----

func.func @expand_dims_axis(%x: tensor<64xf32>) {
  // expected-error @+1 {{axis 2 is outside 0..1 for f32[64]}}
  %t = tile.expand_dims %x {axis = 2 : i32} : tensor<64xf32> -> tensor<64x1xf32>
  return
}

// -----

func.func @expand_dims_result(%x: tensor<64xf32>) {
  // expected-error @+1 {{expanding f32[64] at axis 0 gives f32[1x64], not f32[64x1]}}
  %t = tile.expand_dims %x {axis = 0 : i32} : tensor<64xf32> -> tensor<64x1xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<16x8xf16>) {
  // expected-error @+1 {{cannot reshape f16[16x8] (128 elements) to f16[64] (64 elements)}}
  %t = tile.reshape %x : tensor<16x8xf16> -> tensor<64xf16>
  return
}

// -----

func.func @trans_order(%x: tensor<16x8xf16>) {
  // expected-error @+1 {{order [1, 1] is not a permutation of 0..1}}
  %t = tile.trans %x {order = array<i32: 1, 1>} : tensor<16x8xf16> -> tensor<8x16xf16>
  return
}

// -----

func.func @trans_order_size(%x: tensor<16x8xf16>) {
  // expected-error @+1 {{order has 3 entries for rank 2}}
  %t = tile.trans %x {order = array<i32: 1, 0, 2>} : tensor<16x8xf16> -> tensor<8x16xf16>
  return
}

// -----

func.func @trans_result(%x: tensor<16x8xf16>) {
  // expected-error @+1 {{transposing f16[16x8] gives f16[8x16], not f16[16x8]}}
  %t = tile.trans %x {order = array<i32: 1, 0>} : tensor<16x8xf16> -> tensor<16x8xf16>
  return
}

// -----

func.func @addptr_shape(%p: tensor<128x!tile.ptr<f32>>, %o: tensor<64xi32>) {
  // expected-error @+1 {{offset i32[64] does not have the shape of ptr ptr<f32>[128]}}
  %q = tile.addptr %p, %o : tensor<128x!tile.ptr<f32>>, tensor<64xi32>
  return
}

// -----

func.func @addptr_scalar_tile(%p: !tile.ptr<f32>, %o: tensor<64xi32>) {
  // expected-error @+1 {{offset i32[64] does not have the shape of ptr ptr<f32>}}
  %q = "tile.addptr"(%p, %o) : (!tile.ptr<f32>, tensor<64xi32>) -> !tile.ptr<f32>
  return
}

// -----

func.func @load_result(%p: tensor<128x!tile.ptr<f32>>) {
  // expected-error @+1 {{result f16[128] does not match ptr ptr<f32>[128] (expected f32[128])}}
  %v = "tile.load"(%p) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<128x!tile.ptr<f32>>) -> tensor<128xf16>
  return
}

// -----

func.func @load_mask(%p: tensor<128x!tile.ptr<f32>>, %m: tensor<64xi1>) {
  // expected-error @+1 {{mask i1[64] does not match ptr ptr<f32>[128] (expected i1[128])}}
  %v = "tile.load"(%p, %m) <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<128x!tile.ptr<f32>>, tensor<64xi1>) -> tensor<128xf32>
  return
}

// -----

func.func @load_other_without_mask(%p: tensor<128x!tile.ptr<f32>>, %o: tensor<128xf32>) {
  // expected-error @+1 {{other needs a mask}}
  %v = "tile.load"(%p, %o) <{operandSegmentSizes = array<i32: 1, 0, 1>}> : (tensor<128x!tile.ptr<f32>>, tensor<128xf32>) -> tensor<128xf32>
  return
}

// -----

func.func @load_other_type(%p: tensor<128x!tile.ptr<f32>>, %m: tensor<128xi1>, %o: tensor<128xf16>) {
  // expected-error @+1 {{other f16[128] does not match result f32[128]}}
  %v = "tile.load"(%p, %m, %o) <{operandSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<128x!tile.ptr<f32>>, tensor<128xi1>, tensor<128xf16>) -> tensor<128xf32>
  return
}

// -----

func.func @load_not_pointer(%p: tensor<128xf32>) {
  // expected-error @+1 {{expected a pointer or a tile of pointers, got 'tensor<128xf32>'}}
  %v = tile.load %p : tensor<128xf32>
  return
}

// -----

func.func @store_value(%p: tensor<128x!tile.ptr<f16>>, %v: tensor<128xf32>) {
  // expected-error @+1 {{value f32[128] does not match ptr ptr<f16>[128] (expected f16[128])}}
  "tile.store"(%p, %v) : (tensor<128x!tile.ptr<f16>>, tensor<128xf32>) -> ()
  return
}

// -----

func.func @store_mask(%p: tensor<128x!tile.ptr<f16>>, %v: tensor<128xf16>, %m: tensor<128x1xi1>) {
  // expected-error @+1 {{mask i1[128x1] does not match ptr ptr<f16>[128] (expected i1[128])}}
  "tile.store"(%p, %v, %m) : (tensor<128x!tile.ptr<f16>>, tensor<128xf16>, tensor<128x1xi1>) -> ()
  return
}

// -----

func.func @atomic_bitwise_float(%p: tensor<128x!tile.ptr<f32>>, %v: tensor<128xf32>) {
  // expected-error @+1 {{atomic xor does not apply to f32[128]}}
  %o = tile.atomic_rmw xor, acq_rel, gpu, %p, %v : tensor<128x!tile.ptr<f32>>
  return
}

// -----

func.func @atomic_bool(%p: !tile.ptr<i1>, %v: i1) {
  // expected-error @+1 {{atomic add does not apply to i1}}
  %o = tile.atomic_rmw add, acq_rel, gpu, %p, %v : !tile.ptr<i1>
  return
}

// -----

func.func @atomic_value(%p: tensor<128x!tile.ptr<f32>>, %v: tensor<128xf16>) {
  // expected-error @+1 {{value f16[128] does not match ptr ptr<f32>[128] (expected f32[128])}}
  %o = "tile.atomic_rmw"(%p, %v) <{kind = #tile.atomic_kind<add>, sem = #tile.sem<acq_rel>, scope = #tile.scope<gpu>}> : (tensor<128x!tile.ptr<f32>>, tensor<128xf16>) -> tensor<128xf16>
  return
}

// -----

func.func @bulk_add_f16(%p: !tile.ptr<f16>, %v: tensor<16x16xf16>) {
  // expected-error @+1 {{adds f32 tiles through an f32 pointer, got f16[16x16] through ptr<f16>}}
  tile.bulk_add %p, %v : !tile.ptr<f16>, tensor<16x16xf16>
  return
}

// -----

func.func @bulk_add_bytes(%p: !tile.ptr<f32>, %v: tensor<1x2xf32>) {
  // expected-error @+1 {{adds a 2-D tile of a multiple of 16 bytes, got f32[1x2]}}
  tile.bulk_add %p, %v : !tile.ptr<f32>, tensor<1x2xf32>
  return
}

// -----

func.func @bulk_add_swizzled_width(%p: !tile.ptr<f32>, %v: tensor<16x16xf32>) {
  // expected-error @+1 {{swizzles rows of a multiple of 32 floats, got f32[16x16]}}
  tile.bulk_add %p, %v {swizzled} : !tile.ptr<f32>, tensor<16x16xf32>
  return
}

// -----

func.func @atomic_kind(%p: !tile.ptr<f32>, %v: f32) {
  // expected-error @+1 {{unknown keyword 'mul'}}
  %o = tile.atomic_rmw mul, acq_rel, gpu, %p, %v : !tile.ptr<f32>
  return
}

// -----

func.func @block_ptr_count(%k: !tile.ptr<f16>, %n: i64, %o: i32) {
  // expected-error @+1 {{shape has 1 entries but the block f16[64x128] has rank 2}}
  %bp = tile.make_block_ptr %k, [%n], [%n, %n], [%o, %o] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  return
}

// -----

func.func @block_ptr_offsets(%k: !tile.ptr<f16>, %n: i64, %o: i32) {
  // expected-error @+1 {{offsets has 3 entries but the block f16[64x128] has rank 2}}
  %bp = tile.make_block_ptr %k, [%n, %n], [%n, %n], [%o, %o, %o] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  return
}

// -----

func.func @block_ptr_base(%k: !tile.ptr<f32>, %n: i64, %o: i32) {
  // expected-error @+1 {{base ptr<f32> does not point to the elements of the block f16[64x128]}}
  %bp = tile.make_block_ptr %k, [%n, %n], [%n, %n], [%o, %o] {order = array<i32: 1, 0>} : !tile.ptr<f32> -> !tile.block_ptr<tensor<64x128xf16>>
  return
}

// -----

func.func @block_ptr_order(%k: !tile.ptr<f16>, %n: i64, %o: i32) {
  // expected-error @+1 {{order [0, 0] is not a permutation of 0..1}}
  %bp = tile.make_block_ptr %k, [%n, %n], [%n, %n], [%o, %o] {order = array<i32: 0, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  return
}

// -----

func.func @advance_count(%bp: !tile.block_ptr<tensor<64x128xf16>>, %o: i32) {
  // expected-error @+1 {{1 offsets for the rank-2 block block_ptr<f16[64x128]>}}
  %n = tile.advance %bp, [%o] : !tile.block_ptr<tensor<64x128xf16>>
  return
}

// -----

func.func @block_load_result(%bp: !tile.block_ptr<tensor<64x128xf16>>) {
  // expected-error @+1 {{result f16[128x64] is not the block f16[64x128]}}
  %t = tile.block_load %bp {boundary_check = array<i32>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<128x64xf16>
  return
}

// -----

func.func @block_load_check(%bp: !tile.block_ptr<tensor<64x128xf16>>) {
  // expected-error @+1 {{boundary_check lists dimension 1 more than once or outside 0..1}}
  %t = tile.block_load %bp {boundary_check = array<i32: 1, 1>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16>
  return
}

// -----

func.func @block_store_value(%bp: !tile.block_ptr<tensor<64x128xf16>>, %v: tensor<64x128xf32>) {
  // expected-error @+1 {{value f32[64x128] is not the block f16[64x128]}}
  tile.block_store %bp, %v {boundary_check = array<i32>} : !tile.block_ptr<tensor<64x128xf16>>, tensor<64x128xf32>
  return
}

// -----

func.func @block_store_check(%bp: !tile.block_ptr<tensor<64x128xf16>>, %v: tensor<64x128xf16>) {
  // expected-error @+1 {{boundary_check lists dimension 2 more than once or outside 0..1}}
  tile.block_store %bp, %v {boundary_check = array<i32: 2>} : !tile.block_ptr<tensor<64x128xf16>>, tensor<64x128xf16>
  return
}

// -----

func.func @dot_rank(%a: tensor<2x64x64xf16>, %b: tensor<64x64xf16>, %c: tensor<64x64xf32>) {
  // expected-error @+1 {{operands must be 2-D, got a f16[2x64x64], b f16[64x64], acc f32[64x64]}}
  %d = tile.dot %a, %b, %c : tensor<2x64x64xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @dot_inner(%a: tensor<64x32xf16>, %b: tensor<64x64xf16>, %c: tensor<64x64xf32>) {
  // expected-error @+1 {{inner dimensions differ: a f16[64x32] and b f16[64x64]}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16> * tensor<64x64xf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @dot_acc(%a: tensor<64x32xf16>, %b: tensor<32x64xf16>, %c: tensor<32x64xf32>) {
  // expected-error @+1 {{acc f32[32x64] is not 64x64 for a f16[64x32] and b f16[32x64]}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<32x64xf32>
  return
}

// -----

func.func @dot_small(%a: tensor<64x8xf16>, %b: tensor<8x64xf16>, %c: tensor<64x64xf32>) {
  // expected-error @+1 {{every dimension must be at least 16, got a f16[64x8] and b f16[8x64]}}
  %d = tile.dot %a, %b, %c : tensor<64x8xf16> * tensor<8x64xf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @dot_mixed(%a: tensor<64x32xf16>, %b: tensor<32x64xbf16>, %c: tensor<64x64xf32>) {
  // expected-error @+1 {{a f16[64x32] and b bf16[32x64] have different element types}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x64xbf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @dot_unsupported(%a: tensor<64x32xbf16>, %b: tensor<32x64xbf16>, %c: tensor<64x64xbf16>) {
  // expected-error @+1 {{unsupported dot of bf16[64x32] into bf16[64x64]}}
  %d = tile.dot %a, %b, %c : tensor<64x32xbf16> * tensor<32x64xbf16> -> tensor<64x64xbf16>
  return
}

// -----

func.func @dot_tf32_on_f16(%a: tensor<64x32xf16>, %b: tensor<32x64xf16>, %c: tensor<64x64xf32>) {
  // expected-error @+1 {{input_precision tf32 applies to f32 inputs, not f16[64x32]}}
  %d = tile.dot %a, %b, %c {input_precision = #tile.precision<tf32>} : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @reduce_axis(%x: tensor<128x64xf32>) {
  // expected-error @+1 {{axis 2 is outside 0..1 for f32[128x64]}}
  %r = tile.reduce sum %x {axis = 2 : i32} : tensor<128x64xf32> -> tensor<128xf32>
  return
}

// -----

func.func @reduce_bool(%x: tensor<128xi1>) {
  // expected-error @+1 {{sum of i1[128] is not supported; cast to i32 first}}
  %r = tile.reduce sum %x {axis = 0 : i32} : tensor<128xi1> -> i1
  return
}

// -----

func.func @reduce_result(%x: tensor<128x64xf32>) {
  // expected-error @+1 {{argmax of f32[128x64] along axis 1 gives i32[128], not f32[128]}}
  %r = tile.reduce argmax %x {axis = 1 : i32} : tensor<128x64xf32> -> tensor<128xf32>
  return
}

// -----

func.func @convert_shape(%x: tensor<64xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>) {
  // expected-error @+1 {{converts f32[64] to f32[32]: shape and element type must stay}}
  %y = tile.convert_layout %x : tensor<64xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>> -> tensor<32xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
  return
}

// -----

// expected-error @+1 {{blocked layout threadsPerWarp must multiply to 32, got 16}}
func.func @lanes(%x: tensor<64xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [16], warpsPerCTA = [4], order = [0]>>) { return }

// -----

// expected-error @+1 {{blocked layout sizes must be powers of two, got 3}}
func.func @sizes(%x: tensor<64xf32, #tile.blocked<sizePerThread = [3], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>) { return }

// -----

// expected-error @+1 {{blocked layout order must be a permutation of 0..1}}
func.func @order(%x: tensor<8x8xf32, #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 1]>>) { return }

// -----

// expected-error @+1 {{blocked layout parameters must all have the same rank}}
func.func @rank(%x: tensor<8x8xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>>) { return }

// -----

func.func @async_copy_type(%p: tensor<64x32x!tile.ptr<f32>>, %m: tensor<64x32xi1>, %slot: i32) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x32xbf16>>
  // expected-error @+1 {{copies f32[64x32] into stages of bf16[64x32]}}
  tile.async_copy %p, %m into %buf[%slot] : tensor<64x32x!tile.ptr<f32>>, tensor<64x32xi1>, !tile.shared<2 x tensor<64x32xbf16>>
  return
}

// -----

func.func @async_copy_mask(%p: tensor<64x32x!tile.ptr<bf16>>, %m: tensor<64x16xi1>, %slot: i32) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x32xbf16>>
  // expected-error @+1 {{mask i1[64x16] does not match ptr ptr<bf16>[64x32]}}
  tile.async_copy %p, %m into %buf[%slot] : tensor<64x32x!tile.ptr<bf16>>, tensor<64x16xi1>, !tile.shared<2 x tensor<64x32xbf16>>
  return
}

// -----

func.func @shared_load_type(%slot: i32) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x32xbf16>>
  // expected-error @+1 {{reads bf16[32x64] from stages of bf16[64x32]}}
  %t = tile.shared_load %buf[%slot] : !tile.shared<2 x tensor<64x32xbf16>> -> tensor<32x64xbf16>
  return
}

// -----

func.func @shared_store_type(%slot: i32, %t: tensor<64x32xf16>) {
  %buf = tile.shared_alloc : !tile.shared<1 x tensor<64x32xbf16>>
  // expected-error @+1 {{writes f16[64x32] into stages of bf16[64x32]}}
  tile.shared_store %t, %buf[%slot] : tensor<64x32xf16>, !tile.shared<1 x tensor<64x32xbf16>>
  return
}

// -----

func.func @init_barriers_ring() {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x32xbf16>>
  // expected-error @+1 {{needs stages of tensor<1xi64>, not bf16[64x32]}}
  tile.init_barriers %buf arrivals 1 : !tile.shared<2 x tensor<64x32xbf16>>
  return
}

// -----

func.func @tma_load_block(%map: !tile.tensor_map, %bp: !tile.block_ptr<tensor<64x64xf16>>, %slot: i32, %on: i1) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x32xf16>>
  %bars = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
  // expected-error @+1 {{copies blocks of f16[64x64] into stages of f16[64x32]}}
  tile.tma_load %map, %bp into %buf[%slot], %bars if %on : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x32xf16>>, !tile.shared<2 x tensor<1xi64>>
  return
}

// -----

// Rows of 32-bit elements are copied; 2-D tiles only of 16-bit ones.
func.func @tma_load_f32_tile(%map: !tile.tensor_map, %bp: !tile.block_ptr<tensor<64x64xf32>>, %slot: i32, %on: i1) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf32>>
  %bars = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
  // expected-error @+1 {{copies blocks that are, but for unit dimensions (the columns innermost), 2-D tiles of 16-bit elements or rows of 16- or 32-bit elements, not f32[64x64]}}
  tile.tma_load %map, %bp into %buf[%slot], %bars if %on : !tile.block_ptr<tensor<64x64xf32>>, !tile.shared<2 x tensor<64x64xf32>>, !tile.shared<2 x tensor<1xi64>>
  return
}

// -----

func.func @tma_load_barriers(%map: !tile.tensor_map, %bp: !tile.block_ptr<tensor<64x64xf16>>, %slot: i32, %on: i1) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc : !tile.shared<3 x tensor<1xi64>>
  // expected-error @+1 {{needs one mbarrier (tensor<1xi64>) per stage of the buffer}}
  tile.tma_load %map, %bp into %buf[%slot], %bars if %on : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<3 x tensor<1xi64>>
  return
}

// -----

func.func @tma_load_arrivals(%map: !tile.tensor_map, %bp: !tile.block_ptr<tensor<64x64xf16>>, %slot: i32, %on: i1) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x64xf16>>
  %bars = tile.shared_alloc : !tile.shared<2 x tensor<1xi64>>
  // expected-error @+1 {{arrives at least once, not 0 times}}
  tile.tma_load %map, %bp into %buf[%slot], %bars if %on {arrivals = 0 : i32} : !tile.block_ptr<tensor<64x64xf16>>, !tile.shared<2 x tensor<64x64xf16>>, !tile.shared<2 x tensor<1xi64>>
  return
}

// -----

func.func @wait_barrier_ring(%slot: i32) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<2xi64>>
  // expected-error @+1 {{needs stages of tensor<1xi64>, not i64[2]}}
  tile.wait_barrier %buf[%slot], %slot : !tile.shared<2 x tensor<2xi64>>
  return
}

// -----

func.func @arrive_barrier_ring(%slot: i32, %on: i1) {
  %buf = tile.shared_alloc : !tile.shared<2 x tensor<64x32xbf16>>
  // expected-error @+1 {{needs stages of tensor<1xi64>, not bf16[64x32]}}
  tile.arrive_barrier %buf[%slot] if %on : !tile.shared<2 x tensor<64x32xbf16>>
  return
}

// -----

func.func @set_max_registers_range() {
  // expected-error @+1 {{takes a multiple of 8 from 24 to 256 registers, not 236}}
  tile.set_max_registers 236 {increase}
  return
}

// -----

func.func @within_threads_max(%x: tensor<128x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>>) {
  // expected-error @+1 {{within_threads needs a sum to a tile, with layouts}}
  %r = tile.reduce max %x {axis = 1 : i32, within_threads} : tensor<128x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>> -> tensor<128xf32, #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>>>
  return
}

// -----

func.func @within_threads_without_layouts(%x: tensor<128x64xf32>) {
  // expected-error @+1 {{within_threads needs a sum to a tile, with layouts}}
  %r = tile.reduce sum %x {axis = 1 : i32, within_threads} : tensor<128x64xf32> -> tensor<128xf32>
  return
}

// -----

func.func @combine_lanes_without_layouts(%x: tensor<128xf32>) {
  // expected-error @+1 {{combines float tiles with layouts, not f32[128]}}
  %r = tile.combine_lanes %x {lanes = 3 : i32} : tensor<128xf32>
  return
}

// -----

func.func @combine_lanes_mask(%x: tensor<128xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>) {
  // expected-error @+1 {{lanes must be a mask of lane id bits, 1 to 31, not 32}}
  %r = tile.combine_lanes %x {lanes = 32 : i32} : tensor<128xf32, #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
  return
}
