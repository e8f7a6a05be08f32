// Semantics of the DSL's operations: broadcasting, promotion, literals, control flow.
#include "test_util.h"

#include <tessera/dsl.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using ::testing::HasSubstr;
using ::testing::Not;

using Args = tessera::testing::ProbeArgs;
using tessera::testing::count;

std::string traceBody(const std::function<void(Args &)> &body) {
  return tessera::testing::probe("probe", body).trace().str();
}

TEST(DslOps, TileIntrospection) {
  traceBody([](Args &a) {
    Tile r = arange(0, 64);
    EXPECT_EQ(r.shape(), Shape({64}));
    EXPECT_EQ(r.dtype(), DType::i32);
    EXPECT_EQ(r.str(), "i32[64]");
    EXPECT_TRUE(a.x.is_pointer());
    EXPECT_EQ(a.x.dtype(), DType::f32);
    EXPECT_EQ((a.h + r).str(), "ptr<f16>[64]");
    EXPECT_EQ(Tile(2.5).str(), "literal 2.5");
    EXPECT_TRUE(Tile().is_null());
    EXPECT_EQ(a.l.dtype(), DType::i64);
  });
}

TEST(DslOps, BroadcastingFollowsNumpy) {
  std::string ir = traceBody([](Args &) {
    Tile col = expand_dims(arange(0, 128), 1); // [128, 1]
    Tile row = expand_dims(arange(0, 64), 0);  // [1, 64]
    Tile grid = col * 64 + row;
    EXPECT_EQ(grid.shape(), Shape({128, 64}));
    Tile flat = arange(0, 64) + grid; // rank 1 meets rank 2: leading 1 added
    EXPECT_EQ(flat.shape(), Shape({128, 64}));
  });
  EXPECT_THAT(ir, HasSubstr("tile.broadcast %"));
  EXPECT_THAT(ir, HasSubstr(": tensor<128x1xi32> -> tensor<128x64xi32>"));
  EXPECT_THAT(ir, HasSubstr("tile.reshape %"));
  EXPECT_THAT(ir, HasSubstr(": tensor<64xi32> -> tensor<1x64xi32>"));
}

TEST(DslOps, PromotionAndLiterals) {
  traceBody([](Args &a) {
    Tile h = load(a.h + arange(0, 16));
    EXPECT_EQ((h * 2).dtype(), DType::f16);          // literals adopt the tile's dtype
    EXPECT_EQ((h + a.f).dtype(), DType::f32);        // f16 with f32 is f32
    EXPECT_EQ((h.to<bf16>() + h).dtype(), DType::f32); // f16 with bf16 is f32
    EXPECT_EQ((arange(0, 16) * 0.5).dtype(), DType::f32); // float literal makes ints f32
    EXPECT_EQ((arange(0, 16) + a.l).dtype(), DType::i64); // wider int wins
    EXPECT_EQ((arange(0, 16) + a.l).shape(), Shape({16}));
    EXPECT_EQ((a.n < 3).dtype(), DType::i1);
    EXPECT_EQ(((a.n < 3) + 1).dtype(), DType::i32); // bool tiles meeting ints widen
  });
  std::string ir = traceBody([](Args &a) {
    store(a.h + arange(0, 16), load(a.h + arange(0, 16)) * 2);
  });
  EXPECT_THAT(ir, HasSubstr("arith.constant dense<2.000000e+00> : tensor<16xf16>"));
  EXPECT_THAT(ir, Not(HasSubstr("arith.extf")));
}

TEST(DslOps, Casts) {
  std::string ir = traceBody([](Args &a) {
    Tile i = arange(0, 16);
    EXPECT_EQ(i.to(DType::f16).dtype(), DType::f16);   // sitofp
    EXPECT_EQ(i.to<i64>().dtype(), DType::i64);        // extsi
    EXPECT_EQ(i.to<i8>().dtype(), DType::i8);          // trunci
    EXPECT_EQ(i.to<i1>().dtype(), DType::i1);          // != 0
    EXPECT_EQ((i < 4).to<f32>().dtype(), DType::f32);  // uitofp
    EXPECT_EQ(i.to<f32>().to<i32>().dtype(), DType::i32); // fptosi
    EXPECT_EQ(i.to<f32>().to<bf16>().to<f16>().dtype(), DType::f16);
    EXPECT_EQ(i.bitcast(DType::f32).dtype(), DType::f32);
    EXPECT_EQ(cast<f16>(i).dtype(), DType::f16);
  });
  for (const char *op : {"arith.sitofp", "arith.extsi", "arith.trunci", "arith.cmpi ne",
                         "arith.uitofp", "arith.fptosi", "arith.truncf", "arith.extf",
                         "arith.bitcast"})
    EXPECT_THAT(ir, HasSubstr(op));
}

TEST(DslOps, ArithmeticComparisonsAndBitwise) {
  std::string ir = traceBody([](Args &a) {
    Tile i = arange(0, 32), x = i.to<f32>();
    Tile r = (i / 3) % 5 - (i << 1) + (i >> 2) + (i & 7) + (i | 1) + (i ^ 2) + ~i + -i;
    Tile y = x / 3.0 - -x + x % 2.0;
    Tile m = (!(i < 4) && (i >= 2)) || (x > 1.0) || (x <= 0.0) || (x == 2.0) || (i != 5);
    store(a.ip + i, where(m, r, 0));
    store(a.x + i, y, m);
  });
  for (const char *op : {"arith.divsi", "arith.remsi", "arith.shli", "arith.shrsi", "arith.andi",
                         "arith.ori", "arith.xori", "arith.divf", "arith.negf", "arith.remf",
                         "arith.cmpi slt", "arith.cmpf ogt", "arith.cmpf ole", "arith.cmpf oeq", "arith.cmpi sge",
                         "arith.cmpi ne", "arith.select"})
    EXPECT_THAT(ir, HasSubstr(op)) << op;
}

TEST(DslOps, MathAndReductions) {
  std::string ir = traceBody([](Args &a) {
    Tile x = load(a.x + expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0));
    Tile y = exp(x) + exp2(x) + log(x) + log2(x) + sqrt(x) + rsqrt(x) + abs(x) + tanh(x) +
             sin(x) + cos(x) + floor(x) + ceil(x) + erf(x) + fma(x, x, 1.0) +
             maximum(x, 0.0) + minimum(x, 1.0);
    EXPECT_EQ(sum(y, 1).shape(), Shape({16}));
    EXPECT_EQ(max(y, -1, true).shape(), Shape({16, 1}));
    EXPECT_EQ(min(y, 0).shape(), Shape({16}));
    EXPECT_EQ(argmax(y, 1).dtype(), DType::i32);
    EXPECT_EQ(argmin(y, 0, true).shape(), Shape({1, 16}));
    EXPECT_EQ(sum(sum(y, 1), 0).shape(), Shape({})); // a 1-D reduction is a scalar
    EXPECT_EQ(abs(arange(0, 16)).dtype(), DType::i32);
    EXPECT_EQ(maximum(arange(0, 16), 3).dtype(), DType::i32);
  });
  for (const char *op : {"math.exp ", "math.exp2", "math.log ", "math.log2", "math.sqrt",
                         "math.rsqrt", "math.absf", "math.tanh", "math.sin", "math.cos",
                         "math.floor", "math.ceil", "math.erf", "math.fma", "arith.maximumf",
                         "arith.minimumf", "math.absi", "arith.maxsi", "tile.reduce sum",
                         "tile.reduce max", "tile.reduce min", "tile.reduce argmax",
                         "tile.reduce argmin", "tile.expand_dims"})
    EXPECT_THAT(ir, HasSubstr(op)) << op;
}

TEST(DslOps, ShapeOps) {
  std::string ir = traceBody([](Args &) {
    Tile t = reshape(arange(0, 128), {16, 8});
    EXPECT_EQ(trans(t).shape(), Shape({8, 16}));
    EXPECT_EQ(permute(reshape(t, {2, 8, 8}), {2, 0, 1}).shape(), Shape({8, 2, 8}));
    EXPECT_EQ(broadcast_to(expand_dims(arange(0, 8), 0), {4, 8}).shape(), Shape({4, 8}));
    EXPECT_EQ(broadcast_to(arange(0, 8), {4, 8}).shape(), Shape({4, 8}));
    EXPECT_EQ(full({4, 4}, 1.5, DType::f16).dtype(), DType::f16);
    EXPECT_EQ(zeros({32}, DType::i64).dtype(), DType::i64);
    EXPECT_EQ(splat(program_id(1), {8}).shape(), Shape({8}));
    EXPECT_EQ(expand_dims(program_id(0), 0).shape(), Shape({1}));
    EXPECT_EQ(num_programs(2).dtype(), DType::i32);
  });
  EXPECT_THAT(ir, HasSubstr("tile.trans %"));
  EXPECT_THAT(ir, HasSubstr("{order = array<i32: 2, 0, 1>}"));
  EXPECT_THAT(ir, HasSubstr("tile.program_id y"));
  EXPECT_THAT(ir, HasSubstr("tile.num_programs z"));
  EXPECT_THAT(ir, HasSubstr("arith.constant dense<1.500000e+00> : tensor<4x4xf16>"));
}

TEST(DslOps, DotDefaultsAndPrecision) {
  std::string ir = traceBody([](Args &a) {
    Tile offs = expand_dims(arange(0, 32), 1) * 32 + expand_dims(arange(0, 32), 0);
    Tile h = load(a.h + offs);
    Tile c = dot(h, trans(h)); // f16 accumulates in f32 from zero
    EXPECT_EQ(c.dtype(), DType::f32);
    Tile x = load(a.x + offs);
    Tile d = dot(x, x, c, Precision::tf32);
    store(a.x + offs, d);
  });
  EXPECT_THAT(ir, HasSubstr("arith.constant dense<0.000000e+00> : tensor<32x32xf32>"));
  EXPECT_THAT(ir, HasSubstr("{input_precision = #tile.precision<tf32>}"));
}

TEST(DslOps, MemoryOps) {
  std::string ir = traceBody([](Args &a) {
    Tile i = arange(0, 64);
    Tile m = i < a.n;
    Tile v = load(a.x + i, m, -INFINITY);
    store(a.x + i, v, m);
    store(a.x + i, 0.0);             // a literal broadcast to the pointers
    store(a.x + a.n, v.to<f32>(), m); // a scalar pointer broadcast to the value's shape
    Tile old = atomic_add(a.x + i, v, m);
    EXPECT_EQ(old.shape(), Shape({64}));
    atomic_max(a.ip + i, i, m, MemOrder::relaxed, MemScope::cta);
    atomic_min(a.ip, 3);
    atomic_and(a.ip + i, 1);
    atomic_or(a.ip + i, 1);
    atomic_xor(a.ip + i, 1);
    atomic_xchg(a.ip, a.n);
    print("v = ", v, a.n);
    print("no values");
  });
  EXPECT_THAT(ir, HasSubstr("tile.load %"));
  EXPECT_THAT(ir, HasSubstr("arith.constant dense<0xFF800000> : tensor<64xf32>"));
  for (const char *op : {"tile.atomic_rmw add, acq_rel, gpu", "tile.atomic_rmw max, relaxed, cta",
                         "tile.atomic_rmw min", "tile.atomic_rmw and", "tile.atomic_rmw or",
                         "tile.atomic_rmw xor", "tile.atomic_rmw xchg", "tile.print \"v = \"",
                         "tile.print \"no values\""})
    EXPECT_THAT(ir, HasSubstr(op)) << op;
  EXPECT_EQ(count(ir, "tile.store "), 3);
}

TEST(DslOps, BlockPointers) {
  std::string ir = traceBody([](Args &a) {
    Tile bp = make_block_ptr(a.h, {a.n, 128}, {a.l, 1}, {program_id(0) * 64, 0}, {64, 128});
    Tile acc = zeros({64, 128}, DType::f32);
    for_range(0, a.n, 64, {acc, bp}, [&](Tile) {
      acc = acc + load(bp).to<f32>();
      bp = advance(bp, {64, 0});
    });
    store(bp, acc.to<f16>());
  });
  EXPECT_THAT(ir, HasSubstr("tile.make_block_ptr %arg1"));
  EXPECT_THAT(ir, HasSubstr("{order = array<i32: 1, 0>} : !tile.ptr<f16> -> !tile.block_ptr<tensor<64x128xf16>>"));
  EXPECT_THAT(ir, HasSubstr("tile.block_load %"));
  EXPECT_THAT(ir, HasSubstr("{boundary_check = array<i32: 0, 1>}"));
  EXPECT_THAT(ir, HasSubstr("tile.advance %"));
  EXPECT_THAT(ir, HasSubstr("tile.block_store %"));
}

TEST(DslOps, ForRangeCarriesValuesAndNests) {
  std::string ir = traceBody([](Args &a) {
    Tile total = zeros({16}, DType::f32);
    Tile count = 0; // a literal carried value becomes an i32
    for_range(0, a.n, 1, {total, count}, [&](Tile i) {
      for_range(0, 4, 1, {total}, [&](Tile j) { total = total + (i * 4 + j).to<f32>(); });
      count = count + 1;
    });
    EXPECT_EQ(total.shape(), Shape({16}));
    EXPECT_EQ(count.dtype(), DType::i32);
    store(a.x + arange(0, 16), total / count.to<f32>());
    // 64-bit bounds give a 64-bit induction variable.
    for_range(0, a.l, 2, [&](Tile i) { EXPECT_EQ(i.dtype(), DType::i64); });
  });
  EXPECT_THAT(ir, HasSubstr("iter_args("));
  EXPECT_THAT(ir, HasSubstr("-> (tensor<16xf32>, i32)"));
  EXPECT_THAT(ir, HasSubstr("-> (tensor<16xf32>)"));
  EXPECT_THAT(ir, HasSubstr(": i64 {"));
}

TEST(DslOps, IfCarriesValuesFromEitherBranch) {
  std::string ir = traceBody([](Args &a) {
    Tile v = zeros({32}, DType::f32);
    Tile scale = a.f;
    if_(a.n > 4, {v, scale},
        [&] {
          v = v + 1.0;
          scale = scale * 2.0;
        },
        [&] { v = full({32}, 3.0, DType::f32); });
    if_(program_id(0) == 0, [&] { store(a.x + arange(0, 32), v * scale); });
  });
  EXPECT_THAT(ir, HasSubstr("scf.if %"));
  EXPECT_THAT(ir, HasSubstr("-> (tensor<32xf32>, f32)"));
  EXPECT_THAT(ir, HasSubstr("} else {"));
}

TEST(DslOps, HelpersAndLambdasComposeAtTraceTime) {
  // C++ is the meta-language: helpers, lambdas and loops run while tracing.
  auto softcap = [](Tile x, double cap) { return tanh(x / cap) * cap; };
  std::function<Tile(Tile)> mods[] = {[](Tile x) { return x * 2.0; },
                                      [&](Tile x) { return softcap(x, 30.0); }};
  Kernel k = kernel("compose", [&](Ptr<f32> x, Int n, const Config &cfg) {
    Tile i = arange(0, cfg["BLOCK"]);
    Tile v = load(x + i, i < n, 0.0);
    for (int s = 0; s < cfg["STEPS"]; ++s)
      v = mods[s % 2](v);
    if (cfg.get("CLAMP", 0))
      v = minimum(v, 1.0);
    store(x + i, v, i < n);
  });
  std::string with = k.trace({{"BLOCK", 64}, {"STEPS", 3}, {"CLAMP", 1}}).str();
  EXPECT_EQ(count(with, "arith.mulf"), 3); // x * 2.0 twice, * cap once
  EXPECT_THAT(with, HasSubstr("math.tanh"));
  EXPECT_THAT(with, HasSubstr("arith.minimumf"));
  std::string without = k.trace({{"BLOCK", 64}, {"STEPS", 1}}).str();
  EXPECT_THAT(without, Not(HasSubstr("math.tanh")));
  EXPECT_THAT(without, Not(HasSubstr("arith.minimumf")));
}

TEST(DslOps, ConfigAccess) {
  Config c{{"A", 3}};
  c.set("B", 5);
  EXPECT_EQ(c["A"], 3);
  EXPECT_EQ(c.get("C", 7), 7);
  EXPECT_TRUE(c.has("B"));
  EXPECT_EQ(c.str(), "{A=3, B=5}");
}

} // namespace
