// The example kernels trace to verified tile IR with the structure each algorithm needs.
#include "attention.h"
#include "matmul.h"
#include "softmax.h"
#include "vector_add.h"
#include "test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using ::testing::HasSubstr;
using ::testing::Not;

using tessera::testing::count;

TEST(TraceExamples, VectorAdd) {
  Kernel k = examples::vector_add();
  ASSERT_EQ(k.signature().size(), 4u);
  EXPECT_EQ(k.signature()[0].str(), "ptr<f32>");
  EXPECT_EQ(k.signature()[3].str(), "i32");
  std::string ir = k.trace({{"BLOCK", 256}}).str();
  EXPECT_THAT(ir, HasSubstr("func.func @vector_add(%arg0: !tile.ptr<f32>, %arg1: !tile.ptr<f32>, "
                            "%arg2: !tile.ptr<f32>, %arg3: i32)"));
  EXPECT_THAT(ir, HasSubstr("tile.kernel"));
  EXPECT_THAT(ir, HasSubstr("tile.config = {BLOCK = 256 : i64}"));
  EXPECT_THAT(ir, HasSubstr("tile.make_range 0 to 256 : tensor<256xi32>"));
  EXPECT_THAT(ir, HasSubstr("arith.cmpi slt"));
  EXPECT_EQ(count(ir, "tile.load"), 2);
  EXPECT_EQ(count(ir, "tile.store"), 1);
  EXPECT_THAT(ir, HasSubstr("arith.addf %"));
  EXPECT_THAT(ir, HasSubstr(": tensor<256xf32>"));
  // Another config, another specialization.
  EXPECT_THAT(k.trace({{"BLOCK", 4096}}).str(), HasSubstr("tensor<4096xf32>"));
}

TEST(TraceExamples, SoftmaxComputesInF32AndStoresTheInputType) {
  std::string ir = examples::softmax<bf16>().trace({{"BLOCK", 1024}}).str();
  EXPECT_THAT(ir, HasSubstr("!tile.ptr<bf16>"));
  // Masked lanes read -inf so they vanish from max and sum.
  EXPECT_THAT(ir, HasSubstr("arith.constant dense<0xFF80> : tensor<1024xbf16>"));
  EXPECT_THAT(ir, HasSubstr("arith.extf %"));
  EXPECT_THAT(ir, HasSubstr("tile.reduce max"));
  EXPECT_THAT(ir, HasSubstr("tile.reduce sum"));
  EXPECT_THAT(ir, HasSubstr("math.exp"));
  EXPECT_THAT(ir, HasSubstr("arith.truncf"));
  // 64-bit row offsets.
  EXPECT_THAT(ir, HasSubstr("tile.addptr %arg0, %"));
  EXPECT_THAT(ir, HasSubstr(": !tile.ptr<bf16>, i64"));
}

TEST(TraceExamples, MatmulLoopCarriesAccumulatorAndPointers) {
  Kernel k = examples::matmul<f16>([](Tile acc) { return maximum(acc, 0.0); });
  std::string ir = k.trace({{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 32}}).str();
  EXPECT_THAT(ir, HasSubstr("iter_args("));
  EXPECT_THAT(ir, HasSubstr("-> (tensor<64x128xf32>, tensor<64x32x!tile.ptr<f16>>, "
                            "tensor<32x128x!tile.ptr<f16>>)"));
  EXPECT_THAT(ir, HasSubstr("tile.dot %"));
  EXPECT_THAT(ir, HasSubstr(": tensor<64x32xf16> * tensor<32x128xf16> -> tensor<64x128xf32>"));
  EXPECT_THAT(ir, HasSubstr("scf.yield"));
  EXPECT_THAT(ir, HasSubstr("arith.maximumf")); // the epilogue lambda
  EXPECT_THAT(ir, HasSubstr("arith.truncf"));
  EXPECT_THAT(ir, HasSubstr("arith.minsi")); // grouped ordering
  // Without an epilogue there is no maximumf.
  std::string plain = examples::matmul<f16>().trace({{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 64}}).str();
  EXPECT_THAT(plain, Not(HasSubstr("arith.maximumf")));
  EXPECT_THAT(plain, HasSubstr("tile.dot"));
}

TEST(TraceExamples, AttentionCarriesAccMaxAndSum) {
  std::string ir = examples::attention_forward<bf16>()
                       .trace({{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"HEAD_DIM", 128}})
                       .str();
  std::smatch match;
  std::regex loop(R"(scf\.for .* iter_args\(.*\) -> \((tensor<[^)]*)\))");
  ASSERT_TRUE(std::regex_search(ir, match, loop)) << ir;
  EXPECT_EQ(match[1].str(), "tensor<128x128xf32>, tensor<128xf32>, tensor<128xf32>");
  EXPECT_EQ(count(ir, "tile.dot"), 2);
  EXPECT_THAT(ir, HasSubstr(": tensor<128x128xbf16> * tensor<128x64xbf16> -> tensor<128x64xf32>"));
  EXPECT_THAT(ir, HasSubstr(": tensor<128x64xbf16> * tensor<64x128xbf16> -> tensor<128x128xf32>"));
  EXPECT_EQ(count(ir, "math.exp2"), 2);
  EXPECT_THAT(ir, HasSubstr("tile.reduce max"));
  EXPECT_THAT(ir, HasSubstr("tile.reduce sum"));
  EXPECT_THAT(ir, HasSubstr("arith.select"));
  EXPECT_THAT(ir, HasSubstr("math.log2"));
  // The LSE pointer is f32 whatever the input dtype.
  EXPECT_THAT(ir, HasSubstr("%arg4: !tile.ptr<f32>"));
}

TEST(TraceExamples, TracingIsDeterministic) {
  Kernel k = examples::attention_forward<f16>();
  Config cfg{{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"HEAD_DIM", 64}};
  EXPECT_EQ(k.trace(cfg).str(), k.trace(cfg).str());
}

} // namespace
