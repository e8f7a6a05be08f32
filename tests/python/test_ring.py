"""Ring attention's chunking, schedule and LSE merge without a GPU: every rank a thread running
tessera.distributed's forward and backward on numpy shards through the interpreter, K/V passed
through mailboxes, the result against float64 attention on the whole sequence (on GPUs with
NCCL: test_ring_gpu.py)."""
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tessera
import tessera.distributed as td
from test_attention import reference


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")


class ThreadRing:
    """Rank `rank` of `world` threads: the n-th shift of every rank meets the n-th of its neighbours."""

    def __init__(self, rank, world, mailboxes):
        self.rank, self.world, self.mailboxes, self.sent = rank, world, mailboxes, 0

    def shift(self, tensors):
        receiver = (self.rank + 1) % self.world
        self.mailboxes.box(receiver, self.sent).put([np.array(t, copy=True) for t in tensors])
        box = self.mailboxes.box(self.rank, self.sent)
        self.sent += 1

        class Arrival:
            def wait(self):
                return tuple(box.get(timeout=120))

        return Arrival()


class Mailboxes:
    def __init__(self):
        self.lock, self.boxes = threading.Lock(), {}

    def box(self, rank, index):
        import queue
        with self.lock:
            return self.boxes.setdefault((rank, index), queue.Queue())


def run_ranks(world, rank_program):
    mailboxes = Mailboxes()
    with ThreadPoolExecutor(world) as pool:
        futures = [pool.submit(rank_program, ThreadRing(rank, world, mailboxes)) for rank in range(world)]
        return [f.result() for f in futures]


@pytest.mark.parametrize("sharding", td.SHARDINGS)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shard_and_unshard_are_inverse(sharding, world):
    x = np.arange(2 * 24 * 3).reshape(2, 24, 3)
    parts = [td.shard(x, r, world, sharding) for r in range(world)]
    assert all(p.shape == (2, 24 // world, 3) for p in parts)
    assert np.array_equal(td.unshard(parts, sharding), x)
    if sharding == "zigzag" and world == 2:  # pieces 0,3 and 1,2 of four
        assert np.array_equal(parts[0][0, :, 0], x[0, list(range(0, 6)) + list(range(18, 24)), 0])


def test_shard_errors():
    x = np.zeros((1, 10, 2))
    with pytest.raises(ValueError, match="does not split into 4 equal pieces"):
        td.shard(x, 0, 2, "zigzag")
    with pytest.raises(ValueError, match="sharding must be one of"):
        td.shard(x, 0, 2, "striped")
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        td.shard(x, 2, 2)


def test_merging_attention_over_two_key_halves_is_exact():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, n, 2, 32)).astype(np.float16) for n in (24, 40, 40))
    whole, whole_lse = tessera.attention_forward(q, k, v)
    o = np.zeros(q.shape, np.float32)
    lse = np.full((1, 2, 24), -np.inf, np.float32)
    be = td._Backend(q)
    for keys in (slice(0, 20), slice(20, 40)):
        part, part_lse = tessera.attention_forward(q, k[:, keys], v[:, keys])
        td._merge(be, o, lse, part, part_lse)
    assert np.abs(o - whole.astype(np.float32)).max() < 2e-3 and np.abs(lse - whole_lse).max() < 1e-4
    empty = np.full((1, 2, 24), -np.inf, np.float32)
    o, lse = np.zeros(q.shape, np.float32), empty.copy()
    td._merge(be, o, lse, np.zeros(q.shape, np.float16), empty)  # nothing merged with nothing
    assert (o == 0).all() and np.isneginf(lse).all()


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("sharding", td.SHARDINGS)
@pytest.mark.parametrize("causal", [False, True])
def test_ring_matches_attention_on_the_whole_sequence(world, sharding, causal):
    rng = np.random.default_rng(world)
    n, h, h_kv, d = 2 * world * 7, 4, 2, 32  # GQA; 7-token pieces, not a multiple of any block
    q, k, v, dout = (rng.standard_normal((2, n, heads, d)).astype(np.float16) for heads in (h, h_kv, h_kv, h))
    scale = 0.7 / math.sqrt(d)

    def rank_program(ring):
        mine = [td.shard(x, ring.rank, world, sharding) for x in (q, k, v, dout)]
        o, lse = td.forward(*mine[:3], ring, causal, scale, sharding)
        grads = td.backward(*mine[:3], o, lse, mine[3], ring, causal, scale, sharding)
        return o, lse, grads

    results = run_ranks(world, rank_program)
    o = td.unshard([r[0] for r in results], sharding)
    lse = td.unshard([r[1] for r in results], sharding, dim=2)
    dq, dk, dv = (td.unshard([r[2][i] for r in results], sharding) for i in range(3))
    assert o.dtype == np.float16 and dq.dtype == np.float32

    want = reference(q, k, v, dout, causal, scale)
    for name, got, w, tol in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, dq, dk, dv), want,
                                 (2e-3, 1e-3, 1e-2, 1e-2, 1e-2)):
        assert np.isfinite(got).all(), name
        assert np.abs(got.astype(np.float64) - w).max() <= tol, name


def test_causal_shards_must_hold_equal_queries_and_keys():
    q = np.zeros((1, 8, 2, 32), np.float16)
    ring = ThreadRing(0, 1, Mailboxes())
    with pytest.raises(ValueError, match="as many local queries as keys, got 8 and 6"):
        td.forward(q, q[:, :6], q[:, :6], ring, causal=True)
    with pytest.raises(ValueError, match="7 local tokens is odd"):
        td.forward(q[:, :7], q[:, :7], q[:, :7], ring, causal=True, sharding="zigzag")


def whole_and_ring(q, k, v, dout, rank, world, sharding, causal):
    """(o, dq, dk, dv) of flash_attn on the whole sequence, and this rank's from ring_attention
    on its shards (torch tensors, inside an initialized process group)."""
    import torch
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    whole = tessera.flash_attn(*leaves, causal=causal)
    mine = [td.shard(x, rank, world, sharding).requires_grad_() for x in (q, k, v)]
    ring = td.ring_attention(*mine, causal=causal, sharding=sharding)
    return ([whole, *torch.autograd.grad(whole, leaves, dout)],
            [ring, *torch.autograd.grad(ring, mine, td.shard(dout, rank, world, sharding))])


def _gloo_rank(rank, world, port, sharding, causal):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        g = torch.Generator().manual_seed(5)
        q, k, v, dout = (torch.randn(1, 4 * world * 3, heads, 32, generator=g).half() for heads in (2, 1, 1, 2))
        whole, ring = whole_and_ring(q, k, v, dout, rank, world, sharding, causal)
        for name, got, want in zip(("o", "dq", "dk", "dv"), ring, whole):
            assert (got.float() - td.shard(want, rank, world, sharding).float()).abs().max() < 1e-2, name
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("sharding,causal", [("contiguous", False), ("zigzag", True)])
def test_torch_ring_over_gloo_matches_flash_attn(sharding, causal):
    """ring_attention itself (TorchRing, autograd) over torch.distributed's gloo on CPU
    tensors through the interpreter: two processes against flash_attn on the whole sequence."""
    torch = pytest.importorskip("torch")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_gloo_rank, args=(2, port, sharding, causal), nprocs=2)
