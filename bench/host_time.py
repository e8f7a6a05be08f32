"""Host time a call: how long the host spends in one attention forward call before it returns
(checks, outputs, the tuned config, tensor maps, the launch), tessera against SDPA's cuDNN
backend on the same tensors (BHSD as head_to_head_attention.py). Each call is timed on the
host alone (perf_counter) while the GPU is busy with the calls before it, so that no call
waits for the GPU: the median of 200 such calls, in 3 alternating rounds. For tessera also
its torch entry point (flash_attn, inference: no input needs a gradient) and its parts: the
native call alone (outputs and descriptors made beforehand) and the Python around it. JSON lines to argv[1]; further arguments: a dtype, and D:N or D:N:H as in
head_to_head_attention.py (default f16 64:4096 128:4096), causal or not.
    PYTHONPATH=<build-python>/python:bench python3 bench/host_time.py OUT [f16] [64:4096]"""
import json
import statistics
import sys
import time

import torch
from torch.nn.attention import SDPBackend

import tessera
from head_to_head_attention import DTYPES, alternating_medians, inputs
from peers_attention import sdpa
from peers_common import shapes

CALLS = 200


def host_us(run):
    """Median host microseconds of a call, over CALLS calls queued behind a GPU busy with them."""
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def calls(q, k, v, causal):
    """{name: call}: tessera's public calls, its native call alone, SDPA-cuDNN's."""
    o, lse = tessera.attention_forward(q, k, v, causal=causal)
    descriptors = [tessera._descriptor(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"), (o, "o"), (lse, "lse"))]
    stream = tessera._stream(q)
    cudnn = sdpa(SDPBackend.CUDNN_ATTENTION)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    return {"tessera": lambda: tessera.attention_forward(q, k, v, causal=causal),
            "tessera_flash_attn": lambda: tessera.flash_attn(q, k, v, causal=causal),
            "tessera_native": lambda: tessera._tessera.attention_forward(*descriptors, causal, None, stream),
            "cudnn": lambda: cudnn(qt, kt, vt, causal)}


def main():
    out = open(sys.argv[1], "a")
    args = sys.argv[2:]
    chosen = [a for a in args if a in DTYPES] or ["f16"]
    gpu = torch.cuda.get_device_name()
    print(f"{'dtype':5s} {'D':>4s} {'N':>6s} {'causal':6s} {'tessera':>8s} {'flash':>8s} {'native':>8s} "
          f"{'cudnn':>8s}  (host us a call)")
    for dname in chosen:
        for d, n, h in shapes(args, [(64, 4096), (128, 4096)]):
            q, k, v, _ = inputs(DTYPES[dname], d, n, h)
            for causal in (False, True):
                us, rounds = alternating_medians(calls(q, k, v, causal), host_us)
                print(f"{dname:5s} {d:4d} {n:6d} {causal!s:6s} {us['tessera']:8.1f} {us['tessera_flash_attn']:8.1f} "
                      f"{us['tessera_native']:8.1f} {us['cudnn']:8.1f}", flush=True)
                out.write(json.dumps({"kind": "attn_host_time", "dtype": dname, "B": 16384 // n, "H": h,
                                      "N": n, "D": d, "causal": causal, "host_us": us, "rounds": rounds,
                                      "gpu": gpu}) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
