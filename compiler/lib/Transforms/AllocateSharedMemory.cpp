// tile-allocate-shared-memory (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/MathExtras.h"

namespace tessera {
#define GEN_PASS_DEF_TILEALLOCATESHAREDMEMORY
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

struct TileAllocateSharedMemoryPass
    : tessera::impl::TileAllocateSharedMemoryBase<TileAllocateSharedMemoryPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      Builder b(func.getContext());
      // Pipeline rings live for the whole kernel: each gets its own range, 128-byte aligned.
      int64_t rings = 0;
      func.walk([&](SharedAllocOp alloc) {
        auto type = alloc.getType();
        auto tile = type.getTileType();
        alloc->setAttr("tile.smem_offset", b.getI64IntegerAttr(rings));
        rings += llvm::alignTo(type.getStages() * tile.getNumElements() * storageBytes(tile.getElementType()), 128);
      });
      // Scratch lives only while its op runs: every op's starts right after the rings.
      int64_t scratch = 0;
      func.walk([&](Operation *op) {
        int64_t bytes = scratchBytes(op);
        if (bytes == 0)
          return;
        op->setAttr("tile.smem_offset", b.getI64IntegerAttr(rings));
        scratch = std::max(scratch, bytes);
      });
      func->setAttr(kSharedMemoryAttrName, b.getI64IntegerAttr(rings + scratch));
    });
  }
};

} // namespace
