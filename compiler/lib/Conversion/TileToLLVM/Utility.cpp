#include "Utility.h"

#include "tessera/compiler/Layout/SwizzledTile.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace tessera::tile::lowering {

TileTypeConverter::TileTypeConverter(MLIRContext *context) : LLVMTypeConverter(context) {
  addConversion([context](PointerType) -> Type { return LLVM::LLVMPointerType::get(context, 1); });
  addConversion([this, context](RankedTensorType type) -> std::optional<Type> {
    if (!type.getEncoding())
      return std::nullopt;
    int64_t registers = toLinearLayout(type.getEncoding(), type.getShape()).numRegisters();
    SmallVector<Type> body(registers, convertType(type.getElementType()));
    return LLVM::LLVMStructType::getLiteral(context, body);
  });
  addConversion([context](SharedBufferType) -> Type { return LLVM::LLVMPointerType::get(context, 3); });
  // The address of the kernel parameter (a byval grid constant) holding the CUtensorMap.
  addConversion([context](TensorMapType) -> Type { return LLVM::LLVMPointerType::get(context); });
  addConversion([context](BlockPointerType type) -> Type {
    int64_t rank = type.getBlockType().getRank();
    SmallVector<Type> body{LLVM::LLVMPointerType::get(context, 1)};
    body.append(2 * rank, IntegerType::get(context, 64)); // shape, strides
    body.append(rank, IntegerType::get(context, 32));     // offsets
    return LLVM::LLVMStructType::getLiteral(context, body);
  });
}

Values unpack(OpBuilder &b, Location loc, Value structValue) {
  auto type = cast<LLVM::LLVMStructType>(structValue.getType());
  Values values;
  for (size_t i = 0; i < type.getBody().size(); ++i)
    values.push_back(LLVM::ExtractValueOp::create(b, loc, structValue, i));
  return values;
}

Value pack(OpBuilder &b, Location loc, Type structType, ValueRange values) {
  Value result = LLVM::UndefOp::create(b, loc, structType);
  for (auto [i, value] : llvm::enumerate(values))
    result = LLVM::InsertValueOp::create(b, loc, result, value, i);
  return result;
}

Value i32Constant(OpBuilder &b, Location loc, int64_t value) {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(value));
}

Value constantOf(OpBuilder &b, Location loc, Type type, int64_t value) {
  if (isa<FloatType>(type))
    return LLVM::ConstantOp::create(b, loc, type, b.getFloatAttr(type, static_cast<double>(value)));
  return LLVM::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, value));
}

Value timesLog2e(OpBuilder &b, Location loc, Value x) {
  return LLVM::FMulOp::create(b, loc, x,
                              LLVM::ConstantOp::create(b, loc, b.getF32Type(), b.getF32FloatAttr(1.4426950408889634f)));
}

ThreadId threadId(OpBuilder &b, Location loc) {
  Value tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  return {LLVM::AndOp::create(b, loc, tid, i32Constant(b, loc, 31)),
          LLVM::LShrOp::create(b, loc, tid, i32Constant(b, loc, 5))};
}

std::vector<Values> registerCoordinates(OpBuilder &b, Location loc,
                                        const layout::LinearLayout &layout) {
  ThreadId id = threadId(b, loc);
  int rank = layout.rank();
  // The thread's part: XOR of the bases of its lane and warp bits.
  Values thread(rank, i32Constant(b, loc, 0));
  auto addBits = [&](Value index, const layout::Bases &bases) {
    for (size_t bit = 0; bit < bases.size(); ++bit) {
      Value set = LLVM::AndOp::create(b, loc, LLVM::LShrOp::create(b, loc, index, i32Constant(b, loc, bit)),
                                      i32Constant(b, loc, 1));
      for (int d = 0; d < rank; ++d)
        if (bases[bit][d] != 0)
          thread[d] = LLVM::XOrOp::create(
              b, loc, thread[d], LLVM::MulOp::create(b, loc, set, i32Constant(b, loc, bases[bit][d])));
    }
  };
  addBits(id.lane, layout.lanes());
  addBits(id.warp, layout.warps());
  std::vector<Values> coords;
  for (int64_t reg = 0; reg < layout.numRegisters(); ++reg) {
    layout::Coord fixed = layout.apply(reg, 0, 0);
    Values coord;
    for (int d = 0; d < rank; ++d)
      coord.push_back(fixed[d] ? LLVM::XOrOp::create(b, loc, thread[d], i32Constant(b, loc, fixed[d])).getResult()
                               : thread[d]);
    coords.push_back(coord);
  }
  return coords;
}

Value linearIndex(OpBuilder &b, Location loc, ArrayRef<Value> coord, ArrayRef<int64_t> shape) {
  Value index = i32Constant(b, loc, 0);
  for (size_t d = 0; d < shape.size(); ++d)
    index = LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, index, i32Constant(b, loc, shape[d])),
                                coord[d]);
  return index;
}

Value sharedMemory(OpBuilder &b, Location loc, Operation *op, int64_t offset) {
  auto ptr = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value base = LLVM::AddressOfOp::create(b, loc, ptr, "global_smem");
  if (offset == 0)
    return base;
  return LLVM::GEPOp::create(b, loc, ptr, b.getI8Type(), base, ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(offset)});
}

int64_t smemOffset(mlir::Operation *op) {
  auto attr = op->getAttrOfType<IntegerAttr>("tile.smem_offset");
  return attr ? attr.getInt() : 0;
}

void barrier(OpBuilder &b, Location loc) {
  mlir::Operation *at = b.getInsertionBlock()->getParentOp();
  if (producerWarpsOf(at) == 0) {
    NVVM::Barrier0Op::create(b, loc);
    return;
  }
  // A warp-specialized kernel's tile code runs in its consumer warps alone: barrier 1 over
  // them (the producer warpgroup never joins one).
  NVVM::BarrierOp::create(b, loc, mlir::TypeRange{}, i32Constant(b, loc, kConsumersBarrier),
                          i32Constant(b, loc, numWarpsOf(at) * 32), {}, Value{});
}

Value warpgroupIndex(OpBuilder &b, Location loc) {
  Value tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  return LLVM::LShrOp::create(b, loc, tid, i32Constant(b, loc, 7));
}

void warpgroupBarrier(OpBuilder &b, Location loc) {
  Value warpgroup = warpgroupIndex(b, loc);
  Value id = LLVM::AddOp::create(b, loc, warpgroup, i32Constant(b, loc, kWarpgroupBarriers));
  NVVM::BarrierOp::create(b, loc, mlir::TypeRange{}, id, i32Constant(b, loc, 128), {}, Value{});
}

Type storageType(Type element) {
  if (element.isInteger(1))
    return IntegerType::get(element.getContext(), 8);
  if (isa<LLVM::LLVMPointerType>(element))
    return IntegerType::get(element.getContext(), 64);
  return element;
}

Value toStorage(OpBuilder &b, Location loc, Value value) {
  Type type = value.getType();
  if (type.isInteger(1))
    return LLVM::ZExtOp::create(b, loc, b.getI8Type(), value);
  if (isa<LLVM::LLVMPointerType>(type))
    return LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), value);
  return value;
}

Value fromStorage(OpBuilder &b, Location loc, Value stored, Type element) {
  if (element.isInteger(1))
    return LLVM::TruncOp::create(b, loc, element, stored);
  if (isa<LLVM::LLVMPointerType>(element))
    return LLVM::IntToPtrOp::create(b, loc, element, stored);
  return stored;
}

Value ptx(OpBuilder &b, Location loc, Type resultType, StringRef code, StringRef constraints,
          ValueRange operands, bool sideEffects) {
  TypeRange results = resultType ? TypeRange(resultType) : TypeRange();
  auto op = LLVM::InlineAsmOp::create(
      b, loc, results, operands, code, constraints, sideEffects, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT), ArrayAttr());
  return resultType ? op.getResult(0) : Value();
}

StringRef ptxConstraint(unsigned bits) {
  if (bits <= 16)
    return "h";
  return bits <= 32 ? "r" : "l";
}

Values warpOffset(OpBuilder &b, Location loc, const layout::LinearLayout &layout) {
  Value warp = threadId(b, loc).warp;
  Values offset(layout.rank(), i32Constant(b, loc, 0));
  for (size_t bit = 0; bit < layout.warps().size(); ++bit) {
    Value set = LLVM::AndOp::create(b, loc, LLVM::LShrOp::create(b, loc, warp, i32Constant(b, loc, bit)),
                                    i32Constant(b, loc, 1));
    for (int d = 0; d < layout.rank(); ++d)
      if (layout.warps()[bit][d] != 0)
        offset[d] = LLVM::XOrOp::create(
            b, loc, offset[d], LLVM::MulOp::create(b, loc, set, i32Constant(b, loc, layout.warps()[bit][d])));
  }
  return offset;
}

/// Element index of `coord` in a tile of `shape` as layout::SwizzledTile places it (with
/// `swizzle`), or row-major.
Value sharedIndex(OpBuilder &b, Location loc, ArrayRef<Value> coord, ArrayRef<int64_t> shape,
                  int64_t bytes, bool swizzle) {
  if (!swizzle || shape.size() != 2)
    return linearIndex(b, loc, coord, shape);
  const layout::SwizzledTile tile(shape[0], shape[1], bytes);
  if (!tile.swizzled)
    return linearIndex(b, loc, coord, shape);
  auto shift = [](int64_t v) { return static_cast<int64_t>(llvm::Log2_64(v)); };
  auto constant = [&](int64_t v) { return i32Constant(b, loc, v); };
  Value row = coord[0], col = coord[1], atomBase;
  if (tile.atomColumns != tile.cols) {
    Value atom = LLVM::LShrOp::create(b, loc, col, constant(shift(tile.atomColumns)));
    atomBase = LLVM::MulOp::create(b, loc, atom, constant(tile.rows * tile.atomColumns));
    col = LLVM::AndOp::create(b, loc, col, constant(tile.atomColumns - 1));
  }
  Value chunk = LLVM::LShrOp::create(b, loc, col, constant(shift(tile.chunkElements)));
  Value phase = LLVM::AndOp::create(b, loc, LLVM::LShrOp::create(b, loc, row, constant(shift(tile.rowsPerPhase))),
                                    constant(tile.phases - 1));
  Value swizzled =
      LLVM::ShlOp::create(b, loc, LLVM::XOrOp::create(b, loc, chunk, phase), constant(shift(tile.chunkElements)));
  Value within = LLVM::AndOp::create(b, loc, col, constant(tile.chunkElements - 1));
  Value index = LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, row, constant(tile.atomColumns)),
                                    LLVM::AddOp::create(b, loc, swizzled, within));
  return atomBase ? LLVM::AddOp::create(b, loc, atomBase, index).getResult() : index;
}

void storeTileToShared(OpBuilder &b, Location loc, Value base, const layout::LinearLayout &layout,
                       ArrayRef<Value> registers, Type element, bool swizzle) {
  storeTileToShared(b, loc, base, layout, registers, element, [&](ArrayRef<Value> coord) {
    return sharedIndex(b, loc, coord, layout.shape(), storageBytes(storageType(element)), swizzle);
  });
}

void storeTileToShared(OpBuilder &b, Location loc, Value base, const layout::LinearLayout &layout,
                       ArrayRef<Value> registers, Type element, function_ref<Value(ArrayRef<Value>)> indexOf) {
  std::vector<Values> coords = registerCoordinates(b, loc, layout);
  Type stored = storageType(element);
  int64_t bytes = storageBytes(stored);
  int64_t run = layout.contiguousRegisters(layout.rank() - 1, std::max<int64_t>(1, 16 / bytes));
  for (size_t r = 0; r < registers.size(); r += run) {
    Value index = indexOf(coords[r]);
    Value ptr = LLVM::GEPOp::create(b, loc, base.getType(), stored, base, ValueRange{index});
    if (run == 1) {
      LLVM::StoreOp::create(b, loc, toStorage(b, loc, registers[r]), ptr);
      continue;
    }
    auto vector = VectorType::get({run}, stored);
    Value v = LLVM::UndefOp::create(b, loc, vector);
    for (int64_t i = 0; i < run; ++i)
      v = LLVM::InsertElementOp::create(b, loc, v, toStorage(b, loc, registers[r + i]), i32Constant(b, loc, i));
    LLVM::StoreOp::create(b, loc, v, ptr, run * bytes);
  }
}

Values loadTileFromShared(OpBuilder &b, Location loc, Value base, const layout::LinearLayout &view,
                          Type element, bool swizzle) {
  std::vector<Values> coords = registerCoordinates(b, loc, view);
  Type stored = storageType(element);
  int64_t bytes = storageBytes(stored);
  int64_t run = view.contiguousRegisters(view.rank() - 1, std::max<int64_t>(1, 16 / bytes));
  Values out;
  for (size_t r = 0; r < coords.size(); r += run) {
    Value index = sharedIndex(b, loc, coords[r], view.shape(), bytes, swizzle);
    Value ptr = LLVM::GEPOp::create(b, loc, base.getType(), stored, base, ValueRange{index});
    if (run == 1) {
      out.push_back(fromStorage(b, loc, LLVM::LoadOp::create(b, loc, stored, ptr), element));
      continue;
    }
    Value v = LLVM::LoadOp::create(b, loc, VectorType::get({run}, stored), ptr, run * bytes);
    for (int64_t i = 0; i < run; ++i)
      out.push_back(fromStorage(b, loc, LLVM::ExtractElementOp::create(b, loc, v, i32Constant(b, loc, i)), element));
  }
  return out;
}

Value packPair(OpBuilder &b, Location loc, Value lo, Value hi) {
  Value v = LLVM::UndefOp::create(b, loc, VectorType::get({2}, lo.getType()));
  v = LLVM::InsertElementOp::create(b, loc, v, lo, i32Constant(b, loc, 0));
  v = LLVM::InsertElementOp::create(b, loc, v, hi, i32Constant(b, loc, 1));
  return LLVM::BitcastOp::create(b, loc, b.getI32Type(), v);
}

layout::Coord mmaAElement(int64_t row, int64_t k, int e) {
  return {row + 8 * ((e / 2) % 2), k + e % 2 + 8 * (e / 4)};
}

layout::Coord mmaCElement(int64_t row, int64_t col, int e) { return {row + 8 * (e / 2), col + e % 2}; }

Values passThrough(OpBuilder &b, Location loc, StringRef code, ValueRange values) {
  std::string outputs, tied;
  SmallVector<Type> types;
  for (auto [i, v] : llvm::enumerate(values)) {
    outputs += isa<FloatType>(v.getType()) ? "=f," : "=r,";
    tied += (i ? "," : "") + std::to_string(i);
    types.push_back(v.getType());
  }
  Value all = ptx(b, loc, LLVM::LLVMStructType::getLiteral(b.getContext(), types), code, outputs + tied, values, true);
  Values out;
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, all, i));
  return out;
}

std::map<layout::Coord, int64_t> registerIndex(const layout::LinearLayout &layout) {
  std::map<layout::Coord, int64_t> index;
  for (int64_t r = 0; r < layout.numRegisters(); ++r)
    index.emplace(layout.apply(r, 0, 0), r);
  return index;
}

Value sharedStage(OpBuilder &b, Location loc, Value base, Value slot, SharedBufferType type) {
  auto tile = type.getTileType();
  int64_t stageBytes = tile.getNumElements() * storageBytes(tile.getElementType());
  Value offset = LLVM::MulOp::create(b, loc, slot, i32Constant(b, loc, stageBytes));
  return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base, ValueRange{offset});
}

Value loadFromShared(OpBuilder &b, Location loc, Value base, Value index, Type element) {
  Type stored = storageType(element);
  Value ptr = LLVM::GEPOp::create(b, loc, base.getType(), stored, base, ValueRange{index});
  return fromStorage(b, loc, LLVM::LoadOp::create(b, loc, stored, ptr), element);
}

} // namespace tessera::tile::lowering
