// C = epilogue(A @ B): blocked matmul with grouped program order (L2 reuse) and masked tails.
#ifndef TESSERA_EXAMPLES_MATMUL_H
#define TESSERA_EXAMPLES_MATMUL_H

#include <tessera/dsl.h>

#include <functional>
#include <tuple>
#include <vector>

namespace tessera::examples {

/// Meta parameters: BLOCK_M, BLOCK_N, BLOCK_K (each >= 16), GROUP_M (default 8), and
/// BLOCK_POINTERS (default 0): 1 loads A and B through block pointers, which a Hopper GPU
/// copies with its tensor memory accelerator when the matrices are 16-byte aligned (row
/// strides included). Grid: cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N). `epilogue` maps the f32
/// accumulator tile (e.g. an activation) before it is converted to T and stored.
template <typename T>
dsl::Kernel matmul(std::function<dsl::Tile(dsl::Tile)> epilogue = {}) {
  using namespace tessera::dsl;
  return kernel("matmul", [epilogue](Ptr<T> a, Ptr<T> b, Ptr<T> c, Int M, Int N, Int K,
                                     Int stride_am, Int stride_ak, Int stride_bk, Int stride_bn,
                                     Int stride_cm, Int stride_cn, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], bk = cfg["BLOCK_K"];
    const int64_t group = cfg.get("GROUP_M", 8);

    // Programs walk GROUP_M block-rows together so that the B blocks they share stay in L2.
    Tile pid = program_id(0);
    Tile blocks_m = cdiv(M, bm), blocks_n = cdiv(N, bn);
    Tile per_group = blocks_n * group;
    Tile first_m = pid / per_group * group;
    Tile group_rows = minimum(blocks_m - first_m, group);
    Tile pid_m = first_m + pid % per_group % group_rows;
    Tile pid_n = pid % per_group / group_rows;

    Tile rows = expand_dims(pid_m * bm + arange(0, bm), 1); // [bm, 1]
    Tile cols = expand_dims(pid_n * bn + arange(0, bn), 0); // [1, bn]
    Tile acc = zeros({bm, bn}, DType::f32);
    if (cfg.get("BLOCK_POINTERS", 0)) {
      Tile a_block = make_block_ptr(a, {M, K}, {stride_am, stride_ak}, {pid_m * bm, 0}, {bm, bk});
      Tile b_block = make_block_ptr(b, {K, N}, {stride_bk, stride_bn}, {0, pid_n * bn}, {bk, bn});
      for_range(0, K, bk, {acc, a_block, b_block}, [&](Tile) {
        acc = dot(load(a_block), load(b_block), acc);
        a_block = advance(a_block, {0, bk});
        b_block = advance(b_block, {bk, 0});
      });
    } else {
      Tile ks = arange(0, bk);
      Tile a_ptrs = a + rows * stride_am + expand_dims(ks, 0) * stride_ak;
      Tile b_ptrs = b + expand_dims(ks, 1) * stride_bk + cols * stride_bn;
      for_range(0, K, bk, {acc, a_ptrs, b_ptrs}, [&](Tile k) {
        Tile a_tile = load(a_ptrs, rows < M && expand_dims(ks, 0) + k < K, 0);
        Tile b_tile = load(b_ptrs, expand_dims(ks, 1) + k < K && cols < N, 0);
        acc = dot(a_tile, b_tile, acc);
        a_ptrs += bk * stride_ak;
        b_ptrs += bk * stride_bk;
      });
    }
    if (epilogue)
      acc = epilogue(acc);
    store(c + rows * stride_cm + cols * stride_cn, cast<T>(acc), rows < M && cols < N);
  });
}

/// The config space matmul is tuned over: block shapes, warps, pipeline stages, the large
/// tiles again through block pointers (the TMA on Hopper), and those once more with a producer
/// warpgroup issuing the TMA loads (warp_specialize). The first is the default.
inline std::vector<dsl::Config> matmul_configs() {
  std::vector<dsl::Config> configs;
  for (auto [bm, bn, bk, warps, stages, block_pointers, specialize] :
       std::vector<std::tuple<int, int, int, int, int, int, int>>{
           {128, 128, 32, 4, 3, 0, 0}, {128, 128, 32, 4, 4, 0, 0}, {128, 128, 32, 8, 3, 0, 0},
           {128, 256, 32, 8, 3, 0, 0}, {128, 256, 32, 8, 4, 0, 0}, {256, 128, 32, 8, 3, 0, 0},
           {256, 128, 32, 8, 4, 0, 0}, {128, 64, 32, 4, 4, 0, 0},  {64, 128, 32, 4, 4, 0, 0},
           {64, 64, 32, 4, 4, 0, 0},   {128, 128, 64, 4, 3, 0, 0}, {128, 128, 64, 8, 3, 0, 0},
           {128, 64, 64, 4, 3, 0, 0},  {64, 64, 64, 4, 3, 0, 0},   {256, 128, 64, 8, 2, 0, 0},
           {128, 256, 64, 8, 3, 0, 0}, {128, 256, 64, 8, 4, 0, 0}, {128, 128, 64, 4, 4, 1, 0},
           {128, 128, 64, 8, 4, 1, 0}, {128, 256, 64, 8, 3, 1, 0}, {128, 256, 64, 8, 4, 1, 0},
           {256, 128, 64, 8, 3, 1, 0}, {64, 64, 64, 4, 4, 1, 0},   {128, 128, 64, 4, 4, 1, 1},
           {128, 256, 64, 8, 3, 1, 1}, {128, 256, 64, 8, 4, 1, 1}, {256, 128, 64, 8, 3, 1, 1}}) {
    configs.push_back({{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}, {"GROUP_M", 8},
                       {"num_warps", warps}, {"num_stages", stages}, {"BLOCK_POINTERS", block_pointers}});
    if (specialize)
      configs.back().set("warp_specialize", 1);
  }
  return configs;
}

/// Programs of a matmul launch for `config`.
inline dsl::Grid matmul_grid(const dsl::Config &config, int64_t M, int64_t N) {
  return {static_cast<uint32_t>(dsl::cdiv(M, config["BLOCK_M"]) * dsl::cdiv(N, config["BLOCK_N"]))};
}

} // namespace tessera::examples

#endif // TESSERA_EXAMPLES_MATMUL_H
