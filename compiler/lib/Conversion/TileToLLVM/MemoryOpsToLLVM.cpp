// Lowering of pointer arithmetic and global memory access: per-register predicated PTX loads,
// stores and atomics, and block pointers as (base, shape, strides, offsets) structs.
#include "Utility.h"

#include "tessera/compiler/Layout/SwizzledTile.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace tessera::tile::lowering {
namespace {

/// Registers of a converted operand: the struct's fields for a tile, the value for a scalar.
Values registersOf(OpBuilder &b, Location loc, Value converted) {
  if (!converted)
    return {};
  if (isa<LLVM::LLVMStructType>(converted.getType()))
    return unpack(b, loc, converted);
  return {converted};
}

Value result(OpBuilder &b, Location loc, Type convertedType, ArrayRef<Value> values) {
  if (isa<LLVM::LLVMStructType>(convertedType))
    return pack(b, loc, convertedType, values);
  return values.front();
}

/// PTX type suffix of a load or store of `bits` bits.
std::string memorySuffix(unsigned bits) { return bits == 8 ? "u8" : "b" + std::to_string(bits); }

/// The integer register a memory value travels in (at least 16 bits: PTX has no 8-bit
/// registers), and conversions to and from it.
Type wordType(OpBuilder &b, Type stored) {
  return b.getIntegerType(std::max(16u, stored.getIntOrFloatBitWidth()));
}

Value toWord(OpBuilder &b, Location loc, Value stored) {
  Type type = stored.getType();
  unsigned bits = type.getIntOrFloatBitWidth();
  if (isa<FloatType>(type))
    stored = LLVM::BitcastOp::create(b, loc, b.getIntegerType(bits), stored);
  Type word = wordType(b, type);
  if (bits < word.getIntOrFloatBitWidth())
    stored = LLVM::ZExtOp::create(b, loc, word, stored);
  return stored;
}

Value fromWord(OpBuilder &b, Location loc, Value word, Type stored) {
  unsigned bits = stored.getIntOrFloatBitWidth();
  if (bits < word.getType().getIntOrFloatBitWidth())
    word = LLVM::TruncOp::create(b, loc, b.getIntegerType(bits), word);
  if (isa<FloatType>(stored))
    word = LLVM::BitcastOp::create(b, loc, stored, word);
  return word;
}

/// One element loaded from `ptr` where `mask` (may be null) holds; `other` (may be null) where
/// it does not.
Value maskedLoad(OpBuilder &b, Location loc, Value ptr, Value mask, Value other, Type element) {
  Type stored = storageType(element);
  if (!mask)
    return fromStorage(b, loc,
                       LLVM::LoadOp::create(b, loc, stored, ptr, storageBytes(stored)), element);
  Type word = wordType(b, stored);
  unsigned bits = word.getIntOrFloatBitWidth();
  Value otherWord = other ? toWord(b, loc, toStorage(b, loc, other)) : constantOf(b, loc, word, 0);
  std::string reg = ptxConstraint(bits).str();
  std::string code = "mov.b" + std::to_string(bits) + " $0, $3;\n\t@$2 ld.global." +
                     memorySuffix(stored.getIntOrFloatBitWidth()) + " $0, [$1];";
  Value loaded = ptx(b, loc, word, code, "=" + reg + ",l,b," + reg, {ptr, mask, otherWord}, true);
  return fromStorage(b, loc, fromWord(b, loc, loaded, stored), element);
}

void maskedStore(OpBuilder &b, Location loc, Value ptr, Value value, Value mask) {
  Value stored = toStorage(b, loc, value);
  if (!mask) {
    LLVM::StoreOp::create(b, loc, stored, ptr, storageBytes(stored.getType()));
    return;
  }
  Value word = toWord(b, loc, stored);
  std::string code = "@$2 st.global." + memorySuffix(stored.getType().getIntOrFloatBitWidth()) +
                     " [$0], $1;";
  std::string reg = ptxConstraint(word.getType().getIntOrFloatBitWidth()).str();
  ptx(b, loc, Type(), code, "l," + reg + ",b", {ptr, word, mask}, true);
}

/// `width` consecutive elements as PTX words (b32, or b64 for 64-bit elements), and back.
struct Words {
  Type word;          // i32 or i64
  int64_t count;      // words per vector
  int64_t perWord;    // elements per word
};

Words wordsFor(OpBuilder &b, Type stored, int64_t width) {
  unsigned bits = stored.getIntOrFloatBitWidth();
  unsigned wordBits = std::max(32u, bits);
  return {b.getIntegerType(wordBits), static_cast<int64_t>(width * bits / wordBits),
          static_cast<int64_t>(wordBits / bits)};
}

Value packWord(OpBuilder &b, Location loc, ArrayRef<Value> storedElements, Type word) {
  if (storedElements.size() == 1)
    return toWord(b, loc, storedElements.front());
  auto vector = VectorType::get({static_cast<int64_t>(storedElements.size())}, storedElements.front().getType());
  Value v = LLVM::UndefOp::create(b, loc, vector);
  for (auto [i, element] : llvm::enumerate(storedElements))
    v = LLVM::InsertElementOp::create(b, loc, v, element, i32Constant(b, loc, i));
  return LLVM::BitcastOp::create(b, loc, word, v);
}

Values unpackWord(OpBuilder &b, Location loc, Value word, Type stored, int64_t perWord) {
  if (perWord == 1)
    return {fromWord(b, loc, word, stored)};
  auto vector = VectorType::get({perWord}, stored);
  Value v = LLVM::BitcastOp::create(b, loc, vector, word);
  Values out;
  for (int64_t i = 0; i < perWord; ++i)
    out.push_back(LLVM::ExtractElementOp::create(b, loc, v, i32Constant(b, loc, i)));
  return out;
}

std::string operandList(int64_t first, int64_t count) {
  std::string text = "{";
  for (int64_t i = 0; i < count; ++i)
    text += (i ? ", $" : "$") + std::to_string(first + i);
  return text + "}";
}

/// `width` (> 1) consecutive elements from `ptr` in one predicated vector load.
Values vectorLoad(OpBuilder &b, Location loc, Value ptr, Value mask, ArrayRef<Value> others,
                  Type element, int64_t width) {
  Type stored = storageType(element);
  Words words = wordsFor(b, stored, width);
  unsigned wordBits = words.word.getIntOrFloatBitWidth();
  std::string reg = ptxConstraint(wordBits).str(), suffix = "b" + std::to_string(wordBits);
  std::string vector = words.count > 1 ? ".v" + std::to_string(words.count) : "";
  Values operands{ptr};
  std::string code, constraints;
  for (int64_t w = 0; w < words.count; ++w)
    constraints += "=" + reg + ",";
  constraints += "l";
  if (mask) {
    operands.push_back(mask);
    constraints += ",b";
    for (int64_t w = 0; w < words.count; ++w) {
      Value otherWord = constantOf(b, loc, words.word, 0);
      if (!others.empty()) {
        Values part;
        for (int64_t i = 0; i < words.perWord; ++i)
          part.push_back(toStorage(b, loc, others[w * words.perWord + i]));
        otherWord = packWord(b, loc, part, words.word);
      }
      operands.push_back(otherWord);
      constraints += "," + reg;
      code += "mov." + suffix + " $" + std::to_string(w) + ", $" +
              std::to_string(words.count + 2 + w) + ";\n\t";
    }
    code += "@$" + std::to_string(words.count + 1) + " ";
  }
  code += "ld.global" + vector + "." + suffix + " " +
          (words.count > 1 ? operandList(0, words.count) : std::string("$0")) + ", [$" +
          std::to_string(words.count) + "];";
  Type result = words.word;
  if (words.count > 1)
    result = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(words.count, words.word));
  Value loaded = ptx(b, loc, result, code, constraints, operands, true);
  Values elements;
  for (int64_t w = 0; w < words.count; ++w) {
    Value word = words.count > 1 ? LLVM::ExtractValueOp::create(b, loc, loaded, w).getResult() : loaded;
    for (Value e : unpackWord(b, loc, word, stored, words.perWord))
      elements.push_back(fromStorage(b, loc, e, element));
  }
  return elements;
}

void vectorStore(OpBuilder &b, Location loc, Value ptr, ArrayRef<Value> values, Value mask) {
  Type stored = storageType(values.front().getType());
  Words words = wordsFor(b, stored, static_cast<int64_t>(values.size()));
  unsigned wordBits = words.word.getIntOrFloatBitWidth();
  std::string reg = ptxConstraint(wordBits).str(), suffix = "b" + std::to_string(wordBits);
  Values operands{ptr};
  std::string constraints = "l";
  for (int64_t w = 0; w < words.count; ++w) {
    Values part;
    for (int64_t i = 0; i < words.perWord; ++i)
      part.push_back(toStorage(b, loc, values[w * words.perWord + i]));
    operands.push_back(packWord(b, loc, part, words.word));
    constraints += "," + reg;
  }
  std::string code;
  if (mask) {
    operands.push_back(mask);
    constraints += ",b";
    code = "@$" + std::to_string(words.count + 1) + " ";
  }
  code += "st.global" + (words.count > 1 ? ".v" + std::to_string(words.count) : std::string()) + "." +
          suffix + " [$0], " + (words.count > 1 ? operandList(1, words.count) : std::string("$1")) + ";";
  ptx(b, loc, Type(), code, constraints, operands, true);
}

int64_t vectorAttr(Operation *op) {
  auto attr = op->getAttrOfType<IntegerAttr>("tile.vector");
  return attr ? attr.getInt() : 1;
}

/// The elements of `element` a load or store moves at once: its tile.vector, unless that is
/// narrower than a 32-bit word (PTX vectors are of words).
int64_t accessWidth(Operation *op, Type element) {
  int64_t width = vectorAttr(op);
  return storageType(element).getIntOrFloatBitWidth() * width < 32 ? 1 : width;
}

struct AddPtrLowering : ConvertOpToLLVMPattern<AddPtrOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type pointee = storageType(getTypeConverter()->convertType(
        getElementTypeOrSelf(getPointeeType(op.getPtr().getType()))));
    Values ptrs = registersOf(rewriter, loc, adaptor.getPtr());
    Values offsets = registersOf(rewriter, loc, adaptor.getOffset());
    Values out;
    for (size_t r = 0; r < ptrs.size(); ++r)
      out.push_back(LLVM::GEPOp::create(rewriter, loc, ptrs[r].getType(), pointee, ptrs[r],
                                        ValueRange{offsets[r]}));
    rewriter.replaceOp(op, result(rewriter, loc, getTypeConverter()->convertType(op.getType()), out));
    return success();
  }
};

struct LoadLowering : ConvertOpToLLVMPattern<LoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(LoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type element = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    Values ptrs = registersOf(rewriter, loc, adaptor.getPtr());
    Values masks = registersOf(rewriter, loc, adaptor.getMask());
    Values others = registersOf(rewriter, loc, adaptor.getOther());
    int64_t width = accessWidth(op, element);
    Values out;
    for (size_t r = 0; r < ptrs.size(); r += width) {
      Value mask = masks.empty() ? Value() : masks[r];
      if (width == 1) {
        out.push_back(maskedLoad(rewriter, loc, ptrs[r], mask, others.empty() ? Value() : others[r], element));
        continue;
      }
      ArrayRef<Value> group = others.empty() ? ArrayRef<Value>() : ArrayRef<Value>(others).slice(r, width);
      out.append(vectorLoad(rewriter, loc, ptrs[r], mask, group, element, width));
    }
    rewriter.replaceOp(op, result(rewriter, loc, getTypeConverter()->convertType(op.getType()), out));
    return success();
  }
};

struct StoreLowering : ConvertOpToLLVMPattern<StoreOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(StoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Values ptrs = registersOf(rewriter, loc, adaptor.getPtr());
    Values values = registersOf(rewriter, loc, adaptor.getValue());
    Values masks = registersOf(rewriter, loc, adaptor.getMask());
    int64_t width = accessWidth(op, values.front().getType());
    for (size_t r = 0; r < ptrs.size(); r += width) {
      Value mask = masks.empty() ? Value() : masks[r];
      if (width == 1)
        maskedStore(rewriter, loc, ptrs[r], values[r], mask);
      else
        vectorStore(rewriter, loc, ptrs[r], ArrayRef<Value>(values).slice(r, width), mask);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Where a layout holds an element more than once (zero bases: a tile smaller than the
/// threads, or a broadcast), which copy applies an atomic: an i1 that is true in the threads
/// whose replicated lane and warp bits are 0, and the register bits that only repeat a
/// register. Other copies skip the operation (a replicated thread reads back 0).
std::pair<Value, int64_t> replicaOwner(OpBuilder &b, Location loc, Type ptrType) {
  Value owner = LLVM::ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(true));
  auto type = dyn_cast<RankedTensorType>(ptrType);
  if (!type || !type.getEncoding())
    return {owner, 0};
  layout::LinearLayout layout = toLinearLayout(type.getEncoding(), type.getShape());
  auto isZero = [](const layout::Coord &c) { return llvm::all_of(c, [](int64_t x) { return x == 0; }); };
  ThreadId id = threadId(b, loc);
  for (auto [bases, index] : {std::pair{&layout.lanes(), id.lane}, std::pair{&layout.warps(), id.warp}})
    for (size_t bit = 0; bit < bases->size(); ++bit)
      if (isZero((*bases)[bit])) {
        Value set = LLVM::AndOp::create(b, loc, index, i32Constant(b, loc, int64_t(1) << bit));
        Value clear = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, set, i32Constant(b, loc, 0));
        owner = LLVM::AndOp::create(b, loc, owner, clear);
      }
  int64_t replicaBits = 0;
  for (size_t bit = 0; bit < layout.registers().size(); ++bit)
    if (isZero(layout.registers()[bit]))
      replicaBits |= int64_t(1) << bit;
  return {owner, replicaBits};
}

struct AtomicRMWLowering : ConvertOpToLLVMPattern<AtomicRMWOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(AtomicRMWOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type element = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    unsigned bits = element.getIntOrFloatBitWidth();
    bool fl = isa<FloatType>(element);
    bool floatExtremum = fl && (op.getKind() == AtomicKind::max || op.getKind() == AtomicKind::min);
    if (bits < 16 || (bits == 16 && (op.getKind() != AtomicKind::add || !fl)))
      return rewriter.notifyMatchFailure(op, "atomics on 8- and 16-bit integers are not supported");
    auto code = [&](StringRef kind, const std::string &type) {
      return "mov.b" + std::to_string(bits) + " $0, 0;\n\t@$3 atom.global." +
             stringifyMemSemantic(op.getSem()).str() + "." + stringifyMemScope(op.getScope()).str() +
             "." + kind.str() + "." + type + " $0, [$1], $2;";
    };
    std::string type = fl ? (bits == 16 ? std::string("noftz.") + (element.isBF16() ? "bf16" : "f16")
                                        : "f" + std::to_string(bits))
                          : (op.getKind() == AtomicKind::add ? "u" : "b") + std::to_string(bits);
    if (!fl && (op.getKind() == AtomicKind::max || op.getKind() == AtomicKind::min))
      type = "s" + std::to_string(bits);
    std::string reg = ptxConstraint(bits).str(), constraints = "=" + reg + ",l," + reg + ",b";
    Values ptrs = registersOf(rewriter, loc, adaptor.getPtr());
    Values values = registersOf(rewriter, loc, adaptor.getValue());
    Values masks = registersOf(rewriter, loc, adaptor.getMask());
    Value always = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI1Type(), rewriter.getBoolAttr(true));
    auto [owner, replicaBits] = replicaOwner(rewriter, loc, op.getPtr().getType());
    // An add whose old values nobody reads is a reduction (red): no reply from memory.
    bool reduction = op->use_empty() && op.getKind() == AtomicKind::add &&
                     (op.getSem() == MemSemantic::relaxed || op.getSem() == MemSemantic::release);
    // f32 reductions of a thread's consecutive elements (tile.vector) as one vector red
    // (sm_90: .v2/.v4.f32): a dot's accumulator added into memory moves pairs.
    const int64_t width = reduction && bits == 32 && fl ? std::min<int64_t>(4, vectorAttr(op)) : 1;
    Values out;
    for (size_t r = 0; r < ptrs.size(); r += width) {
      if (r & replicaBits) { // the same element as an earlier register: applied once
        for (int64_t i = 0; i < width; ++i)
          out.push_back(out[(r + i) & ~replicaBits]);
        continue;
      }
      Value mask = LLVM::AndOp::create(rewriter, loc, masks.empty() ? always : masks[r], owner);
      if (width > 1) {
        SmallVector<Value> operands{ptrs[r]};
        operands.append(values.begin() + r, values.begin() + r + width);
        operands.push_back(mask);
        std::string constraints = "l";
        for (int64_t i = 0; i < width; ++i)
          constraints += ",f";
        ptx(rewriter, loc, Type(),
            "@$" + std::to_string(width + 1) + " red." + stringifyMemSemantic(op.getSem()).str() + "." +
                stringifyMemScope(op.getScope()).str() + ".global.add.v" + std::to_string(width) + ".f32 [$0], " +
                operandList(1, width) + ";",
            constraints + ",b", operands, true);
        out.append(values.begin() + r, values.begin() + r + width); // unread
        continue;
      }
      Value word = toWord(rewriter, loc, values[r]);
      Value old;
      if (reduction) {
        ptx(rewriter, loc, Type(),
            "@$2 red.global." + stringifyMemSemantic(op.getSem()).str() + "." +
                stringifyMemScope(op.getScope()).str() + ".add." + type + " [$0], $1;",
            "l," + reg + ",b", {ptrs[r], word, mask}, true);
        old = word; // unread
      } else if (floatExtremum) {
        // Floats order like sign-magnitude integers: a non-negative value compares with memory as
        // a signed integer, a negative one in reverse as an unsigned integer.
        bool isMax = op.getKind() == AtomicKind::max;
        Value nonNegative = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::sge, word,
                                                 constantOf(rewriter, loc, word.getType(), 0));
        Value negative = LLVM::XOrOp::create(rewriter, loc, nonNegative, always);
        Value whenNonNegative = ptx(rewriter, loc, word.getType(), code(isMax ? "max" : "min", "s" + std::to_string(bits)),
                                    constraints, {ptrs[r], word, LLVM::AndOp::create(rewriter, loc, mask, nonNegative)}, true);
        Value whenNegative = ptx(rewriter, loc, word.getType(), code(isMax ? "min" : "max", "u" + std::to_string(bits)),
                                 constraints, {ptrs[r], word, LLVM::AndOp::create(rewriter, loc, mask, negative)}, true);
        old = LLVM::SelectOp::create(rewriter, loc, nonNegative, whenNonNegative, whenNegative);
      } else {
        old = ptx(rewriter, loc, word.getType(), code(stringifyAtomicKind(op.getKind()), type), constraints,
                  {ptrs[r], word, mask}, true);
      }
      out.push_back(fromWord(rewriter, loc, old, element));
    }
    rewriter.replaceOp(op, result(rewriter, loc, getTypeConverter()->convertType(op.getType()), out));
    return success();
  }
};

/// Fields of a block pointer struct.
struct BlockPointer {
  Value base;
  Values shape, strides, offsets;
};

BlockPointer unpackBlockPointer(OpBuilder &b, Location loc, Value packed, int64_t rank) {
  Values fields = unpack(b, loc, packed);
  BlockPointer bp{fields[0], {}, {}, {}};
  for (int64_t d = 0; d < rank; ++d) {
    bp.shape.push_back(fields[1 + d]);
    bp.strides.push_back(fields[1 + rank + d]);
    bp.offsets.push_back(fields[1 + 2 * rank + d]);
  }
  return bp;
}

Value packBlockPointer(OpBuilder &b, Location loc, Type type, const BlockPointer &bp) {
  Values fields{bp.base};
  fields.append(bp.shape);
  fields.append(bp.strides);
  fields.append(bp.offsets);
  return pack(b, loc, type, fields);
}

struct MakeBlockPtrLowering : ConvertOpToLLVMPattern<MakeBlockPtrOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(MakeBlockPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    BlockPointer bp{adaptor.getBase(), adaptor.getShape(), adaptor.getStrides(), adaptor.getOffsets()};
    rewriter.replaceOp(op, packBlockPointer(rewriter, op.getLoc(),
                                            getTypeConverter()->convertType(op.getType()), bp));
    return success();
  }
};

struct AdvanceLowering : ConvertOpToLLVMPattern<AdvanceOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(AdvanceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t rank = op.getType().getBlockType().getRank();
    BlockPointer bp = unpackBlockPointer(rewriter, loc, adaptor.getPtr(), rank);
    for (int64_t d = 0; d < rank; ++d)
      bp.offsets[d] = LLVM::AddOp::create(rewriter, loc, bp.offsets[d], adaptor.getOffsets()[d]);
    rewriter.replaceOp(op, packBlockPointer(rewriter, loc, adaptor.getPtr().getType(), bp));
    return success();
  }
};

/// Per register of a block laid out by `layout`: its address and whether it is inside the
/// tensor along the checked dimensions (null when nothing is checked).
void blockAddresses(OpBuilder &b, Location loc, const BlockPointer &bp, Type element,
                    const layout::LinearLayout &layout, ArrayRef<int32_t> checked, Values &ptrs,
                    Values &masks) {
  Type i64 = b.getI64Type();
  Value zero = constantOf(b, loc, i64, 0);
  for (const Values &coord : registerCoordinates(b, loc, layout)) {
    Value offset = zero, inside;
    for (int d = 0; d < layout.rank(); ++d) {
      Value index = LLVM::SExtOp::create(b, loc, i64, LLVM::AddOp::create(b, loc, bp.offsets[d], coord[d]));
      offset = LLVM::AddOp::create(b, loc, offset, LLVM::MulOp::create(b, loc, index, bp.strides[d]));
      if (llvm::is_contained(checked, d)) {
        Value ok = LLVM::AndOp::create(
            b, loc, LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::sge, index, zero),
            LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, index, bp.shape[d]));
        inside = inside ? LLVM::AndOp::create(b, loc, inside, ok).getResult() : ok;
      }
    }
    ptrs.push_back(LLVM::GEPOp::create(b, loc, bp.base.getType(), storageType(element), bp.base, ValueRange{offset}));
    masks.push_back(inside);
  }
}

struct BlockLoadLowering : ConvertOpToLLVMPattern<BlockLoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(BlockLoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    Type element = getTypeConverter()->convertType(type.getElementType());
    BlockPointer bp = unpackBlockPointer(rewriter, loc, adaptor.getPtr(), type.getRank());
    Values ptrs, masks, out;
    blockAddresses(rewriter, loc, bp, element, toLinearLayout(type.getEncoding(), type.getShape()),
                   op.getBoundaryCheck(), ptrs, masks);
    Value padding;
    if (op.getPadding() == Padding::nan && isa<FloatType>(element))
      padding = LLVM::ConstantOp::create(
          rewriter, loc, element,
          rewriter.getFloatAttr(element, APFloat::getNaN(cast<FloatType>(element).getFloatSemantics())));
    int64_t width = accessWidth(op, element);
    for (size_t r = 0; r < ptrs.size(); r += width) {
      if (width == 1) {
        out.push_back(maskedLoad(rewriter, loc, ptrs[r], masks[r], masks[r] ? padding : Value(), element));
        continue;
      }
      Values paddings(padding ? width : 0, padding);
      out.append(vectorLoad(rewriter, loc, ptrs[r], masks[r], paddings, element, width));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(type), out));
    return success();
  }
};

struct BlockStoreLowering : ConvertOpToLLVMPattern<BlockStoreOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(BlockStoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getValue().getType());
    Type element = getTypeConverter()->convertType(type.getElementType());
    BlockPointer bp = unpackBlockPointer(rewriter, loc, adaptor.getPtr(), type.getRank());
    Values ptrs, masks;
    blockAddresses(rewriter, loc, bp, element, toLinearLayout(type.getEncoding(), type.getShape()),
                   op.getBoundaryCheck(), ptrs, masks);
    Values values = unpack(rewriter, loc, adaptor.getValue());
    int64_t width = accessWidth(op, element);
    for (size_t r = 0; r < ptrs.size(); r += width) {
      if (width == 1)
        maskedStore(rewriter, loc, ptrs[r], values[r], masks[r]);
      else
        vectorStore(rewriter, loc, ptrs[r], ArrayRef<Value>(values).slice(r, width), masks[r]);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct SharedAllocLowering : ConvertOpToLLVMPattern<SharedAllocOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SharedAllocOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    auto offset = op->getAttrOfType<IntegerAttr>("tile.smem_offset");
    rewriter.replaceOp(op, sharedMemory(rewriter, op.getLoc(), op, offset ? offset.getInt() : 0));
    return success();
  }
};

/// cp.async per vector of the pointers' layout into the stage, swizzled as ldmatrix reads it;
/// masked-off vectors copy 0 bytes and zero-fill.
struct AsyncCopyLowering : ConvertOpToLLVMPattern<AsyncCopyOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(AsyncCopyOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto ptrType = op.getPtr().getType();
    auto bufferType = op.getBuffer().getType();
    Type element = storageType(getTypeConverter()->convertType(bufferType.getTileType().getElementType()));
    int64_t bytes = storageBytes(element);
    layout::LinearLayout layout = toLinearLayout(ptrType.getEncoding(), ptrType.getShape());
    int64_t width = std::min<int64_t>(vectorAttr(op), layout.contiguousRegisters(layout.rank() - 1, 16 / bytes));
    Value stage = sharedStage(rewriter, loc, adaptor.getBuffer(), adaptor.getSlot(), bufferType);
    Values ptrs = unpack(rewriter, loc, adaptor.getPtr()), masks = unpack(rewriter, loc, adaptor.getMask());
    std::vector<Values> coords = registerCoordinates(rewriter, loc, layout);
    for (size_t r = 0; r < ptrs.size(); r += width) {
      Value index = sharedIndex(rewriter, loc, coords[r], ptrType.getShape(), bytes, /*swizzle=*/true);
      Value dst = LLVM::GEPOp::create(rewriter, loc, stage.getType(), element, stage, ValueRange{index});
      if (width * bytes < 4) { // too narrow for cp.async: a synchronous masked copy
        Value zero = constantOf(rewriter, loc, element, 0);
        Value v = maskedLoad(rewriter, loc, ptrs[r], masks[r], zero, element);
        LLVM::StoreOp::create(rewriter, loc, v, dst);
        continue;
      }
      int64_t size = width * bytes;
      Value srcSize = LLVM::SelectOp::create(rewriter, loc, masks[r], i32Constant(rewriter, loc, size),
                                             i32Constant(rewriter, loc, 0));
      std::string code = std::string("cp.async.") + (size == 16 ? "cg" : "ca") + ".shared.global [$0], [$1], " +
                         std::to_string(size) + ", $2;";
      ptx(rewriter, loc, Type(), code, "r,l,r", {dst, ptrs[r], srcSize}, true);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct AsyncCommitLowering : ConvertOpToLLVMPattern<AsyncCommitOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(AsyncCommitOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    ptx(rewriter, op.getLoc(), Type(), "cp.async.commit_group;", "", {}, true);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Waits for this thread's copies, then a barrier for everyone's. Where wgmma may read the
/// stages, each thread first orders its copies (generic proxy) before the tensor cores' reads
/// (async proxy).
struct AsyncWaitLowering : ConvertOpToLLVMPattern<AsyncWaitOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(AsyncWaitOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    ptx(rewriter, op.getLoc(), Type(), "cp.async.wait_group " + std::to_string(op.getPending()) + ";", "", {}, true);
    if (warpgroupMmaAllowed(op))
      ptx(rewriter, op.getLoc(), Type(), "fence.proxy.async.shared::cta;", "", {}, true);
    barrier(rewriter, op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }
};

/// Whether this thread is thread `first` of the CTA (thread 0 initializes barriers).
Value isThread(OpBuilder &b, Location loc, int first) {
  Value tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, tid, i32Constant(b, loc, first));
}

/// The 32-bit shared-memory address PTX's mbarrier and bulk-copy instructions take.
Value sharedAddress(OpBuilder &b, Location loc, Value ptr) {
  return LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), ptr);
}

/// Where tile.bulk_add puts the element at `coord` (row, column), counted from dst.
Value bulkAddIndex(OpBuilder &b, Location loc, BulkAddOp op, ArrayRef<Value> coord) {
  auto shape = cast<RankedTensorType>(op.getValues().getType()).getShape();
  if (!op.getSwizzled())
    return linearIndex(b, loc, coord, shape);
  // column ^ 8 * (row % 4)
  Value phase = LLVM::ShlOp::create(b, loc, LLVM::AndOp::create(b, loc, coord[0], i32Constant(b, loc, 3)),
                                    i32Constant(b, loc, 3));
  Value col = LLVM::XOrOp::create(b, loc, coord[1], phase);
  return LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, coord[0], i32Constant(b, loc, shape[1])), col);
}

/// tile.bulk_add. With the copy engine: the tile goes to the op's staging buffer in the order
/// the add reads, then thread 0 hands it over, cp.reduce.async.bulk adding it in L2 while the
/// threads move on; the kernel ends only after its adds (prepareKernels). A buffer is rewritten
/// only once the engine has read the last tile out of it (wait_group.read; by then long done):
/// one buffer takes a barrier before the writes and one after; two alternating buffers
/// (bulkAddAlternates) take one, after thread 0 has seen the other buffer's last tile read.
/// Without the copy engine: each thread reduces its elements (red), replicas once.
struct BulkAddLowering : ConvertOpToLLVMPattern<BulkAddOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(BulkAddOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getValues().getType());
    layout::LinearLayout layout = toLinearLayout(type.getEncoding(), type.getShape());
    Values values = unpack(rewriter, loc, adaptor.getValues());
    if (int64_t staged = bulkAddStagingBytes(op)) {
      const bool alternates = bulkAddAlternates(op);
      const int64_t bytes = alternates ? staged / 2 : staged; // one buffer's
      Value leader = isThread(rewriter, loc, 0);
      Value staging = sharedMemory(rewriter, loc, op, smemOffset(op));
      auto awaitRead = [&] { ptx(rewriter, loc, Type(), "@$0 cp.async.bulk.wait_group.read 0;", "b", {leader}, true); };
      if (alternates) {
        // Buffer (iteration - first) % 2 of the loop the op runs in.
        auto loop = cast<scf::ForOp>(op->getParentOp());
        Value iteration = LLVM::SDivOp::create(
            rewriter, loc, LLVM::SubOp::create(rewriter, loc, loop.getInductionVar(), loop.getLowerBound()),
            loop.getStep());
        Value parity = LLVM::AndOp::create(rewriter, loc, iteration, constantOf(rewriter, loc, iteration.getType(), 1));
        Value offset = LLVM::MulOp::create(rewriter, loc, parity, constantOf(rewriter, loc, parity.getType(), bytes));
        staging = LLVM::GEPOp::create(rewriter, loc, staging.getType(), rewriter.getI8Type(), staging,
                                      ValueRange{offset});
      } else {
        awaitRead();
        barrier(rewriter, loc);
      }
      storeTileToShared(rewriter, loc, staging, layout, values, rewriter.getF32Type(),
                        [&](ArrayRef<Value> coord) { return bulkAddIndex(rewriter, loc, op, coord); });
      // Every thread's writes, ordered before the copy engine's (async proxy) reads.
      ptx(rewriter, loc, Type(), "fence.proxy.async.shared::cta;", "", {}, true);
      if (alternates)
        awaitRead(); // the other buffer's last tile: free for the next iteration after the barrier
      barrier(rewriter, loc);
      ptx(rewriter, loc, Type(),
          "@$0 cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$1], [$2], " + std::to_string(bytes) +
              ";\n\t@$0 cp.async.bulk.commit_group;",
          "b,l,r", {leader, adaptor.getDst(), sharedAddress(rewriter, loc, staging)}, true);
      rewriter.eraseOp(op);
      return success();
    }
    auto [owner, replicaBits] = replicaOwner(rewriter, loc, type);
    std::vector<Values> coords = registerCoordinates(rewriter, loc, layout);
    for (size_t r = 0; r < values.size(); ++r) {
      if (r & replicaBits)
        continue;
      Value index = bulkAddIndex(rewriter, loc, op, coords[r]);
      Value ptr = LLVM::GEPOp::create(rewriter, loc, adaptor.getDst().getType(), rewriter.getF32Type(),
                                      adaptor.getDst(), ValueRange{index});
      ptx(rewriter, loc, Type(), "@$2 red.relaxed.gpu.global.add.f32 [$0], $1;", "l,f,b", {ptr, values[r], owner},
          true);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// The first thread runs `instruction` (PTX whose $1 is the mbarrier's shared address) on the
/// mbarrier of each stage of `barriers`.
void onEachBarrier(OpBuilder &b, Location loc, Value barriers, SharedBufferType type, const std::string &instruction) {
  Value first = isThread(b, loc, 0);
  for (int64_t s = 0; s < type.getStages(); ++s) {
    Value barrier = sharedStage(b, loc, barriers, i32Constant(b, loc, s), type);
    ptx(b, loc, Type(), "@$0 " + instruction, "b,r", {first, sharedAddress(b, loc, barrier)}, true);
  }
}

/// The first thread initializes each stage's mbarrier; the fence makes the initialization
/// visible to the tensor memory accelerator, the barrier to every thread (a warp-specialized
/// kernel initializes its barriers before its warps part, so the producer's too).
struct InitBarriersLowering : ConvertOpToLLVMPattern<InitBarriersOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(InitBarriersOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    onEachBarrier(rewriter, loc, adaptor.getBarriers(), op.getBarriers().getType(),
                  "mbarrier.init.shared::cta.b64 [$1], " + std::to_string(op.getArrivals()) + ";");
    // Rings initialized one after another (a warp-specialized kernel's, all at its start)
    // share the last one's fence and CTA barrier.
    if (!isa_and_present<InitBarriersOp>(op->getNextNode())) {
      ptx(rewriter, loc, Type(), "fence.mbarrier_init.release.cluster;", "", {}, true);
      NVVM::Barrier0Op::create(rewriter, loc);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Where active, the first thread (of the producer warps, in a warp-specialized kernel)
/// arrives on the fill's stage's barrier expecting the block's bytes (and for the stage's
/// other blocks, `arrivals` - 1 times, where the fill copies only this one) and issues one bulk tensor copy per 128-byte-wide atom of the stage (coordinates innermost
/// first, in the map's order of the block's dimensions); the barrier's phase completes when
/// every byte has landed.
struct TmaLoadLowering : ConvertOpToLLVMPattern<TmaLoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(TmaLoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto block = op.getPtr().getType().getBlockType();
    const int64_t rank = block.getRank(), bytes = storageBytes(block.getElementType());
    auto tile = op.getBuffer().getType().getTileType();
    // A single row is stored unswizzled, in one copy.
    const int64_t rows = tile.getRank() == 2 ? tile.getDimSize(0) : 1, cols = tile.getShape().back();
    const int64_t atomColumns = tile.getRank() == 2 ? layout::SwizzledTile(rows, cols, bytes).atomColumns : cols;
    BlockPointer bp = unpackBlockPointer(rewriter, loc, adaptor.getPtr(), rank);
    Value slot = LLVM::URemOp::create(rewriter, loc, adaptor.getFill(),
                                      i32Constant(rewriter, loc, op.getBuffer().getType().getStages()));
    Value stage = sharedStage(rewriter, loc, adaptor.getBuffer(), slot, op.getBuffer().getType());
    Value barrier = sharedStage(rewriter, loc, adaptor.getBarriers(), slot, op.getBarriers().getType());
    Value leader = isThread(rewriter, loc, producerWarpsOf(op) ? numWarpsOf(op) * 32 : 0);
    Value issue = LLVM::AndOp::create(rewriter, loc, leader, adaptor.getActive());
    // $0 issue, $1 barrier, $2 map, $3.. the outer coordinates (innermost first), then per atom
    // its destination and column.
    Values operands{issue, sharedAddress(rewriter, loc, barrier),
                    LLVM::PtrToIntOp::create(rewriter, loc, rewriter.getI64Type(), adaptor.getMap())};
    std::string constraints = "b,r,l", outer;
    BlockTile copied = *blockTile(block);
    for (int64_t d : llvm::reverse(ArrayRef(copied.mapOrder).drop_back())) {
      outer += ", $" + std::to_string(operands.size());
      operands.push_back(bp.offsets[d]);
      constraints += ",r";
    }
    std::string code = "@$0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], " + std::to_string(rows * cols * bytes) + ";";
    if (op.getArrivals() > 1)
      code += "\n\t@$0 mbarrier.arrive.shared::cta.b64 _, [$1], " + std::to_string(op.getArrivals() - 1) + ";";
    for (int64_t atom = 0; atom < cols / atomColumns; ++atom) {
      Value dst = LLVM::GEPOp::create(rewriter, loc, stage.getType(), rewriter.getI8Type(), stage,
                                      ValueRange{i32Constant(rewriter, loc, atom * rows * atomColumns * bytes)});
      Value col = LLVM::AddOp::create(rewriter, loc, bp.offsets[rank - 1], i32Constant(rewriter, loc, atom * atomColumns));
      std::string d = std::to_string(operands.size()), c = std::to_string(operands.size() + 1);
      operands.append({sharedAddress(rewriter, loc, dst), col});
      constraints += ",r,r";
      code += "\n\t@$0 cp.async.bulk.tensor." + std::to_string(rank) +
              "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$" + d + "], [$2, {$" + c + outer + "}], [$1];";
    }
    ptx(rewriter, loc, Type(), code, constraints, operands, true);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Spins on the stage barrier's phase (try_wait suspends the thread for a while in hardware);
/// with `sync`, then a CTA barrier.
struct WaitBarrierLowering : ConvertOpToLLVMPattern<WaitBarrierOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(WaitBarrierOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value stageBarrier = sharedStage(rewriter, loc, adaptor.getBarriers(), adaptor.getSlot(), op.getBarriers().getType());
    ptx(rewriter, loc, Type(),
        "{\n\t.reg .pred done;\n\tLAB_WAIT:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n\t@!done bra LAB_WAIT;\n\t}",
        "r,r", {sharedAddress(rewriter, loc, stageBarrier), adaptor.getParity()}, true);
    if (op.getSync())
      barrier(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Where active, lane 0 of each warp arrives on the stage's barrier once the warp's lanes
/// are all past their reads (the arrive releases them to the thread that waits).
struct ArriveBarrierLowering : ConvertOpToLLVMPattern<ArriveBarrierOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(ArriveBarrierOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value stageBarrier = sharedStage(rewriter, loc, adaptor.getBarriers(), adaptor.getSlot(), op.getBarriers().getType());
    Value lane0 = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::eq, threadId(rewriter, loc).lane,
                                       i32Constant(rewriter, loc, 0));
    Value arrive = LLVM::AndOp::create(rewriter, loc, lane0, adaptor.getActive());
    ptx(rewriter, loc, Type(), "bar.warp.sync -1;\n\t@$0 mbarrier.arrive.shared::cta.b64 _, [$1];", "b,r",
        {arrive, sharedAddress(rewriter, loc, stageBarrier)}, true);
    rewriter.eraseOp(op);
    return success();
  }
};

/// The warps past num_warps (with `first`, the first of them).
struct InProducerWarpsLowering : ConvertOpToLLVMPattern<InProducerWarpsOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(InProducerWarpsOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    const int consumerThreads = numWarpsOf(op) * 32;
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, rewriter.getI32Type());
    Value producing = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::uge, tid,
                                           i32Constant(rewriter, loc, consumerThreads));
    if (op.getFirst())
      producing = LLVM::AndOp::create(rewriter, loc, producing,
                                      LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::ult, tid,
                                                           i32Constant(rewriter, loc, consumerThreads + 32)));
    rewriter.replaceOp(op, producing);
    return success();
  }
};

struct SetMaxRegistersLowering : ConvertOpToLLVMPattern<SetMaxRegistersOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SetMaxRegistersOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    ptx(rewriter, op.getLoc(), Type(),
        std::string("setmaxnreg.") + (op.getIncrease() ? "inc" : "dec") + ".sync.aligned.u32 " +
            std::to_string(op.getCount()) + ";",
        "", {}, true);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Ping-pong's turns: named barrier kTurnBarriers + w is consumer warpgroup w's, over both (256
/// threads); a take waits on its own, a pass arrives on the other's.
struct WarpgroupTurnLowering : ConvertOpToLLVMPattern<WarpgroupTurnOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(WarpgroupTurnOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value warpgroup = warpgroupIndex(rewriter, loc);
    switch (op.getKind()) {
    case TurnKind::first: // warpgroup 1 gives warpgroup 0 the first turn
      ptx(rewriter, loc, Type(),
          "{\n\t.reg .pred p;\n\tsetp.eq.u32 p, $0, 1;\n\t@p bar.arrive " + std::to_string(kTurnBarriers) +
              ", 256;\n\t}",
          "r", {warpgroup}, true);
      break;
    case TurnKind::take: {
      Value own = LLVM::AddOp::create(rewriter, loc, warpgroup, i32Constant(rewriter, loc, kTurnBarriers));
      NVVM::BarrierOp::create(rewriter, loc, TypeRange{}, own, i32Constant(rewriter, loc, 256), {}, Value{});
      break;
    }
    case TurnKind::pass: { // (nvvm.barrier.arrive does not translate to LLVM IR by itself)
      Value other = LLVM::SubOp::create(rewriter, loc, i32Constant(rewriter, loc, kTurnBarriers + 1), warpgroup);
      ptx(rewriter, loc, Type(), "bar.arrive $0, 256;", "r", {other}, true);
      break;
    }
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void populateMemoryOpPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<AddPtrLowering, LoadLowering, StoreLowering, AtomicRMWLowering, BulkAddLowering, MakeBlockPtrLowering,
               AdvanceLowering, BlockLoadLowering, BlockStoreLowering, SharedAllocLowering,
               AsyncCopyLowering, AsyncCommitLowering, AsyncWaitLowering, InitBarriersLowering,
               TmaLoadLowering, WaitBarrierLowering, ArriveBarrierLowering,
               InProducerWarpsLowering, SetMaxRegistersLowering, WarpgroupTurnLowering>(converter);
}

} // namespace tessera::tile::lowering
