// exp2 on the FMA pipe (config knob exp2_on_fma): what tile-convert-to-llvm emits for the
// exponentials it takes off the multi-function unit, and the same arithmetic on the host.
#ifndef TESSERA_COMPILER_EXP2POLYNOMIAL_H
#define TESSERA_COMPILER_EXP2POLYNOMIAL_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessera::compiler::exp2_polynomial {

/// 2^x = 2^f * 2^j with j = floor(x) and f = x - j in [0, 1): j from the low bits of
/// x + 1.5 * 2^23 rounded down, 2^f = 1 + f (c1 + f (c2 + f c3)), and 2^j built as bits from j.
/// Minimax relative error on [0, 1): 8.6e-5, under f16's rounding (4.9e-4). x is clamped to
/// [-127, 128] first (NaN passing through): 2^-127 builds as +0 and 2^128 as +inf, so results
/// below 2^-126 flush to 0 and -inf gives 0, +inf +inf, as ex2.approx.ftz does.
inline constexpr float kLowest = -127.0f, kHighest = 128.0f;
inline constexpr float kShift = 12582912.0f; // 1.5 * 2^23: the sum's ulp is 1
inline constexpr float kC1 = 0.6951168179512024f, kC2 = 0.22764484584331512f, kC3 = 0.07706717401742935f;
inline constexpr int kMantissaBits = 23;
inline constexpr uint32_t kOneBits = 0x3F800000u; // 1.0f: the exponent bias in place
/// The bound tests hold the device's results to.
inline constexpr double kMaxRelativeError = 8.7e-5;

/// The emitted arithmetic in the same order (fmaf as the device's FFMA, floor as its add
/// rounding down): bitwise what a register on the FMA pipe holds.
inline float evaluate(float x) {
  if (!std::isnan(x))
    x = std::fmin(std::fmax(x, kLowest), kHighest);
  const float shifted = kShift + std::floor(x);
  const float f = x - (shifted - kShift);
  const float p = std::fmaf(std::fmaf(std::fmaf(kC3, f, kC2), f, kC1), f, 1.0f);
  uint32_t shiftedBits;
  std::memcpy(&shiftedBits, &shifted, 4);
  // j's two's complement sits in shifted's low mantissa bits; the shift drops the rest.
  const uint32_t scaleBits = (shiftedBits << kMantissaBits) + kOneBits;
  float scale;
  std::memcpy(&scale, &scaleBits, 4);
  return p * scale;
}

/// Whether register `index` of a thread's tile goes to the FMA pipe when `eighths` of every
/// 8 do: spread evenly, so that the two pipes interleave.
inline bool onFma(int64_t index, int64_t eighths) { return index * eighths % 8 < eighths; }

} // namespace tessera::compiler::exp2_polynomial

#endif // TESSERA_COMPILER_EXP2POLYNOMIAL_H
