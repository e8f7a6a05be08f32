"""Attention peers for bench_attention in the same device run: PyTorch SDPA (flash and cuDNN
backends) and FlexAttention (torch.compile), forward, same shapes; JSON lines to argv[1].
Optional argv[2]: only this dtype ("f16" or "bf16"); argv[3] == "noflex" skips FlexAttention."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from peers_common import median_ms


def sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def flex():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    compiled = torch.compile(flex_attention)
    masks = {}

    def run(q, k, v, causal):
        n = q.shape[2]
        if causal and n not in masks:
            masks[n] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, n, n)
        return compiled(q, k, v, block_mask=masks[n] if causal else None)
    return run


def main():
    import torch._dynamo
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.cache_size_limit = 256
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    gpu = torch.cuda.get_device_name()
    providers = {"sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION), "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION)}
    if sys.argv[3:4] != ["noflex"]:
        providers["flex"] = flex()
    only = sys.argv[2] if len(sys.argv) > 2 else None
    for dtype, dname in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        if only and dname != only:
            continue
        for D in (64, 128):
            for N in (1024, 4096, 8192, 16384):
                B, H = 16384 // N, 2048 // D
                q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
                for causal in (False, True):
                    for name, run in providers.items():
                        if name == "flex" and (dtype != torch.float16 or N not in (4096, 16384)):
                            continue  # each shape costs a compile: enough for orientation
                        try:
                            ms = median_ms(lambda: run(q, k, v, causal), 10, 50)
                        except Exception as error:  # a backend that cannot run this shape
                            print(f"{name}: {error!r}"[:200])
                            continue
                        tflops = 4 * B * H * N * N * D * (0.5 if causal else 1) / (ms * 1e9)
                        print(f"{name:10s} {dname:4s} B{B:<3d} H{H:<3d} N{N:<6d} D{D:<4d} causal={causal!s:5s} "
                              f"{ms:9.3f} ms {tflops:7.1f} TFLOP/s")
                        out.write(json.dumps({"kind": "attn", "provider": name, "dtype": dname, "B": B, "H": H,
                                              "N": N, "D": D, "causal": causal, "mode": "fwd", "ms": ms,
                                              "tflops": tflops, "gpu": gpu}) + "\n")


if __name__ == "__main__":
    main()
