// The interpreter runs the example kernels on the host and matches CPU references; accesses
// outside registered memory are reported, not performed.
#include "tessera/compiler/Interpreter.h"

#include "attention_check.h"
#include "interpreter_util.h"
#include "layernorm.h"
#include "matmul.h"
#include "softmax.h"
#include "vector_add.h"

#include <tessera/dsl/fp16.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using ::testing::HasSubstr;
using tessera::testing::Interpreted;
using tessera::testing::Registered;

std::vector<float> random(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

void run(const Kernel &kernel, const Config &config, Grid grid, std::vector<LaunchArg> args) {
  interpreter::run(kernel.trace(config), grid, args.data(), args.size());
}

TEST(Interpreter, VectorAddMasksTheTail) {
  const int n = 1000; // not a multiple of BLOCK
  Registered<float> x(random(n, 1)), y(random(n, 2)), out(std::vector<float>(n + 24, NAN));
  run(examples::vector_add(), {{"BLOCK", 256}}, {4}, {x.ptr(), y.ptr(), out.ptr(), n});
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(out.data[i], x.data[i] + y.data[i]) << "at " << i;
  for (int i = n; i < n + 24; ++i)
    ASSERT_TRUE(std::isnan(out.data[i])) << "masked lane " << i << " was written";
}

TEST(Interpreter, SoftmaxBf16MatchesReference) {
  const int rows = 5, cols = 77, stride = 80;
  std::vector<float> values = random(rows * stride, 3, 4.0f);
  std::vector<uint16_t> in(rows * stride);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = to_bf16(values[i]);
  Registered<uint16_t> input(in), output(std::vector<uint16_t>(rows * stride, 0xffff));
  run(examples::softmax<dsl::bf16>(), {{"BLOCK", 128}}, {rows},
      {input.ptr(), output.ptr(), cols, int64_t(stride), int64_t(stride)});
  for (int r = 0; r < rows; ++r) {
    double peak = -INFINITY, total = 0;
    for (int c = 0; c < cols; ++c)
      peak = std::max(peak, double(from_bf16(in[r * stride + c])));
    for (int c = 0; c < cols; ++c)
      total += std::exp(from_bf16(in[r * stride + c]) - peak);
    for (int c = 0; c < cols; ++c) {
      double want = std::exp(from_bf16(in[r * stride + c]) - peak) / total;
      ASSERT_NEAR(from_bf16(output.data[r * stride + c]), want, 8e-3 * want + 1e-6) << r << "," << c;
    }
    for (int c = cols; c < stride; ++c)
      ASSERT_EQ(output.data[r * stride + c], 0xffff) << "padding " << r << "," << c << " was written";
  }
}

TEST(Interpreter, LayernormF32MatchesReference) {
  const int rows = 3, cols = 300;
  Registered<float> x(random(rows * cols, 4)), w(random(cols, 5)), b(random(cols, 6));
  Registered<float> y(std::vector<float>(rows * cols, NAN));
  run(examples::layernorm<f32>(), {{"BLOCK", 512}}, {rows}, {x.ptr(), w.ptr(), b.ptr(), y.ptr(), cols, 1e-5f});
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c)
      mean += x.data[r * cols + c];
    mean /= cols;
    for (int c = 0; c < cols; ++c)
      var += (x.data[r * cols + c] - mean) * (x.data[r * cols + c] - mean);
    var /= cols;
    for (int c = 0; c < cols; ++c) {
      double want = (x.data[r * cols + c] - mean) / std::sqrt(var + 1e-5) * w.data[c] + b.data[c];
      ASSERT_NEAR(y.data[r * cols + c], want, 1e-4) << r << "," << c;
    }
  }
}

TEST(Interpreter, MatmulFp16OddShapesMatchReference) {
  const int M = 37, N = 50, K = 45;
  std::vector<float> a = random(M * K, 7), b = random(K * N, 8);
  std::vector<uint16_t> a16(M * K), b16(K * N);
  for (int i = 0; i < M * K; ++i)
    a16[i] = to_half(a[i]);
  for (int i = 0; i < K * N; ++i)
    b16[i] = to_half(b[i]);
  for (int block_pointers : {0, 1}) {
    Registered<uint16_t> da(a16), db(b16), dc(std::vector<uint16_t>(M * N, 0x7e00));
    Config config{{"BLOCK_M", 16}, {"BLOCK_N", 32}, {"BLOCK_K", 16}, {"GROUP_M", 2}, {"BLOCK_POINTERS", block_pointers}};
    run(examples::matmul<f16>([](Tile acc) { return maximum(acc, 0.0); }), config,
        examples::matmul_grid(config, M, N), {da.ptr(), db.ptr(), dc.ptr(), M, N, K, K, 1, N, 1, N, 1});
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double want = 0;
        for (int k = 0; k < K; ++k)
          want += double(from_half(a16[m * K + k])) * from_half(b16[k * N + n]);
        want = std::max(want, 0.0);
        ASSERT_NEAR(from_half(dc.data[m * N + n]), want, 1e-3 * std::abs(want) + 1e-3) << config.str() << " " << m << "," << n;
      }
  }
}

TEST(Interpreter, OutOfBoundsAccessIsReportedWithTheProgram) {
  const int n = 100;
  Registered<float> x(random(n, 9)), y(random(n, 10)), out(std::vector<float>(n, 0));
  // n claims more elements than the buffers hold: program 1 reads past the end.
  try {
    run(examples::vector_add(), {{"BLOCK", 64}}, {2}, {x.ptr(), y.ptr(), out.ptr(), 128});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("vector_add"));
    EXPECT_THAT(e.what(), HasSubstr("program (1, 0, 0)"));
    EXPECT_THAT(e.what(), HasSubstr("tile.load"));
  }
}

TEST(Interpreter, AtomicsAccumulateAcrossProgramsAndReturnOldValues) {
  // Every program adds its id into 4 counters and keeps the maximum in a 5th; lanes >= n masked.
  Kernel k = kernel("histogram", [](Ptr<i32> counters, Ptr<i32> old, Int n) {
    Tile lanes = arange(0, 8);
    Tile pid = program_id(0);
    Tile previous = atomic_add(counters + lanes % 4, expand_dims(pid, 0) + lanes * 0, lanes < n);
    store(old + pid * 8 + lanes, previous);
    atomic_max(counters + 4, pid);
  });
  Registered<int32_t> counters(std::vector<int32_t>(5, 0)), old(std::vector<int32_t>(3 * 8, -7));
  run(k, {}, {3}, {counters.ptr(), old.ptr(), 6});
  // Lanes 0..5 are live: counters 0 and 1 get two adds per program, 2 and 3 one.
  EXPECT_EQ(counters.data, (std::vector<int32_t>{6, 6, 3, 3, 2}));
  EXPECT_EQ(old.data[8 * 2 + 0], 2); // program 2 ran last: counter 0 held 0+0+1+1
}

TEST(Interpreter, BulkAddsSumEveryProgramsTileRowMajor) {
  // Programs 0..2 add tiles [8, 4] of value pid + 1 (+ 0.5 in column 3) into block pid % 2.
  Kernel k = kernel("bulk_add", [](Ptr<f32> out) {
    Tile pid = program_id(0);
    Tile cols = expand_dims(arange(0, 4), 0) + expand_dims(arange(0, 8), 1) * 0;
    bulk_add(out + (pid % 2).to<i64>() * 32, (pid + 1).to<f32>() + (cols == 3).to<f32>() * 0.5);
  });
  Registered<float> out(std::vector<float>(64, 1.0f));
  run(k, {}, {3}, {out.ptr()});
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(out.data[i], 1.0f + (i < 32 ? 1 + 3 : 2) + (i % 4 == 3 ? (i < 32 ? 1.0f : 0.5f) : 0.0f)) << i;
  // Swizzled: element (i, j) at column j ^ 8 * (i % 4).
  Kernel swizzled = kernel("bulk_add_swizzled", [](Ptr<f32> out) {
    Tile rows = expand_dims(arange(0, 4), 1), cols = expand_dims(arange(0, 32), 0);
    bulk_add(out, (rows * 32 + cols).to<f32>(), BulkOrder::swizzled);
  });
  Registered<float> grid(std::vector<float>(128, 0.0f));
  run(swizzled, {}, {1}, {grid.ptr()});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 32; ++j)
      EXPECT_EQ(grid.data[i * 32 + (j ^ (8 * (i % 4)))], float(i * 32 + j)) << i << "," << j;
  // The copy engine adds from 16-byte aligned addresses only.
  Kernel skewed = kernel("bulk_add_skewed", [](Ptr<f32> out) { bulk_add(out + 1, zeros({8, 4}, DType::f32)); });
  try {
    run(skewed, {}, {1}, {out.ptr()});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("16-byte aligned"));
  }
}

TEST(Interpreter, IntegerAndBitSemanticsMatchTheGpu) {
  // Signed division truncates toward zero, i32 arithmetic wraps, >> is arithmetic, bitcast
  // reinterprets IEEE bits (here: flipping the sign bit of f32 and of f16).
  Kernel k = kernel("bits", [](Ptr<i32> ints, Ptr<f32> floats, Ptr<f16> halves) {
    Tile lanes = arange(0, 4);
    Tile v = load(ints + lanes);
    store(ints + 4 + lanes, v / 3);
    store(ints + 8 + lanes, v % 3);
    store(ints + 12 + lanes, v >> 1);
    store(ints + 16 + lanes, v * 1073741824); // * 2^30 wraps in 32 bits
    Tile x = load(floats + lanes);
    store(floats + 4 + lanes, (x.bitcast(DType::i32) ^ std::numeric_limits<int32_t>::min()).bitcast(DType::f32));
    Tile h = load(halves + lanes);
    store(halves + 4 + lanes, (h.bitcast(DType::i16) ^ cast<i16>(Tile(-32768))).bitcast(DType::f16));
  });
  Registered<int32_t> ints(std::vector<int32_t>{-7, 7, -1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  Registered<float> floats(std::vector<float>{1.5f, -2.0f, 0.0f, 3.25f, 0, 0, 0, 0});
  Registered<uint16_t> halves(std::vector<uint16_t>{to_half(1.5f), to_half(-2.0f), to_half(0.0f),
                                                    to_half(65504.0f), 0, 0, 0, 0});
  run(k, {}, {1}, {ints.ptr(), floats.ptr(), halves.ptr()});
  std::vector<int32_t> got(ints.data.begin() + 4, ints.data.end());
  EXPECT_EQ(got, (std::vector<int32_t>{-2, 2, 0, 1, -1, 1, -1, 2, -4, 3, -1, 2, 1073741824,
                                       -1073741824, -1073741824, 1073741824}));
  EXPECT_EQ(std::vector<float>(floats.data.begin() + 4, floats.data.end()),
            (std::vector<float>{-1.5f, 2.0f, -0.0f, -3.25f}));
  EXPECT_TRUE(std::signbit(floats.data[6]));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(halves.data[4 + i], halves.data[i] ^ 0x8000) << i;
}

TEST(Interpreter, DotRoundsInputsOnlyForTf32) {
  // 1 + 2^-12 survives in f32 but not in tf32 (10 mantissa bits); tf32x3 recovers f32.
  auto product = [](Precision precision) {
    Kernel k = kernel("dot_precision", [precision](Ptr<f32> out) {
      Tile a = full({16, 16}, 1.0 + std::ldexp(1.0, -12), DType::f32);
      Tile b = full({16, 16}, 1.0, DType::f32);
      Tile index = expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0);
      store(out + index, dot(a, b, {}, precision));
    });
    Registered<float> out(std::vector<float>(256, NAN));
    run(k, {}, {1}, {out.ptr()});
    return out.data[0];
  };
  EXPECT_EQ(product(Precision::ieee), 16.0f + std::ldexp(16.0f, -12));
  EXPECT_EQ(product(Precision::tf32x3), 16.0f + std::ldexp(16.0f, -12));
  EXPECT_EQ(product(Precision::tf32), 16.0f);
}

TEST(Interpreter, BlockPointersZeroFillAndClipAtTheEdges) {
  // Copy a 5x7 matrix in 4x4 blocks through block pointers: edge blocks are partial.
  Kernel k = kernel("block_copy", [](Ptr<f32> in, Ptr<f32> out, Int rows, Int cols) {
    Tile r = program_id(0) * 4, c = program_id(1) * 4;
    Tile src = make_block_ptr(in, {rows, cols}, {cols, 1}, {r, c}, {4, 4});
    Tile dst = make_block_ptr(out, {rows, cols}, {cols, 1}, {r, c}, {4, 4});
    Tile block = load(src);
    print("block ", sum(sum(block, 1), 0));
    store(dst, block + 1.0f);
  });
  Registered<float> in(random(5 * 7, 12)), out(std::vector<float>(5 * 7 + 8, NAN));
  ::testing::internal::CaptureStdout();
  run(k, {}, {2, 2}, {in.ptr(), out.ptr(), 5, 7});
  std::string printed = ::testing::internal::GetCapturedStdout();
  for (int i = 0; i < 35; ++i)
    ASSERT_FLOAT_EQ(out.data[i], in.data[i] + 1.0f) << i;
  for (int i = 35; i < 43; ++i)
    ASSERT_TRUE(std::isnan(out.data[i])) << "past the end: " << i;
  EXPECT_THAT(printed, HasSubstr("block "));
  EXPECT_THAT(printed, HasSubstr("(1, 1, 0)"));
}

/// The launch API with TESSERA_INTERPRET=1: device buffers are host memory, launches run here.
using InterpretedLaunch = Interpreted<>;

TEST_F(InterpretedLaunch, AttentionForwardOddShapesMeetTheBar) {
  struct Shape {
    int heads, n_q, n_kv, d;
  };
  for (Shape s : {Shape{2, 113, 77, 64}, Shape{1, 1, 130, 32}, Shape{3, 65, 65, 16}}) {
    examples::AttentionCheck check = examples::check_attention(s.heads, s.n_q, s.n_kv, s.d, 11);
    EXPECT_TRUE(check.passed) << s.heads << "x" << s.n_q << "x" << s.n_kv << "x" << s.d << ": error "
                              << check.max_error << " vs naive " << check.naive_error << ", LSE "
                              << check.max_lse_error;
  }
}

TEST_F(InterpretedLaunch, LaunchArgumentsAreStillValidated) {
  jit::DeviceBuffer x(64 * 4);
  EXPECT_THROW(examples::vector_add().launch({1}, {{"BLOCK", 64}}, x.data(), x.data(), x.data()), Error);
}

TEST(Interpreter, NonPositiveRuntimeLoopStepIsReportedNotHung) {
  Kernel k = kernel("stuck", [](Ptr<f32> out, Int step) {
    Tile acc = zeros({16}, DType::f32);
    for_range(0, 10, step, {acc}, [&](Tile) { acc = acc + 1.0f; });
    store(out + arange(0, 16), acc);
  });
  Registered<float> out(std::vector<float>(16, 0));
  run(k, {}, {1}, {out.ptr(), 3});
  EXPECT_EQ(out.data[0], 4.0f); // 0, 3, 6, 9
  try {
    run(k, {}, {1}, {out.ptr(), 0});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("loop step 0 is not positive"));
  }
}

TEST(Interpreter, EnabledFollowsTheEnvironment) {
  setenv("TESSERA_INTERPRET", "1", 1);
  EXPECT_TRUE(interpreter::enabled());
  setenv("TESSERA_INTERPRET", "0", 1);
  EXPECT_FALSE(interpreter::enabled());
  unsetenv("TESSERA_INTERPRET");
  EXPECT_FALSE(interpreter::enabled());
}

} // namespace
