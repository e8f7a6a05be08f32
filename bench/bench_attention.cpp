// Attention forward on the GPU (fp16 and bf16, BHSD like PyTorch SDPA, standard-normal inputs
// as peers_attention.py's) in TFLOP/s, at batch*N = 16k tokens and heads = 2048/D, for every
// config of the tuning space (what the autotuner chooses from): the default's time and the
// best's. SDPA and FlexAttention are measured by peers_attention.py in the same run. JSON lines
// go to the file given as argv[1]. Each config's output is checked against the default's: one
// that differs is reported and left out, and the exit status is 3.
#include "bench_util.h"
#include "tessera/kernels/attention.h"
#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

using namespace tessera;

int main(int argc, char **argv) {
  bench::requireGpu("bench_attention");
  std::ofstream json = bench::resultsFile(argc, argv);
  std::string gpu = jit::current_device().name;
  std::printf("%-5s %4s %4s %6s %4s %-7s %10s %10s %12s  %s\n", "dtype", "B", "H", "N", "D", "causal", "ms", "TFLOP/s",
              "default ms", "best config");
  // argv[2] (optional): only this dtype ("f16" or "bf16"); argv[3] and argv[4] (optional):
  // only this D and N, printing every config's time (an A/B of the tuning space, see below).
  // argv[5] (optional, KEY=VALUE[,KEY=VALUE...][/KEY=VALUE...]): also every config with those
  // knobs set, where they apply, once per '/'-separated set (an A/B of knobs outside the space,
  // e.g. ping_pong=1 or OVERLAP_SOFTMAX=1,num_stages=3 or BLOCK_M=128/BLOCK_M=128,ping_pong=1);
  // configs they do not fit are skipped.
  std::string only = argc > 2 ? argv[2] : "";
  const int64_t onlyD = argc > 4 ? std::stoll(argv[3]) : 0, onlyN = argc > 4 ? std::stoll(argv[4]) : 0;
  std::vector<dsl::Config> knobSets;
  for (std::string rest = argc > 5 ? argv[5] : ""; !rest.empty();) {
    const size_t slash = std::min(rest.find('/'), rest.size());
    try {
      knobSets.emplace_back().set_all(rest.substr(0, slash));
      rest.erase(0, slash + 1);
    } catch (const Error &error) {
      std::fprintf(stderr, "bench_attention: %s\n", error.what());
      return 2;
    }
  }
  // argv[6] (optional): only the configs whose text holds it (and the default), e.g.
  // warp_specialize=1.
  const std::string filter = argc > 6 ? argv[6] : "";
  bool wrong = false; // a config's output differed from the default's (exit status 3)
  for (dsl::DType dtype : {dsl::DType::f16, dsl::DType::bf16})
    for (int64_t D : {64, 128}) {
      if ((!only.empty() && dsl::to_string(dtype) != only) || (onlyD && D != onlyD))
        continue;
      for (int64_t N : {1024, 4096, 8192, 16384}) {
        if (onlyN && N != onlyN)
          continue;
        const int64_t B = 16384 / N, H = 2048 / D, numel = B * H * N * D;
        jit::DeviceBuffer q(numel * 2), k(numel * 2), v(numel * 2), o(numel * 2), lse(B * H * N * 4);
        bench::fillNormal(q, dtype, numel, 1);
        bench::fillNormal(k, dtype, numel, 2);
        bench::fillNormal(v, dtype, numel, 3);
        auto view = [&](jit::DeviceBuffer &buffer) {
          return kernels::TensorView{buffer.data(), dtype, {B, N, H, D}, {H * N * D, D, N * D, 1}, kernels::DeviceType::cuda};
        };
        kernels::TensorView lseView{lse.data(), dsl::DType::f32, {B, H, N}, {}};
        for (bool causal : {false, true}) {
          kernels::AttentionOptions options;
          options.causal = causal;
          double ms = 1e30, defaultMs = 0;
          std::string best;
          // A/B (onlyN): configs whose text lacks `filter` are left out (the default stays), and
          // every config is timed sustained (300 back-to-back calls after a rest: the steady state
          // at the power cap, where an H200 runs attention) in 3 interleaved rounds, the median
          // counting.
          auto kept = [&](const dsl::Config &c) { return filter.empty() || c.str().find(filter) != std::string::npos; };
          std::vector<dsl::Config> space = kernels::attention_forward_configs(D, causal), configs;
          for (size_t i = 0; i < space.size(); ++i)
            if (i == 0 || kept(space[i]))
              configs.push_back(space[i]);
          const size_t spaceSize = configs.size();
          for (const dsl::Config &knobs : knobSets)
            for (size_t i = 0; i < spaceSize; ++i) {
              dsl::Config config = configs[i];
              config.update(knobs);
              if (kept(config) && std::find(configs.begin(), configs.end(), config) == configs.end())
                configs.push_back(config);
            }
          const int rounds = onlyN ? 3 : 1;
          std::vector<std::vector<double>> times(configs.size());
          std::vector<float> defaultOutput;
          std::vector<double> strays(configs.size(), 0);
          for (int round = 0; round < rounds; ++round)
            for (size_t i = 0; i < configs.size(); ++i) {
              options.config = configs[i];
              try {
                auto run = [&] { kernels::attention_forward(view(q), view(k), view(v), view(o), lseView, options); };
                times[i].push_back(onlyN ? bench::sustained_ms(run, 300) : bench::median_ms(run, 5, 30));
              } catch (const Error &) {
                if (i < spaceSize)
                  throw;
                continue; // the knobs do not fit this config
              }
              // Every config's output against the default's, once.
              if (round == 0 && i == 0)
                defaultOutput = bench::readHalves(o, dtype, numel);
              else if (round == 0)
                strays[i] = bench::strayFrom(bench::readHalves(o, dtype, numel), defaultOutput, dtype);
            }
          for (size_t i = 0; i < configs.size(); ++i) {
            if (times[i].empty())
              continue;
            std::sort(times[i].begin(), times[i].end());
            double t = times[i][times[i].size() / 2];
            if (i == 0)
              defaultMs = t;
            if (strays[i] > 0) {
              std::fprintf(stderr, "bench_attention: WRONG: %s's output is up to %g off the default's; left out\n",
                           configs[i].str().c_str(), strays[i]);
              wrong = true;
              continue;
            }
            if (onlyN)
              std::printf("  %8.3f ms (%.3f-%.3f)  %s\n", t, times[i].front(), times[i].back(), configs[i].str().c_str());
            if (t < ms)
              ms = t, best = configs[i].str();
          }
          double tflops = 4.0 * B * H * N * N * D * (causal ? 0.5 : 1.0) / (ms * 1e9);
          std::printf("%-5s %4lld %4lld %6lld %4lld %-7s %10.3f %10.1f %12.3f  %s\n", dsl::to_string(dtype).c_str(),
                      (long long)B, (long long)H, (long long)N, (long long)D, causal ? "yes" : "no", ms, tflops,
                      defaultMs, best.c_str());
          json << "{\"kind\": \"attn\", \"provider\": \"tessera\", \"dtype\": \"" << dsl::to_string(dtype)
               << "\", \"B\": " << B << ", \"H\": " << H << ", \"N\": " << N << ", \"D\": " << D
               << ", \"causal\": " << (causal ? "true" : "false") << ", \"mode\": \"fwd\", \"ms\": " << ms
               << ", \"tflops\": " << tflops << ", \"default_ms\": " << defaultMs << ", \"config\": \"" << best
               << "\", \"gpu\": \"" << gpu << "\"}" << std::endl; // a run cut short keeps its rows
          std::fflush(stdout);
        }
      }
    }
  return wrong ? 3 : 0;
}
