// The tile dialect: registration, types, and the type helpers shared by ops and the DSL.
#include "tessera/compiler/Dialect/Tile/TileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace tessera::tile;

#include "tessera/compiler/Dialect/Tile/TileDialect.cpp.inc"
#include "tessera/compiler/Dialect/Tile/TileEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tessera/compiler/Dialect/Tile/TileAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "tessera/compiler/Dialect/Tile/TileTypes.cpp.inc"

void TileDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "tessera/compiler/Dialect/Tile/TileTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tessera/compiler/Dialect/Tile/TileAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "tessera/compiler/Dialect/Tile/TileOps.cpp.inc"
      >();
}

Operation *TileDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

LogicalResult PointerType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  Type pointee) {
  if (!pointee.isIntOrFloat())
    return emitError() << "tile.ptr points to integers or floats, not " << pointee;
  return success();
}

LogicalResult BlockPointerType::verify(function_ref<InFlightDiagnostic()> emitError,
                                       RankedTensorType blockType) {
  if (!blockType.getElementType().isIntOrFloat())
    return emitError() << "tile.block_ptr blocks hold integers or floats, not "
                       << blockType.getElementType();
  return success();
}

namespace tessera::tile {

Type getPointeeType(Type ptrLike) {
  if (auto ptr = dyn_cast<PointerType>(ptrLike))
    return ptr.getPointeeType();
  if (auto tensor = dyn_cast<RankedTensorType>(ptrLike))
    if (auto ptr = dyn_cast<PointerType>(tensor.getElementType()))
      return tensor.clone(ptr.getPointeeType());
  return {};
}

std::optional<BlockTile> blockTile(RankedTensorType block) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < block.getRank(); ++d)
    if (block.getDimSize(d) != 1)
      dims.push_back(d);
  if (block.getRank() > 5 || dims.empty() || dims.size() > 2 || dims.back() != block.getRank() - 1)
    return std::nullopt;
  SmallVector<int64_t, 5> mapOrder;
  for (int64_t d = 0; d < block.getRank(); ++d)
    if (block.getDimSize(d) == 1)
      mapOrder.push_back(d);
  mapOrder.append(dims.begin(), dims.end());
  SmallVector<int64_t> shape = llvm::map_to_vector(dims, [&](int64_t d) { return block.getDimSize(d); });
  return BlockTile{RankedTensorType::get(shape, block.getElementType()), dims.size() == 2 ? dims[0] : -1, dims.back(),
                   mapOrder};
}

bool isBarrierRing(SharedBufferType type) {
  auto tile = type.getTileType();
  return tile.getRank() == 1 && tile.getDimSize(0) == 1 && tile.getElementType().isInteger(64);
}

Type getBoolLike(Type type) {
  auto i1 = IntegerType::get(type.getContext(), 1);
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.clone(i1);
  return i1;
}

std::string describe(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto element = [&os](Type t) {
    if (auto ptr = dyn_cast<PointerType>(t))
      os << "ptr<" << ptr.getPointeeType() << ">";
    else
      os << t;
  };
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    element(tensor.getElementType());
    os << "[";
    llvm::interleave(tensor.getShape(), os, "x");
    os << "]";
  } else if (auto block = dyn_cast<BlockPointerType>(type)) {
    os << "block_ptr<" << describe(block.getBlockType()) << ">";
  } else {
    element(type);
  }
  return text;
}

} // namespace tessera::tile

LogicalResult BlockedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                          ArrayRef<unsigned> sizePerThread,
                                          ArrayRef<unsigned> threadsPerWarp,
                                          ArrayRef<unsigned> warpsPerCTA,
                                          ArrayRef<unsigned> order) {
  size_t rank = sizePerThread.size();
  if (threadsPerWarp.size() != rank || warpsPerCTA.size() != rank || order.size() != rank)
    return emitError() << "blocked layout parameters must all have the same rank";
  unsigned lanes = 1;
  for (unsigned v : threadsPerWarp)
    lanes *= v;
  if (lanes != 32)
    return emitError() << "blocked layout threadsPerWarp must multiply to 32, got " << lanes;
  for (ArrayRef<unsigned> values : {sizePerThread, threadsPerWarp, warpsPerCTA})
    for (unsigned v : values)
      if (!llvm::isPowerOf2_32(v))
        return emitError() << "blocked layout sizes must be powers of two, got " << v;
  SmallVector<bool> seen(rank, false);
  for (unsigned d : order) {
    if (d >= rank || seen[d])
      return emitError() << "blocked layout order must be a permutation of 0.." << rank - 1;
    seen[d] = true;
  }
  return success();
}

namespace tessera::tile {

layout::LinearLayout toLinearLayout(Attribute encoding, ArrayRef<int64_t> shape) {
  auto ints = [](ArrayRef<unsigned> values) { return std::vector<int>(values.begin(), values.end()); };
  if (auto blocked = dyn_cast<BlockedEncodingAttr>(encoding))
    return layout::LinearLayout::blocked(layout::Coord(shape.begin(), shape.end()),
                                         ints(blocked.getSizePerThread()),
                                         ints(blocked.getThreadsPerWarp()),
                                         ints(blocked.getWarpsPerCTA()), ints(blocked.getOrder()));
  if (auto mma = dyn_cast<MmaEncodingAttr>(encoding))
    return layout::LinearLayout::mma({shape[0], shape[1]}, mma.getWarpsPerCTA()[0], mma.getWarpsPerCTA()[1], -1);
  if (auto dot = dyn_cast<DotOperandEncodingAttr>(encoding))
    return layout::LinearLayout::mma({shape[0], shape[1]}, cast<MmaEncodingAttr>(dot.getParent()).getWarpsPerCTA()[0],
                                     cast<MmaEncodingAttr>(dot.getParent()).getWarpsPerCTA()[1],
                                     static_cast<int>(dot.getOpIdx()));
  auto slice = cast<SliceEncodingAttr>(encoding);
  SmallVector<int64_t> parentShape(shape);
  parentShape.insert(parentShape.begin() + slice.getDim(), 1);
  return toLinearLayout(slice.getParent(), parentShape).sliced(slice.getDim());
}

} // namespace tessera::tile
