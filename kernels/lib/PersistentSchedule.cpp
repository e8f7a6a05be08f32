// The persistent causal forward's schedule: which query blocks each program takes, planned on
// the host as a dynamic scheduler would hand them out, and kept on the device per shape.
#include "AttentionKernels.h"

#include "tessera/compiler/Interpreter.h"
#include "tessera/error.h"
#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <queue>
#include <tuple>

namespace tessera::kernels::detail {

int64_t headsSharingL2(int64_t bytes_per_head, int64_t heads) {
  return std::max<int64_t>(std::min(kL2ChunkBytes / std::max<int64_t>(bytes_per_head, 1), heads), 1);
}

std::vector<int32_t> plan_causal_schedule(int64_t batch_heads, int64_t n_q, int64_t n_kv, int64_t block_m,
                                          int64_t programs, int64_t chunk_heads) {
  const int64_t query_blocks = (n_q + block_m - 1) / block_m, diagonal = n_kv - n_q;
  // The kernel indexes the plan's records (kScheduleRecord int32s a tile) in int32.
  if (query_blocks * batch_heads > std::numeric_limits<int32_t>::max() / kScheduleRecord)
    throw Error("attention_forward: " + std::to_string(query_blocks) + " query blocks of " +
                std::to_string(batch_heads) +
                " heads are more tiles than a persistent program's plan holds (2^29 - 1)");
  // (work so far, program): the least loaded first, ties to the lower program.
  using Load = std::pair<int64_t, int64_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> least;
  for (int64_t p = 0; p < programs; ++p)
    least.push({0, p});
  std::vector<std::vector<int32_t>> taken(programs);
  for (int64_t first = 0; first < batch_heads; first += chunk_heads)
    for (int64_t block = query_blocks - 1; block >= 0; --block) {
      // The keys the block's rows see (the kernel's kv_end), and its own cost (Q in, O out)
      // about that of a block of keys (3 or 6 blocks' worth timed the same: H200, d = 64, 12-04c).
      const int64_t keys = std::clamp<int64_t>(block * block_m + block_m + diagonal, 0, n_kv);
      for (int64_t head = first; head < std::min(batch_heads, first + chunk_heads); ++head) {
        auto [load, program] = least.top();
        least.pop();
        taken[program].push_back(static_cast<int32_t>(head * query_blocks + block));
        least.push({load + keys + block_m, program});
      }
    }
  std::vector<int32_t> schedule{0};
  for (const std::vector<int32_t> &tiles : taken)
    schedule.push_back(schedule.back() + static_cast<int32_t>(tiles.size()));
  for (const std::vector<int32_t> &tiles : taken)
    schedule.insert(schedule.end(), tiles.begin(), tiles.end());
  return schedule;
}

const void *causal_schedule(int64_t batches, int64_t heads_q, int64_t group, int64_t n_q, int64_t n_kv,
                            int64_t head_dim, int64_t block_m, int64_t programs) {
  const int64_t batch_heads = batches * heads_q, chunk_heads = headsSharingL2(n_kv * head_dim * 4, batch_heads);
  using Key = std::tuple<bool, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  static std::mutex mutex;
  static std::map<Key, jit::DeviceBuffer> plans;
  const bool host = interpreter::enabled();
  const Key key{host, host ? -1 : jit::current_device().ordinal, batches, heads_q, group, n_q, n_kv, block_m, programs,
                chunk_heads};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = plans.find(key); it != plans.end())
    return it->second.data();
  // Bounded: many lengths would otherwise keep a plan each. Kernels queued may still read the
  // plans dropped, so the GPU finishes them first.
  if (plans.size() >= 64) {
    if (!host)
      jit::synchronize();
    plans.clear();
  }
  const std::vector<int32_t> plan = plan_causal_schedule(batch_heads, n_q, n_kv, block_m, programs, chunk_heads);
  // The offsets, then each tile's record (forEachScheduledTile).
  const int64_t query_blocks = (n_q + block_m - 1) / block_m;
  std::vector<int32_t> records(plan.begin(), plan.begin() + programs + 1);
  for (auto tile = plan.begin() + programs + 1; tile != plan.end(); ++tile) {
    const int64_t batch_head = *tile / query_blocks, head = batch_head % heads_q;
    for (int64_t part : {*tile % query_blocks, batch_head / heads_q, head, head / group})
      records.push_back(static_cast<int32_t>(part));
  }
  jit::DeviceBuffer buffer(records.size() * sizeof(int32_t));
  buffer.copy_from_host(records.data(), records.size() * sizeof(int32_t));
  return plans.emplace(key, std::move(buffer)).first->second.data();
}

} // namespace tessera::kernels::detail
