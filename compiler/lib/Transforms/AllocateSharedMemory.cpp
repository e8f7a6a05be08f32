// tile-allocate-shared-memory (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

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
      int64_t total = 0;
      func.walk([&](Operation *op) {
        int64_t bytes = scratchBytes(op);
        if (bytes == 0)
          return;
        // Scratch lives only while its op runs: every op starts at offset 0.
        op->setAttr("tile.smem_offset", b.getI64IntegerAttr(0));
        total = std::max(total, bytes);
      });
      func->setAttr(kSharedMemoryAttrName, b.getI64IntegerAttr(total));
    });
  }
};

} // namespace
