"""Attention head to head: tessera (its Python package, the tuned config) against SDPA's
cuDNN backend on the same tensors (BHSD, standard normal; batch*N = 16k, heads = 2048/D as
bench_attention), in one process, the two alternating, under three protocols:
  from rest          median of 100 runs after a 1 s rest (the GPU starts cool, at its top clock);
                     each run is timed from a sync, so it holds the host's time to launch;
  from rest kernels  the same with a GPU sleep ahead of each run's start event, which the host's
                     work overlaps: the kernels alone (HIDE_HOST_CYCLES, about 0.2 ms);
  sustained          1000 back-to-back calls (backward 300) after a 2 s rest (the steady state at
                     the power cap, where an H200 runs attention).
Each protocol runs three rounds; the median round counts, so that neither side profits from
the heat the other left. The forward, or with the argument "bwd" the backward alone (tessera's
with dQ added in the dK/dV pass, deterministic=False; cuDNN's through autograd, the forward's
outputs kept). JSON lines to argv[1]; further arguments: a dtype (f16, bf16) and D:N pairs
(e.g. 64:4096) keep only those; D:N:H runs that many heads instead (e.g. 128:4096:33, where
the 128-row tiles fill whole waves of 132 SMs). Where tessera tunes, its trials and pick go to stderr
(TESSERA_AUTOTUNE_VERBOSE), so that a result can be read with the config behind it. Forward
only, cI (e.g. c1 c13) also runs config I of the cell's own space (attention_forward_configs(D,
causal)), where that space has one, untuned, in the same rounds: configs the tuner cannot tell
apart, timed as the peers are; cI:KEY=VALUE,... the same with those knobs changed.
    PYTHONPATH=<build-python>/python:bench python3 bench/head_to_head_attention.py OUT [bwd] [f16] [64:4096] [c1 ...]"""
import json
import os
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend

import tessera
from bench_attention_backward import peer_backward
from peers_attention import sdpa
from peers_common import median_ms_from_rest, shapes, sustained_ms

ROUNDS = 3
HIDE_HOST_CYCLES = 400_000  # longer than the host's 40-120 us after a sync (H200 host, 12-04b)
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def inputs(dtype, d, n, h):
    """q, k, v, dout of the shape for (d, n, h) (batch*N = 16k), standard normal, (batch, heads,
    n, d) in memory as SDPA takes them, seen as (batch, n, heads, d) views."""
    b = 16384 // n
    return tuple(torch.randn(b, h, n, d, device="cuda", dtype=dtype).transpose(1, 2) for _ in range(4))


def pinned_args(args):
    """The cI and cI:KEY=VALUE,... arguments (config I of a cell's space, those knobs changed)."""
    return [a for a in args if a.partition(":")[0][:1] == "c" and a.partition(":")[0][1:].isdigit()]


def pinned_config(arg, space):
    """The config a pinned argument names in `space`; None where the space has no config I."""
    index, _, knobs = arg.partition(":")
    if int(index[1:]) >= len(space):
        return None
    config = dict(space[int(index[1:])])
    config.update((k, int(v)) for k, v in (kv.split("=") for kv in knobs.split(",") if kv))
    return config


def providers(mode, cudnn, q, k, v, dout, causal, pinned=()):
    """{"tessera": call, "cudnn": call, "tessera cI": call for cI in pinned}: the forward, or
    with mode "bwd" the backward alone (tessera's with dQ added in the dK/dV pass; cuDNN's
    through autograd, the forward kept)."""
    if mode == "fwd":
        space = tessera.attention_forward_configs(q.shape[-1], causal)
        calls = {"tessera": lambda: tessera.attention_forward(q, k, v, causal=causal),
                 "cudnn": lambda: cudnn(*(x.transpose(1, 2) for x in (q, k, v)), causal)}
        for arg in pinned:  # where the cell's space has it
            config = pinned_config(arg, space)
            if config is not None:
                calls[f"tessera {arg}"] = lambda c=config: tessera.attention_forward(q, k, v, causal=causal, config=c)
        return calls
    o, lse = tessera.attention_forward(q, k, v, causal=causal)
    return {"tessera": lambda: tessera.attention_backward(q, k, v, o, lse, dout, causal=causal, deterministic=False),
            "cudnn": peer_backward(cudnn, q, k, v, dout, causal)}


def alternating_medians(calls, measure, rounds=ROUNDS):
    """({name: median}, {name: [each round's]}) of measure(call) over `rounds` rounds, in each
    of which every call is measured once in turn, the order reversed every other round: none
    profits from the heat another left, nor (with pinned configs, more than two calls) always
    follows the same one."""
    times = {name: [] for name in calls}
    for round_ in range(rounds):
        for name, run in (reversed(calls.items()) if round_ % 2 else calls.items()):
            times[name].append(measure(run))
    return {name: statistics.median(t) for name, t in times.items()}, times


def cases(args):
    """(case, providers' calls) for each shape the arguments keep (a dtype, "bwd", D:N or
    D:N:H, cI; else both dtypes, D 64 and 128, N 4096-16384, heads 2048/D), causal or not, each
    call run once first (compile, tune); case: dtype, B, H, N, D, causal, mode."""
    chosen = [a for a in args if a in DTYPES] or list(DTYPES)
    mode = "bwd" if "bwd" in args else "fwd"
    pinned = pinned_args(args)
    if pinned and mode == "bwd":
        sys.exit("head_to_head_attention: cI (a pinned forward config) is for the forward only")
    cudnn = sdpa(SDPBackend.CUDNN_ATTENTION)
    for dname in chosen:
        for d, n, h in shapes(args, [(d, n) for d in (64, 128) for n in (4096, 8192, 16384)]):
            q, k, v, dout = inputs(DTYPES[dname], d, n, h)
            for causal in (False, True):
                calls = providers(mode, cudnn, q, k, v, dout, causal, pinned)
                for run in calls.values():
                    run()
                torch.cuda.synchronize()
                yield ({"dtype": dname, "B": 16384 // n, "H": h, "N": n, "D": d, "causal": causal,
                        "mode": mode}, calls)


def main():
    os.environ.setdefault("TESSERA_AUTOTUNE_VERBOSE", "1")
    out = open(sys.argv[1], "a")
    gpu = torch.cuda.get_device_name()
    print(f"{'dtype':5s} {'D':>4s} {'N':>6s} {'causal':6s} mode {'protocol':17s} {'tessera':>8s} {'cudnn':>8s} "
          f"{'ratio':>6s}")
    for case, calls in cases(sys.argv[2:]):
        count = 1000 if case["mode"] == "fwd" else 300
        for protocol, measure in (("from_rest", lambda run: median_ms_from_rest(run, 10, 100)),
                                  ("from_rest_kernels", lambda run: median_ms_from_rest(run, 10, 100, HIDE_HOST_CYCLES)),
                                  ("sustained", lambda run: sustained_ms(run, count))):
            ms, rounds = alternating_medians(calls, measure)
            print(f"{case['dtype']:5s} {case['D']:4d} {case['N']:6d} {case['causal']!s:6s} {case['mode']} "
                  f"{protocol:17s} {ms['tessera']:8.3f} {ms['cudnn']:8.3f} {ms['cudnn'] / ms['tessera']:5.2f}x",
                  flush=True)
            pinned = {name.split()[1]: {"ms": t, "ratio": ms["cudnn"] / t} for name, t in ms.items() if " " in name}
            for name, entry in pinned.items():
                print(f"{'':44s}{name:>9s} {entry['ms']:8.3f} {'':8s} {entry['ratio']:5.2f}x", flush=True)
            out.write(json.dumps({"kind": "attn_head_to_head", **case, "protocol": protocol,
                                  "tessera_ms": ms["tessera"], "sdpa_cudnn_ms": ms["cudnn"], "rounds": rounds,
                                  **({"pinned": pinned} if pinned else {}), "gpu": gpu}) + "\n")
            out.flush()

if __name__ == "__main__":
    main()
