// tessera-examples: traces the example kernels, compiles them to PTX for the H200 (sm_90a) and
// prints a summary; with any of the flags below, the library's shipped kernels too (every
// config: hundreds). With --ir, prints their tile-dialect IR; with --ptx DIR, writes the PTX
// (each kernel twice: as for arbitrary arguments, and as for 16-byte-aligned ones with unit
// strides, which takes the vectorized paths); --only TEXT keeps the kernels whose file name
// contains TEXT (e.g. attention_bwd_dkdv.f16.d128), --shard I/N every N-th kernel from the I-th
// (N processes share the work), --set KEY=VALUE[,KEY=VALUE...] overrides config entries of
// every kernel listed (e.g. --set num_warps=8: inspect a config's PTX). CI assembles every file
// with ptxas. Without flags it then runs flash attention and checks it against a CPU reference:
// on the GPU, or through the interpreter where there is none.
#include "attention_check.h"
#include "layernorm.h"
#include "matmul.h"
#include "softmax.h"
#include "vector_add.h"

#include "tessera/compiler/Compiler.h"
#include "tessera/compiler/Interpreter.h"
#include "tessera/kernels/catalog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char **argv) {
  using namespace tessera;
  using namespace tessera::dsl;
  bool printIR = false;
  std::string ptxDir, only;
  size_t shard = 0, shards = 1;
  Config overrides;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--ir")
      printIR = true;
    else if (arg == "--ptx" && i + 1 < argc)
      ptxDir = argv[++i];
    else if (arg == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (arg == "--shard" && i + 1 < argc && std::sscanf(argv[++i], "%zu/%zu", &shard, &shards) == 2 &&
             shard < shards)
      continue;
    else if (arg == "--set" && i + 1 < argc) {
      try {
        overrides.set_all(argv[++i]);
      } catch (const Error &error) {
        std::cerr << "tessera-examples: " << error.what() << "\n";
        return 2;
      }
    } else {
      std::cerr << "usage: tessera-examples [--ir] [--ptx DIR] [--only TEXT] [--shard I/N] [--set KEY=VALUE[,KEY=VALUE...]]...\n";
      return 2;
    }
  }
  try {
    struct Example {
      Kernel kernel;
      Config config;
      std::vector<size_t> unit_strides = {}; // arguments that are 1 in the aligned variant
      std::string tag = {};                  // tells apart files of one kernel's configs
    };
    std::vector<Example> examples = {
        {examples::vector_add(), {{"BLOCK", 1024}}},
        {examples::softmax<f16>(), {{"BLOCK", 4096}, {"num_warps", 8}}},
        {examples::layernorm<bf16>(), {{"BLOCK", 1024}}},
        {examples::matmul<bf16>([](Tile acc) { return maximum(acc, 0.0); }),
         {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 32}}, {7, 9, 11}},
        {examples::matmul<f16>(),
         {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1}, {"num_warps", 8}, {"num_stages", 4}},
         {7, 9, 11}, ".block_pointers"},
        {examples::matmul<bf16>(),
         {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}, {"BLOCK_POINTERS", 1}, {"num_warps", 8},
          {"num_stages", 4}, {"warp_specialize", 1}},
         {7, 9, 11}, ".warp_specialized"},
        {examples::attention_forward<f16>(), {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"HEAD_DIM", 64}}},
    };
    const bool listing = printIR || !ptxDir.empty() || !only.empty() || shards > 1 || !overrides.values().empty();
    for (const kernels::ShippedKernel &shipped : listing ? kernels::shipped_kernels() : std::vector<kernels::ShippedKernel>{})
      examples.push_back({shipped.kernel, shipped.config, {}, "." + shipped.variant});
    for (size_t e = shard; e < examples.size(); e += shards) {
      Example &example = examples[e];
      example.config.update(overrides);
      Specialization aligned;
      aligned.divisible_by_16.assign(example.kernel.signature().size(), true);
      aligned.equal_to_1.assign(example.kernel.signature().size(), false);
      for (size_t arg : example.unit_strides)
        aligned.equal_to_1[arg] = true;
      for (const Specialization &specialization : {Specialization{}, aligned}) {
        // Filtered before tracing: --set then changes only the kernels --only names.
        std::string variant = example.tag + (specialization.divisible_by_16.empty() ? "" : ".aligned");
        if ((example.kernel.name() + variant).find(only) == std::string::npos)
          continue;
        TracedKernel traced = example.kernel.trace(example.config, specialization);
        if (printIR)
          std::cout << "// " << traced.name() << variant << " " << example.config.str() << "\n"
                    << traced.str() << "\n";
        compiler::CompiledKernel compiled = compiler::compile(traced, compiler::Target{9, 0});
        std::cout << traced.name() << variant << " " << example.config.str() << ": "
                  << compiled.ptx.size() << " bytes of PTX for sm_90a, " << compiled.num_warps
                  << " warps, " << compiled.shared_memory << " bytes of shared memory\n";
        if (!ptxDir.empty())
          std::ofstream(ptxDir + "/" + traced.name() + variant + ".ptx") << compiled.ptx;
      }
    }
    if (listing)
      return 0;
    std::string why;
    if (!interpreter::enabled() && !jit::gpu_available(&why)) {
      std::cout << "no GPU (" << why << "): running attention through the interpreter\n";
      setenv("TESSERA_INTERPRET", "1", 1);
    }
    const int heads = 2, n = 256, d = 64;
    auto start = std::chrono::steady_clock::now();
    examples::AttentionCheck check = examples::check_attention(heads, n, n, d, 2026);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "attention_forward f16 B=1 H=" << heads << " N=" << n << " D=" << d << " on the "
              << (interpreter::enabled() ? "interpreter" : "GPU") << " in " << seconds
              << " s: max error " << check.max_error << " (naive fp16: " << check.naive_error
              << "), LSE error " << check.max_lse_error << ": " << (check.passed ? "PASS" : "FAIL") << "\n";
    if (!check.passed)
      return 1;
  } catch (const Error &error) {
    std::cerr << "tessera-examples: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
