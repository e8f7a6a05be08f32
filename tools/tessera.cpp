// The tessera command line:
//   tessera info                            the GPU, driver, compute capability; compiler; caches
//   tessera cache clear                     remove every compiled kernel from the disk cache
//   tessera tune matmul M N K [bf16|fp16]   tune the matmul for these sizes on this GPU
//   tessera tune --export FILE              write this GPU model's tuning results to FILE
//   tessera tune --import FILE              merge FILE's results for this GPU model
//   tessera attention --b B --h H --n N --d D [--causal] [--bf16] [--hkv HKV] [--nkv NKV] [--config I]
//                   [--backward]            run flash attention forward on random inputs, check
//                                           it against the NVRTC fp64 reference, time it (with
//                                           the tuned config, or config I of the tuning space)
//                                           and, with --backward, the gradients too
#include "tessera/compiler/Compiler.h"
#include "tessera/dsl/fp16.h"
#include "tessera/error.h"
#include "tessera/jit/Autotune.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/Runtime.h"
#include "tessera/kernels/attention.h"
#include "tessera/kernels/reference.h"

#include "attention_check.h"
#include "bench_util.h"
#include "matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

int usage() {
  std::fprintf(stderr, "usage: tessera info\n       tessera cache clear\n"
                       "       tessera tune matmul M N K [bf16|fp16]\n"
                       "       tessera tune --export FILE | --import FILE\n"
                       "       tessera attention --b B --h H --n N --d D [--causal] [--bf16] [--hkv HKV] [--nkv NKV] [--config I] [--backward]\n");
  return 2;
}

int tuneMatmul(int64_t M, int64_t N, int64_t K, bool bf16) {
  using namespace tessera;
  jit::DeviceBuffer a(M * K * 2), b(K * N * 2), c(M * N * 2);
  a.fill_bytes(0x3C);
  b.fill_bytes(0x3C);
  dsl::Kernel kernel = bf16 ? examples::matmul<dsl::bf16>() : examples::matmul<dsl::f16>();
  jit::Autotuner::Options options;
  options.key_arguments = {3, 4, 5}; // M, N, K
  jit::Autotuner tuner(kernel, examples::matmul_configs(), options);
  auto grid = [&](const dsl::Config &config) { return examples::matmul_grid(config, M, N); };
  std::vector<dsl::LaunchArg> args{a.data(), b.data(), c.data(), M, N, K, K, 1, N, 1, N, 1};
  dsl::Config best = tuner.config_for(grid, args);
  const auto &tuning = tuner.last_tuning();
  if (!tuning) {
    std::printf("%s %lldx%lldx%lld: stored result %s (no timing runs)\n", bf16 ? "bf16" : "fp16",
                (long long)M, (long long)N, (long long)K, best.str().c_str());
    return 0;
  }
  double flops = 2.0 * M * N * K;
  // A finalist's ms is the median of the final's rounds (see jit::tune), marked "*".
  std::printf("%-66s %10s %8s %5s %6s %9s\n", "config", "ms", "TFLOP/s", "regs", "spill", "compile s");
  for (const jit::Trial &trial : tuning->trials) {
    if (trial.failure.empty())
      std::printf("%-66s %9.4f%s %8.1f %5d %6d %9.2f\n", trial.config.str().c_str(), trial.ms,
                  trial.final_rounds ? "*" : " ", flops / (trial.ms * 1e9), trial.registers, trial.spilled_bytes,
                  trial.compile_seconds);
    else
      std::printf("%-66s %s\n", trial.config.str().c_str(), trial.failure.c_str());
  }
  const jit::Trial &fallback = tuning->trials.front();
  std::printf("best %s: %.4f ms (%.1f TFLOP/s); default %s: %s; tuned %zu configs in %.1f s (* timed again "
              "in the final)\n",
              best.str().c_str(), tuning->best_ms, flops / (tuning->best_ms * 1e9), fallback.config.str().c_str(),
              fallback.failure.empty() ? (std::to_string(fallback.ms) + " ms").c_str() : fallback.failure.c_str(),
              tuning->trials.size(), tuning->seconds);
  return 0;
}

/// Random inputs, one checked run, then the median time of timed runs (CUDA events). Without
/// a GPU the same kernel runs through the interpreter at a size it finishes in seconds, checked
/// against the CPU reference.
int attention(const std::map<std::string, int64_t> &flags, bool causal, bool bf16, bool backward) {
  using namespace tessera;
  auto flag = [&](const char *name, int64_t fallback) {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  };
  int64_t B = flag("b", 4), H = flag("h", 16), N = flag("n", 4096), D = flag("d", 128);
  int64_t Hkv = flag("hkv", H), Nkv = flag("nkv", N);
  std::string why;
  const bool gpu = jit::gpu_available(&why);
  if (!gpu) {
    setenv("TESSERA_INTERPRET", "1", 1);
    Hkv = Hkv == H ? 2 : 1;
    B = 1, H = 2, N = std::min<int64_t>(N, 256), Nkv = std::min<int64_t>(Nkv, 256);
    std::printf("no GPU (%s): interpreting B=%lld H=%lld/%lld N=%lld/%lld instead\n", why.c_str(), (long long)B,
                (long long)H, (long long)Hkv, (long long)N, (long long)Nkv);
  }
  const dsl::DType dtype = bf16 ? dsl::DType::bf16 : dsl::DType::f16;
  const kernels::DeviceType device = gpu ? kernels::DeviceType::cuda : kernels::DeviceType::cpu;
  // [B, n, heads, D] inputs: their 16-bit bits and f32 values.
  auto make = [&](int64_t n, int64_t heads, uint32_t seed, std::vector<uint16_t> &bits, std::vector<float> &values) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal;
    bits.resize(B * n * heads * D);
    values.resize(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) {
      bits[i] = to_16bit(normal(gen), dtype);
      values[i] = from_16bit(bits[i], dtype);
    }
    jit::DeviceBuffer buffer(std::max<size_t>(2, bits.size() * 2));
    buffer.copy_from_host(bits.data(), bits.size() * 2);
    return buffer;
  };
  std::vector<uint16_t> qb, kb, vb;
  std::vector<float> qf, kf, vf;
  jit::DeviceBuffer q = make(N, H, 1, qb, qf), k = make(Nkv, Hkv, 2, kb, kf), v = make(Nkv, Hkv, 3, vb, vf);
  jit::DeviceBuffer o(std::max<size_t>(2, qf.size() * 2)), lse(std::max<int64_t>(4, B * H * N * 4));
  o.fill_bytes(0xFF);
  auto view = [&](jit::DeviceBuffer &buffer, int64_t n, int64_t heads) {
    return kernels::TensorView{buffer.data(), dtype, {B, n, heads, D}, {}, device};
  };
  kernels::TensorView lseView{lse.data(), dsl::DType::f32, {B, H, N}, {}, device};
  kernels::AttentionOptions options;
  options.causal = causal;
  if (flags.count("config")) {
    std::vector<dsl::Config> configs = kernels::attention_forward_configs(D, causal);
    if (flags.at("config") >= int64_t(configs.size()))
      throw Error("--config: there are " + std::to_string(configs.size()) + " configs for head dim " + std::to_string(D));
    options.config = configs[flags.at("config")];
    std::printf("config %s\n", options.config->str().c_str());
  }
  auto run = [&] { kernels::attention_forward(view(q, N, H), view(k, Nkv, Hkv), view(v, Nkv, Hkv), view(o, N, H), lseView, options); };
  run();
  jit::synchronize();
  std::vector<float> got = bench::readHalves(o, dtype, qf.size());

  // The check: fp64 reference and a naive same-dtype attention on the same inputs.
  const double scale = 1 / std::sqrt(double(D));
  std::vector<float> want(qf.size()), rough(qf.size());
  if (gpu) {
    auto upload = [](const std::vector<float> &host) {
      jit::DeviceBuffer buffer(std::max<size_t>(4, host.size() * 4));
      buffer.copy_from_host(host.data(), host.size() * 4);
      return buffer;
    };
    jit::DeviceBuffer rq = upload(qf), rk = upload(kf), rv = upload(vf), ro(qf.size() * 4 + 4), rl(B * H * N * 4 + 4),
                      naive(qf.size() * 4 + 4);
    kernels::attention_reference({B, N, Nkv, H, Hkv, D, scale, causal}, static_cast<float *>(rq.data()),
                                 static_cast<float *>(rk.data()), static_cast<float *>(rv.data()),
                                 static_cast<float *>(ro.data()), static_cast<float *>(rl.data()),
                                 static_cast<float *>(naive.data()), dtype);
    ro.copy_to_host(want.data(), want.size() * 4);
    naive.copy_to_host(rough.data(), rough.size() * 4);
  } else {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        using examples::head_rows;
        std::vector<uint16_t> qh = head_rows(qb, b, h, N, H, D), kh = head_rows(kb, b, h / (H / Hkv), Nkv, Hkv, D),
                              vh = head_rows(vb, b, h / (H / Hkv), Nkv, Hkv, D);
        examples::AttentionReference ref = examples::attention_reference(
            qh.data(), kh.data(), vh.data(), int(N), int(Nkv), int(D), scale, causal, bf16);
        for (int64_t i = 0; i < N; ++i)
          for (int64_t e = 0; e < D; ++e) {
            want[((b * N + i) * H + h) * D + e] = float(ref.exact[i * D + e]);
            rough[((b * N + i) * H + h) * D + e] = float(ref.naive[i * D + e]);
          }
      }
  }
  kernels::ErrorStats ours = kernels::error_stats(got, want), baseline = kernels::error_stats(rough, want);
  bool passed = kernels::within_forward_bars(ours, baseline, dtype);
  std::printf("attention_forward %s B=%lld H=%lld/%lld N=%lld/%lld D=%lld%s: max error %.2e (naive %s %.2e), mean %.2e "
              "(naive %.2e): %s\n",
              dsl::to_string(dtype).c_str(), (long long)B, (long long)H, (long long)Hkv, (long long)N, (long long)Nkv,
              (long long)D, causal ? " causal" : "", ours.max, dsl::to_string(dtype).c_str(), baseline.max, ours.mean,
              baseline.mean, passed ? "PASS" : "FAIL");
  if (!gpu)
    return passed ? 0 : 1;

  double ms = bench::median_ms(run, 5, 25);
  double visible = causal ? (N <= Nkv ? N * (Nkv - N + (N + 1) / 2.0) : Nkv * (Nkv + 1) / 2.0) : double(N) * Nkv;
  const double flops = 4.0 * B * H * visible * D;
  std::printf("time %.3f ms (median of 25), %.1f TFLOP/s\n", ms, flops / (ms * 1e9));
  if (backward) {
    // The gradients' time (2.5x the forward's FLOPs), not checked here (tests do that).
    std::vector<uint16_t> dob;
    std::vector<float> dof;
    jit::DeviceBuffer dout = make(N, H, 4, dob, dof), dq(qb.size() * 2), dk(kb.size() * 2), dv(vb.size() * 2);
    ms = bench::median_ms(
        [&] {
          kernels::attention_backward(view(q, N, H), view(k, Nkv, Hkv), view(v, Nkv, Hkv), view(o, N, H), lseView,
                                      view(dout, N, H), view(dq, N, H), view(dk, Nkv, Hkv), view(dv, Nkv, Hkv), options);
        },
        3, 10);
    std::printf("backward %.3f ms (median of 10), %.1f TFLOP/s\n", ms, 2.5 * flops / (ms * 1e9));
  }
  return passed ? 0 : 1;
}

int info() {
  std::string why;
  if (tessera::jit::gpu_available(&why)) {
    tessera::jit::DeviceInfo device = tessera::jit::current_device();
    std::printf("gpu:            %s (compute capability %d.%d, %d SMs, %.1f GiB, memory clock %d MHz)\n",
                device.name.c_str(), device.major, device.minor, device.sm_count,
                device.memory_bytes / double(1 << 30), device.memory_clock_khz / 1000);
    std::printf("driver:         CUDA %d.%d\n", device.driver_version / 1000, device.driver_version % 1000 / 10);
    std::printf("target:         %s\n", tessera::compiler::Target{device.major, device.minor}.arch().c_str());
  } else {
    std::printf("gpu:            none (%s)\n", why.c_str());
  }
  std::printf("compiler:       %s\n", tessera::compiler::version().c_str());
  tessera::jit::CacheStats stats = tessera::jit::cache_stats();
  std::printf("cache:          %s (%lld kernels, %.1f KiB)\n", tessera::jit::cache_dir().c_str(),
              static_cast<long long>(stats.entries), stats.bytes / 1024.0);
  std::printf("tuning results: %s\n", tessera::jit::TuningDatabase::default_path().c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "info" && argc == 2)
      return info();
    if (command == "tune" && argc >= 6 && std::string(argv[2]) == "matmul") {
      bool bf16 = argc < 7 || std::string(argv[6]) != "fp16";
      return tuneMatmul(std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]), bf16);
    }
    if (command == "tune" && argc == 4 && (std::string(argv[2]) == "--export" || std::string(argv[2]) == "--import")) {
      tessera::jit::TuningDatabase database;
      tessera::jit::TuningContext context = tessera::jit::TuningContext::current();
      bool exporting = std::string(argv[2]) == "--export";
      size_t count = exporting ? database.export_to(argv[3], context) : database.import_from(argv[3], context);
      std::printf("%s %zu tuning results for %s %s %s\n", exporting ? "exported" : "imported", count,
                  context.str().c_str(), exporting ? "to" : "from", argv[3]);
      return 0;
    }
    if (command == "attention") {
      std::map<std::string, int64_t> flags;
      bool causal = false, bf16 = false, backward = false;
      for (int i = 2; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--causal")
          causal = true;
        else if (arg == "--bf16")
          bf16 = true;
        else if (arg == "--backward")
          backward = true;
        else if (arg.rfind("--", 0) == 0 && i + 1 < argc && (std::atoll(argv[i + 1]) > 0 || std::string(argv[i + 1]) == "0"))
          flags[arg.substr(2)] = std::atoll(argv[++i]);
        else
          return usage();
      }
      return attention(flags, causal, bf16, backward);
    }
    if (command == "cache" && argc == 3 && std::string(argv[2]) == "clear") {
      long long removed = tessera::jit::cache_clear();
      std::printf("removed %lld kernels from %s\n", removed, tessera::jit::cache_dir().c_str());
      return 0;
    }
  } catch (const tessera::Error &error) {
    std::fprintf(stderr, "tessera: %s\n", error.what());
    return 1;
  }
  return usage();
}
