"""Peers for bench_memory in the same device run: device copy bandwidth, torch add, torch.softmax.

Median of 100 CUDA-event-timed runs after warm-up; JSON lines appended to argv[1]."""
import json
import sys

import torch

from peers_common import median_ms


def main():
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    gpu = torch.cuda.get_device_name()
    rows = []
    n = 1 << 28
    src = torch.full((2 * n,), 0.012, dtype=torch.float32, device="cuda")  # 2 GiB
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    rows.append(("copy_2GiB (ceiling)", ms, 2 * src.numel() * 4 / (ms * 1e6)))
    x, y = torch.full((n,), 0.012, device="cuda"), torch.full((n,), 0.012, device="cuda")
    z = torch.empty_like(x)
    ms = median_ms(lambda: torch.add(x, y, out=z))
    rows.append(("torch_add_f32", ms, 3 * n * 4 / (ms * 1e6)))
    a = torch.full((8192, 8192), 0.012, device="cuda")
    ms = median_ms(lambda: torch.softmax(a, dim=-1))
    rows.append(("torch_softmax_f32_8192x8192", ms, 2 * a.numel() * 4 / (ms * 1e6)))
    for what, ms, gbps in rows:
        print(f"{what:32s} {ms:10.4f} ms {gbps:10.1f} GB/s")
        out.write(json.dumps({"kind": "peer", "what": what, "ms": ms, "gbps": gbps, "gpu": gpu,
                              "torch": torch.__version__}) + "\n")


if __name__ == "__main__":
    main()
