// tessera-opt: runs tessera's and upstream MLIR passes on .mlir files (lit tests, debugging).
#include "tessera/compiler/Dialect/Tile/TileDialect.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<tessera::tile::TileDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::scf::SCFDialect, mlir::func::FuncDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect>();
  mlir::func::registerInlinerExtension(registry);
  // The generic passes the tile-level pipeline uses.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerInlinerPass();
  mlir::registerSymbolDCEPass();
  mlir::registerPass([] { return mlir::createReconcileUnrealizedCastsPass(); });
  mlir::registerLoopInvariantCodeMotionPass();
  tessera::registerTesseraPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tessera optimizer driver\n", registry));
}
