"""Sustained attention backward: tessera (deterministic=False) and SDPA-cuDNN, 600 back-to-back
calls each (d = 128, N = 8192, B = 2, H = 16, f16, not causal), after one warm call and a 1 s
pause; JSON lines with the wall-clock span of each phase, to line up with an SM clock and power
log taken beside it (H200: both run at the 700 W cap, where clocks, not the kernels' burst
speed, set the time):
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv,noheader -lms 200 > clocks.csv &
    PYTHONPATH=<build>/python:bench python3 bench/sustained_attention_backward.py > sustained.jsonl"""
import json
import time

import torch
from torch.nn.attention import SDPBackend

import tessera
from bench_attention_backward import peer_backward
from peers_attention import sdpa

CALLS = 600

b, n, h, d = 2, 8192, 16, 128
q, k, v, dout = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
o, lse = tessera.attention_forward(q, k, v)
phases = {"tessera_fused": lambda: tessera.attention_backward(q, k, v, o, lse, dout, deterministic=False),
          "sdpa_cudnn": peer_backward(sdpa(SDPBackend.CUDNN_ATTENTION), q, k, v, dout, False)}
for name, call in phases.items():
    call()
    torch.cuda.synchronize()
    time.sleep(1.0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    began = time.time()
    start.record()
    for _ in range(CALLS):
        call()
    end.record()
    torch.cuda.synchronize()
    print(json.dumps({"name": name, "start": began, "end": time.time(), "ms_per_call": start.elapsed_time(end) / CALLS}),
          flush=True)
