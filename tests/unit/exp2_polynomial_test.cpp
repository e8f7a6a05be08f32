// The arithmetic the knob exp2_on_fma emits (the host model, bitwise the device's above 2^-126;
// the GPU test holds the device to it): its error over the whole range, exact powers of two and
// the edges ex2.approx.ftz has.
#include "tessera/compiler/Exp2Polynomial.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace {

namespace poly = tessera::compiler::exp2_polynomial;

TEST(Exp2Polynomial, RelativeErrorBelowTheBoundOverTheNormalRange) {
  double worst = 0;
  auto check = [&](float x) {
    const double want = std::exp2(double(x)), got = poly::evaluate(x);
    worst = std::max(worst, std::abs(got / want - 1));
  };
  // Every 2^-12 step, then random floats.
  for (double x = -126; x < 128; x += 1.0 / 4096)
    check(float(x));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-126.0f, 127.99f);
  for (int i = 0; i < 1000000; ++i)
    check(uniform(rng));
  EXPECT_LE(worst, poly::kMaxRelativeError);
  EXPECT_GE(worst, 0.5 * poly::kMaxRelativeError) << "the bound is loose: tighten it";
}

TEST(Exp2Polynomial, IntegersArePowersOfTwoExactly) {
  for (int k = -126; k <= 127; ++k)
    EXPECT_EQ(poly::evaluate(float(k)), std::ldexp(1.0f, k)) << k;
}

TEST(Exp2Polynomial, EdgesAsEx2ApproxFtz) {
  const float inf = std::numeric_limits<float>::infinity();
  // Results below 2^-126 flush to 0.
  for (float x : {-inf, -1e30f, -150.0f, -127.0f, -126.5f, -126.001f})
    EXPECT_EQ(poly::evaluate(x), 0.0f) << x;
  for (float x : {128.0f, 200.0f, inf})
    EXPECT_EQ(poly::evaluate(x), inf) << x;
  EXPECT_TRUE(std::isfinite(poly::evaluate(127.9f)));
  EXPECT_TRUE(std::isnan(poly::evaluate(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Exp2Polynomial, EighthsOnTheFmaPipeSpreadEvenly) {
  for (int eighths = 0; eighths <= 8; ++eighths)
    for (int start = 0; start < 16; ++start) {
      int count = 0;
      for (int i = start; i < start + 8; ++i)
        count += poly::onFma(i, eighths);
      EXPECT_EQ(count, eighths) << eighths << " from " << start;
    }
  // Never two in a row while under half go there.
  for (int eighths = 1; eighths <= 4; ++eighths)
    for (int i = 0; i < 64; ++i)
      EXPECT_FALSE(poly::onFma(i, eighths) && poly::onFma(i + 1, eighths)) << eighths << " at " << i;
}

} // namespace
