// Host-side logic of the runtime, checked without a GPU: launch argument checks, cache keys,
// the disk cache's atomic writes under concurrent processes, corrupt entries, TMA tensor maps.
#include "test_util.h"

#include "tessera/compiler/Compiler.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/TensorMap.h"
#include "tessera/kernels/catalog.h"
#include "matmul.h"
#include "vector_add.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using ::testing::HasSubstr;

std::string launchError(const std::function<void(const Kernel &)> &launch) {
  Kernel k = kernel("scale", [](Ptr<f32> x, Int n, Long stride, Float s) {
    store(x + arange(0, 16), load(x + arange(0, 16)) * s + (n + stride).to<f32>());
  });
  try {
    launch(k);
  } catch (const Error &error) {
    return error.what();
  }
  return "no error";
}

TEST(Launch, ArgumentsAreCheckedAgainstTheSignatureBeforeAnyGpuWork) {
  float *device = reinterpret_cast<float *>(0x1000);
  EXPECT_THAT(launchError([&](const Kernel &k) { k.launch({1}, {}, device, 4, int64_t(8)); }),
              HasSubstr("kernel 'scale': expects 4 arguments (ptr<f32>, i32, i64, f32), got 3"));
  EXPECT_THAT(launchError([&](const Kernel &k) { k.launch({1}, {}, 5, 4, 8, 1.0f); }),
              HasSubstr("argument 0 (ptr<f32>) must be a device pointer, got a number"));
  EXPECT_THAT(launchError([&](const Kernel &k) { k.launch({1}, {}, device, device, 8, 1.0f); }),
              HasSubstr("argument 1 (i32) must be a number, got a pointer"));
  EXPECT_THAT(launchError([&](const Kernel &k) { k.launch({1}, {}, device, 2.5, 8, 1.0f); }),
              HasSubstr("argument 1 (i32) must be an integer, got a floating-point number"));
  EXPECT_THAT(launchError([&](const Kernel &k) { k.launch({1}, {}, device, int64_t(1) << 40, 8, 1.0f); }),
              HasSubstr("argument 1 (i32) 1099511627776 does not fit in i32"));
  EXPECT_THAT(launchError([&](const Kernel &k) { k.launch({1, 70000}, {}, device, 4, 8, 1.0f); }),
              HasSubstr("grid (1, 70000, 1) exceeds the GPU's limits"));
  // Nothing to run: no GPU needed, no error.
  EXPECT_EQ(launchError([&](const Kernel &k) { k.launch({0}, {}, device, 4, 8, 1.0f); }), "no error");
}

class Cache : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/tessera-cache-test-XXXXXX";
    dir_ = mkdtemp(pattern);
    setenv("TESSERA_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    jit::cache_clear();
    unsetenv("TESSERA_CACHE_DIR");
    std::remove((dir_ + "/bad.tessera").c_str());
    rmdir(dir_.c_str());
  }
  static compiler::CompiledKernel kernel(const std::string &ptx) {
    compiler::CompiledKernel k;
    k.name = "probe";
    k.ptx = ptx;
    k.num_warps = 8;
    k.shared_memory = 4096;
    return k;
  }
  std::string dir_;
};

TEST_F(Cache, KeysSeparateSourceTargetAndAreStable) {
  std::string a = jit::cache_key("module A", {9, 0});
  EXPECT_EQ(a, jit::cache_key("module A", {9, 0}));
  EXPECT_NE(a, jit::cache_key("module B", {9, 0}));
  EXPECT_NE(a, jit::cache_key("module A", {8, 0}));
  EXPECT_NE(a, jit::cache_key("module A", {9, 0, 101376})); // a kernel may be lowered to fit the limit
  EXPECT_EQ(a.size(), 32u);
}

// The keys (and the tuning database's contexts) include the compiler's version, which names a
// hash of the compiler's sources: a rebuilt compiler never reuses another one's PTX.
TEST(CompilerVersion, NamesAHashOfTheCompilersSources) {
  EXPECT_THAT(compiler::version(), ::testing::MatchesRegex("tessera-[0-9.]+/llvm-[0-9.a-z]+/compiler-[0-9a-f]{16}"));
}

// Compiler knobs of a config outside their range are errors naming the kernel and the knob.
TEST(CompilerConfig, RejectsKnobsOutOfRange) {
  for (auto [knob, value, message] : {std::tuple{"num_stages", 9, "num_stages must be from 1 to 8, got 9"},
                                      {"num_warps", 3, "num_warps must be a power of two from 1 to 32, got 3"},
                                      {"wgmma", 2, "wgmma must be 0 or 1, got 2"},
                                      {"tma", -1, "tma must be 0 or 1, got -1"},
                                      {"warp_specialize", 2, "warp_specialize must be 0 or 1, got 2"},
                                      {"ping_pong", 3, "ping_pong must be 0, 1 (turns at the dots) or 2 (at the exponentials), got 3"},
                                      {"staged_stores", 2, "staged_stores must be 0 or 1, got 2"},
                                      {"exp2_on_fma", 9, "exp2_on_fma must be from 0 to 8 (eighths of the exponentials on the FMA pipe), got 9"},
                                      {"exp2_on_fma", -1, "exp2_on_fma must be from 0 to 8 (eighths of the exponentials on the FMA pipe), got -1"},
                                      {"tree_max", 2, "tree_max must be 0 or 1, got 2"},
                                      {"defer_lane_sums", -1, "defer_lane_sums must be 0 or 1, got -1"},
                                      {"ping_pong", 1, "ping_pong needs warp_specialize = 1 and num_warps = 8 (two "
                                                       "consumer warpgroups), got warp_specialize = 0, num_warps = 4"},
                                      {"ping_pong", 2, "ping_pong needs warp_specialize = 1 and num_warps = 8 (two "
                                                       "consumer warpgroups), got warp_specialize = 0, num_warps = 4"},
                                      {"programs_per_sm", 0, "programs_per_sm must be from 1 to 16 (an SM runs 64 warps, a program 4), got 0"},
                                      {"programs_per_sm", 17, "programs_per_sm must be from 1 to 16 (an SM runs 64 warps, a program 4), got 17"}}) {
    dsl::Config config{{"BLOCK", 256}};
    config.set(knob, value);
    try {
      compiler::compile(examples::vector_add().trace(config), compiler::Target{9, 0});
      ADD_FAILURE() << knob << " = " << value << " compiled";
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(std::string("kernel 'vector_add': ") + message));
    }
  }
}

/// The example matmul's arguments as the launcher sees 16-byte-aligned row-major tensors: the
/// TMA may copy them.
dsl::Specialization alignedMatmul(const dsl::Kernel &matmul) {
  dsl::Specialization aligned;
  aligned.divisible_by_16.assign(matmul.signature().size(), true);
  aligned.equal_to_1.assign(matmul.signature().size(), false);
  for (size_t unitStride : {7, 9, 11})
    aligned.equal_to_1[unitStride] = true;
  return aligned;
}

// warp_specialize on Hopper: the block-pointer matmul, its tensors aligned (the TMA copies
// them), runs a producer warpgroup beyond its 8 warps, which gives its registers to them;
// where nothing goes through the TMA (unaligned tensors, or not Hopper) the knob changes
// nothing. Its consumers share no barrier: the producer's empty barriers order the refills.
TEST(CompilerConfig, WarpSpecializationAddsAProducerWarpgroup) {
  dsl::Kernel matmul = examples::matmul<dsl::bf16>();
  const dsl::Config config{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1},
                           {"num_warps", 8},  {"num_stages", 4}, {"warp_specialize", 1}};
  const dsl::Specialization aligned = alignedMatmul(matmul);
  compiler::CompiledKernel specialized = compiler::compile(matmul.trace(config, aligned), compiler::Target{9, 0});
  EXPECT_EQ(specialized.num_warps, 12);
  EXPECT_EQ(specialized.tensor_maps.size(), 2u);
  EXPECT_THAT(specialized.ptx, ::testing::HasSubstr(".maxntid 384, 1, 1"));
  EXPECT_THAT(specialized.ptx, ::testing::HasSubstr("setmaxnreg.dec.sync.aligned.u32 24;"));
  EXPECT_THAT(specialized.ptx, ::testing::HasSubstr("setmaxnreg.inc.sync.aligned.u32 240;"));
  EXPECT_THAT(specialized.ptx, ::testing::Not(::testing::HasSubstr("bar.sync \t1, 256;")));
  EXPECT_EQ(compiler::compile(matmul.trace(config), compiler::Target{9, 0}).num_warps, 8);
  EXPECT_EQ(compiler::compile(matmul.trace(config, aligned), compiler::Target{8, 0}).num_warps, 8);
}

// The tuner compiles its configs on several threads at once (Kernel::compile_ahead): tracing
// and compiling keep no state between compilations, so each thread's PTX is the one a single
// thread writes, for kernels that take every pass (wgmma, the TMA, warp specialization,
// persistent programs) compiled side by side.
TEST(Compiler, CompilationsOnSeveralThreadsAtOnceMatchOneAtATime) {
  struct Compilation {
    Kernel kernel;
    Config config;
    Specialization specialization;
  };
  std::vector<Compilation> compilations;
  Kernel matmul = examples::matmul<bf16>();
  compilations.push_back({matmul,
                          {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1}, {"num_warps", 8},
                           {"num_stages", 4}, {"warp_specialize", 1}},
                          alignedMatmul(matmul)});
  for (const kernels::ShippedKernel &shipped : kernels::shipped_kernels())
    if (shipped.kernel.name() == "attention_fwd" &&
        (shipped.variant == "f16.d128" || shipped.variant == "f16.d64.causal.persistent")) {
      Specialization aligned;
      aligned.divisible_by_16.assign(shipped.kernel.signature().size(), true);
      aligned.equal_to_1.assign(shipped.kernel.signature().size(), false);
      compilations.push_back({shipped.kernel, shipped.config, aligned});
    }
  ASSERT_EQ(compilations.size(), 3u);
  auto compile = [&](const Compilation &c) {
    return compiler::compile(c.kernel.trace(c.config, c.specialization), compiler::Target{9, 0}).ptx;
  };
  std::vector<std::string> serial;
  for (const Compilation &c : compilations)
    serial.push_back(compile(c));
  std::vector<std::vector<std::string>> threaded(2, std::vector<std::string>(compilations.size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < threaded.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t j = 0; j < compilations.size(); ++j) { // the threads start on different kernels
        const size_t i = (j + t) % compilations.size();
        threaded[t][i] = compile(compilations[i]);
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (size_t i = 0; i < compilations.size(); ++i) {
    const std::string what = compilations[i].kernel.name() + " " + compilations[i].config.str();
    EXPECT_NE(serial[i].find("wgmma.mma_async"), std::string::npos) << what;
    EXPECT_NE(serial[i].find("cp.async.bulk.tensor"), std::string::npos) << what;
    for (const auto &ptx : threaded)
      EXPECT_TRUE(ptx[i] == serial[i]) << what;
  }
}

/// The shipped f16 d = 128 forward traced for aligned tensors, on 128 x 128 blocks of two
/// consumer warpgroups beside a producer in FlashAttention-3's order, with `knobs` set too.
dsl::TracedKernel d128Forward(std::initializer_list<std::pair<const char *, int64_t>> knobs) {
  const auto shipped = kernels::shipped_kernels();
  auto forward = std::find_if(shipped.begin(), shipped.end(), [](const kernels::ShippedKernel &k) {
    return k.kernel.name() == "attention_fwd" && k.variant == "f16.d128";
  });
  if (forward == shipped.end())
    throw Error("no shipped f16 d = 128 attention forward");
  dsl::Config config = forward->config;
  for (auto [key, value] : {std::pair<const char *, int64_t>{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"num_warps", 8},
                            {"num_stages", 2}, {"OVERLAP_SOFTMAX", 1}, {"SPLIT_MASKED", 1}, {"BLOCK_POINTERS", 1},
                            {"invariant_operands_in_shared", 1}, {"warp_specialize", 1}})
    config.set(key, value);
  for (auto [key, value] : knobs)
    config.set(key, value);
  dsl::Specialization aligned;
  aligned.divisible_by_16.assign(forward->kernel.signature().size(), true);
  aligned.equal_to_1.assign(forward->kernel.signature().size(), false);
  return forward->kernel.trace(config, aligned);
}

// The forward's last deferred P @ V, after its loops, reads V from a stage of its own that the
// producer's TMA fills: wgmma, no mma.sync. Where that stage would not fit beside the rings
// (here under a limit just below what it takes), the kernel is compiled without it. (The
// stage reuses a ring's memory and its barriers an alignment gap: without it the kernel may
// take as much.)
TEST(CompilerConfig, ALoadAfterTheLoopsGetsAStageWhereItFits) {
  const dsl::TracedKernel traced = d128Forward({});
  const compiler::CompiledKernel staged = compiler::compile(traced, compiler::Target{9, 0});
  EXPECT_THAT(staged.ptx, ::testing::HasSubstr("wgmma.mma_async"));
  EXPECT_THAT(staged.ptx, ::testing::Not(::testing::HasSubstr("mma.sync")));
  EXPECT_LE(staged.shared_memory, compiler::Target{}.max_shared_memory);
  // One barrier over the 256 consumer threads alone: after Q's copy into shared memory (the
  // waits after its two loops only ordered refills, which the empty barriers order).
  EXPECT_EQ(tessera::testing::count(staged.ptx, "bar.sync \t1, 256;"), 1);
  const compiler::CompiledKernel tight = compiler::compile(traced, compiler::Target{9, 0, staged.shared_memory - 1});
  EXPECT_THAT(tight.ptx, ::testing::HasSubstr("mma.sync"));
  EXPECT_LE(tight.shared_memory, staged.shared_memory);
}

// With LAST_PRODUCT_IN_LOOP that product is a loop of one block whose V fills the ring of the
// loops' K and V (its copy arriving for K's buffer too): no stage of its own (32 KB less), and
// in persistent programs wgmma from the ring where the consumers would load V and multiply on
// mma.sync, in no more shared memory than without.
TEST(CompilerConfig, TheLastProductAsALoopTakesTheRingOfKAndV) {
  auto compile = [](std::initializer_list<std::pair<const char *, int64_t>> knobs) {
    return compiler::compile(d128Forward(knobs), compiler::Target{9, 0});
  };
  const compiler::CompiledKernel ownStage = compile({{"ping_pong", 1}}),
                                 inLoop = compile({{"ping_pong", 1}, {"LAST_PRODUCT_IN_LOOP", 1}});
  EXPECT_EQ(inLoop.shared_memory, ownStage.shared_memory - 128 * 128 * 2);
  EXPECT_THAT(inLoop.ptx, ::testing::HasSubstr("mbarrier.arrive.shared::cta.b64 _,"));
  const compiler::CompiledKernel persistent = compile({{"ping_pong", 1}, {"PERSISTENT", 1}}),
                                 persistentInLoop =
                                     compile({{"ping_pong", 1}, {"PERSISTENT", 1}, {"LAST_PRODUCT_IN_LOOP", 1}});
  EXPECT_THAT(persistent.ptx, ::testing::HasSubstr("mma.sync"));
  EXPECT_LE(persistentInLoop.shared_memory, persistent.shared_memory);
  for (const compiler::CompiledKernel *kernel : {&inLoop, &persistentInLoop}) {
    EXPECT_THAT(kernel->ptx, ::testing::HasSubstr("wgmma.mma_async"));
    EXPECT_THAT(kernel->ptx, ::testing::Not(::testing::HasSubstr("mma.sync")));
  }
}

// staged_stores on Hopper: the matmul's accumulator goes to shared memory by stmatrix and on to
// global memory in 16-byte vectors. Where its scratch would not fit (here under a limit just
// below what it takes) the stores are not staged; before sm_90 (no stmatrix) the knob is
// ignored.
TEST(CompilerConfig, StagedStoresLeaveInSixteenByteVectors) {
  dsl::Kernel matmul = examples::matmul<dsl::f16>();
  dsl::Config config{{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}, {"num_warps", 8}, {"num_stages", 3}};
  const dsl::Specialization aligned = alignedMatmul(matmul);
  auto compile = [&](int64_t stagedStores, compiler::Target target) {
    config.set("staged_stores", stagedStores);
    return compiler::compile(matmul.trace(config, aligned), target);
  };
  const compiler::CompiledKernel direct = compile(0, {9, 0}), staged = compile(1, {9, 0});
  EXPECT_THAT(direct.ptx, ::testing::Not(::testing::HasSubstr("stmatrix")));
  EXPECT_THAT(direct.ptx, ::testing::Not(::testing::HasSubstr("st.global.v4")));
  EXPECT_THAT(staged.ptx, ::testing::HasSubstr("stmatrix.sync.aligned.m8n8.x4.shared.b16"));
  EXPECT_THAT(staged.ptx, ::testing::HasSubstr("st.global.v4.b32"));
  ASSERT_GT(staged.shared_memory, direct.shared_memory);
  EXPECT_EQ(compile(1, {9, 0, staged.shared_memory - 1}).ptx, direct.ptx);
  EXPECT_EQ(compile(1, {8, 0}).ptx, compile(0, {8, 0}).ptx);
}

// Shared-memory addresses are 32-bit (nvptx-short-ptr): ldmatrix, cp.async and the staging
// stores name one register each, not a 64-bit pair, so addresses a loop keeps cost half.
TEST(CompilerConfig, SharedAddressesTakeOneRegister) {
  dsl::Kernel matmul = examples::matmul<dsl::f16>();
  const dsl::Config config{{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 32}, {"num_warps", 4}, {"num_stages", 3}};
  std::string ptx = compiler::compile(matmul.trace(config, alignedMatmul(matmul)), compiler::Target{8, 0}).ptx;
  EXPECT_TRUE(std::regex_search(ptx, std::regex(R"(ldmatrix[^\n]*\[%r\d+\])")));
  EXPECT_TRUE(std::regex_search(ptx, std::regex(R"(cp\.async[^\n]*\[%r\d+\], \[%rd\d+\])")));
  EXPECT_FALSE(std::regex_search(ptx, std::regex(R"((ld|st)\.shared[^\n]*\[%rd)")));
}

// A select on several conditions keeps them one predicate (and.pred, which ptxas folds into its
// compares): LLVM's NVPTX lowering would otherwise chain one select per condition.
TEST(CompilerConfig, SelectOnCombinedConditionsIsOneSelect) {
  Kernel masked = kernel("masked", [](Ptr<f32> x, Ptr<f32> y, Int n, Int lo, Int skip) {
    Tile i = arange(0, 512);
    store(y + i, where(i < n && i >= lo && i != skip, load(x + i), -INFINITY));
  });
  std::string ptx = compiler::compile(masked.trace({{"num_warps", 4}}), compiler::Target{9, 0}).ptx;
  EXPECT_GT(tessera::testing::count(ptx, "and.pred"), 0);
  EXPECT_EQ(tessera::testing::count(ptx, "selp.f32"), 4) << ptx; // 512 elements over 128 threads: one select each
}

// programs_per_sm: each program gets its share of an SM's 65536 registers; a producer
// warpgroup beside 4 warps, 2 programs an SM, starts at 32768 / 256 threads and gives the
// consumers all but 24 a thread of its own.
TEST(CompilerConfig, ProgramsPerSmShareTheRegisterFile) {
  dsl::Kernel matmul = examples::matmul<dsl::f16>();
  dsl::Config config{{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1}, {"num_warps", 4},
                     {"num_stages", 3}, {"warp_specialize", 1}, {"programs_per_sm", 2}};
  const dsl::Specialization aligned = alignedMatmul(matmul);
  std::string ptx = compiler::compile(matmul.trace(config, aligned), compiler::Target{9, 0}).ptx;
  EXPECT_THAT(ptx, ::testing::HasSubstr(".maxnreg 128"));
  EXPECT_THAT(ptx, ::testing::HasSubstr("setmaxnreg.dec.sync.aligned.u32 24;"));
  EXPECT_THAT(ptx, ::testing::HasSubstr("setmaxnreg.inc.sync.aligned.u32 232;"));
  config.set("warp_specialize", 0); // 4 warps alone: 255 (the most a thread may have) either way
  EXPECT_THAT(compiler::compile(matmul.trace(config, aligned), compiler::Target{9, 0}).ptx,
              ::testing::HasSubstr(".maxnreg 255"));
  config.set("num_warps", 8); // 32768 / 256 threads
  EXPECT_THAT(compiler::compile(matmul.trace(config, aligned), compiler::Target{9, 0}).ptx,
              ::testing::HasSubstr(".maxnreg 128"));
}

TEST_F(Cache, StoresAndLoadsEntries) {
  EXPECT_FALSE(jit::cache_load("missing").has_value());
  jit::cache_store("k1", kernel(".version 8.6\nentry"));
  auto loaded = jit::cache_load("k1");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->name, "probe");
  EXPECT_EQ(loaded->ptx, ".version 8.6\nentry");
  EXPECT_EQ(loaded->num_warps, 8);
  EXPECT_EQ(loaded->shared_memory, 4096);
  EXPECT_EQ(jit::cache_stats().entries, 1);
  EXPECT_EQ(jit::cache_clear(), 1);
  EXPECT_FALSE(jit::cache_load("k1").has_value());
}

// A kernel's tensor maps travel with its PTX: a launch from the disk cache must pass them.
TEST_F(Cache, KeepsTheTensorMaps) {
  compiler::CompiledKernel k = kernel("ptx");
  k.tensor_maps.push_back({1, 2, {{3, 0}, {-1, 77}}, {{5, 0}, {-1, 1}}, {128, 64}, 128});
  jit::cache_store("maps", k);
  auto loaded = jit::cache_load("maps");
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->tensor_maps.size(), 1u);
  const compiler::TensorMap &map = loaded->tensor_maps[0];
  EXPECT_EQ(map.pointer, 1);
  EXPECT_EQ(map.element_bytes, 2);
  ASSERT_EQ(map.shape.size(), 2u);
  EXPECT_EQ(map.shape[0].arg, 3);
  EXPECT_EQ(map.shape[1].arg, -1);
  EXPECT_EQ(map.shape[1].value, 77);
  ASSERT_EQ(map.strides.size(), 2u);
  EXPECT_EQ(map.strides[0].arg, 5);
  EXPECT_EQ(map.strides[1].value, 1);
  EXPECT_EQ(map.box, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(map.swizzle_bytes, 128);
}

TEST_F(Cache, CorruptOrTruncatedEntriesAreIgnoredAndRebuilt) {
  std::ofstream(dir_ + "/bad.tessera") << "not json\n.ptx";
  EXPECT_FALSE(jit::cache_load("bad").has_value());
  jit::cache_store("cut", kernel(std::string(1000, 'x')));
  {
    std::ifstream in(dir_ + "/cut.tessera");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir_ + "/cut.tessera") << all.substr(0, all.size() - 10);
  }
  EXPECT_FALSE(jit::cache_load("cut").has_value());
  jit::cache_store("cut", kernel("fresh"));
  EXPECT_EQ(jit::cache_load("cut")->ptx, "fresh");
}

TEST_F(Cache, ConcurrentProcessesNeverExposeAPartialEntry) {
  const int writers = 4, rounds = 200;
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < rounds; ++i)
        jit::cache_store("shared", kernel(std::string(20000 + w * 1000, char('a' + w))));
      _exit(0);
    }
    children.push_back(pid);
  }
  for (int i = 0; i < 2000; ++i)
    if (auto entry = jit::cache_load("shared")) {
      size_t w = entry->ptx.size() < 20000 ? 99 : (entry->ptx.size() - 20000) / 1000;
      ASSERT_LT(w, size_t(writers)) << "a partial entry of " << entry->ptx.size() << " bytes";
      ASSERT_EQ(entry->ptx, std::string(20000 + w * 1000, char('a' + w)));
    }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_TRUE(jit::cache_load("shared").has_value());
  // No temporary files are left behind.
  EXPECT_EQ(jit::cache_stats().entries, 1);
}

} // namespace

namespace {

// --- TMA tensor maps ------------------------------------------------------------------------

/// A's map of matmul(a, b, c, M, N, K, stride_am, ...): [M, K] with row stride stride_am.
compiler::TensorMap matrixMap() { return {0, 2, {{3, 0}, {5, 0}}, {{6, 0}, {-1, 1}}, {128, 64}, 128}; }

TEST(TensorMaps, MatmulThroughBlockPointersTakesOneMapPerOperandOnHopper) {
  Kernel k = examples::matmul<f16>();
  Config config{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1}, {"num_warps", 8}};
  // As a launch with 16-byte aligned matrices and unit column strides specializes it.
  Specialization aligned;
  aligned.divisible_by_16.assign(k.signature().size(), true);
  aligned.equal_to_1.assign(k.signature().size(), false);
  for (int unit : {7, 9, 11})
    aligned.divisible_by_16[unit] = !(aligned.equal_to_1[unit] = true);
  compiler::CompiledKernel hopper = compiler::compile(k.trace(config, aligned), compiler::Target{9, 0});
  ASSERT_EQ(hopper.tensor_maps.size(), 2u);
  for (const compiler::TensorMap &map : hopper.tensor_maps) {
    // A is [M, K] with stride_am (arguments 3, 5, 6); B is [K, N] with stride_bk (5, 4, 8).
    bool a = map.pointer == 0;
    EXPECT_TRUE(a || map.pointer == 1);
    EXPECT_EQ(map.shape[0].arg, a ? 3 : 5);
    EXPECT_EQ(map.shape[1].arg, a ? 5 : 4);
    EXPECT_EQ(map.strides[0].arg, a ? 6 : 8);
    EXPECT_EQ(map.strides[1].arg, -1);
    EXPECT_EQ(map.strides[1].value, 1);
    EXPECT_EQ(map.box, (std::vector<int64_t>{a ? 128 : 64, 64}));
    EXPECT_EQ(map.swizzle_bytes, 128);
  }
  EXPECT_THAT(hopper.ptx, HasSubstr(".param .align 64 .b8 matmul_param_12[128]"));
  EXPECT_THAT(hopper.ptx, HasSubstr("cp.async.bulk.tensor.2d"));
  // Without the alignment the specialization promises, with tma = 0, or before Hopper: none.
  EXPECT_TRUE(compiler::compile(k.trace(config), compiler::Target{9, 0}).tensor_maps.empty());
  Config off = config;
  off.set("tma", 0);
  EXPECT_TRUE(compiler::compile(k.trace(off, aligned), compiler::Target{9, 0}).tensor_maps.empty());
  EXPECT_TRUE(compiler::compile(k.trace(config, aligned), compiler::Target{8, 0}).tensor_maps.empty());
}

TEST(TensorMaps, EncodingIsInnermostFirstInBytes) {
  std::vector<LaunchArg> args{reinterpret_cast<void *>(0x10000), nullptr, nullptr, 300, 512, 1040, 1056};
  jit::TensorMapEncoding e = jit::plan_tensor_map("matmul", matrixMap(), args.data(), args.size());
  EXPECT_EQ(e.address, 0x10000u);
  EXPECT_EQ(e.dims, (std::vector<uint64_t>{1040, 300}));
  EXPECT_EQ(e.byte_strides, (std::vector<uint64_t>{2112}));
  EXPECT_EQ(e.box, (std::vector<uint32_t>{64, 128}));
  EXPECT_EQ(e.swizzle_bytes, 128);
  EXPECT_FALSE(e.empty);
}

// The TMA takes no empty tensor: a map of one reads 16 bytes of zeros instead (every element
// of an empty tensor reads zero, as its bounds check says).
TEST(TensorMaps, AnEmptyTensorReadsZeros) {
  std::vector<LaunchArg> args{reinterpret_cast<void *>(0x10000), nullptr, nullptr, 300, 512, 0, 1056};
  jit::TensorMapEncoding e = jit::plan_tensor_map("matmul", matrixMap(), args.data(), args.size());
  EXPECT_TRUE(e.empty);
  EXPECT_EQ(e.dims, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(e.byte_strides, (std::vector<uint64_t>{16}));
}

TEST(TensorMaps, WhatTheTmaCannotTakeIsAnErrorNamingTheArgument) {
  auto error = [](std::vector<LaunchArg> args) -> std::string {
    try {
      jit::plan_tensor_map("matmul", matrixMap(), args.data(), args.size());
    } catch (const Error &e) {
      return e.what();
    }
    return "no error";
  };
  void *aligned = reinterpret_cast<void *>(0x10000), *odd = reinterpret_cast<void *>(0x10008);
  EXPECT_THAT(error({odd, nullptr, nullptr, 64, 64, 64, 64}),
              HasSubstr("kernel 'matmul': argument 0 is not 16-byte aligned"));
  EXPECT_THAT(error({aligned, nullptr, nullptr, 64, 64, 64, 60}),
              HasSubstr("argument 6 (a stride, 60 elements) is not a non-negative multiple of 16 bytes"));
  EXPECT_THAT(error({aligned, nullptr, nullptr, 64, 64, 64, -64}), HasSubstr("argument 6 (a stride, -64 elements)"));
  EXPECT_THAT(error({aligned, nullptr, nullptr, int64_t(1) << 33, 64, 64, 64}),
              HasSubstr("argument 3 (a dimension, 8589934592) exceeds the TMA's 2^32 - 1"));
  EXPECT_THAT(error({aligned, nullptr, nullptr, 64, 64, 1.5, 64}), HasSubstr("reads argument 5, which is not an integer"));
}

} // namespace
