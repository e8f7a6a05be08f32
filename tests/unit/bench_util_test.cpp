// The benchmarks' check of each config's output against the default config's
// (bench::strayFrom): rounding differences pass, wrong values are caught.
#include "bench_util.h"

#include <gtest/gtest.h>

#include <cmath>

using tessera::bench::strayFrom;
using tessera::dsl::DType;

TEST(BenchOutputCheck, RoundingPassesWrongValuesStray) {
  const std::vector<float> want{0.5f, -1.0f, 3.0f, 0.0f};
  EXPECT_EQ(strayFrom(want, want, DType::f16), 0);
  std::vector<float> got = want;
  got[0] += 8.0f / 1024;            // 8 f16 ulps at 1
  got[2] += 0.9f * 16 * 3 / 1024;   // within 16 ulps of |3|, past 16 ulps of 1
  EXPECT_EQ(strayFrom(got, want, DType::f16), 0);
  got[1] += 0.5f; // off by half a value: what a miscompiled config gives
  EXPECT_FLOAT_EQ(strayFrom(got, want, DType::f16), 0.5f);
}

TEST(BenchOutputCheck, ToleranceFollowsTheDtype) {
  const std::vector<float> want{1.0f, 2.0f};
  const std::vector<float> got{1.05f, 2.0f}; // 6 bf16 ulps, 51 f16 ulps
  EXPECT_EQ(strayFrom(got, want, DType::bf16), 0);
  EXPECT_NEAR(strayFrom(got, want, DType::f16), 0.05, 1e-6);
}

TEST(BenchOutputCheck, NanStraysWithoutBound) {
  const std::vector<float> want{1.0f, 2.0f};
  const std::vector<float> got{1.0f, NAN};
  EXPECT_TRUE(std::isinf(strayFrom(got, want, DType::bf16)));
}
