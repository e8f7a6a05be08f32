"""cuBLAS (torch.matmul) for bench_matmul in the same device run: JSON lines to argv[1]."""
import json
import sys

import torch

from peers_common import median_ms


def main():
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    gpu = torch.cuda.get_device_name()
    torch.manual_seed(0)
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        for M, N, K in ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 128, 8192)):
            a = torch.randn((M, K), dtype=dtype, device="cuda")
            b = torch.randn((K, N), dtype=dtype, device="cuda")
            ms = median_ms(lambda: torch.matmul(a, b), 5, 30)
            tflops = 2 * M * N * K / (ms * 1e9)
            print(f"cublas {name:4s} {M}x{N}x{K:<8d} {ms:10.3f} ms {tflops:10.1f} TFLOP/s")
            out.write(json.dumps({"kind": "peer", "what": "cublas_matmul", "dtype": name, "M": M, "N": N,
                                  "K": K, "ms": ms, "tflops": tflops, "gpu": gpu}) + "\n")


if __name__ == "__main__":
    main()
