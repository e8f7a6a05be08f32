// Host-side logic of the runtime, checked without a GPU: launch argument checks, cache keys,
// the disk cache's atomic writes under concurrent processes, corrupt entries.
#include "test_util.h"

#include "tessera/compiler/Compiler.h"
#include "tessera/jit/Cache.h"
#include "vector_add.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/wait.h>
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
                                      {"wgmma", 2, "wgmma must be 0 or 1, got 2"}}) {
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
