"""Attention backward on the GPU: tessera (through its Python package) against PyTorch SDPA's
flash and cuDNN backends and FlexAttention (torch.compile), in the same run, same shapes as
bench_attention (batch*N = 16k, heads = 2048/D), D 64 and 128, causal and not. Each time is
the backward alone (the forward's outputs kept), median of 30 after warm-up. JSON lines to
argv[1]; an argument "noflex" skips FlexAttention, arguments D:N or D:N:H (e.g. 128:8192) keep
only those shapes; tessera_atomic_dq is tessera's backward with deterministic=False (dQ added in the dK/dV pass).
    PYTHONPATH=<build>/python:bench python3 bench/bench_attention_backward.py OUT"""
import json
import sys

import torch
from torch.nn.attention import SDPBackend

import tessera
from peers_attention import flex, sdpa
from peers_common import median_ms, shapes


def peer_backward(attention, q, k, v, dout, causal):
    leaves = [x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v)]  # (B, H, N, D)
    o = attention(*leaves, causal)
    grad = dout.transpose(1, 2)
    return lambda: torch.autograd.grad(o, leaves, grad, retain_graph=True)


def main():
    import torch._dynamo
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.cache_size_limit = 256
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    peers = {"sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION), "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION)}
    if "noflex" not in sys.argv[2:]:
        peers["flex"] = flex()
    gpu = torch.cuda.get_device_name()
    for d, n, h in shapes(sys.argv[2:], [(d, n) for d in (64, 128) for n in (1024, 2048, 4096, 8192, 16384)]):
        for causal in (False, True):
            b = 16384 // n
            q, k, v, dout = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
            o, lse = tessera.attention_forward(q, k, v, causal=causal)
            flops = 2.5 * 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            row = {"bench": "attention_backward", "gpu": gpu, "dtype": "f16", "batch": b, "heads": h, "n": n,
                   "d": d, "causal": causal}
            times = {}
            for name, deterministic in (("tessera", True), ("tessera_atomic_dq", False)):
                times[name] = median_ms(lambda: tessera.attention_backward(q, k, v, o, lse, dout, causal=causal,
                                                                           deterministic=deterministic),
                                        warmup=5, runs=30)
            for name, attention in peers.items():
                try:
                    times[name] = median_ms(peer_backward(attention, q, k, v, dout, causal), warmup=5, runs=30)
                except Exception as error:  # a backend without this shape
                    print(f"{name} d={d} n={n}: {error}", file=sys.stderr)
            for name, ms in times.items():
                row[name + "_ms"], row[name + "_tflops"] = ms, flops / ms / 1e9
            line = json.dumps(row)
            print(line, flush=True)
            out.write(line + "\n")


if __name__ == "__main__":
    main()
