#!/usr/bin/env bash
# Packs build/ for the GPU machine within its 64 MiB: ../shared/device/pack.sh with the core's
# static libraries added (the Python bindings build there against them) and the programs a GPU
# run does not need left out (moved aside while packing), then these scripts beside it.
#   bash bench/device/pack.sh [PATH ...]   # paths under build/ to leave out as well
# On the GPU machine, from the project root: source .gpu/enter.sh && ...
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
left=(build/bin/tessera-unit-tests build/bin/tessera-opt build/bin/tessera build/bin/tessera-bench-memory build/python "$@")
aside=$(mktemp -d)
restore() { for p in "${left[@]}"; do [ -e "$aside/$p" ] && mv "$aside/$p" "$p"; done; rm -rf "$aside"; }
trap restore EXIT
for p in "${left[@]}"; do
  [ -e "$p" ] && mkdir -p "$aside/$(dirname "$p")" && mv "$p" "$aside/$p"
done
bash ../shared/device/pack.sh build build/lib/libTessera*.a
cp bench/device/*.sh .gpu/
echo "with the checkout: $(( ($(du -sb .gpu | cut -f1) + $(git ls-files -z --others --cached --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1)) / 1048576 )) MiB of the 64 that may travel"
