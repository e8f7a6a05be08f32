#!/usr/bin/env bash
# Compile every example kernel to PTX and assemble each with ptxas for sm_90a (the H200), so
# that CI, which has no GPU, checks the backend's output is valid machine code.
#   ptxas_examples.sh <tessera-examples> <ptxas> <out-dir>
set -euo pipefail
examples=$1 ptxas=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
"$examples" --ptx "$out"
count=0
for ptx in "$out"/*.ptx; do
  "$ptxas" -arch=sm_90a -v "$ptx" -o "${ptx%.ptx}.cubin" 2>&1 | grep -E "registers|spill" | sed "s|^|$(basename "$ptx"): |"
  count=$((count + 1))
done
[ "$count" -ge 42 ] || { echo "expected at least 42 PTX files, got $count" >&2; exit 1; }
echo "ptxas assembled $count kernels for sm_90a"
