"""Ring attention (tessera.distributed) scaling over the GPUs of one host; one process per GPU:
    python3 -m torch.distributed.run --nproc_per_node W bench/bench_ring.py OUT.jsonl
Forward and forward+backward at a fixed total sequence length (strong scaling) and a fixed
length per GPU (weak scaling), causal (zigzag shards) and not (contiguous), B=1 H=16 D=128
fp16. Each time is the slowest rank's median. Also timed: the same ring without
communication (compute only) and the communication alone, from which
hidden = (compute + communication - ring) / communication, the share of the communication
that the compute hides. With one process, single-GPU tessera and SDPA-flash on the whole
sequence are timed too (the peers of the W=1 row)."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import tessera
import tessera.distributed as td
from peers_common import median_ms

HEADS, HEAD_DIM = 16, 128
STRONG_TOKENS, WEAK_TOKENS_PER_GPU = 32768, 16384


class LocalRing:
    """The ring's schedule and compute without its communication (each rank keeps its chunk)."""

    def __init__(self, rank, world):
        self.rank, self.world = rank, world

    def shift(self, tensors):
        return td._Arrived(tuple(tensors))


def slowest(ms):
    value = torch.tensor([ms], device="cuda")
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()


def measure(ring, local, causal, n_total, out):
    world, rank = ring.world, ring.rank
    sharding = "zigzag" if causal else "contiguous"
    n = n_total // world
    q, k, v, dout = (torch.randn(1, n, HEADS, HEAD_DIM, device="cuda", dtype=torch.float16) for _ in range(4))
    scale = HEAD_DIM ** -0.5

    def forward(comm):
        return td.forward(q, k, v, comm, causal, scale, sharding)

    def training_step(comm):
        o, lse = forward(comm)
        return td.backward(q, k, v, o, lse, dout, comm, causal, scale, sharding)

    def communication(backward):
        def run():
            kv = (k, v)
            for _ in range(world - 1):
                kv = ring.shift(kv).wait()
            if backward:
                for _ in range(world - 1):
                    kv = ring.shift(kv).wait()
                dkv = (k.float(), v.float())
                for _ in range(world):
                    dkv = ring.shift(dkv).wait()
        return run

    flops = 4 * HEADS * n_total * n_total * HEAD_DIM * (0.5 if causal else 1.0)
    for name, step, step_flops, backward in (("forward", forward, flops, False),
                                             ("forward+backward", training_step, 3.5 * flops, True)):
        total = slowest(median_ms(lambda: step(ring), warmup=2, runs=20))
        compute = slowest(median_ms(lambda: step(local), warmup=2, runs=20))
        comm = slowest(median_ms(communication(backward), warmup=2, runs=20)) if world > 1 else 0.0
        row = {"bench": "ring_attention", "gpu": torch.cuda.get_device_name(), "world": world, "pass": name,
               "causal": causal, "sharding": sharding, "tokens": n_total, "tokens_per_gpu": n, "heads": HEADS,
               "head_dim": HEAD_DIM, "dtype": "f16", "ms": total, "us_per_token": 1000 * total / n_total,
               "tflops_per_gpu": step_flops / world / total / 1e9, "compute_only_ms": compute,
               "communication_ms": comm,
               "hidden": None if world == 1 else max(0.0, min(1.0, (compute + comm - total) / comm))}
        if world == 1 and name == "forward":
            qf, kf, vf = (x.transpose(1, 2) for x in (q, k, v))
            row["single_gpu_tessera_ms"] = median_ms(lambda: tessera.attention_forward(q, k, v, causal=causal))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                row["sdpa_flash_ms"] = median_ms(lambda: F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal))
        if rank == 0:
            print(json.dumps(row), flush=True)
            out.write(json.dumps(row) + "\n")


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
    ring, local = td.TorchRing(), LocalRing(rank, world)
    out = open(sys.argv[1], "a") if rank == 0 else None
    for causal in (False, True):
        for n_total in sorted({STRONG_TOKENS, WEAK_TOKENS_PER_GPU * world}):
            measure(ring, local, causal, n_total, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
