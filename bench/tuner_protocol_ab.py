"""Times pinned forward configs of one cell in the autotuner's protocol (~100 ms warm-up, then 20
runs queued back to back, each after an L2 flush, the median counting), without the flush, and
sustained, in alternating rounds: whether the tuner's final ranks configs as use does. cI is
config I of the cell's space (attention_forward_configs(D, causal)), cI:KEY=VALUE,... the same
with those knobs changed (e.g. c1:PERSISTENT=0,Q_BLOCK_POINTER=0).
    PYTHONPATH=<build-python>/python:bench python3 bench/tuner_protocol_ab.py OUT f16 64:4096 causal c1 \
        c1:PERSISTENT=0,Q_BLOCK_POINTER=0"""
import json
import sys

import torch

import tessera
from head_to_head_attention import DTYPES, alternating_medians, inputs, pinned_args, pinned_config
from peers_common import shapes, sustained_ms

def tuner_ms(run, flush, runs=20, warm_ms=100.0):
    """Autotune.cpp's timeOnGpu: after ~warm_ms of back-to-back runs, the median of `runs`
    event-timed runs queued back to back, each after zeroing `flush` (larger than L2) if given."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    stop.record()
    stop.synchronize()
    for _ in range(max(3, min(int(warm_ms / max(start.elapsed_time(stop), 1e-3)), 10000))):
        run()
    events = []
    for _ in range(runs):
        if flush is not None:
            flush.zero_()
        b, a = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        b.record()
        run()
        a.record()
        events.append((b, a))
    events[-1][1].synchronize()
    return sorted(b.elapsed_time(a) for b, a in events)[runs // 2]


def main():
    args = sys.argv[2:]
    out = open(sys.argv[1], "a")
    dtype = next(a for a in args if a in DTYPES)
    causal = "causal" in args
    for d, n, h in shapes(args, [(64, 4096)]):
        q, k, v, _ = inputs(DTYPES[dtype], d, n, h)
        space = tessera.attention_forward_configs(d, causal)
        configs = {arg: pinned_config(arg, space) for arg in pinned_args(args)}
        calls = {arg: (lambda c=config: tessera.attention_forward(q, k, v, causal=causal, config=c))
                 for arg, config in configs.items() if config is not None}
        for run in calls.values():
            run()
        torch.cuda.synchronize()
        flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        for protocol, measure in (("tuner", lambda run: tuner_ms(run, flush)),
                                  ("tuner_no_flush", lambda run: tuner_ms(run, None)),
                                  ("sustained", lambda run: sustained_ms(run, 1000))):
            ms, rounds = alternating_medians(calls, measure, rounds=6)
            for name in calls:
                print(f"{dtype} d={d} N={n} causal={causal} {protocol:15s} {name} {ms[name]:.4f} ms  "
                      + " ".join(f"{t:.4f}" for t in rounds[name]), flush=True)
            out.write(json.dumps({"kind": "tuner_protocol_ab", "dtype": dtype, "D": d, "N": n, "H": h,
                                  "causal": causal, "protocol": protocol, "ms": ms, "rounds": rounds,
                                  "gpu": torch.cuda.get_device_name()}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
