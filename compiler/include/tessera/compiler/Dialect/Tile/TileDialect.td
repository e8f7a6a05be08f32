#ifndef TESSERA_TILE_DIALECT
#define TESSERA_TILE_DIALECT

include "mlir/IR/OpBase.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let cppNamespace = "::tessera::tile";
  let summary = "Tile-level GPU programs: one program instance works on whole tiles";
  let description = [{
    The `tile` dialect is what a tessera DSL kernel traces into. A kernel is a `func.func`
    with the `tile.kernel` attribute whose body computes on ranked tensors ("tiles") of
    static, power-of-two shape. Tiles carry no layout here: the compiler assigns register
    layouts later. Elementwise math and comparisons use `arith` and `math` on tensors; loops
    and branches use `scf`. This dialect adds what those do not have: program ids, pointers
    and pointer arithmetic, masked memory access, tensor-core dot, reductions, atomics,
    block pointers for 2-D tiles (the TMA path) and device printing.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect"
  ];
}

class Tile_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tile_Dialect, mnemonic, traits>;

#endif // TESSERA_TILE_DIALECT
