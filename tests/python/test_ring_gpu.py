"""Ring attention over NCCL, one process per GPU (world size 1 on one GPU, 2+ where there are
more): values and gradients of every rank's shard against single-GPU tessera attention on the
whole sequence, both measured against float32 math SDPA to DESIGN.md's bars (2x forward, 3x
backward, plus a small floor). Skipped without torch or CUDA (the CPU version: test_ring.py)."""
import os
import socket

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU: ring attention over NCCL is not run (test_ring.py checks the logic on the CPU)",
                allow_module_level=True)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import tessera.distributed as td  # noqa: E402
from test_ring import whole_and_ring  # noqa: E402

CASES = [(causal, sharding, dtype, piece) for causal in (False, True) for sharding in td.SHARDINGS
         for dtype in (torch.float16, torch.bfloat16) for piece in (125, 1024)]  # tokens per zigzag piece


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _math_reference(q, k, v, dout, causal):
    """float32 SDPA on (batch, seqlen, heads, d) inputs, GQA by repetition: o and dq, dk, dv."""
    qf, kf, vf = (x.detach().float().transpose(1, 2).requires_grad_() for x in (q, k, v))
    group = qf.shape[1] // kf.shape[1]
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(qf, kf.repeat_interleave(group, 1), vf.repeat_interleave(group, 1),
                                           is_causal=causal)
    grads = torch.autograd.grad(o, (qf, kf, vf), dout.float().transpose(1, 2))
    return [x.transpose(1, 2) for x in (o, *grads)]


def _check_case(rank, world, causal, sharding, dtype, piece):
    n = 2 * world * piece
    g = torch.Generator(device="cuda").manual_seed(n)  # the same inputs on every rank
    b, h, h_kv, d = 2, 8, 2, 128
    q, k, v, dout = (torch.randn(b, n, heads, d, device="cuda", generator=g, dtype=dtype)
                     for heads in (h, h_kv, h_kv, h))
    want = _math_reference(q, k, v, dout, causal)
    # Single-GPU tessera on the whole sequence gives the error a ring result is allowed (times
    # the bar); the ring sees this rank's shards only.
    single, ring = whole_and_ring(q, k, v, dout, rank, world, sharding, causal)
    for name, got, base, w, bar in zip(("o", "dq", "dk", "dv"), ring, single, want, (2, 3, 3, 3)):
        w = td.shard(w, rank, world, sharding)
        base = td.shard(base, rank, world, sharding)
        assert got.dtype == dtype and torch.isfinite(got).all(), name
        error = (got.float() - w).abs().max().item()
        allowed = bar * (base.float() - w).abs().max().item() + 1e-3 * max(1.0, w.abs().max().item())
        assert error <= allowed, f"{name}: ring error {error:.3g} > {allowed:.3g} ({causal=}, {sharding}, {dtype}, {n=})"


def _rank(rank, world, port):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    try:
        for case in CASES:
            _check_case(rank, world, *case)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_ring_attention_matches_single_gpu_attention(world):
    if torch.cuda.device_count() < world:
        pytest.skip(f"{world} GPUs needed, {torch.cuda.device_count()} present")
    mp.spawn(_rank, args=(world, _free_port()), nprocs=world)
