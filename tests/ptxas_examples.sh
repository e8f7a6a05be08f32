#!/usr/bin/env bash
# Compile every example kernel to PTX and assemble each with ptxas for sm_90a (the H200), so
# that CI, which has no GPU, checks the backend's output is valid machine code.
#   ptxas_examples.sh <tessera-examples> <ptxas> <out-dir>
set -euo pipefail
examples=$1 ptxas=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
jobs=$(nproc)
for shard in $(seq 0 $((jobs - 1))); do
  "$examples" --ptx "$out" --shard "$shard/$jobs" > "$out/compile.$shard.log" &
done
for shard in $(seq 0 $((jobs - 1))); do wait -n || { cat "$out"/compile.*.log; exit 1; }; done
# ptxas's C75xx notes say it serialized wgmma or waited where the kernel keeps dots in flight:
# the async-dot schedule did not hold. They are shown for every kernel and fail the check for
# the library's (shipped kernels are named with their dtype: attention_fwd.f16.d128...).
assemble() {
  local log name
  log=$("$2" -arch=sm_90a -v "$1" -o "${1%.ptx}.cubin" 2>&1) || { echo "$log"; return 1; }
  name=$(basename "$1")
  echo "$log" | grep -E "registers|spill|C75" | sed "s|^|$name: |"
  if echo "$log" | grep -q "C75" && [[ $name =~ \.b?f16\. ]]; then return 1; fi
}
export -f assemble
ls "$out"/*.ptx | xargs -P "$jobs" -I{} bash -c 'assemble "$1" "$2"' _ {} "$ptxas"
count=$(ls "$out"/*.cubin | wc -l)
[ "$count" -ge 46 ] || { echo "expected at least 46 PTX files, got $count" >&2; exit 1; }
echo "ptxas assembled $count kernels for sm_90a"
