#include "tessera/jit/Autotune.h"

#include "tessera/compiler/Compiler.h"
#include "tessera/error.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/Runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

namespace tessera::jit {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxSpilledBytes = 256;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// One sweep's times of configs a few percent apart do not rank them: on the H200 the causal
/// d = 64 forward's two best configs (persistent or not, 2-3% apart when timed side by side)
/// swapped places between sweeps (0.696 / 0.703 ms, then 0.710 / 0.706). Nor does one sweep
/// always nominate the right configs: on an H100 the d = 64 N = 8192 ping-pong config, 2.35 ms
/// when timed again, read 2.66 and 2.69 ms in the sweeps of two runs, 8% behind a config it
/// beats by 10%, and stayed out of one run's final. So configs are swept twice, the second time
/// in reverse order (each then follows a different neighbour and sits at a different point of
/// the GPU's clock drift), and a config's sweep time is the lower of its two, since what
/// disturbs a timing only slows it. The sweeps only nominate: the (at most kMaxFinalists
/// fastest) configs within kFinalMargin of the best are timed again in kFinalRounds
/// interleaved rounds (each round times every finalist once, so that a drift of the GPU's
/// clock or temperature touches them alike, in reverse order every other round, so that none
/// always follows the same one), and the lowest median of those rounds wins.
constexpr double kFinalMargin = 0.03;
constexpr int kFinalRounds = 3;
constexpr size_t kMaxFinalists = 4;

void runFinal(TuningResult &result, const Measure &measure, bool progress) {
  std::vector<Trial *> finalists;
  for (Trial &trial : result.trials)
    if (trial.failure.empty() && trial.ms <= result.best_ms * (1 + kFinalMargin))
      finalists.push_back(&trial);
  std::stable_sort(finalists.begin(), finalists.end(), [](const Trial *a, const Trial *b) { return a->ms < b->ms; });
  if (finalists.size() > kMaxFinalists)
    finalists.resize(kMaxFinalists);
  if (finalists.size() < 2)
    return;
  std::vector<std::vector<double>> times(finalists.size());
  for (int round = 0; round < kFinalRounds; ++round)
    for (size_t turn = 0; turn < finalists.size(); ++turn) {
      const size_t i = round % 2 ? finalists.size() - 1 - turn : turn;
      if (!finalists[i]->failure.empty())
        continue;
      try {
        times[i].push_back(measure(finalists[i]->config));
      } catch (const Error &error) { // ran in the sweep, but not now: out of the final
        finalists[i]->failure = std::string("failed in the final: ") + error.what();
      }
    }
  result.best_ms = -1;
  for (size_t i = 0; i < finalists.size(); ++i) {
    Trial &trial = *finalists[i];
    if (!trial.failure.empty())
      continue;
    std::sort(times[i].begin(), times[i].end());
    trial.ms = times[i][times[i].size() / 2];
    trial.final_rounds = kFinalRounds;
    if (result.best_ms < 0 || trial.ms < result.best_ms) {
      result.best_ms = trial.ms;
      result.best = trial.config;
    }
    if (progress)
      std::fprintf(stderr, "[tessera tune] final %s: %.6f ms (median of %d rounds)\n", trial.config.str().c_str(),
                   trial.ms, kFinalRounds);
  }
  if (result.best_ms < 0)
    throw Error("autotuning: every finalist failed when timed again");
}

llvm::json::Object toJson(const dsl::Config &config) {
  llvm::json::Object object;
  for (const auto &[name, value] : config.values())
    object[name] = value;
  return object;
}

std::optional<dsl::Config> configFromJson(const llvm::json::Value *value) {
  const llvm::json::Object *object = value ? value->getAsObject() : nullptr;
  if (!object)
    return std::nullopt;
  dsl::Config config;
  for (const auto &[name, v] : *object) {
    std::optional<int64_t> number = v.getAsInteger();
    if (!number)
      return std::nullopt;
    config.set(name.str(), *number);
  }
  return config;
}

/// The database as JSON: {"version": 1, "entries": {context: {key: entry}}}; empty when the
/// file is missing or does not parse (it is then rewritten on the next store).
llvm::json::Object readDatabase(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (buffer) {
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*buffer)->getBuffer());
    if (parsed) {
      if (llvm::json::Object *object = parsed->getAsObject())
        if (object->getObject("entries"))
          return std::move(*object);
    } else {
      llvm::consumeError(parsed.takeError());
    }
  }
  return llvm::json::Object{{"version", 1}, {"entries", llvm::json::Object{}}};
}

void writeDatabase(const std::string &path, llvm::json::Object database) {
  std::random_device random;
  std::string temporary = path + "." + std::to_string(llvm::sys::Process::getProcessId()) + "." +
                          std::to_string(random()) + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(temporary, ec);
    if (ec)
      throw Error("cannot write the tuning database " + temporary + ": " + ec.message());
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(database))) << "\n";
  }
  if (std::error_code ec = llvm::sys::fs::rename(temporary, path)) {
    llvm::sys::fs::remove(temporary);
    throw Error("cannot replace the tuning database " + path + ": " + ec.message());
  }
}

/// An exclusive lock on `path`.lock for a read-modify-write of the database.
class FileLock {
public:
  explicit FileLock(const std::string &path) : fd_(open((path + ".lock").c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ < 0)
      throw Error("cannot lock the tuning database " + path + ": " + std::strerror(errno));
    flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    flock(fd_, LOCK_UN);
    close(fd_);
  }

private:
  int fd_;
};

} // namespace

TuningContext TuningContext::current() {
  DeviceInfo device = current_device();
  return {device.model(), device.driver_version, compiler::version()};
}

std::string TuningContext::str() const {
  return gpu_model + " | driver " + std::to_string(driver_version) + " | " + compiler;
}

TuneMode tune_mode() {
  const char *env = std::getenv("TESSERA_AUTOTUNE");
  std::string mode = env ? env : "";
  if (mode == "off" || mode == "0")
    return TuneMode::off;
  if (mode == "cached")
    return TuneMode::cached;
  if (mode == "force")
    return TuneMode::force;
  return TuneMode::on;
}

TuningDatabase::TuningDatabase(std::string path) : path_(std::move(path)) {}

std::string TuningDatabase::default_path() {
  if (const char *env = std::getenv("TESSERA_TUNING_DB"); env && *env)
    return env;
  return cache_dir() + "/tuning.json";
}

std::optional<dsl::Config> TuningDatabase::lookup(const TuningContext &context, const std::string &key) const {
  llvm::json::Object database = readDatabase(path_);
  const llvm::json::Object *entries = database.getObject("entries")->getObject(context.str());
  const llvm::json::Object *entry = entries ? entries->getObject(key) : nullptr;
  return entry ? configFromJson(entry->get("best")) : std::nullopt;
}

void TuningDatabase::store(const TuningContext &context, const std::string &key, const TuningResult &result) {
  llvm::json::Array trials;
  for (const Trial &trial : result.trials) {
    llvm::json::Object t{{"config", toJson(trial.config)}, {"compile_seconds", trial.compile_seconds},
                         {"registers", trial.registers}, {"spilled_bytes", trial.spilled_bytes}};
    if (trial.failure.empty())
      t["ms"] = trial.ms;
    else
      t["failure"] = trial.failure;
    if (trial.final_rounds)
      t["final_rounds"] = trial.final_rounds;
    trials.push_back(std::move(t));
  }
  FileLock lock(path_);
  llvm::json::Object database = readDatabase(path_);
  llvm::json::Object *entries = database.getObject("entries");
  if (!entries->getObject(context.str()))
    (*entries)[context.str()] = llvm::json::Object{};
  (*entries->getObject(context.str()))[key] =
      llvm::json::Object{{"best", toJson(result.best)}, {"best_ms", result.best_ms},
                         {"seconds", result.seconds}, {"trials", std::move(trials)}};
  writeDatabase(path_, std::move(database));
}

size_t TuningDatabase::export_to(const std::string &file, const TuningContext &context) const {
  llvm::json::Object database = readDatabase(path_);
  const llvm::json::Object *entries = database.getObject("entries")->getObject(context.str());
  llvm::json::Object mine = entries ? *entries : llvm::json::Object{};
  size_t count = mine.size();
  writeDatabase(file, llvm::json::Object{{"version", 1},
                                         {"entries", llvm::json::Object{{context.str(), std::move(mine)}}}});
  return count;
}

size_t TuningDatabase::import_from(const std::string &file, const TuningContext &context) {
  if (!llvm::sys::fs::exists(file))
    throw Error("no tuning database at " + file);
  llvm::json::Object incoming = readDatabase(file);
  const llvm::json::Object *theirs = incoming.getObject("entries")->getObject(context.str());
  if (!theirs)
    return 0; // tuned for another GPU, driver or compiler: nothing applies here
  FileLock lock(path_);
  llvm::json::Object database = readDatabase(path_);
  llvm::json::Object *entries = database.getObject("entries");
  if (!entries->getObject(context.str()))
    (*entries)[context.str()] = llvm::json::Object{};
  llvm::json::Object *mine = entries->getObject(context.str());
  for (const auto &[key, entry] : *theirs)
    (*mine)[key] = entry;
  writeDatabase(path_, std::move(database));
  return theirs->size();
}

unsigned compile_threads() {
  const char *env = std::getenv("TESSERA_COMPILE_THREADS");
  if (!env || !*env)
    return std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  char *end = nullptr;
  const long threads = std::strtol(env, &end, 10);
  if (*end || threads < 1 || threads > 1024)
    throw Error("TESSERA_COMPILE_THREADS must be a number of threads from 1 to 1024, got '" + std::string(env) + "'");
  return static_cast<unsigned>(threads);
}

TuningResult tune(const std::vector<dsl::Config> &space, const Prune &prune, const Measure &measure,
                  bool progress) {
  auto start = Clock::now();
  TuningResult result;
  result.best_ms = -1;
  // Times `trial` once more, keeping its lower time; returns this timing (0 when it failed).
  auto time = [&](Trial &trial) {
    double ms = 0;
    try {
      ms = measure(trial.config);
      trial.ms = trial.ms > 0 ? std::min(trial.ms, ms) : ms;
    } catch (const Error &error) {
      trial.failure = trial.ms > 0 ? std::string("failed in the second sweep: ") + error.what() : error.what();
    }
    if (trial.failure.empty() && (result.best_ms < 0 || trial.ms < result.best_ms)) {
      result.best_ms = trial.ms;
      result.best = trial.config;
    }
    return ms;
  };
  for (size_t i = 0; i < space.size(); ++i) {
    Trial trial{space[i], 0, prune ? prune(space[i]) : std::string(), 0};
    if (!trial.failure.empty())
      trial.failure = "pruned: " + trial.failure;
    else
      time(trial);
    result.trials.push_back(trial);
    if (progress)
      std::fprintf(stderr, "[tessera tune] %zu/%zu %s: %s (best %s %.4f ms, %.1f s)\n", i + 1,
                   space.size(), space[i].str().c_str(),
                   trial.failure.empty() ? (std::to_string(trial.ms) + " ms").c_str() : trial.failure.c_str(),
                   result.best.str().c_str(), result.best_ms, secondsSince(start));
  }
  if (result.best_ms < 0) {
    std::string reasons;
    for (const Trial &trial : result.trials)
      reasons += "\n  " + trial.config.str() + ": " + trial.failure;
    throw Error("autotuning: no config ran" + reasons);
  }
  result.best_ms = -1;
  for (size_t i = result.trials.size(); i-- > 0;) {
    Trial &trial = result.trials[i];
    if (!trial.failure.empty())
      continue;
    const double ms = time(trial);
    if (progress && trial.failure.empty())
      std::fprintf(stderr, "[tessera tune] again %zu/%zu: %.6f ms (the lower of two %.6f ms)\n", i + 1,
                   space.size(), ms, trial.ms);
    else if (progress)
      std::fprintf(stderr, "[tessera tune] again %zu/%zu: %s\n", i + 1, space.size(), trial.failure.c_str());
  }
  if (result.best_ms < 0)
    throw Error("autotuning: every config failed in the second sweep");
  runFinal(result, measure, progress);
  result.seconds = secondsSince(start);
  return result;
}

Autotuner::Autotuner(dsl::Kernel kernel, std::vector<dsl::Config> space, Options options)
    : kernel_(std::move(kernel)), space_(std::move(space)), options_(std::move(options)) {
  if (space_.empty())
    throw Error("autotuning kernel '" + kernel_.name() + "': the config space is empty");
  // The kernel's identity: its name, signature and traced code (of the first config).
  std::string signature;
  for (const dsl::ArgSpec &arg : kernel_.signature())
    signature += arg.str() + ",";
  identity_ = kernel_.name() + "(" + signature + ")#" +
              llvm::utohexstr(llvm::xxh3_64bits(kernel_.trace(space_.front()).str()));
}

std::string Autotuner::key(const std::vector<dsl::LaunchArg> &args) const {
  std::string key = identity_;
  for (size_t i : options_.key_arguments) {
    if (i >= args.size())
      throw Error("autotuning kernel '" + kernel_.name() + "': key argument " + std::to_string(i) +
                  " of " + std::to_string(args.size()));
    key += i == options_.key_arguments.front() ? "|" : ",";
    key += args[i].kind() == dsl::LaunchArg::Kind::Float ? std::to_string(args[i].floating())
                                                         : std::to_string(args[i].integer());
  }
  if (options_.key_extra)
    key += "|" + options_.key_extra(args);
  return key;
}

dsl::Config Autotuner::config_for(const GridFn &grid, const std::vector<dsl::LaunchArg> &args) {
  TuneMode mode = tune_mode();
  if (mode == TuneMode::off)
    return space_.front();
  std::string k = key(args);
  if (auto it = chosen_.find(k); it != chosen_.end() && mode != TuneMode::force)
    return it->second;
  TuningContext context = options_.context ? *options_.context : TuningContext::current();
  TuningDatabase database(options_.database.empty() ? TuningDatabase::default_path() : options_.database);
  if (mode != TuneMode::force)
    if (std::optional<dsl::Config> stored = database.lookup(context, k))
      return chosen_[k] = *stored;
  if (mode == TuneMode::cached)
    return chosen_[k] = space_.front();

  // Timing runs on the default stream: the caller's streams finish producing the inputs first.
  // Kernels that write in place get their inputs back before every timed run.
  saved_.clear();
  if (!options_.measure) {
    synchronize();
    if (options_.restore)
      for (auto [arg, bytes] : options_.restore(args)) {
        saved_.push_back({arg, bytes, DeviceBuffer(bytes)});
        copy_device(saved_.back().contents.data(), reinterpret_cast<const void *>(args[arg].integer()), bytes);
      }
  }
  Measure measure = [&](const dsl::Config &config) {
    return options_.measure ? options_.measure(specialized(config, args)) : timeOnGpu(config, grid, args);
  };
  auto prune = [&](const dsl::Config &config) {
    return options_.prune ? options_.prune(config, args) : std::string();
  };
  bool progress = std::getenv("TESSERA_AUTOTUNE_VERBOSE") || isatty(STDERR_FILENO);
  compileSeconds_.clear();
  resources_.clear();
  if (!options_.measure)
    compileAhead(prune, args, progress);
  TuningResult result;
  try {
    result = tune(space_, prune, measure, progress);
  } catch (const Error &) {
    // Every config spilled heavily (or failed): the fastest of the spilling ones beats none.
    spillsAllowed_ = true;
    try {
      result = tune(space_, prune, measure, progress);
    } catch (...) {
      spillsAllowed_ = false;
      throw;
    }
    spillsAllowed_ = false;
  }
  for (Trial &trial : result.trials) {
    trial.compile_seconds = compileSeconds_[trial.config.str()];
    trial.registers = resources_[trial.config.str()].registers;
    trial.spilled_bytes = resources_[trial.config.str()].spilled_bytes;
  }
  restore(args); // leave the arguments as they were given
  saved_.clear();
  database.store(context, k, result);
  last_ = result;
  return chosen_[k] = result.best;
}

void Autotuner::compileAhead(const Prune &prune, const std::vector<dsl::LaunchArg> &given, bool progress) {
  auto start = Clock::now();
  std::vector<dsl::Config> kept, configs;
  std::vector<std::vector<dsl::LaunchArg>> args;
  for (const dsl::Config &config : space_) {
    if (!prune(config).empty())
      continue;
    kept.push_back(config);
    configs.push_back(specialized(config, given));
    args.push_back(given);
    if (options_.arguments)
      options_.arguments(configs.back(), args.back());
  }
  const unsigned threads = compile_threads();
  std::vector<double> seconds = kernel_.compile_ahead(configs, args, threads);
  for (size_t i = 0; i < kept.size(); ++i)
    compileSeconds_[kept[i].str()] = seconds[i];
  if (progress)
    std::fprintf(stderr, "[tessera tune] %s: %zu configs compiled on %u threads (%.1f s)\n", kernel_.name().c_str(),
                 kept.size(), threads, secondsSince(start));
}

void Autotuner::restore(const std::vector<dsl::LaunchArg> &args) {
  for (const Saved &saved : saved_)
    copy_device(reinterpret_cast<void *>(args[saved.argument].integer()), saved.contents.data(), saved.bytes);
}

dsl::Config Autotuner::specialized(dsl::Config config, const std::vector<dsl::LaunchArg> &args) const {
  if (options_.specialize)
    options_.specialize(config, args);
  return config;
}

double Autotuner::timeOnGpu(const dsl::Config &tried, const GridFn &grid,
                            const std::vector<dsl::LaunchArg> &given) {
  const dsl::Config config = specialized(tried, given);
  std::vector<dsl::LaunchArg> args = given;
  if (options_.arguments)
    options_.arguments(config, args);
  dsl::Grid g = grid(config);
  // The first launch compiles (or loads from the disk cache); failures surface here.
  auto start = Clock::now();
  dsl::Kernel::Resources used = kernel_.resources(config, args.data(), args.size());
  compileSeconds_[tried.str()] += secondsSince(start); // after compileAhead's, where it failed there
  Resources &report = resources_[tried.str()];
  report = {used.registers, used.spilled_bytes};
  // Pruned after compiling (a config needing more shared memory than the GPU has failed to
  // load already): heavy spilling (local-memory traffic per iteration) never wins; a few
  // spilled bytes can (the register budget of the fastest config is often exactly full).
  if (used.spilled_bytes > kMaxSpilledBytes && !spillsAllowed_)
    throw Error("pruned after compiling: " + std::to_string(used.registers) + " registers, " +
                std::to_string(used.spilled_bytes) + " bytes spilled per thread");
  Event first, firstDone;
  first.record();
  kernel_.launch_args(nullptr, g, config, args.data(), args.size());
  firstDone.record();
  firstDone.synchronize();
  // In use the GPU runs these kernels back to back at its power cap, where configs that issue
  // more instructions lose clock; timed rested (each run alone, at the boost clock) the tuner
  // picked configs 5% slower in use. So the runs are queued back to back, the host waiting only
  // for the last, after warming up for kWarmMilliseconds (the warm-up's results are discarded:
  // each timed run restores what the kernel writes in place first).
  constexpr double kWarmMilliseconds = 100;
  const double once = std::max<double>(firstDone.elapsed_since(first), 1e-3);
  // At most 10000 launches (a ~10 us kernel), never fewer than options.warmup (clamp's bounds
  // could cross).
  const int warmup = std::max(options_.warmup, std::min(int(kWarmMilliseconds / once), 10000));
  static DeviceBuffer flush(256 << 20); // larger than L2: every timed run starts cold
  for (int i = 0; i < warmup; ++i)
    kernel_.launch_args(nullptr, g, config, args.data(), args.size());
  std::vector<Event> before(options_.runs), after(options_.runs);
  for (int i = 0; i < options_.runs; ++i) {
    restore(args); // not timed
    flush.fill_bytes(0);
    before[i].record();
    kernel_.launch_args(nullptr, g, config, args.data(), args.size());
    after[i].record();
  }
  after.back().synchronize();
  std::vector<double> times;
  for (int i = 0; i < options_.runs; ++i)
    times.push_back(after[i].elapsed_since(before[i]));
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

} // namespace tessera::jit
