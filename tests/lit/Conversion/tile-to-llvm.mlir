// RUN: tessera-opt %s -split-input-file -tile-convert-to-llvm -reconcile-unrealized-casts | FileCheck %s

#b = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A kernel becomes an llvm.func marked nvvm.kernel with its thread count; tiles become
// per-thread registers; a 4-wide masked load becomes one predicated ld.global.v4.
// CHECK-LABEL: llvm.func @copy
// CHECK-SAME: (%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32)
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>
// CHECK: nvvm.read.ptx.sreg.ctaid.x
// CHECK: nvvm.read.ptx.sreg.tid.x
// CHECK: llvm.getelementptr {{.*}} -> !llvm.ptr<1>, f32
// CHECK: llvm.inline_asm has_side_effects {{.*}}"mov.b32 $0, $6;{{.*}}@$5 ld.global.v4.b32 {$0, $1, $2, $3}, [$4];"
// CHECK: llvm.inline_asm has_side_effects {{.*}}"@$5 st.global.v4.b32 [$0], {$1, $2, $3, $4};"
// CHECK-NOT: tile.
func.func @copy(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %n: i32) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.shared_memory = 0 : i64} {
  %c1024 = arith.constant 1024 : i32
  %pid = tile.program_id x
  %base = arith.muli %pid, %c1024 : i32
  %r = tile.make_range 0 to 1024 : tensor<1024xi32, #b>
  %bs = tile.splat %base : i32 -> tensor<1024xi32, #b>
  %offs = arith.addi %bs, %r : tensor<1024xi32, #b>
  %ns = tile.splat %n : i32 -> tensor<1024xi32, #b>
  %mask = arith.cmpi slt, %offs, %ns : tensor<1024xi32, #b>
  %zero = arith.constant dense<0.0> : tensor<1024xf32, #b>
  %xs = tile.splat %x : !tile.ptr<f32> -> tensor<1024x!tile.ptr<f32>, #b>
  %xp = tile.addptr %xs, %offs : tensor<1024x!tile.ptr<f32>, #b>, tensor<1024xi32, #b>
  %v = tile.load %xp, %mask, %zero {tile.vector = 4 : i32} : tensor<1024x!tile.ptr<f32>, #b>
  %ys = tile.splat %y : !tile.ptr<f32> -> tensor<1024x!tile.ptr<f32>, #b>
  %yp = tile.addptr %ys, %offs : tensor<1024x!tile.ptr<f32>, #b>, tensor<1024xi32, #b>
  tile.store %yp, %v, %mask {tile.vector = 4 : i32} : tensor<1024x!tile.ptr<f32>, #b>
  return
}

// -----

// Each thread may hold its share of the SM's 65536 registers: all of them for one program of
// 8 warps (255 at most), half of that with two programs an SM (tile.programs_per_sm).
// CHECK-LABEL: llvm.func @one_program_an_sm
// CHECK-SAME: nvvm.maxnreg = 255 : i32, nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK-LABEL: llvm.func @two_programs_an_sm
// CHECK-SAME: nvvm.maxnreg = 128 : i32, nvvm.maxntid = array<i32: 256, 1, 1>
func.func @one_program_an_sm() attributes {tile.kernel, tile.num_warps = 8 : i32} {
  return
}
func.func @two_programs_an_sm() attributes {tile.kernel, tile.num_warps = 8 : i32, tile.programs_per_sm = 2 : i32} {
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A reduction over a 1-D tile: in-thread, butterfly shuffles across lanes, then the shared
// buffer across warps between barriers; exp2 is PTX's ex2.approx.
// CHECK: llvm.mlir.global external @global_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL: llvm.func @row_sum
// CHECK: "ex2.approx.ftz.f32 $0, $1;"
// CHECK: nvvm.shfl.sync bfly
// CHECK: llvm.mlir.addressof @global_smem : !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<1>
func.func @row_sum(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.shared_memory = 64 : i64} {
  %r = tile.make_range 0 to 128 : tensor<128xi32, #b>
  %xs = tile.splat %x : !tile.ptr<f32> -> tensor<128x!tile.ptr<f32>, #b>
  %xp = tile.addptr %xs, %r : tensor<128x!tile.ptr<f32>, #b>, tensor<128xi32, #b>
  %v = tile.load %xp : tensor<128x!tile.ptr<f32>, #b>
  %e = math.exp2 %v : tensor<128xf32, #b>
  %s = tile.reduce sum %e {axis = 0 : i32, tile.smem_offset = 0 : i64} : tensor<128xf32, #b> -> f32
  tile.store %out, %s : !tile.ptr<f32>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [2, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 1], order = [1, 0]>

// A thread's values of a row reduction fold as one chain a row, in register order. With
// tile.tree_max a max folds as balanced trees instead, both rows level by level (its sums
// stay chains); then the lanes' butterflies.
// CHECK-LABEL: llvm.func @chain_max
// CHECK: %[[M1:[0-9]+]] = llvm.intr.maximum(
// CHECK-NEXT: %[[M2:[0-9]+]] = llvm.intr.maximum(%[[M1]],
// CHECK-NEXT: llvm.intr.maximum(%[[M2]],
// CHECK-NEXT: %[[N1:[0-9]+]] = llvm.intr.maximum(
// CHECK-NEXT: %[[N2:[0-9]+]] = llvm.intr.maximum(%[[N1]],
// CHECK-NEXT: llvm.intr.maximum(%[[N2]],
// CHECK: nvvm.shfl.sync bfly
// CHECK-LABEL: llvm.func @tree_max
// CHECK: %[[A:[0-9]+]] = llvm.intr.maximum(
// CHECK-NEXT: %[[B:[0-9]+]] = llvm.intr.maximum(
// CHECK-NEXT: %[[C:[0-9]+]] = llvm.intr.maximum(
// CHECK-NEXT: %[[D:[0-9]+]] = llvm.intr.maximum(
// CHECK-NEXT: llvm.intr.maximum(%[[A]], %[[B]])
// CHECK-NEXT: llvm.intr.maximum(%[[C]], %[[D]])
// CHECK: nvvm.shfl.sync bfly
// CHECK: %[[S1:[0-9]+]] = llvm.fadd
// CHECK-NEXT: %[[S2:[0-9]+]] = llvm.fadd %[[S1]],
// CHECK-NEXT: llvm.fadd %[[S2]],
func.func @chain_max(%x: tensor<2x128xf32, #b>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64} {
  %m = tile.reduce max %x {axis = 1 : i32} : tensor<2x128xf32, #b> -> tensor<2xf32, #tile.slice<dim = 1, parent = #b>>
  return
}
func.func @tree_max(%x: tensor<2x128xf32, #b>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64, tile.tree_max} {
  %m = tile.reduce max %x {axis = 1 : i32} : tensor<2x128xf32, #b> -> tensor<2xf32, #tile.slice<dim = 1, parent = #b>>
  %s = tile.reduce sum %x {axis = 1 : i32} : tensor<2x128xf32, #b> -> tensor<2xf32, #tile.slice<dim = 1, parent = #b>>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [8, 4], warpsPerCTA = [1, 1], order = [1, 0]>
#row = #tile.slice<dim = 1, parent = #b>

// A within_threads sum folds a thread's 4 values and stops: no shuffles. tile.combine_lanes
// adds each value to its copies across lane bits 0 and 1 (the 4 lanes of a row), xor 1 then 2.
// CHECK-LABEL: llvm.func @partial_sums
// CHECK: %[[A:.*]] = llvm.fadd %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[B:.*]] = llvm.fadd %[[A]], %{{.*}} : f32
// CHECK-NEXT: %[[P:.*]] = llvm.fadd %[[B]], %{{.*}} : f32
// CHECK-NOT: nvvm.shfl.sync
// CHECK: llvm.insertvalue %[[P]]
// CHECK: %[[ONE:.*]] = llvm.mlir.constant(1 : i32)
// CHECK: nvvm.shfl.sync {{ *}}bfly %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}} : i32 -> i32
// CHECK: %[[S1:.*]] = llvm.fadd
// CHECK: %[[TWO:.*]] = llvm.mlir.constant(2 : i32)
// CHECK: nvvm.shfl.sync {{ *}}bfly %{{.*}}, %{{.*}}, %[[TWO]], %{{.*}} : i32 -> i32
// CHECK: llvm.fadd %[[S1]], %{{.*}} : f32
// CHECK-NOT: nvvm.shfl.sync
// CHECK: llvm.return
func.func @partial_sums(%x: tensor<8x16xf32, #b>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64} {
  %p = tile.reduce sum %x {axis = 1 : i32, within_threads} : tensor<8x16xf32, #b> -> tensor<8xf32, #row>
  %s = tile.combine_lanes %p {lanes = 3 : i32} : tensor<8xf32, #row>
  %ptrs = tile.splat %out : !tile.ptr<f32> -> tensor<8x!tile.ptr<f32>, #row>
  tile.store %ptrs, %s : tensor<8x!tile.ptr<f32>, #row>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// With tile.exp2_on_fma = 2, registers 0 and 4 of a thread's 8 take exp2 by the polynomial on
// the FMA pipe (clamp, floor by adding 1.5 * 2^23 rounding down, Horner, times 2^j built as bits); the
// others stay on ex2.approx. Without the attribute, all are ex2.approx.
// CHECK-LABEL: llvm.func @exp2_on_fma
// CHECK: %[[LOW:.*]] = llvm.intr.maximum(%{{.*}}, %{{.*}})
// CHECK: %[[X:.*]] = llvm.intr.minimum(%[[LOW]], %{{.*}})
// CHECK: %[[SHIFTED:.*]] = llvm.inline_asm asm_dialect = att "add.rm.f32 $0, $1, $2;", "=f,f,f" %[[X]], %{{.*}}
// CHECK: %[[ROUNDED:.*]] = llvm.fsub %[[SHIFTED]], %{{.*}} : f32
// CHECK: %[[F:.*]] = llvm.fsub %[[X]], %[[ROUNDED]] : f32
// CHECK: %[[P3:.*]] = llvm.intr.fma(%{{.*}}, %[[F]], %{{.*}})
// CHECK: %[[P2:.*]] = llvm.intr.fma(%[[P3]], %[[F]], %{{.*}})
// CHECK: %[[P:.*]] = llvm.intr.fma(%[[P2]], %[[F]], %{{.*}})
// CHECK: %[[SHIFTED_BITS:.*]] = llvm.bitcast %[[SHIFTED]] : f32 to i32
// CHECK: %[[EXPONENT:.*]] = llvm.shl %[[SHIFTED_BITS]], %{{.*}} : i32
// CHECK: %[[SCALE_BITS:.*]] = llvm.add %[[EXPONENT]], %{{.*}} : i32
// CHECK: %[[SCALE:.*]] = llvm.bitcast %[[SCALE_BITS]] : i32 to f32
// CHECK: llvm.fmul %[[P]], %[[SCALE]] : f32
// CHECK-COUNT-3: ex2.approx.ftz.f32
// CHECK-NOT: ex2.approx
// CHECK: llvm.intr.maximum
// CHECK-COUNT-3: ex2.approx.ftz.f32
// CHECK-NOT: llvm.intr.maximum
// CHECK-LABEL: llvm.func @exp2_on_mufu
// CHECK-COUNT-8: ex2.approx.ftz.f32
// CHECK-NOT: llvm.intr.maximum
func.func @exp2_on_fma(%x: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64, tile.exp2_on_fma = 2 : i32} {
  %r = tile.make_range 0 to 256 : tensor<256xi32, #b>
  %xs = tile.splat %x : !tile.ptr<f32> -> tensor<256x!tile.ptr<f32>, #b>
  %xp = tile.addptr %xs, %r : tensor<256x!tile.ptr<f32>, #b>, tensor<256xi32, #b>
  %v = tile.load %xp : tensor<256x!tile.ptr<f32>, #b>
  %e = math.exp2 %v : tensor<256xf32, #b>
  tile.store %xp, %e : tensor<256x!tile.ptr<f32>, #b>
  return
}
func.func @exp2_on_mufu(%x: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64} {
  %r = tile.make_range 0 to 256 : tensor<256xi32, #b>
  %xs = tile.splat %x : !tile.ptr<f32> -> tensor<256x!tile.ptr<f32>, #b>
  %xp = tile.addptr %xs, %r : tensor<256x!tile.ptr<f32>, #b>, tensor<256xi32, #b>
  %v = tile.load %xp : tensor<256x!tile.ptr<f32>, #b>
  %e = math.exp2 %v : tensor<256xf32, #b>
  tile.store %xp, %e : tensor<256x!tile.ptr<f32>, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// Device printing goes through vprintf, one line per register: the program, the element's
// index and the value (a percent sign in the prefix is escaped).
// CHECK-DAG: "pid (%d, %d, %d) idx (%d) x 100%% = %f\0A\00"
// CHECK-DAG: "pid (%d, %d, %d) n = %d\0A\00"
// CHECK-LABEL: llvm.func @show
// CHECK: llvm.call @vprintf
// CHECK: llvm.call @vprintf
func.func @show(%n: i32) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64} {
  %r = tile.make_range 0 to 32 : tensor<32xi32, #b>
  %f = arith.sitofp %r : tensor<32xi32, #b> to tensor<32xf32, #b>
  tile.print "x 100% = " %f : tensor<32xf32, #b>
  tile.print "n = " %n : i32
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [1, 1]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [1, 1], order = [1, 0]>

// Operand fragments come from swizzled shared memory through ldmatrix (x4 for A, x4.trans
// for both 8-column tiles of B); a 16x16x16 dot is two mma.sync m16n8k16.
// CHECK-LABEL: llvm.func @mma_tile
// CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK-COUNT-2: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
func.func @mma_tile(%a: tensor<16x16xbf16, #b>, %b: tensor<16x16xbf16, #b>, %acc: tensor<16x16xf32, #mma>, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 512 : i64} {
  %x = tile.convert_layout %a {tile.smem_offset = 0 : i64} : tensor<16x16xbf16, #b> -> tensor<16x16xbf16, #tile.dot_op<opIdx = 0, parent = #mma>>
  %y = tile.convert_layout %b {tile.smem_offset = 0 : i64} : tensor<16x16xbf16, #b> -> tensor<16x16xbf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %x, %y, %acc : tensor<16x16xbf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<16x16xbf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<16x16xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<16x16x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<16x16x!tile.ptr<f32>, #mma>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [1, 1]>

// Ring stages feeding a dot are read by the dot one 16-wide step of k at a time, each step's
// ldmatrix one step ahead of its mma.sync; a stage stored transposed is read without .trans
// for B.
// CHECK-LABEL: llvm.func @mma_from_rings
// CHECK-COUNT-4: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-COUNT-4: mma.sync.aligned.m16n8k16
// CHECK-NOT: ldmatrix
func.func @mma_from_rings(%acc: tensor<16x16xf32, #mma>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 4096 : i64} {
  %qa = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<16x32xf16>>
  %ka = tile.shared_alloc {tile.smem_offset = 2048 : i64} : !tile.shared<2 x tensor<16x32xf16>>
  %x = tile.shared_load %qa[%slot] : !tile.shared<2 x tensor<16x32xf16>> -> tensor<16x32xf16, #tile.dot_op<opIdx = 0, parent = #mma>>
  %y = tile.shared_load %ka[%slot] {transposed} : !tile.shared<2 x tensor<16x32xf16>> -> tensor<32x16xf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %x, %y, %acc : tensor<16x32xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<32x16xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<16x16xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<16x16x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<16x16x!tile.ptr<f32>, #mma>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 2]>

// Two warpgroups split a 64 x 128 dot's columns: each runs m64n64 on its slice, B's descriptor
// starting at column 64 * (warpgroup), both reading all of A from registers (replicated). The
// warpgroup's index is lane 0's (a shuffle), so that ptxas keeps the descriptors uniform.
// CHECK-LABEL: llvm.func @wgmma_column_slices
// CHECK: %[[WARPGROUP:.*]] = nvvm.shfl.sync {{ *}}idx %{{.*}} : i32 -> i32
// CHECK: llvm.urem %[[WARPGROUP]], %{{.*}} : i32
// CHECK: llvm.udiv %[[WARPGROUP]], %{{.*}} : i32
// CHECK: wgmma.fence.sync.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1, 1;
// CHECK: wgmma.commit_group.sync.aligned
// CHECK-NOT: mma.sync
func.func @wgmma_column_slices(%a: tensor<64x64xf16, #tile.dot_op<opIdx = 0, parent = #mma>>, %acc: tensor<64x128xf32, #mma>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma, tile.shared_memory = 32768 : i64} {
  %vb = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %y = tile.shared_load %vb[%slot] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %a, %y, %acc : tensor<64x64xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<64x128xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<64x128x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<64x128x!tile.ptr<f32>, #mma>
  return
}

// Slices narrower than B's 64-column atom (dQ's at d = 64): each warpgroup's m64n32 starts 32
// columns (64 bytes) into the atom's rows: the descriptor adds the column within the atom.
// CHECK-LABEL: llvm.func @wgmma_slices_within_an_atom
// CHECK: nvvm.shfl.sync {{ *}}idx
// CHECK: llvm.udiv
// CHECK: llvm.udiv %[[FIRST:.*]], %{{.*}} : i32
// CHECK: %[[WITHIN:.*]] = llvm.urem %[[FIRST]], %{{.*}} : i32
// CHECK-NEXT: llvm.add %{{.*}}, %[[WITHIN]] : i32
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {{.*}}, 1, 1, 1, 1;
// CHECK-NOT: mma.sync
func.func @wgmma_slices_within_an_atom(%a: tensor<64x64xf16, #tile.dot_op<opIdx = 0, parent = #mma>>, %acc: tensor<64x64xf32, #mma>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma, tile.shared_memory = 16384 : i64} {
  %kb = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x64xf16>>
  %y = tile.shared_load %kb[%slot] : !tile.shared<2 x tensor<64x64xf16>> -> tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %a, %y, %acc : tensor<64x64xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<64x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<64x64xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<64x64x!tile.ptr<f32>, #mma>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>

// On Hopper (tile.warpgroup_mma), a dot whose warps own 16 rows each runs on wgmma: both
// operands read by the tensor cores from their stages through descriptors, one
// m64n64k16 per 16-wide step of k, then one commit and a wait that hands the accumulators on.
// Q's stage is k-major (128-byte swizzle), K's too (read transposed, so not .trans).
// CHECK-LABEL: llvm.func @wgmma_from_rings
// CHECK: wgmma.fence.sync.aligned
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1, 0, 0;
// CHECK: wgmma.commit_group.sync.aligned
// CHECK: wgmma.wait_group.sync.aligned 0
// CHECK-NOT: ldmatrix
// CHECK-NOT: mma.sync
func.func @wgmma_from_rings(%acc: tensor<64x64xf32, #mma>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.warpgroup_mma, tile.shared_memory = 65536 : i64} {
  %qa = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %ka = tile.shared_alloc {tile.smem_offset = 32768 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %x = tile.shared_load %qa[%slot] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #mma>>
  %y = tile.shared_load %ka[%slot] {transposed} : !tile.shared<2 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %x, %y, %acc : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<128x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<64x64xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<64x64x!tile.ptr<f32>, #mma>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A read marked `whole` (an A operand the TMA staged before the loop that holds its dot: the
// forward's Q) goes into registers at once, with ldmatrix: the wgmma in the loop takes A from
// registers and only B by descriptor.
// CHECK-LABEL: llvm.func @wgmma_invariant_a_read_once
// CHECK-COUNT-8: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-NOT: ldmatrix
// CHECK: llvm.br
// CHECK: wgmma.fence.sync.aligned
// CHECK: add.s64 db, ${{[0-9]+}}, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, {${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}}, db,
// CHECK-NOT: ldmatrix
func.func @wgmma_invariant_a_read_once(%acc: tensor<64x64xf32, #mma>, %n: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.warpgroup_mma, tile.shared_memory = 65536 : i64} {
  %qa = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %ka = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %x = tile.shared_load %qa[%c0] {whole} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #mma>>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %acc) -> (tensor<64x64xf32, #mma>) : i32 {
    %y = tile.shared_load %ka[%i] {transposed} : !tile.shared<2 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>>
    %d = tile.dot %x, %y, %a : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<128x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>, #mma>
  tile.store %os, %r : tensor<64x64x!tile.ptr<f32>, #mma>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [8, 1]>

// A in registers (P of attention) and an MN-major B stage 512 columns wide (B transposed:
// .trans 1): two m64n256k16 per step of k. Without tile.warpgroup_mma the same dot stays on
// mma.sync.
// CHECK-LABEL: llvm.func @wgmma_registers_and_wide_b
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, {{.*}}, 1, 1, 1, 1;
// CHECK-NOT: wgmma.mma_async
// CHECK: wgmma.wait_group.sync.aligned 0
// CHECK-LABEL: llvm.func @mma_sync_elsewhere
// CHECK-NOT: wgmma
// CHECK: mma.sync.aligned.m16n8k16
func.func @wgmma_registers_and_wide_b(%p: tensor<128x32xbf16, #tile.dot_op<opIdx = 0, parent = #mma>>, %acc: tensor<128x512xf32, #mma>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma, tile.shared_memory = 65536 : i64} {
  %va = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<32x512xbf16>>
  %v = tile.shared_load %va[%slot] : !tile.shared<2 x tensor<32x512xbf16>> -> tensor<32x512xbf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %p, %v, %acc : tensor<128x32xbf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<32x512xbf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<128x512xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<128x512x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<128x512x!tile.ptr<f32>, #mma>
  return
}
func.func @mma_sync_elsewhere(%p: tensor<128x32xbf16, #tile.dot_op<opIdx = 0, parent = #mma>>, %acc: tensor<128x64xf32, #mma>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.shared_memory = 8192 : i64} {
  %va = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<32x64xbf16>>
  %v = tile.shared_load %va[%slot] : !tile.shared<2 x tensor<32x64xbf16>> -> tensor<32x64xbf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %p, %v, %acc : tensor<128x32xbf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<32x64xbf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<128x64xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<128x64x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<128x64x!tile.ptr<f32>, #mma>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>

// An async dot is issued and committed without a wait; tile.dot_wait waits (leaving `pending`
// groups in flight) and hands the accumulators through, then synchronizes the CTA with
// `barrier`. A zero accumulator is not loaded: the first step of k has scale-d 0. Each
// operand's descriptor is computed once; a step adds its offset (16-byte units: 32 bytes
// along k within the 128-byte atom) in its own instruction.
// CHECK-LABEL: llvm.func @async_wgmma
// CHECK: wgmma.commit_group.sync.aligned
// CHECK-NOT: wgmma.wait_group
// CHECK: add.s64 da, $32, 0;\0Aadd.s64 db, $33, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, da, db, 0, 1, 1, 0, 0;\0A}", "{{(=f,)+}}l,l" %[[A:[0-9]+]], %[[B:[0-9]+]] :
// CHECK-NEXT: llvm.extractvalue
// CHECK: add.s64 da, $32, 2;\0Aadd.s64 db, $33, 2;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, da, db, 1, 1, 1, 0, 0;\0A}", "{{.*}}" %[[A]], %[[B]],
// CHECK: wgmma.commit_group.sync.aligned
// CHECK: wgmma.wait_group.sync.aligned 1;{{.*}}"=f,=f,
// CHECK-NOT: barrier0
// CHECK: wgmma.wait_group.sync.aligned 0;", ""
// CHECK-NEXT: nvvm.barrier0
// CHECK: llvm.store
func.func @async_wgmma(%acc: tensor<64x64xf32, #mma>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.warpgroup_mma, tile.shared_memory = 65536 : i64} {
  %qa = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %ka = tile.shared_alloc {tile.smem_offset = 32768 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %x = tile.shared_load %qa[%slot] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #mma>>
  %y = tile.shared_load %ka[%slot] {transposed} : !tile.shared<2 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>>
  %d = tile.dot %x, %y, %acc {async} : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<128x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<64x64xf32, #mma>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %e = tile.dot %x, %y, %zero {async} : tensor<64x128xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<128x64xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<64x64xf32, #mma>
  %dw = tile.dot_wait %d : tensor<64x64xf32, #mma> {pending = 1 : i32}
  tile.dot_wait {barrier, pending = 0 : i32}
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<64x64x!tile.ptr<f32>, #mma>
  tile.store %os, %dw : tensor<64x64x!tile.ptr<f32>, #mma>
  return
}

// -----

#s = #tile.mma<warpsPerCTA = [4, 2]>
#kv = #tile.mma<warpsPerCTA = [8, 1]>

// A tile stored from registers (tile-stage-dot-operands' P): a barrier (readers of the old
// contents are done), one stmatrix.x4 per 16x16 block a warp holds (64x128 on [4, 2] warps:
// 16 rows x 64 columns, 4 blocks), the fence to the tensor cores' proxy, a barrier. The dot
// reads it transposed, as an MN-major A (trans-a 1): its steps of k lie 16 stored rows (2048
// bytes, 128 descriptor units) apart; B, dO's stage, is MN-major too.
// CHECK-LABEL: llvm.func @staged_a
// CHECK: nvvm.barrier0
// CHECK-COUNT-4: stmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-NOT: stmatrix
// CHECK: fence.proxy.async.shared::cta
// CHECK-NEXT: nvvm.barrier0
// CHECK: add.s64 da, ${{[0-9]+}}, 0;\0Aadd.s64 db, ${{[0-9]+}}, 0;\0Awgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, da, db, 1, 1, 1, 1, 1;
// CHECK: add.s64 da, ${{[0-9]+}}, 128;\0Aadd.s64 db, ${{[0-9]+}}, 128;\0Awgmma.mma_async
// CHECK: add.s64 da, ${{[0-9]+}}, 256;
// CHECK: add.s64 da, ${{[0-9]+}}, 384;{{.*}}wgmma.mma_async
// CHECK-NOT: wgmma.mma_async
// CHECK: wgmma.commit_group.sync.aligned
func.func @staged_a(%p: tensor<64x128xf16, #s>, %acc: tensor<128x128xf32, #kv>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma, tile.shared_memory = 49152 : i64} {
  %ps = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %dos = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %c0 = arith.constant 0 : i32
  tile.shared_store %p, %ps[%c0] : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
  %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
  %dout = tile.shared_load %dos[%slot] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
  %d = tile.dot %pt, %dout, %acc : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<128x128x!tile.ptr<f32>, #kv>
  tile.store %os, %d : tensor<128x128x!tile.ptr<f32>, #kv>
  return
}

// -----

#s = #tile.mma<warpsPerCTA = [4, 2]>
#kv = #tile.mma<warpsPerCTA = [8, 1]>

// The same store scoped by tile-scope-stage-barriers: no barrier before it (readers_synced),
// and after it one of the storing warpgroup's 128 threads, named 2 + tid.x / 128
// (warpgroup_local).
// CHECK-LABEL: llvm.func @staged_a_scoped
// CHECK-NOT: nvvm.barrier
// CHECK-COUNT-4: stmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK: fence.proxy.async.shared::cta
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK-NEXT: %[[SEVEN:.*]] = llvm.mlir.constant(7 : i32)
// CHECK-NEXT: %[[WG:.*]] = llvm.lshr %[[TID]], %[[SEVEN]]
// CHECK-NEXT: %[[TWO:.*]] = llvm.mlir.constant(2 : i32)
// CHECK-NEXT: %[[ID:.*]] = llvm.add %[[WG]], %[[TWO]]
// CHECK-NEXT: %[[THREADS:.*]] = llvm.mlir.constant(128 : i32)
// CHECK-NEXT: nvvm.barrier id = %[[ID]] number_of_threads = %[[THREADS]]
// CHECK-NOT: nvvm.barrier
// CHECK: wgmma.mma_async
func.func @staged_a_scoped(%p: tensor<64x128xf16, #s>, %acc: tensor<128x128xf32, #kv>, %slot: i32, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.warpgroup_mma, tile.shared_memory = 49152 : i64} {
  %ps = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<1 x tensor<64x128xf16>>
  %dos = tile.shared_alloc {tile.smem_offset = 16384 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %c0 = arith.constant 0 : i32
  tile.shared_store %p, %ps[%c0] {readers_synced, warpgroup_local} : tensor<64x128xf16, #s>, !tile.shared<1 x tensor<64x128xf16>>
  %pt = tile.shared_load %ps[%c0] {transposed} : !tile.shared<1 x tensor<64x128xf16>> -> tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>>
  %dout = tile.shared_load %dos[%slot] : !tile.shared<2 x tensor<64x128xf16>> -> tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>>
  %d = tile.dot %pt, %dout, %acc : tensor<128x64xf16, #tile.dot_op<opIdx = 0, parent = #kv>> * tensor<64x128xf16, #tile.dot_op<opIdx = 1, parent = #kv>> -> tensor<128x128xf32, #kv>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<128x128x!tile.ptr<f32>, #kv>
  tile.store %os, %d : tensor<128x128x!tile.ptr<f32>, #kv>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// Float atomic max: non-negative values as a signed-integer max, negative ones as an
// unsigned-integer min of the bits; float add is native, and a reduction (red) when nobody
// reads the old value.
// CHECK-LABEL: llvm.func @float_atomics
// CHECK: atom.global.acq_rel.gpu.max.s32
// CHECK: atom.global.acq_rel.gpu.min.u32
// CHECK: atom.global.relaxed.cta.add.f32
// CHECK: red.global.relaxed.gpu.add.f32
func.func @float_atomics(%p: !tile.ptr<f32>, %v: f32) -> f32 attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64} {
  %a = tile.atomic_rmw max, acq_rel, gpu, %p, %v : !tile.ptr<f32>
  %b = tile.atomic_rmw add, relaxed, cta, %p, %v : !tile.ptr<f32>
  %c = tile.atomic_rmw add, relaxed, gpu, %p, %v : !tile.ptr<f32>
  return %b : f32
}

// -----

#b = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [2], order = [0]>

// 16 elements over 64 threads: lanes 16-31 and warp 1 hold replicas, which must not add again;
// only threads whose lane bit 4 and warp bit 0 are clear do.
// CHECK-LABEL: llvm.func @replicated_atomics
// CHECK: %[[LANE:.*]] = llvm.icmp "eq"
// CHECK: %[[WARP:.*]] = llvm.icmp "eq"
// CHECK: %[[OWNER:.*]] = llvm.and %{{.*}}, %[[WARP]] : i1
// CHECK: %[[MASK:.*]] = llvm.and %{{.*}}, %[[OWNER]] : i1
// CHECK: red.global.relaxed.gpu.add.f32 {{.*}} %[[MASK]]
// CHECK-NOT: red.global
func.func @replicated_atomics(%p: tensor<16x!tile.ptr<f32>, #b>, %v: tensor<16xf32, #b>) attributes {tile.kernel, tile.num_warps = 2 : i32, tile.shared_memory = 0 : i64} {
  %a = tile.atomic_rmw add, relaxed, gpu, %p, %v : tensor<16x!tile.ptr<f32>, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// An f32 reduction of 4 consecutive elements a thread (tile.vector) is one vector red (sm_90);
// an atomic whose old values are read stays one element at a time.
// CHECK-LABEL: llvm.func @vector_reduction
// CHECK: "@$5 red.relaxed.gpu.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f,b"
// CHECK-NOT: red.relaxed
// CHECK-COUNT-4: atom.global.relaxed.gpu.add.f32
// CHECK-NOT: red.relaxed
func.func @vector_reduction(%p: tensor<128x!tile.ptr<f32>, #b>, %v: tensor<128xf32, #b>) attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64} {
  %a = tile.atomic_rmw add, relaxed, gpu, %p, %v {tile.vector = 4 : i32} : tensor<128x!tile.ptr<f32>, #b>
  %b = tile.atomic_rmw add, relaxed, gpu, %p, %v {tile.vector = 4 : i32} : tensor<128x!tile.ptr<f32>, #b>
  tile.store %p, %b : tensor<128x!tile.ptr<f32>, #b>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [1, 1]>

// A transpose into tensor-core fragments: the tile goes to shared memory as it is, and
// ldmatrix.trans reads the transposed A operand (16 x 64 of f16 a warp: 4 x4 loads) for the dot.
// CHECK-LABEL: llvm.func @transpose_into_fragments
// CHECK: llvm.store
// CHECK: nvvm.barrier0
// CHECK-COUNT-4: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK-NOT: ld.shared
// CHECK: nvvm.barrier0
// CHECK: mma.sync.aligned.m16n8k16
func.func @transpose_into_fragments(%ds: tensor<64x16xf16, #mma>, %k: tensor<64x16xf16, #tile.dot_op<opIdx = 1, parent = #mma>>, %acc: tensor<16x16xf32, #mma>, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 2048 : i64} {
  %a = tile.trans %ds {order = array<i32: 1, 0>, tile.smem_offset = 0 : i64} : tensor<64x16xf16, #mma> -> tensor<16x64xf16, #tile.dot_op<opIdx = 0, parent = #mma>>
  %d = tile.dot %a, %k, %acc : tensor<16x64xf16, #tile.dot_op<opIdx = 0, parent = #mma>> * tensor<64x16xf16, #tile.dot_op<opIdx = 1, parent = #mma>> -> tensor<16x16xf32, #mma>
  %os = tile.splat %out : !tile.ptr<f32> -> tensor<16x16x!tile.ptr<f32>, #mma>
  tile.store %os, %d : tensor<16x16x!tile.ptr<f32>, #mma>
  return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// On Hopper (tile.warpgroup_mma) an accumulator of 16-bit values goes to shared memory with
// stmatrix, a 16 x 16 block a store (2 a warp for 64 x 32 on 4 warps), and comes back in the
// store's layout as 16-byte vectors.
// CHECK-LABEL: llvm.func @accumulator_through_stmatrix
// CHECK-COUNT-2: stmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-NOT: stmatrix
// CHECK-NOT: llvm.store
// CHECK: nvvm.barrier0
// CHECK: llvm.load {{.*}} -> vector<8xf16>
func.func @accumulator_through_stmatrix(%acc: tensor<64x32xf16, #mma>, %out: !tile.ptr<f16>)
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.warpgroup_mma, tile.shared_memory = 4096 : i64} {
  %c = tile.convert_layout %acc {tile.smem_offset = 0 : i64} : tensor<64x32xf16, #mma> -> tensor<64x32xf16, #b>
  %os = tile.splat %out : !tile.ptr<f16> -> tensor<64x32x!tile.ptr<f16>, #b>
  tile.store %os, %c : tensor<64x32x!tile.ptr<f16>, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>

// A bulk add with the copy engine (tile.tma): thread 0 waits until the engine has read the
// staging buffer's last tile, everyone writes this one row-major (pairs of a thread's
// consecutive floats), fences it for the async proxy, and thread 0 hands its 32 x 8 x 4 bytes
// to one bulk reduction; the kernel returns once its bulk adds are done.
// CHECK-LABEL: llvm.func @bulk_add_staged
// CHECK: "@$0 cp.async.bulk.wait_group.read 0;"
// CHECK-NEXT: nvvm.barrier0
// CHECK: llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<3>
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK-NEXT: nvvm.barrier0
// CHECK: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$1], [$2], 1024;
// CHECK-SAME: @$0 cp.async.bulk.commit_group;
// CHECK: "cp.async.bulk.wait_group 0;"
// CHECK-NEXT: llvm.return
func.func @bulk_add_staged(%p: !tile.ptr<f32>, %v: tensor<32x8xf32, #b>) attributes {tile.kernel, tile.tma, tile.num_warps = 4 : i32, tile.shared_memory = 1024 : i64} {
  tile.bulk_add %p, %v {tile.smem_offset = 0 : i64} : !tile.ptr<f32>, tensor<32x8xf32, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>

// In a loop's body, the staging alternates by the iteration's parity between two buffers of
// 1024 bytes: everyone writes buffer (i - lo) / step % 2, thread 0 waits until the engine has
// read the other one, and one barrier (not two) comes before the add.
// CHECK-LABEL: llvm.func @bulk_add_in_a_loop
// CHECK: llvm.sub
// CHECK-NEXT: llvm.sdiv
// CHECK-NEXT: llvm.mlir.constant(1 : i32)
// CHECK-NEXT: llvm.and
// CHECK-NEXT: llvm.mlir.constant(1024 : i32)
// CHECK-NEXT: llvm.mul
// CHECK-NEXT: llvm.getelementptr
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<3>
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK-NEXT: "@$0 cp.async.bulk.wait_group.read 0;"
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: llvm.ptrtoint
// CHECK-NEXT: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$1], [$2], 1024;
// CHECK-NOT: nvvm.barrier0
// CHECK: "cp.async.bulk.wait_group 0;"
func.func @bulk_add_in_a_loop(%p: !tile.ptr<f32>, %v: tensor<32x8xf32, #b>, %n: i32) attributes {tile.kernel, tile.tma, tile.num_warps = 4 : i32, tile.shared_memory = 2048 : i64} {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  scf.for %i = %c0 to %n step %c2 : i32 {
    tile.bulk_add %p, %v {tile.smem_offset = 0 : i64} : !tile.ptr<f32>, tensor<32x8xf32, #b>
  }
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>

// Swizzled, a pair of floats at (row, column) goes to row * 32 + (column ^ 8 * (row % 4)).
// CHECK-LABEL: llvm.func @bulk_add_swizzled
// CHECK: %[[PHASE:.*]] = llvm.shl %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: %[[COL:.*]] = llvm.xor %{{.*}}, %[[PHASE]] : i32
// CHECK-NEXT: llvm.mlir.constant(32 : i32)
// CHECK-NEXT: %[[START:.*]] = llvm.mul %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: %[[INDEX:.*]] = llvm.add %[[START]], %[[COL]] : i32
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%[[INDEX]]]
// CHECK: llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<3>
// CHECK: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$1], [$2], 4096;
func.func @bulk_add_swizzled(%p: !tile.ptr<f32>, %v: tensor<32x32xf32, #b>) attributes {tile.kernel, tile.tma, tile.num_warps = 4 : i32, tile.shared_memory = 4096 : i64} {
  tile.bulk_add %p, %v {swizzled, tile.smem_offset = 0 : i64} : !tile.ptr<f32>, tensor<32x32xf32, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>

// Without the copy engine, each thread reduces its elements at dst + row * 8 + column.
// CHECK-LABEL: llvm.func @bulk_add_by_threads
// CHECK-NOT: cp.reduce
// CHECK-COUNT-2: "@$2 red.relaxed.gpu.global.add.f32 [$0], $1;"
// CHECK-NOT: red.relaxed
// CHECK-NOT: cp.async.bulk
func.func @bulk_add_by_threads(%p: !tile.ptr<f32>, %v: tensor<32x8xf32, #b>) attributes {tile.kernel, tile.num_warps = 4 : i32, tile.shared_memory = 0 : i64} {
  tile.bulk_add %p, %v : !tile.ptr<f32>, tensor<32x8xf32, #b>
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [1, 1], order = [1, 0]>

// A pipeline stage: 16-byte cp.async copies (zero-filling masked vectors), commit, wait + bar,
// and ldmatrix reads of the stage for tensor-core fragments.
// CHECK-LABEL: llvm.func @stage
// CHECK: llvm.mlir.addressof @global_smem
// CHECK: "cp.async.cg.shared.global [$0], [$1], 16, $2;"
// CHECK: "cp.async.commit_group;"
// CHECK: "cp.async.wait_group 0;"
// CHECK-NEXT: nvvm.barrier0
// CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16
func.func @stage(%p: tensor<16x32x!tile.ptr<bf16>, #b>, %m: tensor<16x32xi1, #b>, %slot: i32,
                 %out: tensor<16x32x!tile.ptr<bf16>, #tile.dot_op<opIdx = 0, parent = #tile.mma<warpsPerCTA = [1, 1]>>>)
    attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 2048 : i64} {
  %buf = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<16x32xbf16>>
  tile.async_copy %p, %m into %buf[%slot] {tile.vector = 8 : i32} : tensor<16x32x!tile.ptr<bf16>, #b>, tensor<16x32xi1, #b>, !tile.shared<2 x tensor<16x32xbf16>>
  tile.async_commit
  tile.async_wait 0
  %t = tile.shared_load %buf[%slot] : !tile.shared<2 x tensor<16x32xbf16>> -> tensor<16x32xbf16, #tile.dot_op<opIdx = 0, parent = #tile.mma<warpsPerCTA = [1, 1]>>>
  tile.store %out, %t : tensor<16x32x!tile.ptr<bf16>, #tile.dot_op<opIdx = 0, parent = #tile.mma<warpsPerCTA = [1, 1]>>>
  return
}

// -----

// The TMA path: the tensor map is a 64-byte-aligned 128-byte byval grid constant, prefetched
// when the kernel starts; the first
// thread initializes each stage's mbarrier (fenced for the TMA, then a CTA barrier), arrives
// expecting the block's 16384 bytes and copies it in two 64-column boxes (one a 128-byte
// atom of the stage: the fill number's modulo the stages), coordinates innermost first; the
// wait spins on the phase's parity, then (sync) a CTA barrier.
// CHECK-LABEL: llvm.func @tma_ring
// CHECK-SAME: %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant
// CHECK: prefetch.tensormap [$0];
// CHECK-COUNT-2: mbarrier.init.shared::cta.b64 [$1], 1;
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: nvvm.barrier0
// CHECK: llvm.urem %{{.*}}, %{{.*}} : i32
// CHECK: llvm.ptrtoint %{{.*}} : !llvm.ptr to i64
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "@$0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], 16384;\0A\09@$0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$4], [$2, {$5, $3}], [$1];\0A\09@$0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$6], [$2, {$7, $3}], [$1];", "b,r,l,r,r,r,r,r"
// CHECK: mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;
// CHECK-NEXT: nvvm.barrier0
func.func @tma_ring(%map: !tile.tensor_map {tile.tensor_map = {box = array<i64: 64, 64>, element_bytes = 2 : i64, pointer = 1 : i64, shape_args = array<i64: 2, 2>, shape_values = array<i64: 0, 0>, stride_args = array<i64: 2, -1>, stride_values = array<i64: 0, 1>, swizzle_bytes = 128 : i64}},
                    %p: !tile.ptr<f16>, %n: i64, %slot: i32, %active: i1)
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.shared_memory = 33792 : i64} {
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i64
  %ring = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %bars = tile.shared_alloc {tile.smem_offset = 32768 : i64} : !tile.shared<2 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%slot, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
  tile.init_barriers %bars arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  tile.tma_load %map, %bp into %ring[%slot], %bars if %active : !tile.block_ptr<tensor<64x128xf16>>, !tile.shared<2 x tensor<64x128xf16>>, !tile.shared<2 x tensor<1xi64>>
  tile.wait_barrier %bars[%slot], %c0 {sync} : !tile.shared<2 x tensor<1xi64>>
  return
}

// -----

// A row of 64 f32 (the backward's LSE) through the TMA: 256 bytes expected, one unswizzled
// copy of a [1, 64] box (coordinates: the column, then the row); read back as the column
// slice of an mma tile, two adjacent columns a load. Its stage's barrier expects three
// arrivals, two for blocks this fill leaves as they are (arrivals = 3).
// CHECK-LABEL: llvm.func @tma_row
// CHECK: "@$0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], 256;\0A\09@$0 mbarrier.arrive.shared::cta.b64 _, [$1], 2;\0A\09@$0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$4], [$2, {$5, $3}], [$1];"
// CHECK: mbarrier.try_wait.parity
// CHECK-COUNT-8: llvm.load %{{.*}} : !llvm.ptr<3> -> vector<2xf32>
// CHECK-NOT: llvm.load
// CHECK: llvm.return
func.func @tma_row(%map: !tile.tensor_map {tile.tensor_map = {box = array<i64: 1, 64>, element_bytes = 4 : i64, pointer = 1 : i64, shape_args = array<i64: 2, 2>, shape_values = array<i64: 0, 0>, stride_args = array<i64: 2, -1>, stride_values = array<i64: 0, 1>, swizzle_bytes = 0 : i64}},
                   %p: !tile.ptr<f32>, %n: i64, %row: i32, %start: i32, %slot: i32, %active: i1, %out: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 4 : i32, tile.shared_memory = 1040 : i64} {
  %one = arith.constant 1 : i64
  %ring = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64xf32>>
  %bars = tile.shared_alloc {tile.smem_offset = 1024 : i64} : !tile.shared<2 x tensor<1xi64>>
  %bp = tile.make_block_ptr %p, [%n, %n], [%n, %one], [%row, %start] {order = array<i32: 1, 0>} : !tile.ptr<f32> -> !tile.block_ptr<tensor<1x64xf32>>
  tile.init_barriers %bars arrivals 3 : !tile.shared<2 x tensor<1xi64>>
  tile.tma_load %map, %bp into %ring[%slot], %bars if %active {arrivals = 3 : i32} : !tile.block_ptr<tensor<1x64xf32>>, !tile.shared<2 x tensor<64xf32>>, !tile.shared<2 x tensor<1xi64>>
  tile.wait_barrier %bars[%slot], %slot : !tile.shared<2 x tensor<1xi64>>
  %v = tile.shared_load %ring[%slot] : !tile.shared<2 x tensor<64xf32>> -> tensor<64xf32, #tile.slice<dim = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
  %columns = tile.make_range 0 to 64 : tensor<64xi32, #tile.slice<dim = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
  %outs = tile.splat %out : !tile.ptr<f32> -> tensor<64x!tile.ptr<f32>, #tile.slice<dim = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
  %at = tile.addptr %outs, %columns : tensor<64x!tile.ptr<f32>, #tile.slice<dim = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>, tensor<64xi32, #tile.slice<dim = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
  tile.store %at, %v : tensor<64x!tile.ptr<f32>, #tile.slice<dim = 0, parent = #tile.mma<warpsPerCTA = [4, 1]>>>
  return
}

// -----

// A warp-specialized kernel (8 consumer warps, 4 producer warps): 384 threads and the register
// count a thread of them may have at entry; its two rings' barriers, initialized one after the
// other, fenced and synchronized once; the producer warpgroup is the threads from 256
// on, its first warp those below 288; setmaxnreg moves registers; the producer's first thread
// (256) issues the TMA loads of a [1, 64, 1, 128] block of a [b, n, h, d] tensor (the map
// lists h before n: coordinates d, n, h, b); each consumer warp's lane 0 arrives on the empty
// barrier once its lanes are past their reads; the consumers' barriers are barrier 1 over
// their 256 threads.
// CHECK-LABEL: llvm.func @specialized
// CHECK-SAME: nvvm.maxnreg = 168 : i32, nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK: mbarrier.init.shared::cta.b64 [$1], 8;
// CHECK-NOT: nvvm.barrier0
// CHECK-NOT: fence.mbarrier_init
// CHECK: mbarrier.init.shared::cta.b64 [$1], 1;
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK-NEXT: nvvm.barrier0
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.mlir.constant(256 : i32)
// CHECK-NEXT: llvm.icmp "uge"
// CHECK: setmaxnreg.dec.sync.aligned.u32 40;
// CHECK: llvm.mlir.constant(288 : i32)
// CHECK-NEXT: llvm.icmp "ult"
// CHECK: llvm.mlir.constant(256 : i32)
// CHECK-NEXT: llvm.icmp "eq"
// CHECK: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$6], [$2, {$7, $3, $4, $5}], [$1];
// CHECK: setmaxnreg.inc.sync.aligned.u32 232;
// CHECK: bar.warp.sync -1;\0A\09@$0 mbarrier.arrive.shared::cta.b64 _, [$1];
// CHECK: %[[COUNT:.*]] = llvm.mlir.constant(256 : i32)
// CHECK-NEXT: %[[ID:.*]] = llvm.mlir.constant(1 : i32)
// CHECK-NEXT: nvvm.barrier id = %[[ID]] number_of_threads = %[[COUNT]]
// Ping-pong's turns: named barrier 8 + warpgroup (tid / 128) is the warpgroup's own, over
// 256 threads; the first turn is warpgroup 1's arrival on warpgroup 0's.
// CHECK: "{\0A\09.reg .pred p;\0A\09setp.eq.u32 p, $0, 1;\0A\09@p bar.arrive 8, 256;\0A\09}"
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK-NEXT: %[[C7:.*]] = llvm.mlir.constant(7 : i32)
// CHECK-NEXT: %[[WG:.*]] = llvm.lshr %[[TID]], %[[C7]]
// CHECK-NEXT: %[[C8:.*]] = llvm.mlir.constant(8 : i32)
// CHECK-NEXT: %[[OWN:.*]] = llvm.add %[[WG]], %[[C8]]
// CHECK-NEXT: %[[THREADS:.*]] = llvm.mlir.constant(256 : i32)
// CHECK-NEXT: nvvm.barrier id = %[[OWN]] number_of_threads = %[[THREADS]]
// CHECK: %[[C9:.*]] = llvm.mlir.constant(9 : i32)
// CHECK-NEXT: %[[OTHER:.*]] = llvm.sub %[[C9]], %{{.*}}
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "bar.arrive $0, 256;", "r" %[[OTHER]]
func.func @specialized(%map: !tile.tensor_map, %p: !tile.ptr<f16>, %n: i64, %slot: i32, %active: i1)
    attributes {tile.kernel, tile.num_warps = 8 : i32, tile.producer_warps = 4 : i32, tile.shared_memory = 66592 : i64} {
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i64
  %ring = tile.shared_alloc {tile.smem_offset = 0 : i64} : !tile.shared<2 x tensor<64x128xf16>>
  %full = tile.shared_alloc {tile.smem_offset = 65536 : i64} : !tile.shared<2 x tensor<1xi64>>
  %empty = tile.shared_alloc {tile.smem_offset = 66560 : i64} : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %empty arrivals 8 : !tile.shared<2 x tensor<1xi64>>
  tile.init_barriers %full arrivals 1 : !tile.shared<2 x tensor<1xi64>>
  %producer = tile.in_producer_warps
  scf.if %producer {
    tile.set_max_registers 40
    %first = tile.in_producer_warps first
    scf.if %first {
      %bp = tile.make_block_ptr %p, [%one, %n, %n, %n], [%n, %n, %n, %one], [%c0, %slot, %c0, %c0] {order = array<i32: 3, 2, 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<1x64x1x128xf16>>
      tile.wait_barrier %empty[%slot], %c0 : !tile.shared<2 x tensor<1xi64>>
      tile.tma_load %map, %bp into %ring[%slot], %full if %active : !tile.block_ptr<tensor<1x64x1x128xf16>>, !tile.shared<2 x tensor<64x128xf16>>, !tile.shared<2 x tensor<1xi64>>
    }
  } else {
    tile.set_max_registers 232 {increase}
    tile.wait_barrier %full[%slot], %c0 : !tile.shared<2 x tensor<1xi64>>
    tile.arrive_barrier %empty[%slot] if %active : !tile.shared<2 x tensor<1xi64>>
    tile.async_wait 0
    tile.warpgroup_turn first
    tile.warpgroup_turn take
    tile.warpgroup_turn pass
  }
  return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [1, 1], order = [1, 0]>

// A block load and store of 8-wide vectors (tile.vector): one predicated 16-byte access per
// vector, its mask the bounds check of its first element; padding 0 where it is off.
// CHECK-LABEL: llvm.func @block_vectors
// CHECK: "mov.b32 $0, $6;{{.*}}@$5 ld.global.v4.b32 {$0, $1, $2, $3}, [$4];"
// CHECK: "@$5 st.global.v4.b32 [$0], {$1, $2, $3, $4};"
// CHECK-NOT: ld.global.b16
func.func @block_vectors(%k: !tile.ptr<f16>, %n: i64, %d: i64, %sn: i64, %start: i32)
    attributes {tile.kernel, tile.num_warps = 1 : i32, tile.shared_memory = 0 : i64} {
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i64
  %bp = tile.make_block_ptr %k, [%n, %d], [%sn, %one], [%start, %c0] {order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<8x32xf16>>
  %t = tile.block_load %bp {boundary_check = array<i32: 0, 1>, tile.vector = 8 : i32} : !tile.block_ptr<tensor<8x32xf16>> -> tensor<8x32xf16, #b>
  tile.block_store %bp, %t {boundary_check = array<i32: 0, 1>, tile.vector = 8 : i32} : !tile.block_ptr<tensor<8x32xf16>>, tensor<8x32xf16, #b>
  return
}
