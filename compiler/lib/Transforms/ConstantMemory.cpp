// The analysis PipelineLoops and SpecializeWarps share (see ConstantMemory.h).
#include "tessera/compiler/Transforms/ConstantMemory.h"

using namespace mlir;

namespace tessera::tile {

Value pointerRoot(Value ptr) {
  while (Operation *def = ptr.getDefiningOp()) {
    Value next;
    for (Value operand : def->getOperands())
      if (isa<PointerType, BlockPointerType>(getElementTypeOrSelf(operand.getType()))) {
        if (next)
          return {};
        next = operand;
      }
    if (!next)
      return {};
    ptr = next;
  }
  auto arg = cast<BlockArgument>(ptr);
  return isa<func::FuncOp>(arg.getOwner()->getParentOp()) ? ptr : Value();
}

ConstantMemory::ConstantMemory(func::FuncOp func) {
  func.walk([&](Operation *op) {
    Value target;
    if (auto store = dyn_cast<StoreOp>(op))
      target = store.getPtr();
    else if (auto atomic = dyn_cast<AtomicRMWOp>(op))
      target = atomic.getPtr();
    else if (auto store = dyn_cast<BlockStoreOp>(op))
      target = store.getPtr();
    else if (auto add = dyn_cast<BulkAddOp>(op))
      target = add.getDst();
    else
      return;
    Value root = pointerRoot(target);
    unknownWrites |= !root;
    written.insert(root);
  });
}

bool ConstantMemory::holds(LoadOp load) const {
  Value root = pointerRoot(load.getPtr());
  return root && !unknownWrites && !written.contains(root);
}

bool ConstantMemory::isIndexLoad(Operation *op) const {
  auto load = dyn_cast<LoadOp>(op);
  return load && !isa<RankedTensorType>(load.getType()) && holds(load);
}

} // namespace tessera::tile
