// Every misuse of the DSL throws tessera::Error naming the kernel, the op and what is wrong.
#include "test_util.h"

#include <tessera/dsl.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using ::testing::HasSubstr;

using Args = tessera::testing::ProbeArgs;

struct ErrorCase {
  const char *name;
  std::function<void(Args &)> body;
  const char *expected; // substring of the message after "kernel 'bad' {...}: "
};

std::string traceError(const std::function<void(Args &)> &body) {
  Kernel k = tessera::testing::probe("bad", body);
  try {
    k.trace({{"BLOCK", 64}});
  } catch (const Error &error) {
    return error.what();
  }
  return "no error";
}

Tile r16() { return arange(0, 16); }
Tile grid16() { return expand_dims(r16(), 1) * 16 + expand_dims(r16(), 0); }

const ErrorCase kCases[] = {
    // Config and tracing state
    {"MissingConfigKey", [](Args &) { arange(0, Config{{"BLOCK", 64}}["BLOK"]); },
     "config has no meta parameter 'BLOK'"},
    {"NullTile", [](Args &a) { store(a.x, Tile()); }, "store: got a null tile"},
    {"ValueEscapesLoop",
     [](Args &a) {
       Tile inner;
       for_range(0, a.n, 1, [&](Tile i) { inner = i + 1; });
       store(a.ip, inner);
     },
     "uses a value made inside a for_range/if_ body after that body ended; list its variable"},
    {"ValueEscapesIf",
     [](Args &a) {
       Tile inner;
       if_(a.n > 0, [&] { inner = a.n * 2; });
       store(a.ip, inner);
     },
     "after that body ended"},
    // for_range / if_
    {"LoopBoundNotInteger", [](Args &a) { for_range(0, a.f, 1, [](Tile) {}); },
     "for_range: upper bound must be a scalar integer, got f32"},
    {"LoopBoundBool", [](Args &a) { for_range(a.n > 0, 4, 1, [](Tile) {}); },
     "for_range: lower bound must be a scalar integer, got i1"},
    {"LoopStepNotPositive", [](Args &a) { for_range(0, a.n, 0, [](Tile) {}); },
     "for_range: step must be positive, got literal 0"},
    {"LoopCarriedNull",
     [](Args &a) {
       Tile acc;
       for_range(0, a.n, 1, {acc}, [](Tile) {});
     },
     "for_range: carried variable #0 is a null tile"},
    {"LoopCarriedChangesType",
     [](Args &a) {
       Tile acc = zeros({16}, DType::f32);
       for_range(0, a.n, 1, {acc}, [&](Tile) { acc = acc.to<f16>(); });
     },
     "for_range: carried variable #0 was f32[16] before and is f16[16] at the end of the body"},
    {"LoopCarriedChangesShape",
     [](Args &a) {
       Tile acc = zeros({16}, DType::f32);
       for_range(0, a.n, 1, {acc}, [&](Tile) { acc = zeros({32}, DType::f32); });
     },
     "was f32[16] before and is f32[32]"},
    {"IfConditionTile", [](Args &a) { if_(r16() < a.n, [] {}); },
     "if_: the condition must be a scalar i1, got i1[16] (use where() to select elementwise)"},
    {"IfConditionInt", [](Args &a) { if_(a.n, [] {}); },
     "if_: the condition must be a scalar i1, got i32 (compare it, e.g. x != 0)"},
    {"IfCarriedChangesType",
     [](Args &a) {
       Tile v = a.n;
       if_(a.n > 0, {v}, [&] { v = a.f; });
     },
     "if_: carried variable #0 was i32 before and is f32"},
    // Shapes
    {"ArangeNotPowerOfTwo", [](Args &) { arange(0, 100); },
     "arange: tile shape [100] has dimension 100; tile dimensions must be powers of two"},
    {"ArangeEmpty", [](Args &) { arange(8, 8); }, "arange: range [8, 8) must be non-empty"},
    {"FullNotPowerOfTwo", [](Args &) { zeros({16, 24}, DType::f32); },
     "full: tile shape [16x24] has dimension 24"},
    {"FullNonScalarValue", [](Args &) { full({16}, r16()); },
     "full: the fill value must be a scalar, got i32[16]"},
    {"BroadcastMismatch", [](Args &) { arange(0, 16) + arange(0, 32); },
     "add: cannot broadcast i32[16] with i32[32]"},
    {"BroadcastToMismatch", [](Args &) { broadcast_to(r16(), {32}); },
     "broadcast_to: cannot broadcast i32[16] to [32]"},
    {"BroadcastToNotPowerOfTwo", [](Args &) { broadcast_to(r16(), {3, 16}); },
     "broadcast_to: tile shape [3x16] has dimension 3"},
    {"ExpandDimsAxis", [](Args &) { expand_dims(r16(), 2); },
     "expand_dims: axis 2 is out of range for i32[16]"},
    {"ReshapeCount", [](Args &) { reshape(r16(), {4, 8}); },
     "reshape: cannot reshape i32[16] (16 elements) to [4x8] (32 elements)"},
    {"ReshapeNotPowerOfTwo", [](Args &) { reshape(r16(), {16, 3}); },
     "reshape: tile shape [16x3] has dimension 3"},
    {"PermuteNotPermutation", [](Args &) { permute(grid16(), {0, 0}); },
     "permute: order {0, 0} is not a permutation of the dimensions of i32[16x16]"},
    {"TransNot2D", [](Args &) { trans(r16()); },
     "trans: needs a 2-D tile, got i32[16] (use permute for other ranks)"},
    // Literals and promotion
    {"FloatLiteralIntoInt", [](Args &a) { store(a.ip, 1.5); },
     "store: literal 1.5 cannot become an integer i32 implicitly"},
    {"LiteralOutOfRange", [](Args &) { r16().to<i8>() + 300; },
     "add: literal 300 does not fit in i8"},
    {"MixPointersAndNumbers", [](Args &a) { where(a.n > 0, a.x, a.f); },
     "where: mixes pointers with other types"},
    {"LiteralIntoPointer", [](Args &a) { where(a.n > 0, a.x, 0); },
     "where: literal 0 cannot become a ptr<f32>"},
    // Arithmetic
    {"PointerTimesInt", [](Args &a) { a.x * 2; },
     "mul: pointers take only ptr + int, int + ptr and ptr - int"},
    {"PointerPlusPointer", [](Args &a) { a.x + a.x; }, "add: pointers take only"},
    {"IntMinusPointer", [](Args &a) { 1 - a.x; }, "sub: pointers take only"},
    {"PointerPlusFloat", [](Args &a) { a.x + 1.5; },
     "add: pointer offsets must be integers, got ptr<f32> and literal 1.5"},
    {"BlockPointerArithmetic",
     [](Args &a) { make_block_ptr(a.h, {a.n}, {1}, {0}, {16}) + 1; },
     "add: block pointers move with advance()"},
    {"BoolArithmetic", [](Args &a) { (a.n > 0) + (a.n < 5); },
     "add: arithmetic on i1 (i1 and i1); cast to i32 first"},
    {"BitwiseOnFloat", [](Args &a) { a.f & 1; }, "and: needs integer operands, got f32 and literal 1"},
    {"ShiftOnFloat", [](Args &a) { a.f << 1; }, "shl: needs integer operands"},
    {"LogicalOnInt", [](Args &a) { a.n && a.n; }, "logical_and: needs i1 operands, got i32 and i32"},
    {"NotOnInt", [](Args &a) { !a.n; }, "logical_not: needs i1 operands"},
    {"ComparePointers", [](Args &a) { a.x < a.x; }, "lt: does not apply to pointers"},
    {"NegatePointer", [](Args &a) { -a.x; }, "neg: does not apply to pointers"},
    // Casts
    {"CastPointer", [](Args &a) { a.x.to<f32>(); }, "to: cannot convert ptr<f32> to f32"},
    {"CastBlockPointer", [](Args &a) { make_block_ptr(a.h, {a.n}, {1}, {0}, {16}).to<f32>(); },
     "to: cannot convert block_ptr<f16[16]> to f32"},
    {"BitcastWidth", [](Args &) { r16().bitcast(DType::f16); },
     "bitcast: cannot reinterpret i32[16] as f16 (widths must match)"},
    {"BitcastPointer", [](Args &a) { a.x.bitcast(DType::i64); }, "bitcast: cannot reinterpret ptr<f32>"},
    // Elementwise math
    {"ExpOfInt", [](Args &) { exp(r16()); },
     "exp: needs a float tile, got i32[16] (convert with .to(DType::f32))"},
    {"AbsOfBool", [](Args &a) { abs(a.n > 0); }, "abs: needs numbers, got i1"},
    {"AbsOfPointer", [](Args &a) { abs(a.x); }, "abs: needs numbers, got ptr<f32>"},
    {"FmaOfInts", [](Args &) { fma(r16(), r16(), r16()); }, "fma: needs floats"},
    {"CdivOfFloats", [](Args &a) { cdiv(a.f, 2); }, "cdiv: needs integers, got f32 and literal 2"},
    {"WhereConditionNotBool", [](Args &a) { where(a.n, 1, 2); }, "where: the condition must be i1, got i32"},
    {"MaximumOfPointers", [](Args &a) { maximum(a.x, a.x); }, "maximum: does not apply to pointers"},
    // Grid
    {"ProgramIdAxis", [](Args &) { program_id(3); }, "program_id: axis must be 0, 1 or 2, got 3"},
    {"NumProgramsAxis", [](Args &) { num_programs(-1); }, "num_programs: axis must be 0, 1 or 2, got -1"},
    // Reductions
    {"ReduceAxis", [](Args &) { sum(grid16(), 2); }, "sum: axis 2 is out of range for i32[16x16]"},
    {"ReduceScalar", [](Args &a) { max(a.f, 0); }, "max: needs a tile of numbers, got f32"},
    {"ReduceBool", [](Args &) { sum(r16() < 3, 0); }, "sum: of i1[16] is not supported; convert to i32 first"},
    {"ReducePointers", [](Args &a) { min(a.x + r16(), 0); }, "min: needs a tile of numbers, got ptr<f32>[16]"},
    // dot
    {"DotNot2D", [](Args &a) { dot(load(a.h + r16()), load(a.h + r16())); },
     "dot: needs two 2-D tiles of numbers, got f16[16] and f16[16]"},
    {"DotInner",
     [](Args &a) { dot(load(a.h + grid16()), reshape(load(a.h + grid16()), {32, 8})); },
     "dot: inner dimensions differ: f16[16x16] and f16[32x8]"},
    {"DotDtypes", [](Args &a) { dot(load(a.h + grid16()), load(a.x + grid16())); },
     "dot: operands have different dtypes: f16[16x16] and f32[16x16]"},
    {"DotSmall",
     [](Args &a) { dot(reshape(load(a.h + grid16()), {32, 8}), reshape(load(a.h + grid16()), {8, 32})); },
     "dot: every dimension must be at least 16, got f16[32x8] and f16[8x32]"},
    {"DotTf32OnF16", [](Args &a) { dot(load(a.h + grid16()), load(a.h + grid16()), {}, Precision::tf32); },
     "dot: tf32 precisions apply to f32 inputs, not f16[16x16] and f16[16x16]"},
    {"DotUnsupportedDtype", [](Args &a) { dot(load(a.ip + grid16()), load(a.ip + grid16())); },
     "dot: unsupported operand dtype: i32[16x16] and i32[16x16] (f16, bf16, f32, i8)"},
    {"DotAccShape",
     [](Args &a) { dot(load(a.h + grid16()), load(a.h + grid16()), zeros({16, 32}, DType::f32)); },
     "dot: acc f32[16x32] is not [16x16] for f16[16x16] and f16[16x16]"},
    {"DotAccDtype",
     [](Args &a) { dot(load(a.h + grid16()), load(a.h + grid16()), zeros({16, 16}, DType::bf16)); },
     "dot: acc bf16[16x16] cannot accumulate f16[16x16] and f16[16x16]"},
    // load / store
    {"LoadNotPointer", [](Args &a) { load(a.n); }, "load: needs pointers, got i32"},
    {"LoadOtherWithoutMask", [](Args &a) { load(a.x + r16(), {}, 0.0); },
     "load: `other` needs a mask: without one every lane is loaded"},
    {"LoadMaskNotBool", [](Args &a) { load(a.x + r16(), r16()); }, "load: mask must be i1, got i32[16]"},
    {"LoadMaskShape", [](Args &a) { load(a.x + r16(), arange(0, 32) < 3); },
     "load: cannot broadcast ptr<f32>[16] with i1[32]"},
    {"LoadOtherDtype", [](Args &a) { load(a.x + r16(), r16() < 3, r16()); },
     "load: other i32[16] does not match the pointee of ptr<f32>[16]"},
    {"LoadOtherLarger", [](Args &a) { load(a.x + r16(), r16() < 3, load(a.x + grid16())); },
     "load: other f32[16x16] is larger than the pointers ptr<f32>[16]"},
    {"LoadBlockWithMask",
     [](Args &a) { load(make_block_ptr(a.h, {a.n}, {1}, {0}, {16}), r16() < 3); },
     "load: a block pointer load takes no mask or other"},
    {"StoreNotPointer", [](Args &a) { store(a.f, 1.0); }, "store: needs pointers, got f32"},
    {"StoreDtype", [](Args &a) { store(a.h + r16(), load(a.x + r16())); },
     "store: value f32[16] does not match the pointee of ptr<f16>[16] (convert it with .to())"},
    {"StoreMaskNotBool", [](Args &a) { store(a.x + r16(), 1.0, r16()); }, "store: mask must be i1, got i32[16]"},
    {"StoreShape", [](Args &a) { store(a.x + r16(), load(a.x + arange(0, 32))); },
     "store: cannot broadcast ptr<f32>[16] with f32[32]"},
    {"StoreBlockWithMask",
     [](Args &a) { store(make_block_ptr(a.h, {a.n}, {1}, {0}, {16}), 0.0, r16() < 3); },
     "store: a block pointer store takes no mask"},
    {"StoreBlockDtype",
     [](Args &a) { store(make_block_ptr(a.h, {a.n}, {1}, {0}, {16}), load(a.x + r16())); },
     "store: value f32[16] does not match the block of block_ptr<f16[16]>"},
    {"StoreBlockLarger",
     [](Args &a) { store(make_block_ptr(a.h, {a.n}, {1}, {0}, {16}), load(a.h + grid16())); },
     "store: cannot broadcast f16[16x16] to [16]"},
    {"StoreBlockShape",
     [](Args &a) { store(make_block_ptr(a.h, {a.n}, {1}, {0}, {16}), load(a.h + arange(0, 32))); },
     "store: cannot broadcast f16[32] to [16]"},
    {"AtomicShape", [](Args &a) { atomic_add(a.x + r16(), load(a.x + arange(0, 32))); },
     "atomic_add: cannot broadcast ptr<f32>[16] with f32[32]"},
    // atomics
    {"AtomicNotPointer", [](Args &a) { atomic_add(a.n, 1); }, "atomic_add: needs pointers, got i32"},
    {"AtomicDtype", [](Args &a) { atomic_add(a.x + r16(), r16()); },
     "atomic_add: value i32[16] does not match the pointee of ptr<f32>[16]"},
    {"BulkAddIntoPointers", [](Args &a) { bulk_add(a.x + r16(), zeros({4, 4}, DType::f32)); },
     "bulk_add: adds into an f32 pointer, got ptr<f32>[16]"},
    {"BulkAddNot2D", [](Args &a) { bulk_add(a.x, load(a.x + arange(0, 32))); },
     "bulk_add: adds a 2-D f32 tile, got f32[32]"},
    {"BulkAddSwizzledWidth", [](Args &a) { bulk_add(a.x, zeros({4, 16}, DType::f32), BulkOrder::swizzled); },
     "bulk_add: swizzles rows of a multiple of 32 floats, got f32[4x16]"},
    {"BulkAddOddBytes", [](Args &a) { bulk_add(a.x, zeros({1, 2}, DType::f32)); },
     "bulk_add: adds a multiple of 16 bytes, got f32[1x2]"},
    {"AtomicMaskNotBool", [](Args &a) { atomic_max(a.ip + r16(), 1, r16()); },
     "atomic_max: mask must be i1, got i32[16]"},
    {"AtomicBitwiseFloat", [](Args &a) { atomic_xor(a.x + r16(), 1.0); },
     "atomic_xor: 'tile.atomic_rmw' op atomic xor does not apply to f32[16]"},
    // block pointers
    {"BlockPtrBaseNotScalar", [](Args &a) { make_block_ptr(a.h + r16(), {a.n}, {1}, {0}, {16}); },
     "make_block_ptr: the base must be a scalar pointer, got ptr<f16>[16]"},
    {"BlockPtrCounts", [](Args &a) { make_block_ptr(a.h, {a.n, a.n}, {1}, {0, 0}, {16, 16}); },
     "make_block_ptr: strides has 1 entries for the 2-D block [16x16]"},
    {"BlockPtrOrder", [](Args &a) { make_block_ptr(a.h, {a.n}, {1}, {0}, {16}, {0, 1}); },
     "make_block_ptr: order has 2 entries for the 1-D block [16]"},
    {"BlockPtrOrderPermutation",
     [](Args &a) { make_block_ptr(a.h, {a.n, a.n}, {a.l, 1}, {0, 0}, {16, 16}, {1, 1}); },
     "make_block_ptr: 'tile.make_block_ptr' op order [1, 1] is not a permutation of 0..1"},
    {"BlockPtrShapeNotInt", [](Args &a) { make_block_ptr(a.h, {a.f}, {1}, {0}, {16}); },
     "make_block_ptr: shape entries must be scalar integers, got f32"},
    {"BlockPtrBlockNotPowerOfTwo", [](Args &a) { make_block_ptr(a.h, {a.n}, {1}, {0}, {24}); },
     "make_block_ptr: tile shape [24] has dimension 24"},
    {"AdvanceNotBlockPtr", [](Args &a) { advance(a.h, {1}); }, "advance: needs a block pointer, got ptr<f16>"},
    {"AdvanceCount", [](Args &a) { advance(make_block_ptr(a.h, {a.n}, {1}, {0}, {16}), {1, 2}); },
     "advance: 2 offsets for block_ptr<f16[16]>"},
    {"AdvanceOffsetNotInt",
     [](Args &a) { advance(make_block_ptr(a.h, {a.n}, {1}, {0}, {16}), {a.f}); },
     "advance: offsets must be scalar integers, got f32"},
};

class DslErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(DslErrors, ThrowsNamingKernelOpAndProblem) {
  const ErrorCase &c = GetParam();
  std::string message = traceError(c.body);
  EXPECT_THAT(message, HasSubstr("kernel 'bad' {BLOCK=64}: "));
  EXPECT_THAT(message, HasSubstr(c.expected));
}

INSTANTIATE_TEST_SUITE_P(All, DslErrors, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(DslErrorsOutsideTrace, OpsNeedAnActiveTrace) {
  try {
    arange(0, 16);
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("arange: used outside of a kernel trace"));
  }
}

TEST(DslErrorsOutsideTrace, TilesDoNotOutliveTheirTrace) {
  std::optional<Tile> escaped;
  Kernel first = kernel("first", [&](Int n) { escaped = n + 1; });
  first.trace();
  Kernel second = kernel("second", [&](Ptr<i32> p) { store(p, *escaped); });
  try {
    second.trace();
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("kernel 'second' {}: store: uses a tile from another kernel trace"));
  }
}

TEST(DslErrorsOutsideTrace, KernelNameMustBeAnIdentifier) {
  auto body = [](Int) {};
  EXPECT_THROW(kernel("", body), Error);
  EXPECT_THROW(kernel("9lives", body), Error);
  try {
    kernel("my kernel", body);
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("kernel name 'my kernel' is not a C identifier"));
  }
  EXPECT_NO_THROW(kernel("_ok_9", body));
}

TEST(ConfigAssignments, SetEachKeyAndNameAMalformedOne) {
  Config config{{"num_warps", 4}};
  config.set_all("num_warps=8,MASKED_BLOCK_N=128,SHIFT=-2");
  EXPECT_EQ(config, (Config{{"num_warps", 8}, {"MASKED_BLOCK_N", 128}, {"SHIFT", -2}}));
  for (const char *bad : {"", "num_warps", "=8", "num_warps=", "num_warps=8x", "a=1,,b=2", "a=1,", "a=1.5",
                          "a=99999999999999999999"}) {
    Config scratch = config; // entries before the malformed one may already be set
    try {
      scratch.set_all(bad);
      FAIL() << "no error for '" << bad << "'";
    } catch (const Error &error) {
      EXPECT_THAT(error.what(), HasSubstr("is not KEY=VALUE with an integer VALUE")) << bad;
    }
  }
}

TEST(ConfigAssignments, UpdateOverridesAndAddsValues) {
  Config config{{"BLOCK_M", 64}, {"num_warps", 4}};
  config.update(Config{{"num_warps", 8}, {"ping_pong", 1}});
  EXPECT_EQ(config, (Config{{"BLOCK_M", 64}, {"num_warps", 8}, {"ping_pong", 1}}));
  config.update(Config{});
  EXPECT_EQ(config.str(), "{BLOCK_M=64, num_warps=8, ping_pong=1}");
}

} // namespace
