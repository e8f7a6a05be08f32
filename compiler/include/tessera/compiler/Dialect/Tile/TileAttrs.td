#ifndef TESSERA_TILE_ATTRS
#define TESSERA_TILE_ATTRS

include "mlir/IR/EnumAttr.td"
include "tessera/compiler/Dialect/Tile/TileDialect.td"

def Tile_GridAxis : I32EnumAttr<"GridAxis", "axis of the launch grid", [
    I32EnumAttrCase<"x", 0>, I32EnumAttrCase<"y", 1>, I32EnumAttrCase<"z", 2>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_GridAxisAttr : EnumAttr<Tile_Dialect, Tile_GridAxis, "grid_axis">;

def Tile_ReduceKind : I32EnumAttr<"ReduceKind", "reduction along one axis", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>, I32EnumAttrCase<"min", 2>,
    I32EnumAttrCase<"argmax", 3>, I32EnumAttrCase<"argmin", 4>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_ReduceKindAttr : EnumAttr<Tile_Dialect, Tile_ReduceKind, "reduce_kind">;

def Tile_AtomicKind : I32EnumAttr<"AtomicKind", "read-modify-write operation", [
    I32EnumAttrCase<"add", 0>, I32EnumAttrCase<"max", 1>, I32EnumAttrCase<"min", 2>,
    I32EnumAttrCase<"bit_and", 3, "and">, I32EnumAttrCase<"bit_or", 4, "or">,
    I32EnumAttrCase<"bit_xor", 5, "xor">,
    I32EnumAttrCase<"xchg", 6>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_AtomicKindAttr : EnumAttr<Tile_Dialect, Tile_AtomicKind, "atomic_kind"> {
  // Appears in the generic form: #tile.atomic_kind<...>.
  let assemblyFormat = "`<` $value `>`";
}

def Tile_MemSemantic : I32EnumAttr<"MemSemantic", "memory ordering of an atomic", [
    I32EnumAttrCase<"relaxed", 0>, I32EnumAttrCase<"acquire", 1>,
    I32EnumAttrCase<"release", 2>, I32EnumAttrCase<"acq_rel", 3>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_MemSemanticAttr : EnumAttr<Tile_Dialect, Tile_MemSemantic, "sem"> {
  // Appears in the generic form: #tile.sem<...>.
  let assemblyFormat = "`<` $value `>`";
}

def Tile_MemScope : I32EnumAttr<"MemScope", "set of threads an atomic is ordered with", [
    I32EnumAttrCase<"cta", 0>, I32EnumAttrCase<"gpu", 1>, I32EnumAttrCase<"sys", 2>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_MemScopeAttr : EnumAttr<Tile_Dialect, Tile_MemScope, "scope"> {
  // Appears in the generic form: #tile.scope<...>.
  let assemblyFormat = "`<` $value `>`";
}

def Tile_InputPrecision : I32EnumAttr<"InputPrecision", "precision of fp32 dot inputs", [
    I32EnumAttrCase<"ieee", 0>, I32EnumAttrCase<"tf32", 1>, I32EnumAttrCase<"tf32x3", 2>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_InputPrecisionAttr : EnumAttr<Tile_Dialect, Tile_InputPrecision, "precision"> {
  // Appears in attribute dictionaries: #tile.precision<...>.
  let assemblyFormat = "`<` $value `>`";
}

def Tile_TurnKind : I32EnumAttr<"TurnKind", "a consumer warpgroup's step in ping-pong", [
    I32EnumAttrCase<"first", 0>, I32EnumAttrCase<"take", 1>, I32EnumAttrCase<"pass", 2>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_TurnKindAttr : EnumAttr<Tile_Dialect, Tile_TurnKind, "turn_kind">;

def Tile_Padding : I32EnumAttr<"Padding", "value read outside a block pointer's tensor", [
    I32EnumAttrCase<"zero", 0>, I32EnumAttrCase<"nan", 1>]> {
  let cppNamespace = "::tessera::tile";
  let genSpecializedAttr = 0;
}
def Tile_PaddingAttr : EnumAttr<Tile_Dialect, Tile_Padding, "padding"> {
  // Appears in attribute dictionaries: #tile.padding<...>.
  let assemblyFormat = "`<` $value `>`";
}

#endif // TESSERA_TILE_ATTRS

//===----------------------------------------------------------------------===//
// Layout encodings of tiles (tensor encodings, assigned by tile-assign-layouts)
//===----------------------------------------------------------------------===//

include "mlir/IR/AttrTypeBase.td"

def Tile_BlockedEncodingAttr : AttrDef<Tile_Dialect, "BlockedEncoding"> {
  let mnemonic = "blocked";
  let summary = "each thread holds small contiguous blocks; threads and warps tile the rest";
  let description = [{
    `sizePerThread[d]` consecutive elements per thread along dimension d, `threadsPerWarp` and
    `warpsPerCTA` threads and warps across each dimension, `order` the dimensions from fastest
    to slowest. The CTA tile repeats in registers over larger tensors and replicates across
    threads over smaller ones, so one blocked layout serves every shape of a given rank.

    Example: `tensor<128x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8],
    warpsPerCTA = [4, 1], order = [1, 0]>>`
  }];
  let parameters = (ins ArrayRefParameter<"unsigned">:$sizePerThread,
                        ArrayRefParameter<"unsigned">:$threadsPerWarp,
                        ArrayRefParameter<"unsigned">:$warpsPerCTA,
                        ArrayRefParameter<"unsigned">:$order);
  let assemblyFormat = [{
    `<` `sizePerThread` `=` `[` $sizePerThread `]` `,` `threadsPerWarp` `=` `[` $threadsPerWarp `]`
    `,` `warpsPerCTA` `=` `[` $warpsPerCTA `]` `,` `order` `=` `[` $order `]` `>`
  }];
  let genVerifyDecl = 1;
}

def Tile_SliceEncodingAttr : AttrDef<Tile_Dialect, "SliceEncoding"> {
  let mnemonic = "slice";
  let summary = "the parent layout with one dimension removed (a reduction's result)";
  let description = [{
    Element i of a tile in `#tile.slice<dim = d, parent = P>` lives where P keeps the element
    with coordinate 0 inserted at dimension d, in every thread that P spreads along d.

    Example: `tensor<128xf32, #tile.slice<dim = 1, parent = #tile.blocked<...>>>`
  }];
  let parameters = (ins "unsigned":$dim, "::mlir::Attribute":$parent);
  let assemblyFormat = "`<` `dim` `=` $dim `,` `parent` `=` $parent `>`";
}

def Tile_MmaEncodingAttr : AttrDef<Tile_Dialect, "MmaEncoding"> {
  let mnemonic = "mma";
  let summary = "accumulators of mma.sync m16n8k16 (Ampere/Hopper tensor cores)";
  let description = [{
    A 2-D tile split over `warpsPerCTA = [wm, wn]` warps; each warp's [M/wm, N/wn] part is
    covered by 16x8 instruction tiles in which lane l holds rows l/4 and l/4 + 8, columns
    2*(l%4) and 2*(l%4) + 1.

    Example: `tensor<128x128xf32, #tile.mma<warpsPerCTA = [2, 2]>>`
  }];
  let parameters = (ins ArrayRefParameter<"unsigned">:$warpsPerCTA);
  let assemblyFormat = "`<` `warpsPerCTA` `=` `[` $warpsPerCTA `]` `>`";
}

def Tile_DotOperandEncodingAttr : AttrDef<Tile_Dialect, "DotOperandEncoding"> {
  let mnemonic = "dot_op";
  let summary = "the registers an mma.sync reads its A (opIdx 0) or B (opIdx 1) from";
  let description = [{
    A: 16x16 fragments, lane l holding rows l/4 and l/4 + 8, columns 2*(l%4) + {0, 1, 8, 9};
    B: 16x8 fragments, lane l holding rows 2*(l%4) + {0, 1, 8, 9}, column l/4. Warps follow the
    parent mma layout (A is shared by the warps along N, B by those along M).

    Example: `tensor<128x32xf16, #tile.dot_op<opIdx = 0, parent = #tile.mma<warpsPerCTA = [2, 2]>>>`
  }];
  let parameters = (ins "unsigned":$opIdx, "::mlir::Attribute":$parent);
  let assemblyFormat = "`<` `opIdx` `=` $opIdx `,` `parent` `=` $parent `>`";
}
