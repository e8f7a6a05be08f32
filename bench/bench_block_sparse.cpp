// Block-sparse attention on the GPU (issue 8's bench): B=4 H=16 N=8192 D=128 fp16, forward and
// backward, for a causal sliding window of 1024 (mask_mod in the partial blocks), random
// 128x128 blocks at 25% (no mask_mod: visited blocks are whole) and a density sweep 5%-100%,
// plus tessera's dense time for the "within 1.3x of density x dense" bar. The random blocks
// come from a formula that peers_block_sparse.py repeats, so FlexAttention gets the same mask
// in the same run. JSON lines go to argv[1]; argv[2] (optional) keeps only the masks it names
// (comma-separated, e.g. sliding_window,random_25); the dense kernels are always timed. Each
// line is flushed as it is measured, so a run cut short keeps what it measured. Every time is
// taken from rest (median_ms_from_rest; peers_block_sparse.py the same), so that the dense
// time the bar divides by and each mask's start from the same heat and power state.
#include "bench_util.h"
#include "tessera/jit/Runtime.h"
#include "tessera/kernels/block_sparse.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

using namespace tessera;

namespace {

constexpr int64_t B = 4, H = 16, N = 8192, D = 128, kBlock = 128;

/// Block (i, j) of head h is visited when this hash falls under the density (the same formula
/// as peers_block_sparse.py); the diagonal always is, so that no row is empty.
bool randomBlock(int64_t h, int64_t i, int64_t j, double density) {
  uint64_t x = uint64_t(h * 1000003 + i * 7919 + j * 104729) * 2654435761u % 1000;
  return i == j || double(x) < density * 1000;
}

kernels::BlockMask randomMask(double density) {
  const int64_t blocks = N / kBlock;
  std::vector<kernels::BlockMask::State> states;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < blocks; ++i)
        for (int64_t j = 0; j < blocks; ++j)
          states.push_back(randomBlock(h, i, j, density) ? kernels::BlockMask::State::full
                                                          : kernels::BlockMask::State::skip);
  return kernels::BlockMask(B, H, N, N, kBlock, kBlock, states);
}

} // namespace

int main(int argc, char **argv) {
  bench::requireGpu("bench_block_sparse");
  std::ofstream json = bench::resultsFile(argc, argv);
  const std::string gpu = jit::current_device().name;
  const int64_t numel = B * H * N * D;
  std::vector<jit::DeviceBuffer> buffers;
  for (int i = 0; i < 8; ++i) // q k v o dout dq dk dv
    buffers.emplace_back(numel * 2);
  jit::DeviceBuffer lse(B * H * N * 4);
  for (int i : {0, 1, 2, 4}) // q k v dout, standard normal as FlexAttention's inputs
    bench::fillNormal(buffers[i], dsl::DType::f16, numel, uint32_t(i + 1));
  auto view = [&](int i) {
    return kernels::TensorView{buffers[i].data(), dsl::DType::f16, {B, N, H, D}, {}, kernels::DeviceType::cuda};
  };
  const kernels::TensorView lseView{lse.data(), dsl::DType::f32, {B, H, N}, {}, kernels::DeviceType::cuda};

  kernels::Modifiers window;
  window.mask_mod = kernels::mask_mods::sliding_window(1024);
  const kernels::BlockSparseAttention windowed(window), plain;
  std::printf("%-16s %8s %10s %10s %12s %12s\n", "mask", "density", "fwd ms", "bwd ms", "fwd TFLOP/s", "bwd TFLOP/s");
  const std::string only = argc > 2 ? "," + std::string(argv[2]) + "," : "";
  auto measure = [&](const std::string &name, const kernels::BlockSparseAttention &attention,
                     const kernels::BlockMask &mask) {
    if (!only.empty() && only.find("," + name + ",") == std::string::npos)
      return;
    // FLOPs of the visited blocks (the density), as FlexAttention's benchmarks count them.
    const double flops = 4.0 * B * H * N * N * D * mask.density();
    double fwd = bench::median_ms_from_rest([&] { attention.forward(view(0), view(1), view(2), view(3), lseView, mask); }, 5, 30);
    double bwd = bench::median_ms_from_rest([&] {
      attention.backward(view(0), view(1), view(2), view(3), lseView, view(4), view(5), view(6), view(7), mask);
    }, 5, 30);
    std::printf("%-16s %8.3f %10.3f %10.3f %12.1f %12.1f\n", name.c_str(), mask.density(), fwd, bwd, flops / fwd / 1e9,
                2.5 * flops / bwd / 1e9);
    json << "{\"bench\": \"block_sparse\", \"gpu\": \"" << gpu << "\", \"provider\": \"tessera\", \"mask\": \"" << name
         << "\", \"density\": " << mask.density() << ", \"batch\": " << B << ", \"heads\": " << H << ", \"n\": " << N
         << ", \"d\": " << D << ", \"fwd_ms\": " << fwd << ", \"bwd_ms\": " << bwd << "}" << std::endl;
    std::fflush(stdout);
  };
  // The dense kernels on the same inputs: the time the sparse ones should scale down from.
  double dense_fwd = bench::median_ms_from_rest([&] { kernels::attention_forward(view(0), view(1), view(2), view(3), lseView); }, 5, 30);
  double dense_bwd = bench::median_ms_from_rest([&] {
    kernels::attention_backward(view(0), view(1), view(2), view(3), lseView, view(4), view(5), view(6), view(7));
  }, 5, 30);
  std::printf("%-16s %8.3f %10.3f %10.3f\n", "dense kernels", 1.0, dense_fwd, dense_bwd);
  json << "{\"bench\": \"block_sparse\", \"gpu\": \"" << gpu << "\", \"provider\": \"tessera_dense\", \"mask\": \"none\", "
       << "\"density\": 1, \"fwd_ms\": " << dense_fwd << ", \"bwd_ms\": " << dense_bwd << "}" << std::endl;
  std::fflush(stdout);
  measure("sliding_window", windowed, kernels::BlockMask::sliding_window(B, N, 1024));
  measure("dense", plain, randomMask(1.0));
  for (double density : {0.05, 0.1, 0.25, 0.5, 0.75})
    measure("random_" + std::to_string(int(density * 100)), plain, randomMask(density));
  return 0;
}
