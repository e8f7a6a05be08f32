"""Where an event-timed attention backward call's time goes, on the GPU: tessera (deterministic
and adding dQ) and SDPA-cuDNN, d 64 / 128, causal and not, N = 8192, B x H = 32. For each call
(torch.profiler, CPU + CUDA): the event time, the host time from the call to its first kernel
launch (the GPU idles then), and each kernel's time. JSON lines to argv[1].
    PYTHONPATH=<build>/python:bench python3 bench/trace_attention_backward.py OUT"""
import json
import os
import sys
import tempfile

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import tessera

CALLS = 5


def calls_of(trace):
    """Per profiled call: (host ms from the call to its first launch, {kernel: ms})."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    calls = sorted((e for e in events if e["name"] == "call" and e.get("cat") == "user_annotation"),
                   key=lambda e: e["ts"])
    launches = sorted((e for e in events if e["name"].startswith("cuLaunchKernel") or e["name"] == "cudaMemsetAsync"),
                      key=lambda e: e["ts"])
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    out = []
    for i, call in enumerate(calls):
        end = calls[i + 1]["ts"] if i + 1 < len(calls) else float("inf")
        first = next(e["ts"] for e in launches if e["ts"] >= call["ts"])
        mine = [k for k in kernels if call["ts"] <= k["ts"] < end]
        out.append(((first - call["ts"]) / 1000, {k["name"][:60]: k["dur"] / 1000 for k in mine}))
    return out


def main():
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    gpu = torch.cuda.get_device_name()
    for d in (64, 128):
        for causal in (False, True):
            b, h, n = 2, 2048 // d, 8192
            q, k, v, dout = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
            o, lse = tessera.attention_forward(q, k, v, causal=causal)
            leaves = [x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v)]
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                oc = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
            variants = {
                "tessera": lambda: tessera.attention_backward(q, k, v, o, lse, dout, causal=causal),
                "tessera_atomic_dq": lambda: tessera.attention_backward(q, k, v, o, lse, dout, causal=causal,
                                                                        deterministic=False),
                "sdpa_cudnn": lambda: torch.autograd.grad(oc, leaves, dout.transpose(1, 2), retain_graph=True),
            }
            for name, run in variants.items():
                for _ in range(5):
                    run()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                times = []
                with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
                    for _ in range(CALLS):
                        with torch.profiler.record_function("call"):
                            start.record()
                            run()
                            end.record()
                        end.synchronize()
                        times.append(start.elapsed_time(end))
                with tempfile.TemporaryDirectory() as folder:
                    path = os.path.join(folder, "trace.json")
                    prof.export_chrome_trace(path)
                    calls = calls_of(json.load(open(path)))[1:]  # the first may pay one-time costs
                host = sorted(c[0] for c in calls)[len(calls) // 2]
                kernels = {}
                for _, ks in calls:
                    for kname, ms in ks.items():
                        kernels.setdefault(kname, []).append(ms)
                row = {"bench": "attention_backward_trace", "gpu": gpu, "dtype": "f16", "batch": b, "heads": h, "n": n,
                       "d": d, "causal": causal, "provider": name, "event_ms": sorted(times)[len(times) // 2],
                       "host_to_first_launch_ms": host,
                       "kernel_ms": {kname: sorted(v)[len(v) // 2] for kname, v in kernels.items()}}
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
