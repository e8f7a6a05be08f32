#ifndef TESSERA_TILE_TYPES
#define TESSERA_TILE_TYPES

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"
include "tessera/compiler/Dialect/Tile/TileDialect.td"

class Tile_TypeDef<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Tile_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Tile_PointerType : Tile_TypeDef<"Pointer", "ptr"> {
  let summary = "pointer to global memory holding elements of one type";
  let description = [{
    A pointer into global memory. Offsets added with `tile.addptr` count elements of the
    pointee type, not bytes. A tile of pointers is a tensor of this type.

    Example: `!tile.ptr<f16>`, `tensor<128x64x!tile.ptr<f16>>`.
  }];
  let parameters = (ins "::mlir::Type":$pointeeType);
  let assemblyFormat = "`<` $pointeeType `>`";
  let genVerifyDecl = 1;
}

def Tile_BlockPointerType : Tile_TypeDef<"BlockPointer", "block_ptr"> {
  let summary = "pointer to a 2-D (or N-D) block of a strided tensor in global memory";
  let description = [{
    Made by `tile.make_block_ptr`: a base pointer, the full tensor's shape and strides,
    the block's current offsets and the block shape carried in the type. Loads and stores
    through it move one whole block; the TMA path builds its tensor descriptors from it.

    Example: `!tile.block_ptr<tensor<64x128xbf16>>`.
  }];
  let parameters = (ins "::mlir::RankedTensorType":$blockType);
  let assemblyFormat = "`<` $blockType `>`";
  let genVerifyDecl = 1;
}

def Tile_SharedBufferType : Tile_TypeDef<"SharedBuffer", "shared"> {
  let summary = "a ring of tiles in shared memory (the stages of a software pipeline)";
  let description = [{
    `stages` tiles of `tileType`, one after the other in the kernel's shared buffer, each
    stored row-major with 16-byte chunks swizzled by row.

    Example: `!tile.shared<3 x tensor<128x32xbf16>>`.
  }];
  let parameters = (ins "int64_t":$stages, "::mlir::RankedTensorType":$tileType);
  let assemblyFormat = "`<` $stages `x` $tileType `>`";
}

def Tile_TensorMapType : Tile_TypeDef<"TensorMap", "tensor_map"> {
  let summary = "a TMA tensor map (CUtensorMap) passed to the kernel by value";
  let description = [{
    Only kernel arguments have this type: `tile-pipeline-loops` adds one per tensor it copies
    with the tensor memory accelerator, with a `tile.tensor_map` argument attribute saying how
    the launcher builds it from the other arguments (see Compiler.h's TensorMap). Lowered to a
    64-byte-aligned 128-byte `byval` grid constant.

    Example: `!tile.tensor_map`.
  }];
}

def Tile_Ptr : Type<CPred<"::llvm::isa<::tessera::tile::PointerType>($_self)">,
                    "tile pointer", "::tessera::tile::PointerType">;
def Tile_PtrTensor : RankedTensorOf<[Tile_PointerType]>;
def Tile_PtrLike : AnyTypeOf<[Tile_PointerType, Tile_PtrTensor], "pointer or tile of pointers">;
def Tile_IntLike : AnyTypeOf<[AnySignlessInteger, RankedTensorOf<[AnySignlessInteger]>],
                             "integer or tile of integers">;
def Tile_BoolLike : AnyTypeOf<[I1, RankedTensorOf<[I1]>], "i1 or tile of i1">;
def Tile_Tile : RankedTensorOf<[AnyType]>;
def Tile_Value : AnyTypeOf<[AnySignlessInteger, AnyFloat, Tile_PointerType, AnyRankedTensor],
                           "scalar or tile">;

#endif // TESSERA_TILE_TYPES
