#ifndef TESSERA_TRANSFORMS_PASSES
#define TESSERA_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def TilePipelineLoops : Pass<"tile-pipeline-loops", "mlir::ModuleOp"> {
  let summary = "Multi-stage software pipelining of tensor-core operand loads through shared memory";
  let description = [{
    In a loop whose body loads tiles that only feed `tile.dot` (16-bit elements, pointers from
    index math, which may read single values from memory the kernel never writes, such as
    block indices: those of iterations ahead are read early, masked to iterations that exist),
    directly or through a 2-D `tile.trans` (read back `{transposed}`), each such
    load becomes a ring of `tile.num_stages` shared-memory stages filled by `tile.async_copy`
    (cp.async): the first stages - 1 iterations are copied before the loop, and each iteration
    waits for its own stage, reads it and starts the copy for the iteration stages - 1 ahead
    into the stage the previous iteration finished with. With `tile.tma` on the kernel (Hopper),
    `tile.block_load`s of such tiles whose tensor is a 16-byte-aligned kernel argument with a
    shape and strides the launcher knows (arguments or constants; rows a multiple of 16 bytes,
    the last stride 1) are copied by the tensor memory accelerator instead:
    the kernel gets a `!tile.tensor_map` argument per tensor and block shape (its
    `tile.tensor_map` attribute says how the launcher builds it). Block loads of single rows
    (16- or 32-bit, 128-byte multiples, such as the backward's LSE) join the same ring whatever
    uses them: each use reads the stage where it stands, in the layout it asks for. Loops loading the same blocks
    (maps and tiles) fill one ring, made at the kernel's start with an mbarrier a stage
    (`tile.init_barriers`), whose fills are numbered across those loops in program order
    (`tile.tma_load`s name their fill number; loops and branches around them carry the
    count): the masked loop continues the unmasked one's numbering, an outer loop's next
    iteration the previous one's. A loop loading only some of a ring's blocks (in the same
    order) fills that ring too: its copies land in their blocks' buffers, and the first
    arrives for the blocks the fill leaves as they are (`arrivals`), so that the forward's last
    deferred P @ V, written as a loop of one block, reads V from the ring of K and V. Each
    iteration waits for its stage's phase
    (`tile.wait_barrier {sync}`). Every pipelined loop ends with `tile.async_wait 0` (a CTA
    barrier). With `tile.invariant_operands_in_shared` on the kernel, a
    tile loaded outside loops and used only by dots inside them is copied once into a
    one-stage buffer that every iteration's dot reads (Q of attention, out of registers).
    With `stage-outside-loops`, in a warp-specialized kernel, a block load outside loops whose
    tile only feeds dots (attention's Q before the loops, its last deferred P @ V after them)
    is copied by the TMA into a stage and an mbarrier of its own, issued before the branches
    around it where they would run it; the producer issues it in program order (Q before the
    first keys, the last V after its loops' last fill), and the consumers wait for its phase
    where the load stood: no thread copies it and no CTA barrier waits for it. The tile is
    read from the stage there (`{whole}`: into registers once), or with
    `tile.invariant_operands_in_shared` by each dot in a loop (its own shared memory: the
    function is marked `tile.staged_outside_loops`, and the compiler drops the stage where the
    kernel would not fit otherwise). Likewise a loop around loops that fill rings (a persistent
    kernel's loop over tiles) copies its own such block loads (the next tile's Q) through a
    two-stage TMA ring of its own, numbered by the iteration, one iteration ahead.
  }];
  let options = [
    Option<"stageOutsideLoops", "stage-outside-loops", "bool", /*default=*/"true",
           "copy block loads outside loops that feed dots into stages of their own (TMA)">
  ];
}

def TilePrefetchLoads : Pass<"tile-prefetch-loads", "mlir::ModuleOp"> {
  let summary = "Software-pipeline loops: issue next iteration's loads before this one's math";
  let description = [{
    For an `scf.for` whose body loads tiles through pointers computed from the induction
    variable and the loop-carried values (pure index math), the first iteration's loads move
    before the loop and each iteration loads the next one's tiles (carried to it) before its
    own compute: a load's latency then hides behind a whole iteration of math (two pipeline
    stages, buffered in registers). The prefetch for the iteration after the last is masked off.
  }];
}

def TileAssignLayouts : Pass<"tile-assign-layouts", "mlir::ModuleOp"> {
  let summary = "Give every tile a layout encoding; insert conversions where ops need them";
  let description = [{
    Memory ops, ranges, splats and constants get the default blocked layout of their shape
    (vectors of 16 bytes of the narrowest accessed element along the last dimension);
    f16/bf16 dots get the mma layout (every warp on rows when one dot feeds another, as in
    attention, so that row statistics stay in a warp and the first dot's accumulator is the
    second's operand; 16 rows a warp in whole warpgroups where the kernel has
    `tile.warpgroup_mma`, so that the dot can run on Hopper's wgmma); reductions give the slice of their source's layout; expand_dims of a
    slice gives its parent back; broadcasts keep an mma layout; elementwise ops take the
    operand layout costliest to leave (mma and its slices before blocked), then the first.
    Loop-carried tiles are carried in the layout their body yields when that one is costlier
    to leave than their initial value's (found by assigning copies of the function until no
    loop asks for another). Operands in another layout than their op needs get a
    `tile.convert_layout`.
  }];
  let dependentDialects = ["::tessera::tile::TileDialect"];
}

def TileRemoveLayoutConversions : Pass<"tile-remove-layout-conversions", "mlir::ModuleOp"> {
  let summary = "Remove layout conversions that cancel or whose source is cheap to rebuild";
  let description = [{
    Folds conversions to the same layout and chains of conversions, and rebuilds values made
    only of ranges, splats, constants, reads of shared-memory stages, broadcasts, expand_dims
    and elementwise math directly in the layout a conversion asks for (index arithmetic, or a
    stage read in another layout, costs less than a trip through shared memory).
  }];
}

def TileVectorizeMemory : Pass<"tile-vectorize-memory", "mlir::ModuleOp"> {
  let summary = "Give loads and stores the widest vector access their pointers allow";
  let description = [{
    A forward analysis of contiguity (runs of consecutive values), divisibility (the largest
    power of two dividing a run's first value; bytes for pointers) and constancy (runs of equal
    values) per dimension, seeded by kernel arguments marked `tile.divisibility` at launch.
    Each load and store of a blocked tile gets `tile.vector` = the number of
    consecutive registers one instruction may move: at most the thread's run along the fastest
    dimension, the pointers' contiguity, 16 bytes, their alignment, and the mask's constancy.
    Block loads and stores (those the TMA does not take) get it along the block pointer's
    fastest dimension where its stride is 1, their base, other strides and offset keep each
    vector aligned, and a boundary check on that dimension cannot change inside a vector.
  }];
}

def TileStageDotOperands : Pass<"tile-stage-dot-operands", "mlir::ModuleOp"> {
  let summary = "Let wgmma read an A operand computed in registers from a stage, not registers";
  let description = [{
    A wgmma dot's A operand that a trans or convert_layout moves through shared memory (dS in
    the backward's dQ = dS K, whose rows the warpgroups computing dS^T do not hold) would be
    stored there and loaded back by every warpgroup with ldmatrix: a 64x128 A takes 32
    registers a thread. Instead it is written once into a stage of its own
    (`tile.shared_store`) and the dot reads it through a matrix descriptor
    (`tile.shared_load` that the dot reads step by step), K-major or, from a trans,
    MN-major. Only where the dot then still runs on wgmma.
  }];
}

def TileAllocateSharedMemory : Pass<"tile-allocate-shared-memory", "mlir::ModuleOp"> {
  let summary = "Place every op's shared-memory scratch in the kernel's one shared buffer";
  let description = [{
    Pipeline rings (`tile.shared_alloc`) are placed first fit, aligned by what reads them:
    rings of 2-D tiles to 1024 bytes (the 128-byte swizzle's period), of rows (1-D) to 128,
    of mbarriers to 8. Rings in use at the same time (from the first use to the end of the
    loop around the last) get disjoint ranges, rings of sequential loops share memory (each
    pipelined loop ends with an async_wait 0 and a barrier); rings of mbarriers are never
    shared, nor, in a warp-specialized kernel, rings the TMA fills (its producer runs ahead of
    the consumers). Layout conversions, cross-warp reductions and the CUDA-core dot use shared
    memory only while they run (barriers before and after), so their scratch overlaps right
    after the rings; each such op gets `tile.smem_offset`, the kernel `tile.shared_memory`
    (bytes).
  }];
}

def TileAsyncDots : Pass<"tile-async-dots", "mlir::ModuleOp"> {
  let summary = "Issue Hopper wgmma dots asynchronously and wait for them where their results are read";
  let description = [{
    Every dot that runs on wgmma gets `async`; a `tile.dot_wait` hands its result on just
    before the first op of its block that reads it, contains loops or branches with dots of
    their own, or refills a stage (copies, or a `tile.shared_store` into its operand's):
    meanwhile the warps compute what does not depend on it (softmax on one dot's scores while
    the next dot runs), and `pending` leaves the dots issued since in flight. A result that
    only feeds the next async dot as its accumulator is not waited for. A loop whose body's
    dots all feed, through the loop, only their own accumulator (a matmul's k loop), and that
    stores no stage from registers, keeps them in flight into the next iteration: after its
    last dot, the body waits for the previous iteration's dots and synchronizes the CTA (all
    warpgroups are done with their stages), and only then refills its stages (cp.async copies
    or TMA loads; a TMA stage's `tile.wait_barrier` then needs no CTA barrier of its own); the
    loop's results are waited for right after it. A dot whose result only the loop carries,
    read in the next iteration before that iteration issues, waits for or refills anything
    (FlashAttention-3's P @ V with the accumulator rescaled before the next Q K^T), stays in
    flight through the rest of its iteration and is waited for just before that read, and
    after the loop before the result's first reader: ptxas moves a wait for it placed at the
    iteration's end up into the softmax, ahead of the exponentials (sm_90a, CUDA 13.0), but
    not across the loop's back edge. Read after the next iteration's dots (the plain order's
    rescale), it is waited for in its own iteration.
  }];
}

def TileScopeStageBarriers : Pass<"tile-scope-stage-barriers", "mlir::ModuleOp"> {
  let summary = "Drop or narrow the barriers around a loop's stores of stages from registers";
  let description = [{
    A `tile.shared_store` of tile-stage-dot-operands' kind (the only store of a stage of its
    own memory, read in the same loop body) waits for all warps before and after. After it, a
    warpgroup's own barrier is enough (`warpgroup_local`) where every load of the stage gives
    each warpgroup only elements it stored itself, by the layouts (P^T for dV in the
    backward, whose rows are the keys of the warpgroup that computed them). Before it, none
    is needed (`readers_synced`) where each read of the previous contents is done (a load, or
    the `tile.dot_wait` retiring the dot that reads it) and followed, before the store comes
    round again, by a barrier at least as wide as the readers: the end of another store, a
    staged `tile.bulk_add`, a `tile.dot_wait` with `barrier`. The backward pass adding dQ so
    keeps 2 of its loop's 5 CTA-wide barriers (dS's after its store, the bulk add's) and one
    per warpgroup.
  }];
}

def TileSpecializeWarps : Pass<"tile-specialize-warps", "mlir::ModuleOp"> {
  let summary = "Give a kernel's TMA loads to a producer warpgroup of their own (tile.warp_specialize)";
  let description = [{
    For kernels with `tile.warp_specialize` whose pipelined rings are filled by the TMA: the
    kernel runs one more warpgroup (`tile.producer_warps`), and its body becomes
    `scf.if tile.in_producer_warps`. The producer runs the TMA loads (in the same loops, at any
    depth, carrying only the index math the loads need, cloned from the consumers'), each fill f
    first waiting, where active, for its stage's "empty" mbarrier to complete the consumers'
    release of fill f - stages (a fill numbered by a constant below the stages, the prologue's
    or a one-shot stage's, has none to wait for); the consumers (the kernel's num_warps warps,
    laid out as before) run the rest, and where a loop refilled a stage each of their warps now
    arrives on that stage's empty barrier instead, in every iteration (the releases of a loop's
    last iterations let the next loop's, or the next tile's, first fills go), so the CTA
    barriers that protected refills go (`sync` of stage waits, `barrier` of dot waits, and the
    `tile.async_wait 0 {orders_refills}` after their TMA loops, unless the consumers write
    shared memory after their first loop); every other CTA barrier of theirs becomes a named
    barrier over the consumers alone (lowering). All barriers are initialized before the split;
    new ones are placed after the kernel's shared memory (tile-allocate-shared-memory never lets
    its rings share memory). With 8 or more consumer warps the producer gives registers back
    (setmaxnreg) and the consumers take them.
    cp.async copies stay with the consumers: their rings' refills wait behind the consumers'
    named barrier (a persistent kernel's Q, one stage per tile). A kernel whose TMA loads sit in
    anything but loops, whose rings are initialized elsewhere than in its body, or whose loads
    need anything but scalar index math (block indices read from memory the kernel never writes
    count as such), is an error.
  }];
}

def TilePingPong : Pass<"tile-ping-pong", "mlir::ModuleOp"> {
  let summary = "The two consumer warpgroups take turns at their wgmma or their exponentials (tile.ping_pong)";
  let description = [{
    For kernels with `tile.ping_pong` that tile-specialize-warps split (those with TMA loads;
    others keep their warps and are left alone), whose consumers must be two warpgroups. In
    every loop of the consumers, a warpgroup waits for its turn (`tile.warpgroup_turn take`)
    before a span of the body and passes it (`pass`) after; `first`, at the consumers' start,
    gives warpgroup 0 the first turn. The span, by the attribute's value:
    - "dots", FlashAttention-3's ping-pong: from the body's first async dot to the last one
      issued before the first dot wait after it (a wait before it is for the previous
      iteration's dots). One warpgroup's products then run while the other computes on its
      last results (FlashAttention's softmax).
    - "exponentials", cuDNN's order: from the body's first exponential to the first async dot
      after its last (P @ V, which reads them; ptxas moves arithmetic past a bar.arrive but not
      past a wgmma). The warpgroups' softmaxes then take turns at the multi-function units
      their warps share, each running while the other's products do.
    Both warpgroups run the same loops, so their turns pair up. A loop with anything in the
    span that may wait for all consumer warps (a barrier: shared memory stores, scratch
    exchanges, nested regions) takes no turns: the other warpgroup would be waiting for its
    turn.
  }];
}

def TileDeferLaneSums : Pass<"tile-defer-lane-sums", "mlir::ModuleOp"> {
  let summary = "Sums a loop carries add up their lanes once, after it (tile.defer_lane_sums)";
  let description = [{
    For kernels with `tile.defer_lane_sums`. A loop that carries `s = s * alpha + sum(p, axis)`
    (FlashAttention's softmax denominator, alpha a row's rescale) or `s = s + sum(p, axis)`,
    where nothing else in the loop reads `s`, needs the lanes' shuffles of the sum only once:
    alpha is alike in the lanes that hold a row, so each lane may carry its own partial sum
    (the reduce becomes `within_threads`) and a `tile.combine_lanes` after the loop adds the
    lanes up, as FlashAttention-3 does. The sum must start at zero or where another such loop
    left its partial sums (the masked key blocks' loop after the unmasked ones'); reductions
    with warps along the axis (which meet in shared memory) are left alone.
  }];
}

def TileConvertToLLVM : Pass<"tile-convert-to-llvm", "mlir::ModuleOp"> {
  let summary = "Lower tile programs with layouts to per-thread LLVM and NVVM";
  let description = [{
    Every tile becomes an LLVM struct of the registers its layout gives one thread; tile ops
    become per-register LLVM, NVVM (special registers, shuffles, barriers) and predicated PTX
    memory instructions; loops carry the structs. Kernels become `llvm.func`s with
    `nvvm.kernel` and their thread count, sharing one `.extern .shared` buffer. exp2 is PTX's
    ex2.approx; with `tile.exp2_on_fma` = n, n of every 8 registers of an f32 exp2 or exp take
    a polynomial on the FMA pipe instead (Exp2Polynomial.h).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::cf::ControlFlowDialect", "::mlir::gpu::GPUDialect"];
}

#endif // TESSERA_TRANSFORMS_PASSES
