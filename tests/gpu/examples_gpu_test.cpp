// The example kernels on the GPU against independent references (NVRTC-compiled CUDA C++ or a
// CPU loop), with random inputs, ragged sizes and outputs poisoned before every run.
#include "gpu_util.h"

#include "tessera/compiler/Exp2Polynomial.h"
#include "tessera/jit/Autotune.h"
#include "tessera/jit/Cache.h"

#include "attention.h"
#include "layernorm.h"
#include "matmul.h"
#include "softmax.h"
#include "vector_add.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
#include <thread>
#include <unistd.h>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using namespace tessera::testing;

int64_t nextPowerOfTwo(int64_t n) {
  int64_t p = 1;
  while (p < n)
    p *= 2;
  return p;
}

bool isPoison(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits == 0xFFFFFFFFu;
}

double maxAbsError(const std::vector<float> &a, const std::vector<float> &b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i]))
      return std::numeric_limits<double>::infinity();
    if (!std::isnan(a[i]))
      worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  }
  return worst;
}

// --- vector add ---------------------------------------------------------------------------------

class VectorAdd : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(VectorAdd, MatchesReferenceBitwiseAndWritesNothingPastN) {
  const int n = GetParam(), pad = 64;
  static const char *source = R"(
    extern "C" __global__ void ref_add(const float *x, const float *y, float *out, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = x[i] + y[i];
    })";
  auto reference = jit::nvrtc_kernel(source, "ref_add");
  auto dx = upload(random_floats(n, 1)), dy = upload(random_floats(n, 2));
  auto out = poisoned((n + pad) * 4), expected = poisoned(n * 4);
  void *xp = dx.data(), *yp = dy.data(), *ep = expected.data();
  int count = n;
  launch_reference(*reference, (n + 127) / 128, {&xp, &yp, &ep, &count});
  examples::vector_add().launch({static_cast<uint32_t>(cdiv(n, 1024))}, {{"BLOCK", 1024}},
                                dx.data(), dy.data(), out.data(), n);
  jit::synchronize();
  auto got = download<float>(out, n + pad), want = download<float>(expected, n);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[i], want[i]) << "at " << i;
  for (int i = n; i < n + pad; ++i)
    ASSERT_TRUE(isPoison(got[i])) << "wrote past n at " << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, VectorAdd, ::testing::Values(1, 17, 1000, 1024, 4097, (1 << 20) + 3));

// --- softmax ------------------------------------------------------------------------------------

const char *kSoftmaxReference = R"(
  extern "C" __global__ void ref_softmax(const float *in, float *out, int rows, int cols,
                                         long long in_stride, long long out_stride) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float *x = in + row * in_stride;
    double m = -1e300, s = 0;
    for (int c = 0; c < cols; ++c) m = fmax(m, (double)x[c]);
    for (int c = 0; c < cols; ++c) s += exp((double)x[c] - m);
    for (int c = 0; c < cols; ++c) out[row * out_stride + c] = (float)(exp((double)x[c] - m) / s);
  })";

struct SoftmaxCase {
  int cols;
  bool half;
};

class Softmax : public GpuTest, public ::testing::WithParamInterface<SoftmaxCase> {};

TEST_P(Softmax, MatchesFloat64Reference) {
  const auto [cols, half] = GetParam();
  const int rows = 37;
  const int64_t inStride = cols + 3, outStride = cols; // a strided input
  auto values = random_floats(rows * inStride, 3, -8, 8);
  if (half)
    for (float &v : values)
      v = from_half(to_half(v));
  auto reference = jit::nvrtc_kernel(kSoftmaxReference, "ref_softmax");
  auto din = upload(values);
  auto expected = poisoned(rows * outStride * 4);
  void *ip = din.data(), *ep = expected.data();
  int r = rows, c = cols;
  long long is = inStride, os = outStride;
  launch_reference(*reference, (rows + 127) / 128, {&ip, &ep, &r, &c, &is, &os});
  auto want = download<float>(expected, rows * outStride);

  int64_t block = nextPowerOfTwo(cols);
  Config config{{"BLOCK", block}, {"num_warps", std::clamp<int64_t>(block / 512, 1, 16)}};
  std::vector<float> got(rows * outStride);
  if (half) {
    std::vector<uint16_t> h(values.size());
    std::transform(values.begin(), values.end(), h.begin(), to_half);
    auto dh = upload(h);
    auto out = poisoned(rows * outStride * 2);
    examples::softmax<f16>().launch({uint32_t(rows)}, config, dh.data(), out.data(), cols, inStride, outStride);
    jit::synchronize();
    auto raw = download<uint16_t>(out, rows * outStride);
    std::transform(raw.begin(), raw.end(), got.begin(), from_half);
  } else {
    auto out = poisoned(rows * outStride * 4);
    examples::softmax<f32>().launch({uint32_t(rows)}, config, din.data(), out.data(), cols, inStride, outStride);
    jit::synchronize();
    got = download<float>(out, rows * outStride);
  }
  EXPECT_LE(maxAbsError(got, want), half ? 1e-3 : 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Softmax,
                         ::testing::Values(SoftmaxCase{1, false}, SoftmaxCase{17, false},
                                           SoftmaxCase{1000, false}, SoftmaxCase{4096, false},
                                           SoftmaxCase{16384, false}, SoftmaxCase{1000, true},
                                           SoftmaxCase{16384, true}),
                         [](const auto &info) {
                           return std::to_string(info.param.cols) + (info.param.half ? "_f16" : "_f32");
                         });

// --- layer norm ---------------------------------------------------------------------------------

class LayerNorm : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(LayerNorm, MatchesFloat64Reference) {
  const int cols = GetParam(), rows = 29;
  const float eps = 1e-5f;
  static const char *source = R"(
    extern "C" __global__ void ref_layernorm(const float *x, const float *w, const float *b, float *y,
                                             int rows, int cols, float eps) {
      int row = blockIdx.x * blockDim.x + threadIdx.x;
      if (row >= rows) return;
      const float *v = x + (long long)row * cols;
      double mean = 0, var = 0;
      for (int c = 0; c < cols; ++c) mean += v[c];
      mean /= cols;
      for (int c = 0; c < cols; ++c) var += (v[c] - mean) * (v[c] - mean);
      var /= cols;
      double rstd = 1.0 / sqrt(var + eps);
      for (int c = 0; c < cols; ++c) y[(long long)row * cols + c] = (float)((v[c] - mean) * rstd * w[c] + b[c]);
    })";
  auto reference = jit::nvrtc_kernel(source, "ref_layernorm");
  auto dx = upload(random_floats(rows * cols, 4, -3, 5));
  auto dw = upload(random_floats(cols, 5, 0.5, 1.5)), db = upload(random_floats(cols, 6));
  auto out = poisoned(rows * cols * 4), expected = poisoned(rows * cols * 4);
  void *xp = dx.data(), *wp = dw.data(), *bp = db.data(), *ep = expected.data();
  int r = rows, c = cols;
  float e = eps;
  launch_reference(*reference, 1, {&xp, &wp, &bp, &ep, &r, &c, &e});
  int64_t block = nextPowerOfTwo(cols);
  examples::layernorm<f32>().launch({uint32_t(rows)}, {{"BLOCK", block}, {"num_warps", std::clamp<int64_t>(block / 512, 1, 8)}},
                                    dx.data(), dw.data(), db.data(), out.data(), cols, eps);
  jit::synchronize();
  EXPECT_LE(maxAbsError(download<float>(out, rows * cols), download<float>(expected, rows * cols)), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Widths, LayerNorm, ::testing::Values(1, 100, 1024, 5000));

// --- reductions along either axis, across lanes and warps ---------------------------------------

class Reductions : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(Reductions, SumMaxArgmaxArgminAlongBothAxes) {
  const int warps = GetParam(), M = 64, N = 128;
  Kernel k = kernel("reductions", [](Ptr<f32> x, Ptr<f32> colsum, Ptr<f32> rowmax, Ptr<i32> rowarg,
                                     Ptr<i32> colarg, Ptr<f32> total) {
    Tile rows = expand_dims(arange(0, 64), 1), cols = expand_dims(arange(0, 128), 0);
    Tile v = load(x + rows * 128 + cols);
    store(colsum + arange(0, 128), sum(v, 0));
    store(rowmax + arange(0, 64), max(v, 1));
    store(rowarg + arange(0, 64), argmax(v, 1));
    store(colarg + arange(0, 128), argmin(v, 0));
    store(total, sum(sum(v, 1), 0));
  });
  auto x = random_floats(M * N, 7);
  x[5 * N + 9] = x[5 * N + 100] = 7.0f; // a tie: argmax takes the first index
  auto dx = upload(x);
  auto colsum = poisoned(N * 4), rowmax = poisoned(M * 4), rowarg = poisoned(M * 4),
       colarg = poisoned(N * 4), total = poisoned(4);
  k.launch({1}, {{"num_warps", warps}}, dx.data(), colsum.data(), rowmax.data(), rowarg.data(),
           colarg.data(), total.data());
  jit::synchronize();
  auto cs = download<float>(colsum, N), rm = download<float>(rowmax, M), t = download<float>(total, 1);
  auto ra = download<int32_t>(rowarg, M), ca = download<int32_t>(colarg, N);
  double all = 0;
  for (int j = 0; j < N; ++j) {
    double s = 0;
    int arg = 0;
    for (int i = 0; i < M; ++i) {
      s += x[i * N + j];
      if (x[i * N + j] < x[arg * N + j])
        arg = i;
    }
    all += s;
    EXPECT_NEAR(cs[j], s, 1e-4) << "column " << j;
    EXPECT_EQ(ca[j], arg) << "column " << j;
  }
  for (int i = 0; i < M; ++i) {
    int arg = int(std::max_element(x.begin() + i * N, x.begin() + (i + 1) * N) - (x.begin() + i * N));
    EXPECT_EQ(rm[i], x[i * N + arg]) << "row " << i;
    EXPECT_EQ(ra[i], arg) << "row " << i;
  }
  EXPECT_NEAR(t[0], all, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Warps, Reductions, ::testing::Values(1, 4, 8));

// --- atomics, masks, scalar stores --------------------------------------------------------------

TEST_F(GpuTest, AtomicHistogramSumMaxMin) {
  const int n = 10007, bins = 16;
  Kernel k = kernel("histogram", [](Ptr<i32> values, Ptr<i32> counts, Ptr<f32> x, Ptr<f32> total,
                                    Ptr<f32> extremes, Int n) {
    Tile i = program_id(0) * 256 + arange(0, 256);
    Tile ok = i < n;
    atomic_add(counts + load(values + i, ok, 0), 1, ok);
    atomic_add(total + i * 0, load(x + i, ok, 0.0), ok);
    Tile signed_values = load(values + i, ok, 0).to<f32>() - 7.5; // -7.5 .. 7.5
    atomic_max(extremes + i * 0, signed_values, ok);
    atomic_min(extremes + 1 + i * 0, signed_values, ok);
  });
  std::vector<int32_t> values(n);
  std::vector<int> want(bins, 0);
  for (int i = 0; i < n; ++i) {
    values[i] = (i * 7 + i / 3) % bins;
    ++want[values[i]];
  }
  std::vector<float> x(n, 0.25f);
  auto dv = upload(values), dx = upload(x);
  jit::DeviceBuffer counts(bins * 4), total(4);
  counts.fill_bytes(0);
  total.fill_bytes(0);
  auto extremes = upload(std::vector<float>{-100.0f, 100.0f});
  k.launch({uint32_t(cdiv(n, 256))}, {}, dv.data(), counts.data(), dx.data(), total.data(), extremes.data(), n);
  jit::synchronize();
  auto mm = download<float>(extremes, 2);
  EXPECT_EQ(mm[0], 7.5f);  // float atomic max, across signs
  EXPECT_EQ(mm[1], -7.5f); // float atomic min
  auto got = download<int32_t>(counts, bins);
  for (int b = 0; b < bins; ++b)
    EXPECT_EQ(got[b], want[b]) << "bin " << b;
  EXPECT_EQ(download<float>(total, 1)[0], 0.25f * n);
}

// Split-K through bulk adds: program (r, s) multiplies k-slice s of row blocks r, r + R, ... and
// adds each 64 x 64 f32 product into C (row-major, so a row block is 64 * 64 consecutive
// floats). Many programs add into each tile, and each program adds several tiles (its staging
// buffer reused). With the copy engine (Hopper, default) and without (tma = 0, per-thread reds),
// row-major and swizzled (SWIZZLED: element (i, j) of a tile at column j ^ 8 * (i % 4)).
class BulkAdd : public GpuTest, public ::testing::WithParamInterface<Config> {};

TEST_P(BulkAdd, SplitKSumsEveryProgramsTiles) {
  const int64_t bm = 64, n = 64, bk = 32, splits = 6, row_programs = 3, tiles_each = 4;
  const int M = int(bm * row_programs * tiles_each), K = int(bk * splits);
  Kernel split_k = kernel("split_k_bulk_add", [](Ptr<f16> a, Ptr<f16> b, Ptr<f32> c, Int k, const Config &cfg) {
    Tile cols = arange(0, n), ks = program_id(1) * bk + arange(0, bk);
    Tile b_tile = load(b + expand_dims(ks, 1) * n + expand_dims(cols, 0));
    for_range(program_id(0), row_programs * tiles_each, row_programs, {}, [&](Tile block) {
      Tile rows = block * bm + arange(0, bm);
      Tile a_tile = load(a + expand_dims(rows, 1) * k + expand_dims(ks, 0));
      bulk_add(c + block.to<i64>() * (bm * n), dot(a_tile, b_tile, zeros({bm, n}, DType::f32)),
               cfg.get("SWIZZLED", 0) ? BulkOrder::swizzled : BulkOrder::row_major);
    });
  });
  auto a = random_floats(size_t(M) * K, 31), b = random_floats(size_t(K) * n, 32);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = from_half(a16[i] = to_half(a[i]));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = from_half(b16[i] = to_half(b[i]));
  std::vector<float> start = random_floats(size_t(M) * n, 33); // added to, not overwritten
  auto da = upload(a16), db = upload(b16), dc = upload(start);
  split_k.launch({uint32_t(row_programs), uint32_t(splits)}, GetParam(), da.data(), db.data(), dc.data(), K);
  jit::synchronize();
  auto got = download<float>(dc, size_t(M) * n);
  const bool swizzled = GetParam().get("SWIZZLED", 0) != 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < n; ++j) {
      const size_t at = size_t(i) * n + (swizzled ? j ^ (8 * (i % 4)) : j);
      double want = start[at];
      for (int kk = 0; kk < K; ++kk)
        want += double(a[size_t(i) * K + kk]) * b[size_t(kk) * n + j];
      ASSERT_NEAR(got[at], want, 1e-3 * (1 + std::abs(want))) << "at " << i << "," << j;
    }
}

std::string bulkAddPath(const ::testing::TestParamInfo<Config> &info) {
  const char *names[] = {"copy_engine", "eight_warps", "threads", "copy_engine_swizzled", "threads_swizzled"};
  return names[info.index];
}
INSTANTIATE_TEST_SUITE_P(Paths, BulkAdd,
                         ::testing::Values(Config{}, Config{{"num_warps", 8}}, Config{{"tma", 0}}, Config{{"SWIZZLED", 1}},
                                           Config{{"tma", 0}, {"SWIZZLED", 1}}),
                         bulkAddPath);

// --- block pointers, trans, reshape, if_ ------------------------------------------------------

TEST_F(GpuTest, BlockPointersTransReshapeAndBranches) {
  // A ragged M x N matrix: block-load a 32 x 64 tile (out-of-bounds reads zero), write its
  // transpose and its flattening, and add 1 only in programs whose row block is odd.
  const int M = 45, N = 100;
  Kernel k = kernel("shapes", [](Ptr<f32> a, Ptr<f32> t, Ptr<f32> flat, Ptr<f32> b, Int m, Int n) {
    Tile pid = program_id(0);
    Tile bp = make_block_ptr(a, {m, n}, {n.to<i64>(), 1}, {pid * 32, 0}, {32, 64});
    Tile tile = load(advance(bp, {0, 32}));         // columns 32..95
    if_(pid % 2 == 1, {tile}, [&] { tile = tile + 1.0; });
    Tile rows = expand_dims(arange(0, 64), 1), cols = expand_dims(arange(0, 32), 0);
    store(t + pid * 2048 + rows * 32 + cols, trans(tile)); // [64, 32]
    store(flat + pid * 2048 + arange(0, 2048), reshape(tile, {2048}));
    store(make_block_ptr(b, {m, n}, {n.to<i64>(), 1}, {pid * 32, 0}, {32, 64}), tile);
  });
  auto a = random_floats(M * N, 30);
  auto da = upload(a);
  const int programs = 2;
  auto dt = poisoned(programs * 2048 * 4), df = poisoned(programs * 2048 * 4), db = poisoned(M * N * 4);
  k.launch({programs}, {}, da.data(), dt.data(), df.data(), db.data(), M, N);
  jit::synchronize();
  auto t = download<float>(dt, programs * 2048), f = download<float>(df, programs * 2048);
  auto stored = download<float>(db, M * N);
  for (int p = 0; p < programs; ++p)
    for (int i = 0; i < 32; ++i)
      for (int j = 0; j < 64; ++j) {
        int r = p * 32 + i, c = 32 + j;
        float want = (r < M && c < N ? a[r * N + c] : 0.0f) + (p % 2 == 1 ? 1.0f : 0.0f);
        ASSERT_EQ(t[p * 2048 + j * 32 + i], want) << "trans at " << r << "," << c;
        ASSERT_EQ(f[p * 2048 + i * 64 + j], want) << "reshape at " << r << "," << c;
        // The block store wrote columns 0..63 of the rows that exist, nothing else.
        if (r < M) {
          ASSERT_EQ(stored[r * N + j], want) << "block store at " << r << "," << j;
        }
      }
  for (int r = 0; r < M; ++r)
    for (int c = 64; c < N; ++c)
      ASSERT_TRUE(isPoison(stored[r * N + c])) << "written outside the block at " << r << "," << c;
}

// --- exponentials on the FMA pipe --------------------------------------------------------------

// Config knob exp2_on_fma: that many of every 8 exponentials of a thread by the polynomial on
// the FMA pipe. Over the whole range (and its edges, which both pipes give as ex2.approx.ftz
// does) each result is within the polynomial's bound of 2^x. The second half of the inputs
// are points where the polynomial is at least 2e-5 off, 40 times ex2.approx's error: there
// each result is either the host model's bits (the FMA pipe) or ex2.approx's, and the FMA
// pipe's share is the one asked for.
class Exp2OnFma : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(Exp2OnFma, SharesOfThePolynomialWithinItsBound) {
  namespace poly = compiler::exp2_polynomial;
  const int eighths = GetParam(), n = 1 << 17, half = n / 2;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = random_floats(half, 11, -130, 130);
  const std::vector<float> edges{-inf, -1e30f, -127, -126.5f, 0, 1, -1, 127.9f, 128, 1e30f, inf, nan};
  for (size_t i = 0; i < edges.size(); ++i)
    x[i * 9] = edges[i]; // spread over the registers
  for (float candidate : random_floats(4 * half, 12, -20, 20))
    if (x.size() < size_t(n) && std::abs(poly::evaluate(candidate) / std::exp2(double(candidate)) - 1) >= 2e-5)
      x.push_back(candidate);
  ASSERT_EQ(x.size(), size_t(n));
  Kernel k = kernel("exp2_tile", [](Ptr<f32> in, Ptr<f32> out, Int count, const Config &cfg) {
    Tile offsets = program_id(0) * cfg["BLOCK"] + arange(0, cfg["BLOCK"]);
    Tile mask = offsets < count;
    store(out + offsets, exp2(load(in + offsets, mask)), mask);
  });
  auto din = upload(x);
  auto out = poisoned(n * 4);
  k.launch({static_cast<uint32_t>(cdiv(n, 1024))}, {{"BLOCK", 1024}, {"exp2_on_fma", eighths}}, din.data(), out.data(), n);
  jit::synchronize();
  auto got = download<float>(out, n);
  int onFma = 0, bad = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_FALSE(isPoison(got[i])) << "not written at " << i;
    const double want = std::exp2(double(x[i]));
    const float model = poly::evaluate(x[i]);
    bool ok;
    if (std::isnan(x[i]))
      ok = std::isnan(got[i]);
    else if (want < std::ldexp(1.0, -126))
      ok = got[i] == 0; // flushed, on both pipes
    else if (want > std::numeric_limits<float>::max())
      ok = got[i] == inf;
    else if (i < half)
      ok = std::abs(got[i] / want - 1) <= poly::kMaxRelativeError;
    else if (std::memcmp(&got[i], &model, 4) == 0)
      ok = true, ++onFma;
    else
      ok = std::abs(got[i] / want - 1) <= 5e-7; // ex2.approx
    if (!ok && bad++ < 5)
      ADD_FAILURE() << "exp2(" << x[i] << ") = " << got[i] << ", want " << want << " (the polynomial's " << model << ")";
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(onFma, (n - half) * eighths / 8);
}

INSTANTIATE_TEST_SUITE_P(Eighths, Exp2OnFma, ::testing::Values(0, 1, 3, 8));

// --- device printing, the disk cache --------------------------------------------------------

TEST_F(GpuTest, DevicePrintShowsProgramIndexAndValue) {
  Kernel k = kernel("show", [](Int n) { print("v = ", arange(0, 4) * n); });
  ::testing::internal::CaptureStdout();
  k.launch({2}, {{"num_warps", 1}}, 5);
  jit::synchronize();
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("pid (1, 0, 0) idx (3) v = 15"), std::string::npos) << out.substr(0, 500);
}

/// A kernel cache of its own ($TESSERA_CACHE_DIR) while it lives: compilations start cold.
struct FreshCacheDir {
  FreshCacheDir() {
    char pattern[] = "/tmp/tessera-gpu-cache-XXXXXX";
    setenv("TESSERA_CACHE_DIR", mkdtemp(pattern), 1);
  }
  ~FreshCacheDir() {
    jit::cache_clear();
    unsetenv("TESSERA_CACHE_DIR");
  }
};

TEST_F(GpuTest, AnotherKernelObjectReusesTheDiskCache) {
  FreshCacheDir cache;
  const int n = 5000;
  auto dx = upload(random_floats(n, 20)), dy = upload(random_floats(n, 21));
  auto first = poisoned(n * 4), second = poisoned(n * 4);
  examples::vector_add().launch({uint32_t(cdiv(n, 512))}, {{"BLOCK", 512}}, dx.data(), dy.data(), first.data(), n);
  jit::synchronize();
  EXPECT_EQ(jit::cache_stats().entries, 1);
  examples::vector_add().launch({uint32_t(cdiv(n, 512))}, {{"BLOCK", 512}}, dx.data(), dy.data(), second.data(), n);
  jit::synchronize();
  EXPECT_EQ(jit::cache_stats().entries, 1); // found, not compiled again
  EXPECT_EQ(download<float>(first, n), download<float>(second, n));
}

// The tuner compiles its configs on several threads before it times them
// (Kernel::compile_ahead): each is loaded into the caller's context, where its launch finds it
// (a second compile_ahead has nothing left to do), and runs right.
TEST_F(GpuTest, KernelsCompiledAheadOnSeveralThreadsAreTheOnesLaunched) {
  FreshCacheDir cache;
  const int n = 5000;
  auto x = random_floats(n, 22), y = random_floats(n, 23);
  auto dx = upload(x), dy = upload(y);
  auto out = poisoned(n * 4);
  Kernel add = examples::vector_add();
  const std::vector<Config> configs{{{"BLOCK", 128}}, {{"BLOCK", 256}}, {{"BLOCK", 512}}, {{"BLOCK", 1024}}};
  const std::vector<std::vector<LaunchArg>> args(configs.size(), {dx.data(), dy.data(), out.data(), n});
  for (double seconds : add.compile_ahead(configs, args, 4))
    EXPECT_GT(seconds, 0);
  EXPECT_EQ(jit::cache_stats().entries, 4);
  for (double seconds : add.compile_ahead(configs, args, 4))
    EXPECT_EQ(seconds, 0);
  for (const Config &config : configs) {
    auto result = poisoned(n * 4);
    add.launch({uint32_t(cdiv(n, config["BLOCK"]))}, config, dx.data(), dy.data(), result.data(), n);
    jit::synchronize();
    auto got = download<float>(result, n);
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(got[i], x[i] + y[i]) << config.str() << " at " << i;
  }
  EXPECT_EQ(jit::cache_stats().entries, 4); // nothing compiled again
}

// Threads launching different configs of one kernel at once, each compiling its own (the
// kernel's cache is not locked while a thread compiles), and two the same config: every launch
// runs right and the cache keeps one module a config.
TEST_F(GpuTest, ThreadsLaunchingOneKernelCompileSideBySide) {
  FreshCacheDir cache;
  const int n = 5000;
  auto x = random_floats(n, 24), y = random_floats(n, 25);
  auto dx = upload(x), dy = upload(y);
  Kernel add = examples::vector_add();
  const std::vector<int64_t> blocks{128, 256, 512, 1024, 1024};
  std::vector<jit::DeviceBuffer> results;
  for (size_t i = 0; i < blocks.size(); ++i)
    results.push_back(poisoned(n * 4));
  std::vector<std::string> errors(blocks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < blocks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        add.launch({uint32_t(cdiv(n, blocks[i]))}, {{"BLOCK", blocks[i]}}, dx.data(), dy.data(), results[i].data(), n);
        jit::synchronize();
      } catch (const Error &error) {
        errors[i] = error.what();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(errors[i], "") << "BLOCK " << blocks[i];
    auto got = download<float>(results[i], n);
    for (int j = 0; j < n; ++j)
      ASSERT_EQ(got[j], x[j] + y[j]) << "BLOCK " << blocks[i] << " at " << j;
  }
  EXPECT_EQ(jit::cache_stats().entries, 4);
}

// --- autotuning an in-place kernel -----------------------------------------------------------

TEST_F(GpuTest, AutotuningRestoresInPlaceOutputsAndLaunchesOnce) {
  char pattern[] = "/tmp/tessera-gpu-tune-XXXXXX";
  std::string dir = mkdtemp(pattern);
  Kernel twice = kernel("twice", [](Ptr<f32> x, Int n, const Config &cfg) {
    Tile i = program_id(0) * cfg["BLOCK"] + arange(0, cfg["BLOCK"]);
    store(x + i, load(x + i, i < n, 0.0) * 2.0, i < n);
  });
  const int n = 100000;
  auto values = random_floats(n, 40);
  auto dx = upload(values);
  jit::Autotuner::Options options;
  options.key_arguments = {1};
  options.restore = [n](const std::vector<dsl::LaunchArg> &) { return std::vector<std::pair<size_t, size_t>>{{0, n * 4}}; };
  options.database = dir + "/tuning.json";
  options.runs = 5;
  std::vector<Config> space{{{"BLOCK", 256}}, {{"BLOCK", 1024}}, {{"BLOCK", 4096}}};
  jit::Autotuner tuner(twice, space, options);
  // Tuning launches the kernel dozens of times; the input is restored before each run and at
  // the end, so the one real launch doubles the original values exactly once.
  tuner.launch([&](const Config &c) { return Grid{uint32_t(cdiv(n, c["BLOCK"]))}; }, dx.data(), n);
  jit::synchronize();
  ASSERT_TRUE(tuner.last_tuning().has_value());
  EXPECT_EQ(tuner.last_tuning()->trials.size(), 3u);
  auto got = download<float>(dx, n);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[i], values[i] * 2.0f) << "at " << i;
  std::remove((dir + "/tuning.json").c_str());
  std::remove((dir + "/tuning.json.lock").c_str());
  rmdir(dir.c_str());
}

// Arguments a config decides (Autotuner::Options::arguments, as the persistent causal
// forward's plan): every timed launch and the final one get those of their config. Each config
// writes the argument it got to a slot of its own; without the hook all would read -1.
TEST_F(GpuTest, AutotuningPassesTheArgumentsEachConfigDecides) {
  char pattern[] = "/tmp/tessera-gpu-tune-XXXXXX";
  std::string dir = mkdtemp(pattern);
  Kernel echo = kernel("config_argument", [](Ptr<i32> seen, Int block, const Config &cfg) {
    store(seen + cfg["BLOCK"] / 64, block);
  });
  std::vector<int32_t> slots(5, -7);
  auto seen = upload(slots);
  jit::Autotuner::Options options;
  options.database = dir + "/tuning.json";
  options.runs = 3;
  options.arguments = [](const Config &config, std::vector<LaunchArg> &args) { args[1] = config["BLOCK"]; };
  jit::Autotuner tuner(echo, {{{"BLOCK", 64}}, {{"BLOCK", 128}}, {{"BLOCK", 256}}}, options);
  tuner.launch([](const Config &) { return Grid{1}; }, seen.data(), -1);
  jit::synchronize();
  ASSERT_TRUE(tuner.last_tuning().has_value());
  EXPECT_EQ(download<int32_t>(seen, 5), (std::vector<int32_t>{-7, 64, 128, -7, 256}));
  std::remove((dir + "/tuning.json").c_str());
  std::remove((dir + "/tuning.json.lock").c_str());
  rmdir(dir.c_str());
}

// --- matmul ----------------------------------------------------------------------------------------

struct MatmulCase {
  int M, N, K;
  bool bf16;
};

class Matmul : public GpuTest, public ::testing::WithParamInterface<MatmulCase> {};

TEST_P(Matmul, MatchesFloat32Reference) {
  const auto [M, N, K, bf16] = GetParam();
  static const char *source = R"(
    extern "C" __global__ void ref_matmul(const float *a, const float *b, float *c, int M, int N, int K) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i >= M * N) return;
      int m = i / N, n = i % N;
      float acc = 0;
      for (int k = 0; k < K; ++k) acc += a[m * K + k] * b[k * N + n];
      c[i] = acc;
    })";
  const DType dtype = bf16 ? DType::bf16 : DType::f16;
  auto round = [dtype](float f) { return from_16bit(to_16bit(f, dtype), dtype); };
  auto encode = [dtype](float f) { return to_16bit(f, dtype); };
  auto a = random_floats(M * K, 8), b = random_floats(K * N, 9);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    a16[i] = encode(a[i] = round(a[i]));
  for (size_t i = 0; i < b.size(); ++i)
    b16[i] = encode(b[i] = round(b[i]));
  auto reference = jit::nvrtc_kernel(source, "ref_matmul");
  auto da = upload(a), db = upload(b), expected = poisoned(M * N * 4);
  void *ap = da.data(), *bp = db.data(), *ep = expected.data();
  int m = M, n = N, kk = K;
  launch_reference(*reference, (M * N + 127) / 128, {&ap, &bp, &ep, &m, &n, &kk});
  auto want = download<float>(expected, M * N);

  auto da16 = upload(a16), db16 = upload(b16);
  Kernel kernel = bf16 ? examples::matmul<dsl::bf16>() : examples::matmul<f16>();
  // Small tiles on pointers; block pointers (the TMA on Hopper where rows are 16-byte aligned,
  // plain loads elsewhere) with one and with several atoms a row, ragged edges zero-filled;
  // a producer warpgroup issuing the TMA loads for 4 consumer warps and for 8 (which take the
  // producer's registers).
  for (const Config &config : {Config{{"BLOCK_M", 32}, {"BLOCK_N", 32}, {"BLOCK_K", 32}, {"GROUP_M", 4}},
                               Config{{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1}},
                               Config{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1},
                                      {"num_warps", 8}, {"num_stages", 4}},
                               Config{{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1},
                                      {"num_stages", 3}, {"warp_specialize", 1}},
                               Config{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1},
                                      {"num_warps", 8}, {"num_stages", 4}, {"warp_specialize", 1}}}) {
    SCOPED_TRACE(config.str());
    auto out = poisoned(M * N * 2);
    kernel.launch(examples::matmul_grid(config, M, N), config, da16.data(), db16.data(), out.data(), M, N, K, K, 1,
                  N, 1, N, 1);
    jit::synchronize();
    auto raw = download<uint16_t>(out, M * N);
    for (int i = 0; i < M * N; ++i) {
      float got = from_16bit(raw[i], dtype);
      ASSERT_NEAR(got, want[i], (bf16 ? 8e-3 : 1e-3) * std::abs(want[i]) + 1e-3) << "at " << i / N << "," << i % N;
    }
  }
}

// Programs that each walk several output tiles run the TMA's pipelined k loop again and again:
// its barriers are initialized anew for every tile (after being retired by the last one).
TEST_F(GpuTest, MatmulTilesWalkedByFewProgramsReuseTheTmaBarriers) {
  const int M = 256, N = 256, K = 320, programs = 3;
  Kernel walk = kernel("tile_walk", [](Ptr<f16> a, Ptr<f16> b, Ptr<f32> c, Int m, Int n, Int k, const Config &) {
    const int64_t bm = 64, bn = 64, bk = 64;
    Tile tiles_n = cdiv(n, bn);
    for_range(program_id(0), cdiv(m, bm) * tiles_n, num_programs(0), {}, [&](Tile t) {
      Tile row = t / tiles_n * bm, col = t % tiles_n * bn;
      Tile a_block = make_block_ptr(a, {m, k}, {k, 1}, {row, 0}, {bm, bk});
      Tile b_block = make_block_ptr(b, {k, n}, {n, 1}, {0, col}, {bk, bn});
      Tile acc = zeros({bm, bn}, DType::f32);
      for_range(0, k, bk, {acc, a_block, b_block}, [&](Tile) {
        acc = dot(load(a_block), load(b_block), acc);
        a_block = advance(a_block, {0, bk});
        b_block = advance(b_block, {bk, 0});
      });
      Tile rows = expand_dims(row + arange(0, bm), 1), cols = expand_dims(col + arange(0, bn), 0);
      store(c + rows * n + cols, acc, rows < m && cols < n);
    });
  });
  auto a = random_floats(M * K, 21), b = random_floats(K * N, 22);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = from_half(a16[i] = to_half(a[i]));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = from_half(b16[i] = to_half(b[i]));
  auto da = upload(a16), db = upload(b16), dc = poisoned(M * N * 4);
  walk.launch({programs}, {{"num_stages", 3}}, da.data(), db.data(), dc.data(), M, N, K);
  jit::synchronize();
  auto got = download<float>(dc, M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int k = 0; k < K; ++k)
        want += double(a[i * K + k]) * b[k * N + j];
      ASSERT_NEAR(got[i * N + j], want, 1e-3 * std::abs(want) + 1e-3) << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Matmul,
                         ::testing::Values(MatmulCase{64, 64, 64, false}, MatmulCase{100, 72, 50, false},
                                           MatmulCase{17, 130, 33, true}, MatmulCase{129, 31, 96, true},
                                           MatmulCase{200, 144, 80, false}, MatmulCase{300, 272, 336, true},
                                           MatmulCase{1, 512, 1040, false}),
                         [](const auto &info) {
                           const auto &p = info.param;
                           return std::to_string(p.M) + "x" + std::to_string(p.N) + "x" +
                                  std::to_string(p.K) + (p.bf16 ? "_bf16" : "_f16");
                         });

// --- attention forward --------------------------------------------------------------------------

struct AttentionCase {
  int nq, nkv;
};

class Attention : public GpuTest, public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(Attention, MatchesFloat32Reference) {
  const auto [nq, nkv] = GetParam();
  const int heads = 3, D = 64;
  const float scale = 0.125f;
  static const char *source = R"(
    extern "C" __global__ void ref_attention(const float *q, const float *k, const float *v, float *o,
                                             float *lse, int heads, int nq, int nkv, float scale) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i >= heads * nq) return;
      int h = i / nq;
      const float *qi = q + (long long)i * 64;
      const float *kh = k + (long long)h * nkv * 64, *vh = v + (long long)h * nkv * 64;
      float m = -__int_as_float(0x7f800000);
      for (int j = 0; j < nkv; ++j) {
        float s = 0;
        for (int d = 0; d < 64; ++d) s += qi[d] * kh[j * 64 + d];
        m = fmaxf(m, s * scale);
      }
      float acc[64] = {0}, l = 0;
      for (int j = 0; j < nkv; ++j) {
        float s = 0;
        for (int d = 0; d < 64; ++d) s += qi[d] * kh[j * 64 + d];
        float p = expf(s * scale - m);
        l += p;
        for (int d = 0; d < 64; ++d) acc[d] += p * vh[j * 64 + d];
      }
      for (int d = 0; d < 64; ++d) o[(long long)i * 64 + d] = l > 0 ? acc[d] / l : 0.f;
      lse[i] = l > 0 ? m + logf(l) : -__int_as_float(0x7f800000);
    })";
  auto make = [](int n, uint32_t seed) {
    auto v = random_floats(n, seed, -2, 2);
    std::vector<uint16_t> h(n);
    for (int i = 0; i < n; ++i)
      h[i] = to_half(v[i]), v[i] = from_half(h[i]);
    return std::make_pair(v, h);
  };
  auto [q, q16] = make(heads * nq * D, 10);
  auto [k, k16] = make(heads * std::max(nkv, 1) * D, 11);
  auto [v, v16] = make(heads * std::max(nkv, 1) * D, 12);
  auto reference = jit::nvrtc_kernel(source, "ref_attention");
  auto dq = upload(q), dk = upload(k), dv = upload(v);
  auto eo = poisoned(heads * nq * D * 4), el = poisoned(heads * nq * 4);
  void *qp = dq.data(), *kp = dk.data(), *vp = dv.data(), *op = eo.data(), *lp = el.data();
  int hh = heads, a = nq, b = nkv;
  float s = scale;
  launch_reference(*reference, (heads * nq + 127) / 128, {&qp, &kp, &vp, &op, &lp, &hh, &a, &b, &s});

  auto dq16 = upload(q16), dk16 = upload(k16), dv16 = upload(v16);
  auto out = poisoned(heads * nq * D * 2), lse = poisoned(heads * nq * 4);
  examples::attention_forward<f16>().launch(
      {uint32_t(cdiv(nq, 64)), uint32_t(heads)}, {{"BLOCK_M", 64}, {"BLOCK_N", 32}, {"HEAD_DIM", 64}},
      dq16.data(), dk16.data(), dv16.data(), out.data(), lse.data(), nq, nkv, scale);
  jit::synchronize();
  auto raw = download<uint16_t>(out, heads * nq * D);
  std::vector<float> got(raw.size());
  std::transform(raw.begin(), raw.end(), got.begin(), from_half);
  EXPECT_LE(maxAbsError(got, download<float>(eo, heads * nq * D)), 2e-3);
  auto gotLse = download<float>(lse, heads * nq), wantLse = download<float>(el, heads * nq);
  for (int i = 0; i < heads * nq; ++i) {
    if (std::isinf(wantLse[i]))
      EXPECT_TRUE(std::isinf(gotLse[i]) && gotLse[i] < 0) << "row " << i;
    else
      EXPECT_NEAR(gotLse[i], wantLse[i], 1e-3) << "row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, Attention,
                         ::testing::Values(AttentionCase{113, 77}, AttentionCase{1, 256},
                                           AttentionCase{64, 1}, AttentionCase{70, 0}),
                         [](const auto &info) {
                           return std::to_string(info.param.nq) + "x" + std::to_string(info.param.nkv);
                         });

} // namespace
