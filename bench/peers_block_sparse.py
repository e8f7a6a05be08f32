"""FlexAttention on bench_block_sparse's masks, same run: B=4 H=16 N=8192 D=128 fp16, forward and
backward, a causal sliding window of 1024 and random 128x128 blocks (the same formula as
bench_block_sparse.cpp) at 5-100% density. JSON lines appended to argv[1]."""
import json
import sys

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from peers_common import median_ms_from_rest

B, H, N, D, BLOCK = 4, 16, 8192, 128, 128


def random_blocks(density):
    """[H, N/128, N/128] bool: bench_block_sparse.cpp's randomBlock for every block."""
    h, i, j = torch.meshgrid(*(torch.arange(n, dtype=torch.int64) for n in (H, N // BLOCK, N // BLOCK)), indexing="ij")
    x = (h * 1000003 + i * 7919 + j * 104729) * 2654435761 % 1000
    return ((i == j) | (x < density * 1000)).cuda()


def main():
    import torch._dynamo
    torch._dynamo.config.recompile_limit = 64
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    attention = torch.compile(flex_attention)
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn((B, H, N, D), device="cuda", dtype=torch.float16) for _ in range(4))
    masks = {"sliding_window": lambda b, h, qi, ki: (ki <= qi) & (qi - ki < 1024)}
    for density in (0.05, 0.1, 0.25, 0.5, 0.75, 1.0):
        table = random_blocks(density)
        name = "dense" if density == 1.0 else f"random_{int(density * 100)}"
        masks[name] = lambda b, h, qi, ki, table=table: table[h, qi // BLOCK, ki // BLOCK]
    for name, mask_mod in masks.items():
        block_mask = create_block_mask(mask_mod, None, H, N, N)
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        fwd = median_ms_from_rest(lambda: attention(*leaves, block_mask=block_mask), warmup=5, runs=30)
        o = attention(*leaves, block_mask=block_mask)
        bwd = median_ms_from_rest(lambda: torch.autograd.grad(o, leaves, dout, retain_graph=True), warmup=5, runs=30)
        row = {"bench": "block_sparse", "gpu": torch.cuda.get_device_name(), "provider": "flex", "mask": name,
               "density": 1 - block_mask.sparsity() / 100, "batch": B, "heads": H, "n": N,
               "d": D, "fwd_ms": fwd, "bwd_ms": bwd}
        print(json.dumps(row), flush=True)
        out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
