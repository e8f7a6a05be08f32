"""Launches tessera's attention forward (or backward, "bwd") and SDPA-cuDNN's on the same
tensors as head_to_head_attention.py, for Nsight Compute to profile side by side: tessera three
times (the first call tunes; with its kernel cache warm, only the chosen config runs), then
cuDNN three times. Run it once without ncu to warm the cache, then (forward; the backward
launches several kernels a call, so pick its names and counts to match):
    PYTHONPATH=<build-python>/python:bench ncu --clock-control none --set full \
        --kernel-name regex:'attention_fwd|sdpa' --launch-skip 2 --launch-count 2 -o REPORT \
        python3 bench/ncu_attention.py f16 128:4096[:H] [causal]
and read REPORT with bench/ncu_stalls.py."""
import sys

import torch
from torch.nn.attention import SDPBackend

from head_to_head_attention import DTYPES, inputs, providers
from peers_attention import sdpa
from peers_common import shapes


def main():
    dtype = DTYPES[next((a for a in sys.argv[1:] if a in DTYPES), "f16")]
    d, n, h = shapes(sys.argv[1:], [(128, 4096)])[0]
    mode = "bwd" if "bwd" in sys.argv[1:] else "fwd"
    calls = providers(mode, sdpa(SDPBackend.CUDNN_ATTENTION), *inputs(dtype, d, n, h), "causal" in sys.argv[1:])
    for run in calls.values():  # tessera's three, then cuDNN's
        for _ in range(3):
            run()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
