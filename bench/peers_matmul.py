"""cuBLAS (torch.matmul) for bench_matmul in the same device run: JSON lines to argv[1].
argv[2] == "sustained": only 8192^3, 1000 back-to-back calls after a 2 s pause, as
`tessera-bench-matmul --sustained`."""
import json
import sys

import torch

from peers_common import median_ms, sustained_ms


def main():
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout
    gpu = torch.cuda.get_device_name()
    torch.manual_seed(0)
    if sys.argv[2:3] == ["sustained"]:
        n = 8192
        for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
            a = torch.randn((n, n), dtype=dtype, device="cuda")
            b = torch.randn((n, n), dtype=dtype, device="cuda")
            ms = sustained_ms(lambda: torch.matmul(a, b), 1000)
            tflops = 2 * n**3 / (ms * 1e9)
            print(f"sustained cublas {name} {n}x{n}x{n} {ms:.3f} ms {tflops:.1f} TFLOP/s")
            out.write(json.dumps({"kind": "peer", "what": "cublas_matmul_sustained", "dtype": name, "M": n, "N": n,
                                  "K": n, "calls": 1000, "ms": ms, "tflops": tflops, "gpu": gpu}) + "\n")
        return
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
