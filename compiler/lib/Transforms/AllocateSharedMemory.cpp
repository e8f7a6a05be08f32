// tile-allocate-shared-memory (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace tessera {
#define GEN_PASS_DEF_TILEALLOCATESHAREDMEMORY
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// Where each op sits in the function, and where the ops nested in it end.
struct Positions {
  DenseMap<Operation *, int64_t> begin, end;
  explicit Positions(func::FuncOp func) {
    int64_t next = 0;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) { begin[op] = next++; });
    func.walk<WalkOrder::PostOrder>([&](Operation *op) {
      int64_t last = begin[op];
      for (Region &region : op->getRegions())
        for (Operation &inner : region.getOps())
          last = std::max(last, end[&inner]);
      end[op] = last;
    });
  }
};

/// The span of ops during which a ring holds data: from its first use to the end of the
/// outermost op (a loop) around its last use, in the block of its allocation.
std::pair<int64_t, int64_t> liveSpan(SharedAllocOp alloc, const Positions &at) {
  int64_t first = at.begin.lookup(alloc), last = first;
  for (Operation *user : alloc->getUsers()) {
    Operation *outer = alloc->getBlock()->findAncestorOpInBlock(*user);
    first = std::min(first, at.begin.lookup(outer ? outer : user));
    last = std::max(last, at.end.lookup(outer ? outer : user));
  }
  return {first, last};
}

struct TileAllocateSharedMemoryPass
    : tessera::impl::TileAllocateSharedMemoryBase<TileAllocateSharedMemoryPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      Builder b(func.getContext());
      // Pipeline rings of tiles 1024-byte aligned (the period of the 128-byte swizzle, which
      // wgmma's operand descriptors and the TMA assume), of rows (a row statistic's stages:
      // unswizzled TMA copies) 128-byte, of mbarriers 8-byte; first fit: rings whose spans do
      // not overlap share memory (the pipeliner ends every loop with async_wait 0, a barrier,
      // so the next loop's copies cannot land under a warp still reading the previous ring).
      // Rings of mbarriers live as long as the kernel: their memory is never repurposed (which
      // would need mbarrier.inval first).
      Positions at(func);
      struct Placed {
        int64_t first, last, offset, bytes;
      };
      std::vector<Placed> placed;
      int64_t rings = 0;
      func.walk([&](SharedAllocOp alloc) {
        auto type = alloc.getType();
        auto tile = type.getTileType();
        const int64_t align = isBarrierRing(type) ? 8 : tile.getRank() == 1 ? 128 : 1024;
        int64_t bytes = llvm::alignTo(ringBytes(type), align);
        auto [first, last] = liveSpan(alloc, at);
        // mbarriers are never reused; nor, in a warp-specialized kernel, the rings its TMA
        // loads fill: its producer fills a ring ahead of the consumers, past where they
        // still read another.
        bool tmaRing = llvm::any_of(alloc->getUsers(), [](Operation *user) { return isa<TmaLoadOp>(user); });
        if (isBarrierRing(type) || (tmaRing && func->hasAttr(kWarpSpecializeAttrName)))
          std::tie(first, last) = std::pair(int64_t(0), at.end.lookup(func));
        std::vector<std::pair<int64_t, int64_t>> taken; // [offset, end) of rings live at the same time
        for (const Placed &other : placed)
          if (other.first <= last && first <= other.last)
            taken.push_back({other.offset, other.offset + other.bytes});
        int64_t offset = firstFit(std::move(taken), bytes, align);
        placed.push_back({first, last, offset, bytes});
        alloc->setAttr("tile.smem_offset", b.getI64IntegerAttr(offset));
        rings = std::max(rings, offset + bytes);
      });
      // Bulk adds' staging, one each, never reused (the copy engine reads it after the op).
      func.walk([&](BulkAddOp add) {
        if (int64_t bytes = bulkAddStagingBytes(add)) {
          rings = llvm::alignTo(rings, 128);
          add->setAttr("tile.smem_offset", b.getI64IntegerAttr(rings));
          rings += bytes;
        }
      });
      // Scratch lives only while its op runs: every op's starts right after the rings.
      const int64_t scratchAt = int64_t(llvm::alignTo(rings, 128));
      int64_t scratch = 0;
      func.walk([&](Operation *op) {
        int64_t bytes = scratchBytes(op);
        if (bytes == 0)
          return;
        op->setAttr("tile.smem_offset", b.getI64IntegerAttr(scratchAt));
        scratch = std::max(scratch, bytes);
      });
      func->setAttr(kSharedMemoryAttrName, b.getI64IntegerAttr(scratch ? scratchAt + scratch : rings));
    });
  }
};

} // namespace
