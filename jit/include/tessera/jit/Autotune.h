// Autotuning: pick the fastest config of a kernel for the argument values that matter, once per
// GPU model, and remember it on disk.
#ifndef TESSERA_JIT_AUTOTUNE_H
#define TESSERA_JIT_AUTOTUNE_H

#include "tessera/dsl/kernel.h"
#include "tessera/jit/Runtime.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::jit {

/// What a tuning result is valid for: the GPU model (name, SMs, memory clock), the driver and
/// the compiler. An H100 and an H200 never share results; a new compiler retunes.
struct TuningContext {
  std::string gpu_model;
  int driver_version = 0;
  std::string compiler;
  static TuningContext current(); // of the current device and this build
  std::string str() const;
};

/// One config tried: its time, or why it was skipped or failed.
struct Trial {
  dsl::Config config;
  double ms = 0;           // the lower of its two sweeps' times, or its final rounds' median
  std::string failure;     // empty when it ran
  double compile_seconds = 0;
  int registers = 0;       // per thread, when compiled on the GPU
  int spilled_bytes = 0;
  int final_rounds = 0;    // rounds it was timed again in the final (see tune)
};

struct TuningResult {
  dsl::Config best;
  double best_ms = 0;
  std::vector<Trial> trials;
  double seconds = 0; // wall time of the whole tuning
};

/// off: never tune (the first config); cached: use stored results, never tune; on: tune what is
/// not stored (default); force: tune again. From TESSERA_AUTOTUNE.
enum class TuneMode { off, cached, on, force };
TuneMode tune_mode();

/// The tuning database: $TESSERA_TUNING_DB, else $TESSERA_CACHE_DIR/tuning.json; shared by
/// processes (writes are locked read-modify-write, then an atomic rename; a corrupt file is
/// ignored and rewritten).
class TuningDatabase {
public:
  explicit TuningDatabase(std::string path = default_path());
  static std::string default_path();
  const std::string &path() const { return path_; }

  /// The stored best config for `key` under `context`.
  std::optional<dsl::Config> lookup(const TuningContext &context, const std::string &key) const;
  void store(const TuningContext &context, const std::string &key, const TuningResult &result);
  /// Copy the entries of `context` to `file`, or merge them in from it; how many.
  size_t export_to(const std::string &file, const TuningContext &context) const;
  size_t import_from(const std::string &file, const TuningContext &context);

private:
  std::string path_;
};

/// Time one config (milliseconds); throw tessera::Error when it cannot run.
using Measure = std::function<double(const dsl::Config &)>;
/// Why a config is pruned before it runs, or "" to keep it.
using Prune = std::function<std::string(const dsl::Config &)>;

/// Measure every config that `prune` keeps, twice (the second sweep in reverse order; the lower
/// time counts); failures are recorded with their reason and skipped. The configs within 3% of
/// the fastest (the four fastest of them at most) are measured again, in three interleaved
/// rounds, and the lowest median of those wins. Throws tessera::Error only when no config runs
/// (in the first sweep, the second or the final). Progress goes to stderr when `progress`.
TuningResult tune(const std::vector<dsl::Config> &space, const Prune &prune, const Measure &measure,
                  bool progress);

/// Threads that compile a tuning's configs at once, before they are timed one by one:
/// $TESSERA_COMPILE_THREADS (1 to 1024), else the host's hardware threads, at most 16 (a
/// compilation holds ~100 MB). Throws tessera::Error for a malformed value.
unsigned compile_threads();

/// The grid of a launch for a config.
using GridFn = std::function<dsl::Grid(const dsl::Config &)>;

/// A kernel with a config space, tuned per distinct value of its key arguments.
class Autotuner {
public:
  struct Options {
    std::vector<size_t> key_arguments;          // arguments whose values select the config
    /// More of the key, computed from the arguments (e.g. sequence lengths rounded to powers
    /// of two, so that nearby sizes share one tuning).
    std::function<std::string(const std::vector<dsl::LaunchArg> &)> key_extra;
    /// What a launch with these arguments writes in place, as (pointer argument, bytes): saved
    /// before tuning, put back before every timed run and after the last.
    std::function<std::vector<std::pair<size_t, size_t>>(const std::vector<dsl::LaunchArg> &)> restore;
    std::function<std::string(const dsl::Config &, const std::vector<dsl::LaunchArg> &)> prune;
    /// Settings the arguments decide (e.g. that the lengths are whole blocks), added to every
    /// config timed; whoever launches the chosen config adds them too (it is stored without).
    std::function<void(dsl::Config &, const std::vector<dsl::LaunchArg> &)> specialize;
    /// Arguments a config decides (e.g. a persistent kernel's plan for its number of
    /// programs), set in each timed launch's arguments; whoever launches the chosen config sets
    /// them too.
    std::function<void(const dsl::Config &, std::vector<dsl::LaunchArg> &)> arguments;
    /// Default timing: at least `warmup` launches back to back (as many as fill ~100 ms), then
    /// `runs` timed ones queued back to back, the median counting.
    int warmup = 3;
    int runs = 20;
    /// Custom timing (default: CUDA events around the kernel, inputs restored, L2 flushed).
    Measure measure;
    /// Custom context (default: TuningContext::current()).
    std::optional<TuningContext> context;
    /// Custom database (default: TuningDatabase::default_path()).
    std::string database;
  };
  Autotuner(dsl::Kernel kernel, std::vector<dsl::Config> space, Options options);

  /// The config these arguments launch with: stored, tuned now, or the first (see TuneMode).
  dsl::Config config_for(const GridFn &grid, const std::vector<dsl::LaunchArg> &args);
  template <typename... Args> void launch(const GridFn &grid, Args &&...args) {
    std::vector<dsl::LaunchArg> packed{dsl::LaunchArg(args)...};
    const dsl::Config config = specialized(config_for(grid, packed), packed);
    if (options_.arguments)
      options_.arguments(config, packed);
    kernel_.launch_args(nullptr, grid(config), config, packed.data(), packed.size());
  }
  /// The tuning this object ran last, if any (for reports).
  const std::optional<TuningResult> &last_tuning() const { return last_; }
  /// The database key of these arguments (kernel identity and key values).
  std::string key(const std::vector<dsl::LaunchArg> &args) const;

private:
  /// `config` with the settings these arguments decide (Options::specialize).
  dsl::Config specialized(dsl::Config config, const std::vector<dsl::LaunchArg> &args) const;
  double timeOnGpu(const dsl::Config &config, const GridFn &grid, const std::vector<dsl::LaunchArg> &args);
  /// Compiles the configs `prune` keeps for these arguments on compile_threads() threads (most
  /// of a tuning's time), before they are timed one by one.
  void compileAhead(const Prune &prune, const std::vector<dsl::LaunchArg> &args, bool progress);
  void restore(const std::vector<dsl::LaunchArg> &args);

  dsl::Kernel kernel_;
  std::vector<dsl::Config> space_;
  Options options_;
  std::string identity_;
  std::optional<TuningResult> last_;
  std::map<std::string, dsl::Config> chosen_; // key -> config, for launches after the first
  std::map<std::string, double> compileSeconds_;
  struct Resources {
    int registers = 0, spilled_bytes = 0;
  };
  std::map<std::string, Resources> resources_;
  /// What Options::restore names for the arguments being tuned, and its contents.
  struct Saved {
    size_t argument, bytes;
    DeviceBuffer contents;
  };
  std::vector<Saved> saved_;
  bool spillsAllowed_ = false;      // set while retrying a space in which every config spilled
};

} // namespace tessera::jit

#endif // TESSERA_JIT_AUTOTUNE_H
