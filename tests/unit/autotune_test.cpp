// Autotuning logic without a GPU: fake timings, fake GPU identities, temporary databases.
#include "test_util.h"

#include "tessera/error.h"
#include "tessera/jit/Autotune.h"
#include "tessera/jit/Cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using namespace tessera::jit;
using ::testing::HasSubstr;

std::vector<Config> space() {
  return {{{"BLOCK", 64}, {"num_warps", 4}}, {{"BLOCK", 128}, {"num_warps", 4}},
          {{"BLOCK", 256}, {"num_warps", 8}}, {{"BLOCK", 512}, {"num_warps", 8}}};
}

/// A fake GPU: 256 is fastest, 512 "runs out of resources".
double fakeTime(const Config &config) {
  int64_t block = config["BLOCK"];
  if (block == 512)
    throw Error("cuLaunchKernel(probe) failed: CUDA_ERROR_OUT_OF_RESOURCES");
  return block == 256 ? 1.0 : 2.0 + block / 64.0;
}

TEST(Tune, MeasuresWhatIsNotPrunedAndSkipsFailures) {
  int measured = 0;
  TuningResult result = tune(
      space(), [](const Config &c) { return c["BLOCK"] == 64 ? std::string("too small") : std::string(); },
      [&](const Config &c) {
        ++measured;
        return fakeTime(c);
      },
      false);
  EXPECT_EQ(measured, 5); // two sweeps of 128 and 256; the others are out of the second
  EXPECT_EQ(result.best["BLOCK"], 256);
  EXPECT_EQ(result.best_ms, 1.0);
  ASSERT_EQ(result.trials.size(), 4u);
  EXPECT_EQ(result.trials[0].failure, "pruned: too small");
  EXPECT_THAT(result.trials[3].failure, HasSubstr("CUDA_ERROR_OUT_OF_RESOURCES"));
  EXPECT_TRUE(result.trials[2].failure.empty());
}

/// A fake GPU whose sweeps misrank BLOCK 128 and 256 (1% apart at best), which the final's
/// rounds rank the other way round; BLOCK 64 is 10% behind and stays out of the final.
struct NoisySweep {
  std::vector<std::string> order; // every measure, in turn
  std::map<int64_t, std::vector<double>> times{{64, {1.10, 1.12}},
                                                {128, {1.00, 1.03, 1.05, 1.04, 1.06}},
                                                {256, {1.02, 1.01, 1.01, 1.09, 1.00}}};
  double operator()(const Config &config) {
    int64_t block = config["BLOCK"];
    if (block == 512)
      throw Error("cuLaunchKernel(probe) failed: CUDA_ERROR_OUT_OF_RESOURCES");
    order.push_back(std::to_string(block));
    std::vector<double> &left = times.at(block);
    double ms = left.front();
    left.erase(left.begin());
    return ms;
  }
};

TEST(Tune, TimesTheConfigsNearTheBestAgainInInterleavedRounds) {
  NoisySweep gpu;
  TuningResult result = tune(space(), {}, std::ref(gpu), false);
  // Two sweeps, the second in reverse order, then three rounds of the two finalists, the order
  // reversed every other round.
  EXPECT_THAT(gpu.order, ::testing::ElementsAre("64", "128", "256", "256", "128", "64", "128", "256", "256", "128",
                                                "128", "256"));
  EXPECT_EQ(result.best["BLOCK"], 256);
  EXPECT_EQ(result.best_ms, 1.01); // the median of its rounds
  EXPECT_EQ(result.trials[1].ms, 1.05);
  EXPECT_EQ(result.trials[1].final_rounds, 3);
  EXPECT_EQ(result.trials[0].ms, 1.10); // not a finalist: the lower of its sweep times
  EXPECT_EQ(result.trials[0].final_rounds, 0);
}

TEST(Tune, AConfigSlowedInOneSweepStillReachesTheFinal) {
  // BLOCK 256 reads 20% slow in the first sweep (out of the final's 3% on that alone), then
  // 1% ahead in the second; the final's rounds show it 10% ahead.
  std::map<int64_t, std::vector<double>> times{{64, {1.5, 1.5}},
                                               {128, {1.00, 1.00, 1.0, 1.0, 1.0}},
                                               {256, {1.20, 0.99, 0.9, 0.9, 0.9}}};
  TuningResult result = tune(
      space(), {},
      [&](const Config &c) -> double {
        if (c["BLOCK"] == 512)
          throw Error("out of resources");
        std::vector<double> &left = times.at(c["BLOCK"]);
        double ms = left.front();
        left.erase(left.begin());
        return ms;
      },
      false);
  EXPECT_EQ(result.best["BLOCK"], 256);
  EXPECT_EQ(result.best_ms, 0.9);
  EXPECT_EQ(result.trials[2].final_rounds, 3);
}

TEST(Tune, AConfigThatFailsInTheSecondSweepDropsOut) {
  int calls = 0;
  TuningResult result = tune(
      space(), {},
      [&](const Config &c) -> double {
        if (c["BLOCK"] == 512 || (c["BLOCK"] == 256 && ++calls > 1))
          throw Error("the GPU fell off the bus");
        return c["BLOCK"] == 256 ? 0.5 : c["BLOCK"] == 64 ? 1.5 : 1.0;
      },
      false);
  EXPECT_EQ(result.best["BLOCK"], 128); // fastest in the first sweep, but out of the second
  EXPECT_EQ(result.best_ms, 1.0);
  EXPECT_THAT(result.trials[2].failure, HasSubstr("failed in the second sweep: the GPU fell off the bus"));
}

TEST(Tune, AFinalistThatFailsWhenTimedAgainDropsOut) {
  int calls = 0;
  TuningResult result = tune(
      space(), {},
      [&](const Config &c) -> double {
        if (c["BLOCK"] == 512 || (c["BLOCK"] == 128 && ++calls > 2)) // both sweeps pass
          throw Error("the GPU fell off the bus");
        return c["BLOCK"] == 128 ? 0.99 : c["BLOCK"] == 64 ? 1.5 : 1.0;
      },
      false);
  EXPECT_EQ(result.best["BLOCK"], 256); // slower in the sweep, but the only finalist left
  EXPECT_THAT(result.trials[1].failure, HasSubstr("failed in the final: the GPU fell off the bus"));
}

TEST(Tune, FailsWhenEveryFinalistFailsWhenTimedAgain) {
  std::map<int64_t, int> calls;
  try {
    tune(
        space(), {},
        [&](const Config &c) -> double {
          if (c["BLOCK"] == 512 || (c["BLOCK"] >= 128 && ++calls[c["BLOCK"]] > 2))
            throw Error("the GPU fell off the bus");
          return c["BLOCK"] == 64 ? 1.5 : 1.0;
        },
        false);
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("every finalist failed when timed again"));
  }
}

TEST(Tune, TheFinalTakesTheFourFastestNearTheBest) {
  std::vector<Config> six;
  for (int64_t block = 1; block <= 6; ++block)
    six.push_back({{"BLOCK", block}});
  std::map<int64_t, int> measured;
  // Sweep times 1.006, 1.005, ..., 1.001 (BLOCK 6 fastest): all within 3%.
  tune(six, {}, [&](const Config &c) { return ++measured[c["BLOCK"]] <= 2 ? 1.007 - c["BLOCK"] * 0.001 : 1.0; },
       false);
  EXPECT_EQ(measured, (std::map<int64_t, int>{{1, 2}, {2, 2}, {3, 5}, {4, 5}, {5, 5}, {6, 5}}));
}

TEST(CompileThreads, TesseraCompileThreadsElseTheHostsThreadsUpTo16) {
  unsetenv("TESSERA_COMPILE_THREADS");
  EXPECT_GE(compile_threads(), 1u);
  EXPECT_LE(compile_threads(), 16u);
  setenv("TESSERA_COMPILE_THREADS", "3", 1);
  EXPECT_EQ(compile_threads(), 3u);
  for (const char *bad : {"0", "-2", "four", "4x", "2000"}) {
    setenv("TESSERA_COMPILE_THREADS", bad, 1);
    try {
      compile_threads();
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("TESSERA_COMPILE_THREADS must be a number of threads from 1 to 1024, got '" +
                                      std::string(bad) + "'"));
    }
  }
  unsetenv("TESSERA_COMPILE_THREADS");
}

TEST(Tune, FailsOnlyWhenNothingRuns) {
  try {
    tune(space(), {}, [](const Config &) -> double { throw Error("compile error"); }, false);
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("autotuning: no config ran"));
    EXPECT_THAT(error.what(), HasSubstr("{BLOCK=64, num_warps=4}: compile error"));
  }
}

class TuningStore : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/tessera-tuning-XXXXXX";
    dir_ = mkdtemp(pattern);
    path_ = dir_ + "/tuning.json";
    unsetenv("TESSERA_AUTOTUNE");
  }
  void TearDown() override {
    unsetenv("TESSERA_AUTOTUNE");
    std::remove(path_.c_str());
    std::remove((path_ + ".lock").c_str());
    std::remove((dir_ + "/export.json").c_str());
    rmdir(dir_.c_str());
  }
  static TuningResult result(int64_t block) {
    TuningResult r;
    r.best = {{"BLOCK", block}};
    r.best_ms = 1.5;
    r.trials.push_back({r.best, 1.5, "", 0.2});
    return r;
  }
  /// Options for the fake H200 and this test's database, timing with fakeTime and counting
  /// the configs timed in `measured_`.
  Autotuner::Options countingOptions() {
    Autotuner::Options options;
    options.context = h200;
    options.database = path_;
    options.measure = [this](const Config &c) {
      ++measured_;
      return fakeTime(c);
    };
    return options;
  }
  /// A kernel to tune: x[0:64] *= f.
  static Kernel scaled(const std::string &name) {
    return tessera::testing::probe(name, [](tessera::testing::ProbeArgs &a) {
      store(a.x + arange(0, 64), load(a.x + arange(0, 64)) * a.f);
    });
  }
  std::string dir_, path_;
  int measured_ = 0;
  TuningContext h200{"NVIDIA H200/132SM/3201MHz", 13000, "tessera-0.1/llvm-22.1.8"};
};

TEST_F(TuningStore, TheDatabaseIsTesseraTuningDbElseInTheCacheDir) {
  const char *before = std::getenv("TESSERA_TUNING_DB");
  const std::string saved = before ? before : "";
  setenv("TESSERA_TUNING_DB", path_.c_str(), 1);
  EXPECT_EQ(TuningDatabase::default_path(), path_);
  unsetenv("TESSERA_TUNING_DB");
  EXPECT_EQ(TuningDatabase::default_path(), cache_dir() + "/tuning.json");
  if (before)
    setenv("TESSERA_TUNING_DB", saved.c_str(), 1);
}

TEST_F(TuningStore, AnUnwritableDatabaseIsAnErrorNamingIt) {
  TuningDatabase db(dir_ + "/no/such/folder/tuning.json");
  EXPECT_FALSE(db.lookup(h200, "k").has_value());
  try {
    db.store(h200, "k", result(64));
    ADD_FAILURE() << "stored";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot lock the tuning database " + dir_ + "/no/such/folder/tuning.json"));
  }
}

TEST_F(TuningStore, ResultsAreKeyedByGpuModelDriverAndCompiler) {
  TuningDatabase db(path_);
  EXPECT_FALSE(db.lookup(h200, "k").has_value());
  db.store(h200, "k", result(256));
  EXPECT_EQ((*db.lookup(h200, "k"))["BLOCK"], 256);
  TuningContext h100 = h200;
  h100.gpu_model = "NVIDIA H100 80GB HBM3/132SM/2619MHz";
  EXPECT_FALSE(db.lookup(h100, "k").has_value());
  TuningContext newer = h200;
  newer.compiler = "tessera-0.2/llvm-22.1.8";
  EXPECT_FALSE(db.lookup(newer, "k").has_value());
  TuningContext driver = h200;
  driver.driver_version = 13010;
  EXPECT_FALSE(db.lookup(driver, "k").has_value());
  // Another database object (another process) sees the stored result.
  EXPECT_EQ((*TuningDatabase(path_).lookup(h200, "k"))["BLOCK"], 256);
}

TEST_F(TuningStore, RecordsWhichTrialsTheFinalTimedAgain) {
  TuningResult r = result(256);
  r.trials.push_back({{{"BLOCK", 128}}, 1.6, "", 0.2});
  r.trials[0].final_rounds = 3;
  TuningDatabase(path_).store(h200, "k", r);
  std::ifstream file(path_);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("\"final_rounds\": 3"));
  EXPECT_EQ(text.find("final_rounds"), text.rfind("final_rounds")); // only the finalist's
}

TEST_F(TuningStore, CorruptDatabaseIsIgnoredAndRewritten) {
  std::ofstream(path_) << "{ not json";
  TuningDatabase db(path_);
  EXPECT_FALSE(db.lookup(h200, "k").has_value());
  db.store(h200, "k", result(128));
  EXPECT_EQ((*db.lookup(h200, "k"))["BLOCK"], 128);
}

TEST_F(TuningStore, ConcurrentWritersKeepEveryEntry) {
  const int writers = 4, keys = 15;
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      TuningDatabase db(path_);
      for (int k = 0; k < keys; ++k)
        db.store(h200, "w" + std::to_string(w) + "k" + std::to_string(k), result(64 * (w + 1)));
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  TuningDatabase db(path_);
  for (int w = 0; w < writers; ++w)
    for (int k = 0; k < keys; ++k) {
      auto config = db.lookup(h200, "w" + std::to_string(w) + "k" + std::to_string(k));
      ASSERT_TRUE(config.has_value()) << "lost w" << w << "k" << k;
      EXPECT_EQ((*config)["BLOCK"], 64 * (w + 1));
    }
}

TEST_F(TuningStore, ExportImportShipsResultsToTheSameGpuModel) {
  TuningDatabase db(path_);
  db.store(h200, "a", result(256));
  db.store(h200, "b", result(128));
  EXPECT_EQ(db.export_to(dir_ + "/export.json", h200), 2u);
  std::remove(path_.c_str());
  TuningDatabase fresh(path_);
  TuningContext h100 = h200;
  h100.gpu_model = "NVIDIA H100";
  EXPECT_EQ(fresh.import_from(dir_ + "/export.json", h100), 0u); // another GPU: nothing applies
  EXPECT_EQ(fresh.import_from(dir_ + "/export.json", h200), 2u);
  EXPECT_EQ((*fresh.lookup(h200, "a"))["BLOCK"], 256);
  EXPECT_THROW(fresh.import_from(dir_ + "/missing.json", h200), Error);
}

TEST_F(TuningStore, AutotunerTunesOnceThenReusesAcrossProcesses) {
  Kernel k = scaled("scaled");
  int &measured = measured_;
  Autotuner::Options options = countingOptions();
  options.key_arguments = {3}; // n
  auto grid = [](const Config &c) { return Grid{uint32_t(c["BLOCK"])}; };
  float *x = reinterpret_cast<float *>(0x1000);
  std::vector<LaunchArg> args{x, x, x, 1000, int64_t(4), 2.0f};

  Autotuner first(k, space(), options);
  EXPECT_EQ(first.config_for(grid, args)["BLOCK"], 256);
  EXPECT_EQ(measured, 7); // two sweeps; 512 fails in the first
  ASSERT_TRUE(first.last_tuning().has_value());
  EXPECT_EQ(first.last_tuning()->trials.size(), 4u);
  EXPECT_EQ(first.config_for(grid, args)["BLOCK"], 256); // remembered in memory
  EXPECT_EQ(measured, 7);

  Autotuner second(k, space(), options); // as a new process would: from the database
  EXPECT_EQ(second.config_for(grid, args)["BLOCK"], 256);
  EXPECT_EQ(measured, 7);
  EXPECT_FALSE(second.last_tuning().has_value());

  std::vector<LaunchArg> other{x, x, x, 4096, int64_t(4), 2.0f}; // another key value: tuned
  EXPECT_EQ(second.config_for(grid, other)["BLOCK"], 256);
  EXPECT_EQ(measured, 14);
  EXPECT_NE(second.key(args), second.key(other));

  setenv("TESSERA_AUTOTUNE", "force", 1);
  Autotuner(k, space(), options).config_for(grid, args);
  EXPECT_EQ(measured, 21);
  setenv("TESSERA_AUTOTUNE", "off", 1);
  EXPECT_EQ(Autotuner(k, space(), options).config_for(grid, args)["BLOCK"], 64);
  EXPECT_EQ(measured, 21);
  setenv("TESSERA_AUTOTUNE", "cached", 1);
  std::vector<LaunchArg> unseen{x, x, x, 7, int64_t(4), 2.0f};
  EXPECT_EQ(Autotuner(k, space(), options).config_for(grid, unseen)["BLOCK"], 64);
  EXPECT_EQ(measured, 21);
}

TEST_F(TuningStore, KeyExtraBucketsArgumentsIntoOneTuning) {
  Kernel k = scaled("bucketed");
  int &measured = measured_;
  Autotuner::Options options = countingOptions();
  options.key_extra = [](const std::vector<LaunchArg> &args) { // n rounded up to a power of two
    int64_t p = 1;
    while (p < args[3].integer())
      p *= 2;
    return "n" + std::to_string(p);
  };
  auto grid = [](const Config &c) { return Grid{uint32_t(c["BLOCK"])}; };
  float *x = reinterpret_cast<float *>(0x1000);
  Autotuner tuner(k, space(), options);
  auto with = [&](int n) { return std::vector<LaunchArg>{x, x, x, n, int64_t(4), 2.0f}; };
  tuner.config_for(grid, with(600));
  EXPECT_EQ(measured, 7);
  tuner.config_for(grid, with(1000)); // the same bucket (1024): no new tuning
  EXPECT_EQ(measured, 7);
  EXPECT_EQ(tuner.key(with(600)), tuner.key(with(1000)));
  EXPECT_THAT(tuner.key(with(1000)), HasSubstr("|n1024"));
  tuner.config_for(grid, with(1025)); // the next bucket
  EXPECT_EQ(measured, 14);
}

// Options::specialize: every timed config carries what the arguments decide; the tuning
// stores and returns the space's config without it (the launcher adds it again).
TEST_F(TuningStore, SpecializeReachesEveryTimedConfigButNotTheStoredOne) {
  Kernel k = scaled("specialized");
  Autotuner::Options options = countingOptions();
  std::vector<std::pair<int64_t, int64_t>> evens; // (BLOCK, EVEN) of every timing
  options.measure = [&](const Config &c) {
    evens.push_back({c["BLOCK"], c.get("EVEN", -1)});
    return fakeTime(c);
  };
  options.specialize = [](Config &c, const std::vector<LaunchArg> &args) {
    c.set("EVEN", args[3].integer() % c["BLOCK"] == 0 ? 1 : 0);
  };
  auto grid = [](const Config &c) { return Grid{uint32_t(c["BLOCK"])}; };
  float *x = reinterpret_cast<float *>(0x1000);
  Autotuner tuner(k, space(), options);
  Config best = tuner.config_for(grid, {x, x, x, 64, int64_t(4), 2.0f});
  ASSERT_EQ(evens.size(), 2 * space().size() - 1); // two sweeps; 512 fails in the first
  for (auto [block, even] : evens)
    EXPECT_EQ(even, 64 % block == 0 ? 1 : 0) << "BLOCK " << block;
  EXPECT_EQ(best.get("EVEN", -1), -1);
  EXPECT_EQ(TuningDatabase(path_).lookup(h200, tuner.key({x, x, x, 64, int64_t(4), 2.0f}))->get("EVEN", -1), -1);
}

TEST_F(TuningStore, KernelIdentityChangesWithItsCode) {
  Autotuner::Options options;
  options.key_arguments = {3};
  options.context = h200;
  options.database = path_;
  auto body = [](float factor) {
    return [factor](tessera::testing::ProbeArgs &a) { store(a.x + arange(0, 64), load(a.x + arange(0, 64)) * factor); };
  };
  std::vector<LaunchArg> args{nullptr, nullptr, nullptr, 1000, int64_t(4), 2.0f};
  Autotuner a(tessera::testing::probe("k", body(2.0f)), space(), options);
  Autotuner b(tessera::testing::probe("k", body(3.0f)), space(), options);
  EXPECT_NE(a.key(args), b.key(args));
  options.key_arguments = {9};
  EXPECT_THROW(Autotuner(tessera::testing::probe("k", body(2.0f)), space(), options).key(args), Error);
  EXPECT_THROW(Autotuner(tessera::testing::probe("k", body(2.0f)), {}, options), Error);
}

} // namespace
