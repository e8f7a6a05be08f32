#!/usr/bin/env bash
# The GPU tests matching FILTER in SHARDS concurrent processes (default 16, the GPU machine's
# cores: compiling dominates a cold kernel cache), each stopped after LIMIT seconds; the logs
# joined in LOG, then a summary: passed, failed, skipped, and each shard cut short.
#   bash .gpu/gpu_tests.sh FILTER LIMIT LOG
filter=$1 limit=$2 log=$3 shards=${SHARDS:-16}
logs=$(mktemp -d)
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$limit" ./build/bin/tessera-gpu-tests \
    --gtest_filter="$filter" > "$logs/$i.log" 2>&1 &
done
wait
cat "$logs"/*.log > "$log"
echo "tests: $(grep -c '^\[       OK' "$log") passed, $(grep -c '^\[  FAILED  \].*ms)' "$log") failed," \
     "$(grep -c '^\[  SKIPPED.*ms)' "$log") skipped, of $(grep -c '^\[ RUN' "$log") started"
grep '^\[  FAILED  \].*ms)' "$log"
for i in $(seq 0 $((shards - 1))); do
  grep -q "PASSED\|FAILED TEST" "$logs/$i.log" || echo "shard $i cut short in: $(grep '^\[ RUN' "$logs/$i.log" | tail -1)"
done
rm -rf "$logs"
