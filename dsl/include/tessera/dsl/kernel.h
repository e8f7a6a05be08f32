// Kernels: a C++ lambda over tiles, traced into the tile dialect per configuration.
#ifndef TESSERA_DSL_KERNEL_H
#define TESSERA_DSL_KERNEL_H

#include "tessera/dsl/tile.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera::jit {
class KernelCache;
class LoadedKernel;
/// Where a kernel's compiled specializations live; shared by copies of the kernel.
struct KernelCacheSlot {
  std::once_flag created;
  std::shared_ptr<KernelCache> cache;
};
} // namespace tessera::jit

namespace tessera::dsl {

/// Compile-time meta parameters of one kernel specialization (BLOCK sizes, CAUSAL, ...),
/// read while tracing: `const int B = cfg["BLOCK"];`.
class Config {
public:
  Config() = default;
  Config(std::initializer_list<std::pair<const std::string, int64_t>> values)
      : values_(values) {}

  /// The value of `name`; throws tessera::Error naming the missing parameter.
  int64_t operator[](const std::string &name) const;
  int64_t get(const std::string &name, int64_t fallback) const;
  bool has(const std::string &name) const { return values_.count(name) != 0; }
  void set(const std::string &name, int64_t value) { values_[name] = value; }
  /// Sets each of the comma-separated `KEY=VALUE` assignments ("num_warps=8,num_stages=3");
  /// throws tessera::Error naming a malformed one (no name, no `=`, a value not an integer).
  void set_all(const std::string &assignments);
  /// Sets each of `other`'s values (overriding this config's where both have one).
  void update(const Config &other);
  const std::map<std::string, int64_t> &values() const { return values_; }
  bool operator==(const Config &other) const { return values_ == other.values_; }
  /// "{BLOCK=1024, CAUSAL=1}"
  std::string str() const;

private:
  std::map<std::string, int64_t> values_;
};

/// One kernel argument: a pointer to `dtype` or a scalar of `dtype`.
struct ArgSpec {
  bool pointer = false;
  DType dtype = DType::i32;
  std::string str() const; // "ptr<f16>", "i32"
};

/// Facts about launch arguments the compiler may rely on: which pointers are 16-byte aligned,
/// which integers are multiples of 16 (they decide vector widths) and which integers are 1
/// (unit strides: traced as the constant, so contiguity is visible). Part of the cache key.
struct Specialization {
  std::vector<bool> divisible_by_16; // per argument; empty: nothing known
  std::vector<bool> equal_to_1;      // per argument; empty: nothing known
  std::string str() const;           // "D.1." (D: divisible by 16, 1: equal to 1)
};

/// The traced IR of one kernel specialization (owns its MLIR context).
class TracedKernel {
public:
  struct Impl;
  explicit TracedKernel(std::unique_ptr<Impl> impl);
  TracedKernel(TracedKernel &&) noexcept;
  TracedKernel &operator=(TracedKernel &&) noexcept;
  ~TracedKernel();

  const std::string &name() const;
  /// The module in MLIR's textual form.
  std::string str() const;
  Impl &impl() const { return *impl_; }

private:
  std::unique_ptr<Impl> impl_;
};

/// Programs to launch along x, y and z.
struct Grid {
  uint32_t x = 1, y = 1, z = 1;
};

/// One argument of a launch: a device pointer or a number (checked against the signature).
class LaunchArg {
public:
  enum class Kind { Pointer, Integer, Float };
  LaunchArg(const void *pointer) : kind_(Kind::Pointer), int_(reinterpret_cast<intptr_t>(pointer)) {}
  LaunchArg(std::nullptr_t) : LaunchArg(static_cast<const void *>(nullptr)) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  LaunchArg(T value) : kind_(Kind::Integer), int_(static_cast<int64_t>(value)) {}
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  LaunchArg(T value) : kind_(Kind::Float), float_(static_cast<double>(value)) {}
  Kind kind() const { return kind_; }
  int64_t integer() const { return int_; }
  double floating() const { return float_; }

private:
  Kind kind_;
  int64_t int_ = 0;
  double float_ = 0;
};

class Kernel {
public:
  using Body = std::function<void(const std::vector<Tile> &args, const Config &config)>;
  /// `name` must be a C identifier: it names the GPU function.
  Kernel(std::string name, std::vector<ArgSpec> signature, Body body);

  const std::string &name() const { return name_; }
  const std::vector<ArgSpec> &signature() const { return signature_; }
  /// Trace the body for `config` into a verified tile-dialect module.
  TracedKernel trace(const Config &config = {}, const Specialization &specialization = {}) const;

  /// Run `grid` programs on the GPU: traced and compiled on first use per config and argument
  /// specialization (cached in memory and in $TESSERA_CACHE_DIR), then launched on the
  /// default stream. Arguments are device pointers and numbers matching the signature.
  /// Defined in the jit library.
  template <typename... Args> void launch(Grid grid, const Config &config, Args &&...args) const {
    launch_on(nullptr, grid, config, std::forward<Args>(args)...);
  }
  /// The same on `stream` (a CUstream; nullptr for the default stream).
  template <typename... Args>
  void launch_on(void *stream, Grid grid, const Config &config, Args &&...args) const {
    const LaunchArg packed[] = {LaunchArg(args)..., LaunchArg(nullptr)}; // never empty
    launch_args(stream, grid, config, packed, sizeof...(Args));
  }
  void launch_args(void *stream, Grid grid, const Config &config, const LaunchArg *args,
                   size_t count) const;

  /// What the compiled specialization for `config` and these arguments uses per thread and per
  /// program (compiling it if needed). Defined in the jit library.
  struct Resources {
    int registers = 0;
    int spilled_bytes = 0;
    int64_t shared_memory = 0;
  };
  Resources resources(const Config &config, const LaunchArg *args, size_t count) const;

  /// Compiles, `threads` at a time, the specializations that launches of `configs[i]` with
  /// `args[i]` need and that are not loaded yet (a tuning's configs: ~1 s each, most of the
  /// tuning's time), so that those launches find them loaded. One that fails to compile here
  /// compiles again at its launch and fails there, with its error. Returns the seconds each
  /// compilation took (0 where already loaded or failed). Defined in the jit library.
  std::vector<double> compile_ahead(const std::vector<Config> &configs, const std::vector<std::vector<LaunchArg>> &args,
                                    unsigned threads) const;

private:
  const jit::LoadedKernel *specialization(const Config &config, uint64_t divisible, uint64_t ones,
                                          size_t count) const;

  std::string name_;
  std::vector<ArgSpec> signature_;
  Body body_;
  std::shared_ptr<jit::KernelCacheSlot> cache_ = std::make_shared<jit::KernelCacheSlot>();
};

namespace detail {
template <typename T> struct LambdaTraits : LambdaTraits<decltype(&T::operator())> {};
template <typename C, typename R, typename... Args> struct LambdaTraits<R (C::*)(Args...) const> {
  using ArgTuple = std::tuple<std::decay_t<Args>...>;
};
template <typename C, typename R, typename... Args> struct LambdaTraits<R (C::*)(Args...)> {
  using ArgTuple = std::tuple<std::decay_t<Args>...>;
};

template <typename Tuple> struct EndsWithConfig : std::false_type {};
template <typename... A>
struct EndsWithConfig<std::tuple<A...>>
    : std::is_same<Config, std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>> {};
template <> struct EndsWithConfig<std::tuple<>> : std::false_type {};

template <typename Tuple, size_t... I>
std::tuple<std::tuple_element_t<I, Tuple>...> take(std::index_sequence<I...>);
template <typename Tuple, size_t N>
using TakeFirst = decltype(take<Tuple>(std::make_index_sequence<N>{}));

template <bool WithConfig, typename... A, typename F, size_t... I>
void call_body(F &body, const std::vector<Tile> &tiles, const Config &config,
               std::index_sequence<I...>) {
  if constexpr (WithConfig)
    body(A(tiles[I])..., config);
  else
    body(A(tiles[I])...);
}

template <bool WithConfig, typename F, typename... A>
Kernel make_kernel(std::string name, F body, std::tuple<A...> *) {
  static_assert(((std::is_base_of_v<Tile, A> && !std::is_same_v<A, Tile>) && ...),
                "kernel arguments must be Ptr<T>, Int, Long, Float or Scalar<T>, optionally "
                "followed by const Config&");
  std::vector<ArgSpec> signature{ArgSpec{A::pointer, A::element}...};
  return Kernel(std::move(name), std::move(signature),
                [body](const std::vector<Tile> &tiles, const Config &config) mutable {
                  call_body<WithConfig, A...>(body, tiles, config, std::index_sequence_for<A...>{});
                });
}
} // namespace detail

/// Define a kernel from a lambda `[](Ptr<f32> x, Int n, ..., const Config& cfg) {...}`.
template <typename F> Kernel kernel(std::string name, F body) {
  using All = typename detail::LambdaTraits<F>::ArgTuple;
  constexpr bool with_config = detail::EndsWithConfig<All>::value;
  using Args = detail::TakeFirst<All, std::tuple_size_v<All> - (with_config ? 1 : 0)>;
  return detail::make_kernel<with_config>(std::move(name), std::move(body),
                                          static_cast<Args *>(nullptr));
}

} // namespace tessera::dsl

#endif // TESSERA_DSL_KERNEL_H
