#ifndef TESSERA_TILE_OPS
#define TESSERA_TILE_OPS

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "tessera/compiler/Dialect/Tile/TileDialect.td"
include "tessera/compiler/Dialect/Tile/TileTypes.td"
include "tessera/compiler/Dialect/Tile/TileAttrs.td"

//===----------------------------------------------------------------------===//
// Grid
//===----------------------------------------------------------------------===//

def Tile_ProgramIdOp : Tile_Op<"program_id", [Pure]> {
  let summary = "index of this program instance along one grid axis";
  let description = [{
    Each program instance computes one set of tiles; its index along `x`, `y` or `z` of the
    launch grid selects which.

    Example: `%pid = tile.program_id x`
  }];
  let arguments = (ins Tile_GridAxisAttr:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "custom<Keyword>($axis) attr-dict";
}

def Tile_NumProgramsOp : Tile_Op<"num_programs", [Pure]> {
  let summary = "number of program instances along one grid axis";
  let description = [{
    Example: `%n = tile.num_programs y`
  }];
  let arguments = (ins Tile_GridAxisAttr:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "custom<Keyword>($axis) attr-dict";
}

//===----------------------------------------------------------------------===//
// Tile construction and shape manipulation
//===----------------------------------------------------------------------===//

def Tile_MakeRangeOp : Tile_Op<"make_range", [Pure]> {
  let summary = "the 1-D tile [start, end) of consecutive i32";
  let description = [{
    `end - start` must be a power of two and equal the result's size.

    Example: `%r = tile.make_range 0 to 128 : tensor<128xi32>`
  }];
  let arguments = (ins I32Attr:$start, I32Attr:$end);
  let results = (outs RankedTensorOf<[I32]>:$result);
  let assemblyFormat = "$start `to` $end attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_SplatOp : Tile_Op<"splat", [Pure]> {
  let summary = "a tile with every element equal to one scalar";
  let description = [{
    Example: `%t = tile.splat %x : f32 -> tensor<64x64xf32>`
  }];
  let arguments = (ins AnyTypeOf<[AnySignlessInteger, AnyFloat, Tile_PointerType]>:$src);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tile_BroadcastOp : Tile_Op<"broadcast", [Pure]> {
  let summary = "repeat a tile along its size-1 dimensions";
  let description = [{
    Source and result have the same rank and element type; every source dimension equals
    the result's or is 1.

    Example: `%b = tile.broadcast %row : tensor<1x64xf32> -> tensor<128x64xf32>`
  }];
  let arguments = (ins Tile_Tile:$src);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_ExpandDimsOp : Tile_Op<"expand_dims", [Pure]> {
  let summary = "insert a dimension of size 1";
  let description = [{
    Example: `%c = tile.expand_dims %v {axis = 1 : i32} : tensor<128xf32> -> tensor<128x1xf32>`
  }];
  let arguments = (ins Tile_Tile:$src, I32Attr:$axis);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_ReshapeOp : Tile_Op<"reshape", [Pure]> {
  let summary = "reinterpret a tile's elements, in row-major order, as another shape";
  let description = [{
    Example: `%r = tile.reshape %t : tensor<16x8xf16> -> tensor<128xf16>`
  }];
  let arguments = (ins Tile_Tile:$src);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_TransOp : Tile_Op<"trans", [Pure]> {
  let summary = "permute a tile's dimensions";
  let description = [{
    Result dimension `i` is source dimension `order[i]`.

    Example: `%kt = tile.trans %k {order = array<i32: 1, 0>} : tensor<64x128xf16> -> tensor<128x64xf16>`
  }];
  let arguments = (ins Tile_Tile:$src, DenseI32ArrayAttr:$order);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Pointers and memory
//===----------------------------------------------------------------------===//

def Tile_AddPtrOp : Tile_Op<"addptr", [Pure, AllTypesMatch<["ptr", "result"]>]> {
  let summary = "advance pointers by a number of elements";
  let description = [{
    Offsets count elements of the pointee type. A scalar pointer takes a scalar offset; a
    tile of pointers takes a tile of offsets of the same shape.

    Example: `%p = tile.addptr %base, %offs : tensor<128x!tile.ptr<f32>>, tensor<128xi32>`
  }];
  let arguments = (ins Tile_PtrLike:$ptr, Tile_IntLike:$offset);
  let results = (outs Tile_PtrLike:$result);
  let assemblyFormat = "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_LoadOp : Tile_Op<"load", [AttrSizedOperandSegments, MemoryEffects<[MemRead]>]> {
  let summary = "load the elements a tile of pointers points to, where a mask allows";
  let description = [{
    Lanes whose `mask` is false do not touch memory and produce `other` (undefined when
    `other` is absent). `other` requires `mask`. The result has the pointee type and the
    shape of `ptr`; `mask` is i1 of that shape and `other` has the result's type.

    Example: `%x = tile.load %p, %m, %zero : tensor<128x!tile.ptr<f32>>`
  }];
  let arguments = (ins Tile_PtrLike:$ptr, Optional<Tile_BoolLike>:$mask,
                       Optional<AnyType>:$other);
  let results = (outs AnyType:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$ptr, "::mlir::Value":$mask, "::mlir::Value":$other)>
  ];
}

def Tile_StoreOp : Tile_Op<"store", [MemoryEffects<[MemWrite]>]> {
  let summary = "store a tile through a tile of pointers, where a mask allows";
  let description = [{
    Example: `tile.store %p, %x, %m : tensor<128x!tile.ptr<f32>>`
  }];
  let arguments = (ins Tile_PtrLike:$ptr, AnyType:$value, Optional<Tile_BoolLike>:$mask);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Tile_AtomicRMWOp : Tile_Op<"atomic_rmw", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "atomic read-modify-write through a tile of pointers; returns the old values";
  let description = [{
    `add`, `max`, `min` and `xchg` take integers or floats; `and`, `or`, `xor` integers only.
    Masked-off lanes do not touch memory.

    Example: `%old = tile.atomic_rmw add, %p, %x, %m {sem = acq_rel, scope = gpu} : tensor<128x!tile.ptr<f32>>`
  }];
  let arguments = (ins Tile_AtomicKindAttr:$kind, Tile_PtrLike:$ptr, AnyType:$value,
                       Optional<Tile_BoolLike>:$mask,
                       DefaultValuedAttr<Tile_MemSemanticAttr,
                                         "::tessera::tile::MemSemantic::acq_rel">:$sem,
                       DefaultValuedAttr<Tile_MemScopeAttr,
                                         "::tessera::tile::MemScope::gpu">:$scope);
  let results = (outs AnyType:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Tile_BulkAddOp : Tile_Op<"bulk_add", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "add an f32 tile into as many consecutive floats in global memory, row-major";
  let description = [{
    Element (i, j) of the M x N `values` is added to `dst[i * N + j]`, a relaxed reduction of
    GPU scope (the order of concurrent adds varies). `dst` must be 16-byte aligned. Where the
    kernel may use the tensor memory accelerator (Hopper), the tile is staged in shared memory
    and added by one bulk reduction of the copy engine (cp.reduce.async.bulk), which keeps the
    adds off the SM's load/store path; elsewhere each thread reduces its elements.

    With `swizzled` (N a multiple of 32), element (i, j) goes to `dst[i * N + (j ^ 8 * (i % 4))]`
    instead: each row's groups of 8 floats permuted by the row, so that the threads of a
    tensor-core accumulator (8 rows of 8 floats a warp) write the staging without bank
    conflicts. Whoever reads the sums applies the same permutation.

    Example: `tile.bulk_add %dq, %tile {swizzled} : !tile.ptr<f32>, tensor<64x128xf32>`
  }];
  let arguments = (ins Tile_PointerType:$dst, Tile_Tile:$values, UnitAttr:$swizzled);
  let assemblyFormat = "$dst `,` $values attr-dict `:` qualified(type($dst)) `,` type($values)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Block pointers (2-D tiles of strided tensors; the TMA path)
//===----------------------------------------------------------------------===//

def Tile_MakeBlockPtrOp : Tile_Op<"make_block_ptr", [Pure, AttrSizedOperandSegments]> {
  let summary = "pointer to a block of a strided tensor in global memory";
  let description = [{
    `shape` and `strides` (in elements, i64) describe the whole tensor, `offsets` (i32)
    the block's first element; the block shape is the result type's. `order` lists the
    dimensions from fastest- to slowest-varying in memory.

    Example:
    ```mlir
    %bp = tile.make_block_ptr %k, [%n, %d], [%sn, %c1], [%start, %c0] {order = array<i32: 1, 0>}
        : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>
    ```
  }];
  let arguments = (ins Tile_PointerType:$base, Variadic<I64>:$shape, Variadic<I64>:$strides,
                       Variadic<I32>:$offsets, DenseI32ArrayAttr:$order);
  let results = (outs Tile_BlockPointerType:$result);
  let assemblyFormat = [{
    $base `,` `[` $shape `]` `,` `[` $strides `]` `,` `[` $offsets `]` attr-dict
    `:` qualified(type($base)) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def Tile_AdvanceOp : Tile_Op<"advance", [Pure, AllTypesMatch<["ptr", "result"]>]> {
  let summary = "move a block pointer by a number of elements per dimension";
  let description = [{
    Example: `%next = tile.advance %bp, [%c64, %c0] : !tile.block_ptr<tensor<64x128xf16>>`
  }];
  let arguments = (ins Tile_BlockPointerType:$ptr, Variadic<I32>:$offsets);
  let results = (outs Tile_BlockPointerType:$result);
  let assemblyFormat = "$ptr `,` `[` $offsets `]` attr-dict `:` qualified(type($ptr))";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_BlockLoadOp : Tile_Op<"block_load", [MemoryEffects<[MemRead]>]> {
  let summary = "load the block a block pointer points to";
  let description = [{
    Dimensions listed in `boundary_check` are checked against the tensor's shape; elements
    outside read as `padding`. Unchecked dimensions must be in bounds.

    Example:
    `%t = tile.block_load %bp {boundary_check = array<i32: 0>} : !tile.block_ptr<tensor<64x128xf16>> -> tensor<64x128xf16>`
  }];
  let arguments = (ins Tile_BlockPointerType:$ptr, DenseI32ArrayAttr:$boundary_check,
                       DefaultValuedAttr<Tile_PaddingAttr, "::tessera::tile::Padding::zero">:$padding);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$ptr attr-dict `:` qualified(type($ptr)) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_BlockStoreOp : Tile_Op<"block_store", [MemoryEffects<[MemWrite]>]> {
  let summary = "store a tile to the block a block pointer points to";
  let description = [{
    Elements outside the tensor in a dimension listed in `boundary_check` are not written.

    Example:
    `tile.block_store %bp, %o {boundary_check = array<i32: 0, 1>} : !tile.block_ptr<tensor<64x128xf16>>, tensor<64x128xf16>`
  }];
  let arguments = (ins Tile_BlockPointerType:$ptr, Tile_Tile:$value,
                       DenseI32ArrayAttr:$boundary_check);
  let assemblyFormat = "$ptr `,` $value attr-dict `:` qualified(type($ptr)) `,` type($value)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def Tile_DotOp : Tile_Op<"dot", [Pure, AllTypesMatch<["acc", "result"]>]> {
  let summary = "matrix product with accumulator: result = a @ b + acc";
  let description = [{
    `a` is MxK, `b` is KxN, `acc` and the result MxN, every dimension at least 16.
    Accepted inputs -> accumulator: f16 -> f32 or f16, bf16 -> f32, f32 -> f32 (with
    `input_precision` ieee, tf32 or tf32x3), i8 -> i32. `input_precision` other than ieee
    is only meaningful for f32 inputs.

    With `async` (set by tile-async-dots on dots that run on Hopper's wgmma), the dot is only
    issued: its result may be read after a `tile.dot_wait` that hands it on, or be the
    accumulator of the next async dot of the same shape.

    Example:
    `%c = tile.dot %a, %b, %acc : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>`
  }];
  let arguments = (ins Tile_Tile:$a, Tile_Tile:$b, Tile_Tile:$acc,
                       DefaultValuedAttr<Tile_InputPrecisionAttr,
                                         "::tessera::tile::InputPrecision::ieee">:$input_precision,
                       UnitAttr:$async);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$a `,` $b `,` $acc attr-dict `:` type($a) `*` type($b) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_DotWaitOp : Tile_Op<"dot_wait", [MemoryEffects<[MemRead, MemWrite]>, AllTypesMatch<["values", "results"]>]> {
  let summary = "wait until at most `pending` async dots of this warpgroup are in flight";
  let description = [{
    Async dots complete in the order they were issued. The results are `values` (results of
    async dots that have completed by then), which nothing reads before the wait. With
    `barrier`, the CTA then synchronizes: every warpgroup's dots issued before it, but the last
    `pending`, have finished reading shared memory, whose stages may then be refilled.

    Example: `%d = tile.dot_wait %c {pending = 1 : i32} : tensor<128x128xf32>`
  }];
  let arguments = (ins Variadic<Tile_Tile>:$values, I32Attr:$pending, UnitAttr:$barrier);
  let results = (outs Variadic<Tile_Tile>:$results);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Tile_ReduceOp : Tile_Op<"reduce", [Pure]> {
  let summary = "reduce a tile along one axis";
  let description = [{
    `sum`, `max` and `min` keep the element type; `argmax` and `argmin` return i32 indices
    (the first index on ties). `max`/`min` of floats propagate NaN. Reducing a 1-D tile gives
    a scalar.

    With `within_threads` (a `sum` with layouts, set by tile-defer-lane-sums) each thread adds
    only its own values: the lanes along the axis hold partial sums of a row, not the row's
    sum, until a tile.combine_lanes adds them up.

    Example: `%m = tile.reduce max %s {axis = 1 : i32} : tensor<128x64xf32> -> tensor<128xf32>`
  }];
  let arguments = (ins Tile_Tile:$src, Tile_ReduceKindAttr:$kind, I32Attr:$axis, UnitAttr:$within_threads);
  let results = (outs AnyType:$result);
  let assemblyFormat = "custom<Keyword>($kind) $src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Tile_CombineLanesOp : Tile_Op<"combine_lanes", [Pure, AllTypesMatch<["src", "result"]>]> {
  let summary = "add up the partial sums that lanes hold (after a within_threads reduce)";
  let description = [{
    Each of a thread's values becomes the sum of that value over the lanes whose ids differ
    from its lane's only in the bits of `lanes` (butterfly shuffles): the lanes that held
    partial sums of one row (tile.reduce's `within_threads`) then all hold the row's sum.

    Example: `%s = tile.combine_lanes %partial {lanes = 3 : i32} : tensor<128xf32, #slice>`
  }];
  let arguments = (ins Tile_Tile:$src, I32Attr:$lanes);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_PrintOp : Tile_Op<"print", [MemoryEffects<[MemWrite]>]> {
  let summary = "print scalars and tiles from the device (debugging)";
  let description = [{
    Example: `tile.print "row max " %m : tensor<128xf32>`
  }];
  let arguments = (ins StrAttr:$prefix, Variadic<Tile_Value>:$args);
  let assemblyFormat = "$prefix attr-dict ($args^ `:` type($args))?";
}

#endif // TESSERA_TILE_OPS

def Tile_ConvertLayoutOp : Tile_Op<"convert_layout", [Pure]> {
  let summary = "move a tile's elements to another layout";
  let description = [{
    Same shape and element type, another encoding. Lowered through shared memory unless the
    two layouts place every element in the same thread.

    Example: `%b = tile.convert_layout %a : tensor<128xf32, #slice> -> tensor<128xf32, #blocked>`
  }];
  let arguments = (ins Tile_Tile:$src);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Shared-memory pipelines (made by tile-pipeline-loops)
//===----------------------------------------------------------------------===//

def Tile_SharedAllocOp : Tile_Op<"shared_alloc", [MemoryEffects<[MemAlloc]>]> {
  let summary = "a ring of tiles in shared memory";
  let description = [{
    Example: `%buf = tile.shared_alloc : !tile.shared<3 x tensor<128x32xbf16>>`
  }];
  let results = (outs Tile_SharedBufferType:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
}

def Tile_AsyncCopyOp : Tile_Op<"async_copy", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "start copying a tile from global memory into one stage of a ring (cp.async)";
  let description = [{
    Lanes whose mask is false write zeros. The copy completes at a later `tile.async_wait`.

    Example: `tile.async_copy %ptrs, %mask into %buf[%slot] : tensor<128x32x!tile.ptr<bf16>>, tensor<128x32xi1>, !tile.shared<3 x tensor<128x32xbf16>>`
  }];
  let arguments = (ins Tile_PtrTensor:$ptr, RankedTensorOf<[I1]>:$mask, Tile_SharedBufferType:$buffer, I32:$slot);
  let assemblyFormat = [{
    $ptr `,` $mask `into` $buffer `[` $slot `]` attr-dict `:` type($ptr) `,` type($mask) `,` qualified(type($buffer))
  }];
  let hasVerifier = 1;
}

def Tile_AsyncCommitOp : Tile_Op<"async_commit", [MemoryEffects<[MemWrite]>]> {
  let summary = "close the group of copies started since the last commit";
  let description = [{ Example: `tile.async_commit` }];
  let assemblyFormat = "attr-dict";
}

def Tile_AsyncWaitOp : Tile_Op<"async_wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "wait until at most `pending` copy groups are in flight, then synchronize the CTA";
  let description = [{
    After it, every thread sees the tiles of the completed groups, and every thread has finished
    reading the stages it read before it (so they may be refilled).

    With `orders_refills` it follows a loop whose rings the TMA fills: it waits for no copy,
    and its barrier only keeps later fills from landing under a warp still reading the loop's
    last stages. tile-specialize-warps drops it where the producer's empty barriers order those
    fills and the consumers write no shared memory after their first loop.

    Example: `tile.async_wait 1`, `tile.async_wait 0 {orders_refills}`
  }];
  let arguments = (ins I32Attr:$pending, UnitAttr:$orders_refills);
  let assemblyFormat = "$pending attr-dict";
}

def Tile_InitBarriersOp : Tile_Op<"init_barriers", [MemoryEffects<[MemWrite]>]> {
  let summary = "initialize a ring of mbarriers, each completing a phase after `arrivals` arrivals";
  let description = [{
    One mbarrier per stage (a `tensor<1xi64>` stage). Afterwards every thread, and the tensor
    memory accelerator, sees them initialized.

    Example: `tile.init_barriers %bars arrivals 2 : !tile.shared<3 x tensor<1xi64>>`
  }];
  let arguments = (ins Tile_SharedBufferType:$barriers, I32Attr:$arrivals);
  let assemblyFormat = "$barriers `arrivals` $arrivals attr-dict `:` qualified(type($barriers))";
  let hasVerifier = 1;
}

def Tile_TmaLoadOp : Tile_Op<"tma_load", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "start copying a block pointer's block into one stage of a ring (TMA)";
  let description = [{
    The ring's fill number `fill` of this load: where `active`, one thread arrives on
    `barriers[fill % stages]` expecting the block's bytes and has the tensor memory
    accelerator copy the block of the tensor `map` describes at the block pointer's offsets
    into `buffer[fill % stages]`, in the stage's swizzled layout (one copy per 128-byte-wide
    atom; a single row, of 16- or 32-bit elements, unswizzled in one copy); elements outside
    the tensor read zero. The barrier's phase fill / stages completes
    when all its loads have landed (`tile.wait_barrier`); a producer warpgroup
    (tile-specialize-warps) first waits until the stage's previous contents, fill - stages,
    have been released. With `arrivals` = n > 1 it arrives n times (a fill that copies only
    some of the blocks a ring's stage holds arrives for the others too).

    Example: `tile.tma_load %map, %bp into %buf[%fill], %bars if %active : !tile.block_ptr<tensor<128x64xf16>>, !tile.shared<3 x tensor<128x64xf16>>, !tile.shared<3 x tensor<1xi64>>`
  }];
  let arguments = (ins Tile_TensorMapType:$map, Tile_BlockPointerType:$ptr, Tile_SharedBufferType:$buffer,
                       I32:$fill, Tile_SharedBufferType:$barriers, I1:$active,
                       DefaultValuedAttr<I32Attr, "1">:$arrivals);
  let assemblyFormat = [{
    $map `,` $ptr `into` $buffer `[` $fill `]` `,` $barriers `if` $active attr-dict `:`
    qualified(type($ptr)) `,` qualified(type($buffer)) `,` qualified(type($barriers))
  }];
  let hasVerifier = 1;
}

def Tile_WaitBarrierOp : Tile_Op<"wait_barrier", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "wait until the phase of parity `parity` of `barriers[slot]` has completed";
  let description = [{
    After it, this thread sees what the phase's TMA loads wrote. With `sync`, a CTA barrier
    follows: every thread has also finished reading the stages it read before it (so they may
    be refilled), as after `tile.async_wait`.

    Example: `tile.wait_barrier %bars[%slot], %parity {sync} : !tile.shared<3 x tensor<1xi64>>`
  }];
  let arguments = (ins Tile_SharedBufferType:$barriers, I32:$slot, I32:$parity, UnitAttr:$sync);
  let assemblyFormat = "$barriers `[` $slot `]` `,` $parity attr-dict `:` qualified(type($barriers))";
  let hasVerifier = 1;
}

def Tile_ArriveBarrierOp : Tile_Op<"arrive_barrier", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "where `active`, each warp arrives once on `barriers[slot]`: it is done with the stage";
  let description = [{
    The warp's threads have finished the reads (and wgmma reads they waited for) of the stage
    the barrier guards; the barrier counts warps, so a ring that consumer warps release is
    initialized with one arrival per consumer warp. A warp-specialized kernel's consumers
    release each stage this way, and its producer waits for the phase before refilling it.

    Example: `tile.arrive_barrier %empty[%slot] if %active : !tile.shared<3 x tensor<1xi64>>`
  }];
  let arguments = (ins Tile_SharedBufferType:$barriers, I32:$slot, I1:$active);
  let assemblyFormat = "$barriers `[` $slot `]` `if` $active attr-dict `:` qualified(type($barriers))";
  let hasVerifier = 1;
}

def Tile_InProducerWarpsOp : Tile_Op<"in_producer_warps", [Pure]> {
  let summary = "whether this thread is in the producer warpgroup (with `first`: its first warp)";
  let description = [{
    A warp-specialized kernel runs `tile.producer_warps` warps beyond its `num_warps`: they
    only issue TMA loads (the first of them; the others only give back registers); the first
    `num_warps` warps compute, laid out as in any kernel.

    Example: `%producer = tile.in_producer_warps`, `%issuer = tile.in_producer_warps first`
  }];
  let arguments = (ins UnitAttr:$first);
  let results = (outs I1:$result);
  let assemblyFormat = "(`first` $first^)? attr-dict";
}

def Tile_SetMaxRegistersOp : Tile_Op<"set_max_registers", [MemoryEffects<[MemWrite]>]> {
  let summary = "this warpgroup's registers a thread: fewer, or with `increase` more (setmaxnreg)";
  let description = [{
    Every warp of the warpgroup runs it. The producer warpgroup gives registers back to the
    pool; the consumer warpgroups take them, waiting until the pool has them.

    Example: `tile.set_max_registers 24`, `tile.set_max_registers 240 {increase}`
  }];
  let arguments = (ins I32Attr:$count, UnitAttr:$increase);
  let assemblyFormat = "$count attr-dict";
  let hasVerifier = 1;
}

def Tile_WarpgroupTurnOp : Tile_Op<"warpgroup_turn", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "ping-pong: the two consumer warpgroups take turns at issuing their wgmma";
  let description = [{
    FlashAttention-3's inter-warpgroup schedule: while one consumer warpgroup's products run
    on the tensor cores, the other computes its softmax. `take` waits for this warpgroup's
    turn, `pass` gives the turn to the other, `first` (once, before any `take`) gives the
    first turn to warpgroup 0. Named barriers 8 and 9 (the warpgroups'), over both (256
    threads): warpgroup w's `take` completes with the other's `pass` (or `first`).

    Example: `tile.warpgroup_turn take`
  }];
  let arguments = (ins Tile_TurnKindAttr:$kind);
  let assemblyFormat = "custom<Keyword>($kind) attr-dict";
}

def Tile_SharedLoadOp : Tile_Op<"shared_load", [MemoryEffects<[MemRead]>]> {
  let summary = "read one stage of a ring into registers";
  let description = [{
    With `transposed`, the result is the stage's 2-D tile transposed (a K tile staged as
    stored in memory, read as the B operand of Q K^T). With `whole`, the tile is read into
    registers here, all of it, even where the tensor-core dots it feeds could read it
    themselves one step of k at a time (a loop-invariant A operand staged by the TMA and read
    before the loop: once, not in every iteration).

    Example: `%a = tile.shared_load %buf[%slot] : !tile.shared<3 x tensor<128x32xbf16>> -> tensor<128x32xbf16>`
    `%kt = tile.shared_load %buf[%slot] {transposed} : !tile.shared<3 x tensor<64x128xf16>> -> tensor<128x64xf16>`
  }];
  let arguments = (ins Tile_SharedBufferType:$buffer, I32:$slot, UnitAttr:$transposed, UnitAttr:$whole);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$buffer `[` $slot `]` attr-dict `:` qualified(type($buffer)) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_SharedStoreOp : Tile_Op<"shared_store", [MemoryEffects<[MemWrite]>]> {
  let summary = "write a tile from registers into one stage of a ring";
  let description = [{
    The stage is laid out as the rings' copies lay them out, so that a wgmma dot reads it
    through `tile.shared_load` (made by tile-stage-dot-operands). Every warp of the program
    (the consumer warps of a warp-specialized one) stores its part; the op waits for all of
    them before and after, so that readers of the previous contents are done first (async
    dots reading the stage are waited for before the next store: tile-async-dots) and readers
    of the new contents, the tensor cores among them, see all of it. tile-scope-stage-barriers
    narrows this: with `readers_synced` no barrier before (an earlier one already follows
    every read of the previous contents), with `warpgroup_local` each warpgroup waits for its
    own warps only (it reads back only what it stored).

    Example: `tile.shared_store %ds, %buf[%slot] : tensor<128x64xf16, #mma>, !tile.shared<1 x tensor<128x64xf16>>`
  }];
  let arguments = (ins Tile_Tile:$value, Tile_SharedBufferType:$buffer, I32:$slot, UnitAttr:$readers_synced,
                       UnitAttr:$warpgroup_local);
  let assemblyFormat = "$value `,` $buffer `[` $slot `]` attr-dict `:` type($value) `,` qualified(type($buffer))";
  let hasVerifier = 1;
}
