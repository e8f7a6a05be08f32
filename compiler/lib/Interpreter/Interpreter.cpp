// The interpreter: tile programs before layouts, with every op's tensor semantics on the host.
#include "tessera/compiler/Interpreter.h"

#include "tessera/compiler/Dialect/Tile/TileDialect.h"
#include "tessera/dsl/fp16.h"
#include "tessera/error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

using namespace mlir;
using namespace tessera::tile;

namespace tessera::interpreter {
namespace {

std::mutex allocationsMutex;
std::map<uintptr_t, size_t> &allocations() {
  static std::map<uintptr_t, size_t> table;
  return table;
}

bool inside(uintptr_t address, size_t bytes) {
  std::lock_guard<std::mutex> lock(allocationsMutex);
  auto &table = allocations();
  auto it = table.upper_bound(address);
  if (it == table.begin())
    return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second;
}

/// A value of the program: a scalar (empty shape) or a tile, its elements as doubles (floats)
/// or int64 (integers, i1, pointer addresses); a block pointer keeps {base, shape..., strides...,
/// offsets...} in `ints`.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  size_t size() const { return floats.empty() ? ints.size() : floats.size(); }
};

int64_t numel(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

Type elementOf(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.getElementType();
  return type;
}


/// A double rounded to the precision of `type`.
double roundTo(double v, Type type) {
  if (type.isF64())
    return v;
  if (type.isF16())
    return from_half(to_half(static_cast<float>(v)));
  if (type.isBF16())
    return from_bf16(to_bf16(static_cast<float>(v)));
  return static_cast<float>(v);
}

/// `v` rounded to tf32 (10 mantissa bits, ties away from zero, as cvt.rna.tf32.f32 does).
double roundToTf32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) // inf and NaN pass through
    bits = (bits + 0x1000u) & ~0x1fffu;
  float rounded;
  std::memcpy(&rounded, &bits, 4);
  return rounded;
}

/// An int64 wrapped to the width of `type` (i1 as 0/1, others sign-extended).
int64_t wrapTo(int64_t v, Type type) {
  unsigned bits = isa<PointerType>(type) ? 64 : type.getIntOrFloatBitWidth();
  if (bits == 1)
    return v & 1;
  if (bits >= 64)
    return v;
  int64_t m = int64_t(1) << bits;
  v &= m - 1;
  return v >= m / 2 ? v - m : v;
}

/// The IEEE bits of `v` stored as `type` (f16, bf16, f32 or f64).
int64_t floatBits(double v, Type type) {
  if (type.isF16())
    return to_half(static_cast<float>(v));
  if (type.isBF16())
    return to_bf16(static_cast<float>(v));
  if (type.isF64()) {
    int64_t bits;
    std::memcpy(&bits, &v, 8);
    return bits;
  }
  float narrow = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &narrow, 4);
  return bits;
}

/// The float of `type` whose IEEE bits are `bits`.
double floatFromBits(int64_t bits, Type type) {
  if (type.isF16())
    return from_half(static_cast<uint16_t>(bits));
  if (type.isBF16())
    return from_bf16(static_cast<uint16_t>(bits));
  if (type.isF64()) {
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  uint32_t narrow = static_cast<uint32_t>(bits);
  float v;
  std::memcpy(&v, &narrow, 4);
  return v;
}

size_t storedBytes(Type type) {
  if (isa<PointerType>(type))
    return 8;
  return std::max<size_t>(1, type.getIntOrFloatBitWidth() / 8);
}

/// The elementwise arith/math ops the interpreter knows (conversions that only re-round or
/// re-wrap share one kind: rounding to the result type happens after every op).
enum class ElementwiseOp {
  addf, subf, mulf, divf, remf, negf, maximumf, minimumf, convertf, sitofp, uitofp, fptosi,
  addi, subi, muli, divsi, remsi, andi, ori, xori, shli, shrsi, maxsi, minsi, converti, extui,
  select, cmpi, cmpf, bitcast, exp, exp2, log, log2, sqrt, rsqrt, absf, absi, tanh, sin, cos,
  floor, ceil, erf, fma, unknown
};

ElementwiseOp classify(StringRef name) {
  using K = ElementwiseOp;
  return llvm::StringSwitch<K>(name)
      .Case("arith.addf", K::addf).Case("arith.subf", K::subf).Case("arith.mulf", K::mulf)
      .Case("arith.divf", K::divf).Case("arith.remf", K::remf).Case("arith.negf", K::negf)
      .Case("arith.maximumf", K::maximumf).Case("arith.minimumf", K::minimumf)
      .Cases({"arith.extf", "arith.truncf"}, K::convertf).Case("arith.sitofp", K::sitofp)
      .Case("arith.uitofp", K::uitofp).Case("arith.fptosi", K::fptosi).Case("arith.addi", K::addi)
      .Case("arith.subi", K::subi).Case("arith.muli", K::muli).Case("arith.divsi", K::divsi)
      .Case("arith.remsi", K::remsi).Case("arith.andi", K::andi).Case("arith.ori", K::ori)
      .Case("arith.xori", K::xori).Case("arith.shli", K::shli).Case("arith.shrsi", K::shrsi)
      .Case("arith.maxsi", K::maxsi).Case("arith.minsi", K::minsi)
      .Cases({"arith.extsi", "arith.trunci"}, K::converti).Case("arith.extui", K::extui)
      .Case("arith.select", K::select).Case("arith.cmpi", K::cmpi).Case("arith.cmpf", K::cmpf)
      .Case("arith.bitcast", K::bitcast).Case("math.exp", K::exp).Case("math.exp2", K::exp2)
      .Case("math.log", K::log).Case("math.log2", K::log2).Case("math.sqrt", K::sqrt)
      .Case("math.rsqrt", K::rsqrt).Case("math.absf", K::absf).Case("math.absi", K::absi)
      .Case("math.tanh", K::tanh).Case("math.sin", K::sin).Case("math.cos", K::cos)
      .Case("math.floor", K::floor).Case("math.ceil", K::ceil).Case("math.erf", K::erf)
      .Case("math.fma", K::fma).Default(K::unknown);
}

class Program {
public:
  Program(func::FuncOp func, const std::string &kernel, std::array<int64_t, 3> pid, std::array<int64_t, 3> grid)
      : func_(func), kernel_(kernel), pid_(pid), grid_(grid) {}

  void run(ArrayRef<Tensor> args) {
    for (auto [arg, value] : llvm::zip(func_.getArguments(), args))
      env_[arg] = value;
    runBlock(func_.getBody().front());
  }

private:
  func::FuncOp func_;
  std::string kernel_;
  std::array<int64_t, 3> pid_, grid_;
  llvm::DenseMap<Value, Tensor> env_;

  [[noreturn]] void fail(Operation *op, const std::string &message) {
    throw Error("interpreter: kernel '" + kernel_ + "' program (" + std::to_string(pid_[0]) + ", " +
                std::to_string(pid_[1]) + ", " + std::to_string(pid_[2]) + "): " +
                op->getName().getStringRef().str() + ": " + message);
  }

  /// The value of `v`, which an op before has defined. Never inserts: an insertion may grow
  /// env_ and move every Tensor, which a reference held by the caller would not survive.
  Tensor &get(Value v) {
    auto it = env_.find(v);
    if (it == env_.end())
      fail(v.getParentBlock()->getParentOp(), "a value used before the interpreter defined it");
    return it->second;
  }

  Tensor like(Value result, bool floats) {
    Tensor t;
    if (auto tensor = dyn_cast<RankedTensorType>(result.getType()))
      t.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    if (floats)
      t.floats.resize(numel(t.shape));
    else
      t.ints.resize(numel(t.shape));
    return t;
  }

  /// The storedBytes(type) bytes at `address`, zero-extended (hosts are little-endian, as the GPU).
  int64_t readBits(Operation *op, int64_t address, Type type, int64_t element) {
    check(op, address, type, element);
    int64_t bits = 0;
    std::memcpy(&bits, reinterpret_cast<const void *>(address), storedBytes(type));
    return bits;
  }

  double readFloat(Operation *op, int64_t address, Type type, int64_t element) {
    return floatFromBits(readBits(op, address, type, element), type);
  }

  int64_t readInt(Operation *op, int64_t address, Type type, int64_t element) {
    int64_t bits = readBits(op, address, type, element);
    return type.isInteger(1) ? bits != 0 : wrapTo(bits, type); // an i1 byte is true when nonzero
  }

  void write(Operation *op, int64_t address, Type type, int64_t element, double f, int64_t i) {
    check(op, address, type, element);
    int64_t bits = isa<FloatType>(type) ? floatBits(f, type) : i;
    std::memcpy(reinterpret_cast<void *>(address), &bits, storedBytes(type));
  }

  void check(Operation *op, int64_t address, Type type, int64_t element) {
    if (!inside(static_cast<uintptr_t>(address), storedBytes(type))) {
      char text[32];
      std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(address));
      fail(op, "element " + std::to_string(element) + " accesses " + text +
                   ", outside every allocation (an unmasked out-of-bounds access)");
    }
  }

  void runBlock(Block &block) {
    for (Operation &op : block)
      runOp(&op);
  }

  /// Row-major source index of each result element for shape ops.
  template <typename F> Tensor gather(Value src, Value result, F sourceIndex) {
    Tensor &s = get(src);
    Tensor out = like(result, !s.floats.empty());
    auto shape = cast<RankedTensorType>(result.getType()).getShape();
    std::vector<int64_t> coord(shape.size(), 0);
    for (int64_t e = 0; e < numel(shape); ++e) {
      int64_t from = sourceIndex(coord);
      if (!s.floats.empty())
        out.floats[e] = s.floats[from];
      else
        out.ints[e] = s.ints[from];
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        if (++coord[d] < shape[d])
          break;
        coord[d] = 0;
      }
    }
    return out;
  }

  void runOp(Operation *op) {
    if (isa<func::ReturnOp>(op))
      return;
    if (auto loop = dyn_cast<scf::ForOp>(op))
      return runFor(loop);
    if (auto branch = dyn_cast<scf::IfOp>(op))
      return runIf(branch);
    if (runTileOp(op) || runArith(op))
      return;
    fail(op, "not supported by the interpreter");
  }

  void runFor(scf::ForOp loop) {
    int64_t lo = get(loop.getLowerBound()).ints[0], hi = get(loop.getUpperBound()).ints[0],
            step = get(loop.getStep()).ints[0];
    if (step <= 0 && lo < hi)
      fail(loop, "loop step " + std::to_string(step) + " is not positive: the loop would never end");
    std::vector<Tensor> carried;
    for (Value init : loop.getInitArgs())
      carried.push_back(get(init));
    Block *body = loop.getBody();
    auto yield = cast<scf::YieldOp>(body->getTerminator());
    for (int64_t i = lo; i < hi; i += step) {
      Tensor iv;
      iv.ints = {i};
      env_[loop.getInductionVar()] = iv;
      for (auto [arg, value] : llvm::zip(loop.getRegionIterArgs(), carried))
        env_[arg] = value;
      for (Operation &op : body->without_terminator())
        runOp(&op);
      for (auto [slot, value] : llvm::zip(carried, yield.getOperands()))
        slot = get(value);
    }
    for (auto [result, value] : llvm::zip(loop.getResults(), carried))
      env_[result] = value;
  }

  void runIf(scf::IfOp branch) {
    Region &region = get(branch.getCondition()).ints[0] ? branch.getThenRegion() : branch.getElseRegion();
    if (region.empty())
      return;
    Block &block = region.front();
    for (Operation &op : block.without_terminator())
      runOp(&op);
    auto yield = cast<scf::YieldOp>(block.getTerminator());
    // Copied out first: env_[result] may grow the map and move the yielded value.
    for (auto [result, value] : llvm::zip(branch.getResults(), yield.getOperands())) {
      Tensor yielded = get(value);
      env_[result] = std::move(yielded);
    }
  }

  bool runTileOp(Operation *op);
  bool runArith(Operation *op);
  void runReduce(ReduceOp op);
  void runDot(DotOp op);
  void runBlockMemory(Operation *op, Value ptr, ArrayRef<int32_t> checked, Value stored);
};

bool Program::runTileOp(Operation *op) {
  auto set = [&](Tensor t) { env_[op->getResult(0)] = std::move(t); };
  if (auto p = dyn_cast<ProgramIdOp>(op)) {
    Tensor t;
    t.ints = {pid_[static_cast<int>(p.getAxis())]};
    set(t);
  } else if (auto n = dyn_cast<NumProgramsOp>(op)) {
    Tensor t;
    t.ints = {grid_[static_cast<int>(n.getAxis())]};
    set(t);
  } else if (auto range = dyn_cast<MakeRangeOp>(op)) {
    Tensor t = like(range, false);
    for (size_t e = 0; e < t.ints.size(); ++e)
      t.ints[e] = static_cast<int32_t>(range.getStart()) + static_cast<int64_t>(e);
    set(t);
  } else if (auto splat = dyn_cast<SplatOp>(op)) {
    Tensor &s = get(splat.getSrc());
    Tensor t = like(splat, !s.floats.empty());
    if (!s.floats.empty())
      std::fill(t.floats.begin(), t.floats.end(), s.floats[0]);
    else
      std::fill(t.ints.begin(), t.ints.end(), s.ints[0]);
    set(t);
  } else if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
    auto src = broadcast.getSrc().getType().getShape();
    set(gather(broadcast.getSrc(), broadcast, [&](const std::vector<int64_t> &c) {
      int64_t index = 0;
      for (size_t d = 0; d < c.size(); ++d)
        index = index * src[d] + (src[d] == 1 ? 0 : c[d]);
      return index;
    }));
  } else if (isa<ExpandDimsOp, ReshapeOp, ConvertLayoutOp>(op)) {
    Tensor t = get(op->getOperand(0));
    auto shape = cast<RankedTensorType>(op->getResult(0).getType()).getShape();
    t.shape.assign(shape.begin(), shape.end());
    set(t);
  } else if (auto trans = dyn_cast<TransOp>(op)) {
    auto src = trans.getSrc().getType().getShape();
    auto order = trans.getOrder();
    set(gather(trans.getSrc(), trans, [&](const std::vector<int64_t> &c) {
      std::vector<int64_t> s(c.size());
      for (size_t i = 0; i < order.size(); ++i)
        s[order[i]] = c[i];
      int64_t index = 0;
      for (size_t d = 0; d < s.size(); ++d)
        index = index * src[d] + s[d];
      return index;
    }));
  } else if (auto addptr = dyn_cast<AddPtrOp>(op)) {
    Tensor t = get(addptr.getPtr());
    Tensor &off = get(addptr.getOffset());
    int64_t bytes = storedBytes(getPointeeType(elementOf(addptr.getPtr().getType())));
    for (size_t e = 0; e < t.ints.size(); ++e)
      t.ints[e] += off.ints[e] * bytes;
    set(t);
  } else if (auto load = dyn_cast<LoadOp>(op)) {
    Tensor &ptr = get(load.getPtr());
    Type element = elementOf(load.getType());
    Tensor t = like(load, isa<FloatType>(element));
    for (size_t e = 0; e < ptr.ints.size(); ++e) {
      bool on = !load.getMask() || get(load.getMask()).ints[e];
      if (isa<FloatType>(element))
        t.floats[e] = on ? readFloat(op, ptr.ints[e], element, e) : (load.getOther() ? get(load.getOther()).floats[e] : 0.0);
      else
        t.ints[e] = on ? readInt(op, ptr.ints[e], element, e) : (load.getOther() ? get(load.getOther()).ints[e] : 0);
    }
    set(t);
  } else if (auto store = dyn_cast<StoreOp>(op)) {
    Tensor &ptr = get(store.getPtr()), &value = get(store.getValue());
    Type element = elementOf(store.getValue().getType());
    for (size_t e = 0; e < ptr.ints.size(); ++e)
      if (!store.getMask() || get(store.getMask()).ints[e])
        write(op, ptr.ints[e], element, e, value.floats.empty() ? 0 : value.floats[e],
              value.ints.empty() ? 0 : value.ints[e]);
  } else if (auto add = dyn_cast<BulkAddOp>(op)) {
    int64_t dst = get(add.getDst()).ints[0];
    if (dst % 16)
      fail(op, "adds at an address that is not 16-byte aligned (the bulk copy needs it)");
    Tensor &values = get(add.getValues());
    Type element = elementOf(add.getValues().getType());
    const int64_t cols = cast<RankedTensorType>(add.getValues().getType()).getDimSize(1);
    for (size_t e = 0; e < values.floats.size(); ++e) {
      int64_t row = static_cast<int64_t>(e) / cols, col = static_cast<int64_t>(e) % cols;
      if (add.getSwizzled())
        col ^= 8 * (row % 4);
      int64_t address = dst + (row * cols + col) * 4;
      write(op, address, element, e, roundTo(readFloat(op, address, element, e) + values.floats[e], element), 0);
    }
  } else if (auto atomic = dyn_cast<AtomicRMWOp>(op)) {
    Tensor &ptr = get(atomic.getPtr()), &value = get(atomic.getValue());
    Type element = elementOf(atomic.getType());
    bool fl = isa<FloatType>(element);
    Tensor old = like(atomic, fl);
    for (size_t e = 0; e < ptr.ints.size(); ++e) {
      if (atomic.getMask() && !get(atomic.getMask()).ints[e])
        continue;
      if (fl) {
        double prev = readFloat(op, ptr.ints[e], element, e), v = value.floats[e], next = v;
        if (atomic.getKind() == AtomicKind::add) next = prev + v;
        else if (atomic.getKind() == AtomicKind::max) next = std::max(prev, v);
        else if (atomic.getKind() == AtomicKind::min) next = std::min(prev, v);
        write(op, ptr.ints[e], element, e, roundTo(next, element), 0);
        old.floats[e] = prev;
      } else {
        int64_t prev = readInt(op, ptr.ints[e], element, e), v = value.ints[e], next = v;
        switch (atomic.getKind()) {
        case AtomicKind::add: next = prev + v; break;
        case AtomicKind::max: next = std::max(prev, v); break;
        case AtomicKind::min: next = std::min(prev, v); break;
        case AtomicKind::bit_and: next = prev & v; break;
        case AtomicKind::bit_or: next = prev | v; break;
        case AtomicKind::bit_xor: next = prev ^ v; break;
        case AtomicKind::xchg: next = v; break;
        }
        write(op, ptr.ints[e], element, e, 0, wrapTo(next, element));
        old.ints[e] = prev;
      }
    }
    set(old);
  } else if (auto reduce = dyn_cast<ReduceOp>(op)) {
    runReduce(reduce);
  } else if (auto dot = dyn_cast<DotOp>(op)) {
    runDot(dot);
  } else if (auto print = dyn_cast<PrintOp>(op)) {
    for (Value arg : print.getArgs()) {
      Tensor &t = get(arg);
      std::printf("pid (%lld, %lld, %lld) %s", (long long)pid_[0], (long long)pid_[1], (long long)pid_[2],
                  print.getPrefix().str().c_str());
      for (size_t e = 0; e < t.size(); ++e)
        t.floats.empty() ? std::printf(" %lld", (long long)t.ints[e]) : std::printf(" %f", t.floats[e]);
      std::printf("\n");
    }
    if (print.getArgs().empty())
      std::printf("pid (%lld, %lld, %lld) %s\n", (long long)pid_[0], (long long)pid_[1], (long long)pid_[2],
                  print.getPrefix().str().c_str());
  } else if (auto make = dyn_cast<MakeBlockPtrOp>(op)) {
    Tensor t;
    t.ints.push_back(get(make.getBase()).ints[0]);
    for (Value v : make.getShape()) t.ints.push_back(get(v).ints[0]);
    for (Value v : make.getStrides()) t.ints.push_back(get(v).ints[0]);
    for (Value v : make.getOffsets()) t.ints.push_back(get(v).ints[0]);
    set(t);
  } else if (auto advance = dyn_cast<AdvanceOp>(op)) {
    Tensor t = get(advance.getPtr());
    size_t rank = advance.getOffsets().size();
    for (size_t d = 0; d < rank; ++d)
      t.ints[1 + 2 * rank + d] += get(advance.getOffsets()[d]).ints[0];
    set(t);
  } else if (auto load = dyn_cast<BlockLoadOp>(op)) {
    runBlockMemory(op, load.getPtr(), load.getBoundaryCheck(), Value());
  } else if (auto store = dyn_cast<BlockStoreOp>(op)) {
    runBlockMemory(op, store.getPtr(), store.getBoundaryCheck(), store.getValue());
  } else {
    return false;
  }
  return true;
}

void Program::runBlockMemory(Operation *op, Value ptr, ArrayRef<int32_t> checked, Value stored) {
  Tensor &bp = get(ptr);
  auto block = cast<BlockPointerType>(ptr.getType()).getBlockType();
  size_t rank = block.getRank();
  Type element = block.getElementType();
  int64_t bytes = storedBytes(element);
  Tensor out = like(stored ? stored : op->getResult(0), isa<FloatType>(element));
  std::vector<int64_t> coord(rank, 0);
  for (int64_t e = 0; e < numel(block.getShape()); ++e) {
    int64_t address = bp.ints[0];
    bool inBounds = true;
    for (size_t d = 0; d < rank; ++d) {
      int64_t index = bp.ints[1 + 2 * rank + d] + coord[d];
      address += index * bp.ints[1 + rank + d] * bytes;
      if (llvm::is_contained(checked, static_cast<int32_t>(d)))
        inBounds &= index >= 0 && index < bp.ints[1 + d];
    }
    if (stored) {
      Tensor &v = get(stored);
      if (inBounds)
        write(op, address, element, e, v.floats.empty() ? 0 : v.floats[e], v.ints.empty() ? 0 : v.ints[e]);
    } else if (isa<FloatType>(element)) {
      out.floats[e] = inBounds ? readFloat(op, address, element, e)
                               : (cast<BlockLoadOp>(op).getPadding() == Padding::nan ? NAN : 0.0);
    } else {
      out.ints[e] = inBounds ? readInt(op, address, element, e) : 0;
    }
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      if (++coord[d] < block.getDimSize(d))
        break;
      coord[d] = 0;
    }
  }
  if (!stored)
    env_[op->getResult(0)] = out;
}

void Program::runReduce(ReduceOp op) {
  Tensor &src = get(op.getSrc());
  auto shape = op.getSrc().getType().getShape();
  int axis = static_cast<int>(op.getAxis());
  int64_t outer = numel(shape.take_front(axis)), n = shape[axis], inner = numel(shape.drop_front(axis + 1));
  bool fl = !src.floats.empty();
  ReduceKind kind = op.getKind();
  bool index = kind == ReduceKind::argmax || kind == ReduceKind::argmin;
  Tensor out = like(op, fl && !index);
  Type element = op.getSrc().getType().getElementType();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * n + k) * inner + i; };
      if (fl) {
        double acc = src.floats[at(0)];
        int64_t best = 0;
        for (int64_t k = 1; k < n; ++k) {
          double v = src.floats[at(k)];
          if (kind == ReduceKind::sum) acc = roundTo(acc + v, element);
          else if (kind == ReduceKind::max) acc = (std::isnan(acc) || std::isnan(v)) ? NAN : std::max(acc, v);
          else if (kind == ReduceKind::min) acc = (std::isnan(acc) || std::isnan(v)) ? NAN : std::min(acc, v);
          else if ((kind == ReduceKind::argmax && v > acc) || (kind == ReduceKind::argmin && v < acc)) {
            acc = v;
            best = k;
          }
        }
        if (index) out.ints[o * inner + i] = best;
        else out.floats[o * inner + i] = acc;
      } else {
        int64_t acc = src.ints[at(0)], best = 0;
        for (int64_t k = 1; k < n; ++k) {
          int64_t v = src.ints[at(k)];
          if (kind == ReduceKind::sum) acc = wrapTo(acc + v, element);
          else if (kind == ReduceKind::max) acc = std::max(acc, v);
          else if (kind == ReduceKind::min) acc = std::min(acc, v);
          else if ((kind == ReduceKind::argmax && v > acc) || (kind == ReduceKind::argmin && v < acc)) {
            acc = v;
            best = k;
          }
        }
        out.ints[o * inner + i] = index ? best : acc;
      }
    }
  env_[op.getResult()] = out;
}

/// fp32 (or i32) accumulation of products of the inputs, which already carry their dtype's
/// rounding; the result rounds to the accumulator's type.
void Program::runDot(DotOp op) {
  Tensor &a = get(op.getA()), &b = get(op.getB());
  Tensor out = get(op.getAcc());
  int64_t M = op.getType().getDimSize(0), N = op.getType().getDimSize(1), K = op.getA().getType().getDimSize(1);
  Type acc = op.getType().getElementType();
  bool fl = !a.floats.empty();
  // tf32 keeps 10 mantissa bits; tf32x3 splits each input in three tf32 parts and recovers
  // (nearly) f32 products, so it runs as ieee here.
  bool tf32 = op.getInputPrecision() == InputPrecision::tf32;
  const bool exact = acc.isF64();
  auto input = [&](double v) { return tf32 ? roundToTf32(static_cast<float>(v)) : v; };
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      if (fl) {
        double sum = out.floats[m * N + n];
        for (int64_t k = 0; k < K; ++k) {
          sum += input(a.floats[m * K + k]) * input(b.floats[k * N + n]);
          if (!exact) // f16 accumulators also sum in f32, as mma does
            sum = static_cast<float>(sum);
        }
        out.floats[m * N + n] = roundTo(sum, acc);
      } else {
        int64_t sum = out.ints[m * N + n];
        for (int64_t k = 0; k < K; ++k)
          sum += a.ints[m * K + k] * b.ints[k * N + n];
        out.ints[m * N + n] = wrapTo(sum, acc);
      }
    }
  env_[op.getResult()] = out;
}

bool Program::runArith(Operation *op) {
  if (op->getNumResults() != 1)
    return false;
  Value result = op->getResult(0);
  Type element = elementOf(result.getType());
  StringRef name = op->getName().getStringRef();
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    Attribute value = constant.getValue();
    if (auto dense = dyn_cast<DenseElementsAttr>(value))
      value = dense.getSplatValue<Attribute>();
    bool fl = isa<FloatType>(element);
    Tensor t = like(result, fl);
    if (fl)
      std::fill(t.floats.begin(), t.floats.end(), cast<FloatAttr>(value).getValueAsDouble());
    else
      std::fill(t.ints.begin(), t.ints.end(),
                element.isInteger(1) ? (cast<IntegerAttr>(value).getValue().getBoolValue() ? 1 : 0)
                                     : cast<IntegerAttr>(value).getValue().getSExtValue());
    env_[result] = t;
    return true;
  }
  ElementwiseOp kind = classify(name);
  if (kind == ElementwiseOp::unknown)
    return false;
  std::vector<Tensor *> in;
  for (Value v : op->getOperands())
    in.push_back(&get(v));
  bool outFloat = isa<FloatType>(element);
  Tensor out = like(result, outFloat);
  size_t n = out.size();
  auto F = [&](int k, size_t e) { return in[k]->floats[e]; };
  auto I = [&](int k, size_t e) { return in[k]->ints[e]; };
  Type from = elementOf(op->getOperand(0).getType());
  const int64_t fromBits = isa<PointerType>(from) ? 64 : from.getIntOrFloatBitWidth();
  const uint64_t fromMask = fromBits >= 64 ? ~uint64_t(0) : (uint64_t(1) << fromBits) - 1;
  auto cmpi = dyn_cast<arith::CmpIOp>(op);
  auto cmpf = dyn_cast<arith::CmpFOp>(op);
  if (cmpf && !llvm::is_contained({arith::CmpFPredicate::OEQ, arith::CmpFPredicate::OGT, arith::CmpFPredicate::OGE,
                                   arith::CmpFPredicate::OLT, arith::CmpFPredicate::OLE, arith::CmpFPredicate::UNE},
                                  cmpf.getPredicate()))
    fail(op, "unsupported float predicate");
  // Decided once per op; the loop below only switches on the kind.
  for (size_t e = 0; e < n; ++e) {
    double f = 0;
    int64_t i = 0;
    switch (kind) {
    case ElementwiseOp::addf: f = F(0, e) + F(1, e); break;
    case ElementwiseOp::subf: f = F(0, e) - F(1, e); break;
    case ElementwiseOp::mulf: f = F(0, e) * F(1, e); break;
    case ElementwiseOp::divf: f = F(0, e) / F(1, e); break;
    case ElementwiseOp::remf: f = std::fmod(F(0, e), F(1, e)); break;
    case ElementwiseOp::negf: f = -F(0, e); break;
    case ElementwiseOp::maximumf:
      f = (std::isnan(F(0, e)) || std::isnan(F(1, e))) ? NAN : std::max(F(0, e), F(1, e));
      break;
    case ElementwiseOp::minimumf:
      f = (std::isnan(F(0, e)) || std::isnan(F(1, e))) ? NAN : std::min(F(0, e), F(1, e));
      break;
    case ElementwiseOp::convertf: f = F(0, e); break;
    case ElementwiseOp::sitofp: f = static_cast<double>(I(0, e)); break;
    case ElementwiseOp::uitofp: f = static_cast<double>(static_cast<uint64_t>(I(0, e)) & fromMask); break;
    case ElementwiseOp::fptosi: i = static_cast<int64_t>(std::trunc(F(0, e))); break;
    case ElementwiseOp::addi: i = I(0, e) + I(1, e); break;
    case ElementwiseOp::subi: i = I(0, e) - I(1, e); break;
    case ElementwiseOp::muli: i = I(0, e) * I(1, e); break;
    case ElementwiseOp::divsi:
    case ElementwiseOp::remsi:
      if (I(1, e) == 0)
        fail(op, "integer division by zero at element " + std::to_string(e));
      i = kind == ElementwiseOp::divsi ? I(0, e) / I(1, e) : I(0, e) % I(1, e);
      break;
    case ElementwiseOp::andi: i = I(0, e) & I(1, e); break;
    case ElementwiseOp::ori: i = I(0, e) | I(1, e); break;
    case ElementwiseOp::xori: i = I(0, e) ^ I(1, e); break;
    case ElementwiseOp::shli: i = I(0, e) << I(1, e); break;
    case ElementwiseOp::shrsi: i = I(0, e) >> I(1, e); break;
    case ElementwiseOp::maxsi: i = std::max(I(0, e), I(1, e)); break;
    case ElementwiseOp::minsi: i = std::min(I(0, e), I(1, e)); break;
    case ElementwiseOp::converti: i = I(0, e); break;
    case ElementwiseOp::extui: i = static_cast<int64_t>(static_cast<uint64_t>(I(0, e)) & fromMask); break;
    case ElementwiseOp::select: {
      bool c = in[0]->ints[in[0]->ints.size() == 1 ? 0 : e];
      if (outFloat)
        f = c ? F(1, e) : F(2, e);
      else
        i = c ? I(1, e) : I(2, e);
      break;
    }
    case ElementwiseOp::cmpi: {
      int64_t x = I(0, e), y = I(1, e);
      uint64_t ux = static_cast<uint64_t>(x) & fromMask, uy = static_cast<uint64_t>(y) & fromMask;
      switch (cmpi.getPredicate()) {
      case arith::CmpIPredicate::eq: i = x == y; break;
      case arith::CmpIPredicate::ne: i = x != y; break;
      case arith::CmpIPredicate::slt: i = x < y; break;
      case arith::CmpIPredicate::sle: i = x <= y; break;
      case arith::CmpIPredicate::sgt: i = x > y; break;
      case arith::CmpIPredicate::sge: i = x >= y; break;
      case arith::CmpIPredicate::ult: i = ux < uy; break;
      case arith::CmpIPredicate::ule: i = ux <= uy; break;
      case arith::CmpIPredicate::ugt: i = ux > uy; break;
      case arith::CmpIPredicate::uge: i = ux >= uy; break;
      }
      break;
    }
    case ElementwiseOp::cmpf: {
      double x = F(0, e), y = F(1, e);
      bool unordered = std::isnan(x) || std::isnan(y);
      switch (cmpf.getPredicate()) {
      case arith::CmpFPredicate::OEQ: i = !unordered && x == y; break;
      case arith::CmpFPredicate::OGT: i = !unordered && x > y; break;
      case arith::CmpFPredicate::OGE: i = !unordered && x >= y; break;
      case arith::CmpFPredicate::OLT: i = !unordered && x < y; break;
      case arith::CmpFPredicate::OLE: i = !unordered && x <= y; break;
      default: i = unordered || x != y; break; // UNE, the only other one admitted above
      }
      break;
    }
    case ElementwiseOp::bitcast:
      if (isa<FloatType>(from) && !outFloat)
        i = floatBits(F(0, e), from);
      else if (!isa<FloatType>(from) && outFloat)
        f = floatFromBits(I(0, e), element);
      else if (outFloat)
        f = F(0, e);
      else
        i = I(0, e);
      break;
    case ElementwiseOp::exp: f = std::exp(F(0, e)); break;
    case ElementwiseOp::exp2: f = std::exp2(F(0, e)); break;
    case ElementwiseOp::log: f = std::log(F(0, e)); break;
    case ElementwiseOp::log2: f = std::log2(F(0, e)); break;
    case ElementwiseOp::sqrt: f = std::sqrt(F(0, e)); break;
    case ElementwiseOp::rsqrt: f = 1.0 / std::sqrt(F(0, e)); break;
    case ElementwiseOp::absf: f = std::fabs(F(0, e)); break;
    case ElementwiseOp::absi: i = std::llabs(I(0, e)); break;
    case ElementwiseOp::tanh: f = std::tanh(F(0, e)); break;
    case ElementwiseOp::sin: f = std::sin(F(0, e)); break;
    case ElementwiseOp::cos: f = std::cos(F(0, e)); break;
    case ElementwiseOp::floor: f = std::floor(F(0, e)); break;
    case ElementwiseOp::ceil: f = std::ceil(F(0, e)); break;
    case ElementwiseOp::erf: f = std::erf(F(0, e)); break;
    case ElementwiseOp::fma: f = std::fma(F(0, e), F(1, e), F(2, e)); break;
    case ElementwiseOp::unknown: break;
    }
    if (outFloat)
      out.floats[e] = roundTo(f, element);
    else
      out.ints[e] = wrapTo(i, element);
  }
  env_[result] = out;
  return true;
}

} // namespace

bool enabled() {
  const char *env = std::getenv("TESSERA_INTERPRET");
  return env && *env && std::string(env) != "0";
}

void register_allocation(const void *base, size_t bytes) {
  std::lock_guard<std::mutex> lock(allocationsMutex);
  allocations()[reinterpret_cast<uintptr_t>(base)] = bytes;
}

void unregister_allocation(const void *base) {
  std::lock_guard<std::mutex> lock(allocationsMutex);
  allocations().erase(reinterpret_cast<uintptr_t>(base));
}

void run(const dsl::TracedKernel &traced, dsl::Grid grid, const dsl::LaunchArg *args, size_t count) {
  DialectRegistry registry;
  registry.insert<TileDialect, arith::ArithDialect, math::MathDialect, scf::SCFDialect, func::FuncDialect>();
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(traced.str(), &context);
  if (!module)
    throw Error("interpreter: kernel '" + traced.name() + "': the traced IR does not parse back");
  func::FuncOp func;
  module->walk([&](func::FuncOp f) { func = f; });
  std::vector<Tensor> values;
  for (size_t i = 0; i < count; ++i) {
    Tensor t;
    Type type = func.getArgument(i).getType();
    if (isa<FloatType>(type))
      t.floats = {args[i].kind() == dsl::LaunchArg::Kind::Float ? args[i].floating() : static_cast<double>(args[i].integer())};
    else
      t.ints = {args[i].integer()};
    values.push_back(t);
  }
  std::array<int64_t, 3> dims{grid.x, grid.y, grid.z};
  for (int64_t z = 0; z < dims[2]; ++z)
    for (int64_t y = 0; y < dims[1]; ++y)
      for (int64_t x = 0; x < dims[0]; ++x)
        Program(func, traced.name(), {x, y, z}, dims).run(values);
}

} // namespace tessera::interpreter
