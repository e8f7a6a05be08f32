"""Context-parallel (ring) attention: one sequence split over the ranks of a torch.distributed
group. Each rank keeps its queries; the K/V chunks travel around the ring (NCCL send/recv,
issued before the compute on the chunk in hand so that they overlap it), and every partial
output is merged exactly through its log-sum-exp. The backward pass sends the K/V chunks
around again, each with its dK/dV accumulator, which arrives home after one more hop.

    import tessera.distributed as td
    q, k, v = (td.shard(x, rank, world, "zigzag") for x in (q_full, k_full, v_full))
    o = td.ring_attention(q, k, v, causal=True, sharding="zigzag")   # this rank's rows of O

Shardings of a sequence over W ranks: "contiguous" (rank r holds the r-th of W equal pieces)
and "zigzag" (the sequence in 2W equal pieces, rank r holds pieces r and 2W-1-r: with a causal
mask every rank then does the same work at every step, where "contiguous" leaves the first
ranks idle). Every rank holds the same number of tokens.

`forward` and `backward` are the framework-free core (numpy arrays or torch tensors) over any
communicator with `rank`, `world` and `shift(tensors)`, which sends tensors to rank+1 and
returns a handle whose `wait()` gives those of rank-1; `ring_attention` runs them over
torch.distributed with autograd.
"""
import math

from . import _check_layout, _is_torch, attention_backward, attention_forward

__all__ = ["ring_attention", "shard", "unshard", "forward", "backward", "SHARDINGS"]

SHARDINGS = ("contiguous", "zigzag")


def _pieces(rank, world, sharding):
    """The pieces of the sequence that rank holds, in order, and how many pieces there are."""
    if sharding not in SHARDINGS:
        raise ValueError(f"tessera: sharding must be one of {SHARDINGS}, not {sharding!r}")
    if not 0 <= rank < world:
        raise ValueError(f"tessera: rank {rank} is not in a world of {world}")
    return ((rank,), world) if sharding == "contiguous" else ((rank, 2 * world - 1 - rank), 2 * world)


def _cat(parts, dim):
    if _is_torch(parts[0]):
        import torch
        return torch.cat(parts, dim)
    import numpy
    return numpy.concatenate(parts, dim)


def _slice(x, dim, start, stop):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, stop)
    return x[tuple(index)]


def shard(x, rank, world, sharding="contiguous", dim=1):
    """rank's part of the full sequence x (dimension `dim`: 1 for (batch, seqlen, ...))."""
    pieces, count = _pieces(rank, world, sharding)
    if x.shape[dim] % count:
        raise ValueError(f"tessera: a sequence of {x.shape[dim]} tokens does not split into {count} equal pieces "
                         f"({sharding} over {world} ranks)")
    size = x.shape[dim] // count
    return _cat([_slice(x, dim, p * size, (p + 1) * size) for p in pieces], dim)


def unshard(parts, sharding="contiguous", dim=1):
    """The full sequence from every rank's part (parts[r] from rank r): shard's inverse."""
    world = len(parts)
    _, count = _pieces(0, world, sharding)
    size = parts[0].shape[dim] * world // count
    placed = {}
    for rank, part in enumerate(parts):
        for i, piece in enumerate(_pieces(rank, world, sharding)[0]):
            placed[piece] = _slice(part, dim, i * size, (i + 1) * size)
    return _cat([placed[p] for p in range(count)], dim)


def _step_plan(rank, source, world, causal, sharding, n):
    """Which of this rank's query rows attend which rows of source's K/V chunk, and whether
    under the causal mask: (query rows, key rows, causal), or None when no query sees a key."""
    everything = slice(None)
    if not causal:
        return everything, everything, False
    if source == rank:  # the diagonal: local positions are ordered like the global ones
        return everything, everything, True
    if sharding == "contiguous":
        return (everything, everything, False) if source < rank else None
    # zigzag: pieces (rank, 2W-1-rank) against (source, 2W-1-source). An earlier source's first
    # piece precedes both of ours and its second follows both; a later source's pieces both
    # precede our second piece and follow our first.
    first, second = slice(None, n // 2), slice(n // 2, None)
    return (everything, first, False) if source < rank else (second, everything, False)


class _Backend:
    """The few array operations where numpy and torch differ."""

    def __init__(self, like):
        self.torch = _is_torch(like)
        if self.torch:
            import torch
            self.module, self.f32, self.device = torch, torch.float32, like.device
        else:
            import numpy
            self.module, self.f32, self.device = numpy, numpy.float32, None

    def full(self, shape, value):
        if self.torch:
            return self.module.full(shape, value, dtype=self.f32, device=self.device)
        return self.module.full(shape, value, self.f32)

    def cast(self, x, dtype):
        return x.to(dtype) if self.torch else x.astype(dtype)

    def contiguous(self, x):
        return x.contiguous() if self.torch else self.module.ascontiguousarray(x)


def _check(q, k, v, comm, causal, sharding):
    _pieces(comm.rank, comm.world, sharding)
    if causal and q.shape[1] != k.shape[1]:
        raise ValueError(f"tessera: causal ring attention needs as many local queries as keys, "
                         f"got {q.shape[1]} and {k.shape[1]}")
    if causal and sharding == "zigzag" and q.shape[1] % 2:
        raise ValueError(f"tessera: a zigzag shard holds two equal pieces; {q.shape[1]} local tokens is odd")


def forward(q, k, v, comm, causal=False, scale=None, sharding="contiguous"):
    """This rank's O (q's dtype) and fp32 LSE (batch, heads, seqlen) of attention over the whole
    sequence; q, k, v are this rank's (batch, seqlen, heads, head_dim) shards."""
    _check(q, k, v, comm, causal, sharding)
    if comm.world == 1:  # nothing to merge
        return attention_forward(q, k, v, causal=causal, scale=scale)
    be = _Backend(q)
    o = be.full(q.shape, 0.0)
    lse = be.full((q.shape[0], q.shape[2], q.shape[1]), -math.inf)
    kv = (k, v)
    for step in range(comm.world):
        arriving = comm.shift(kv) if step + 1 < comm.world else None
        plan = _step_plan(comm.rank, (comm.rank - step) % comm.world, comm.world, causal, sharding, q.shape[1])
        if plan:
            rows, keys, masked = plan
            part, part_lse = attention_forward(q[:, rows], kv[0][:, keys], kv[1][:, keys], causal=masked, scale=scale)
            _merge(be, o[:, rows], lse[..., rows], part, part_lse)
        if arriving:
            kv = arriving.wait()
    return be.cast(o, q.dtype), lse


def _merge(be, o, lse, part, part_lse):
    """o, lse (views, updated in place) become the softmax-weighted union of both partial results."""
    xp = be.module
    total = xp.logaddexp(lse, part_lse)
    finite = xp.where(xp.isneginf(total), 0.0, total)  # rows that saw no key yet stay 0 and -inf
    old, new = xp.exp(lse - finite).swapaxes(1, 2)[..., None], xp.exp(part_lse - finite).swapaxes(1, 2)[..., None]
    o[...] = o * old + be.cast(part, be.f32) * new
    lse[...] = total


def backward(q, k, v, o, lse, dout, comm, causal=False, scale=None, sharding="contiguous"):
    """dq, dk, dv (fp32) of this rank's shards, from forward's o and lse and the output gradient."""
    _check(q, k, v, comm, causal, sharding)
    be = _Backend(q)
    dq = be.full(q.shape, 0.0)
    kv, dkv, dkv_arriving = (k, v), None, None
    for step in range(comm.world):
        kv_arriving = comm.shift(kv) if step + 1 < comm.world else None
        plan = _step_plan(comm.rank, (comm.rank - step) % comm.world, comm.world, causal, sharding, q.shape[1])
        # The accumulators of the chunk in hand come from the previous rank (zeros at the first step).
        dkv = dkv_arriving.wait() if dkv_arriving else (be.full(k.shape, 0.0), be.full(v.shape, 0.0))
        if plan:
            rows, keys, masked = plan
            part = attention_backward(q[:, rows], kv[0][:, keys], kv[1][:, keys], o[:, rows],
                                      be.contiguous(lse[..., rows]), dout[:, rows], causal=masked, scale=scale)
            for total, grad, index in ((dq, part[0], rows), (dkv[0], part[1], keys), (dkv[1], part[2], keys)):
                total[:, index] += be.cast(grad, be.f32)
        dkv_arriving = comm.shift(dkv)  # one hop more than K/V: after the last step they are home
        if kv_arriving:
            kv = kv_arriving.wait()
    dk, dv = dkv_arriving.wait()
    return dq, dk, dv


class _Arrived:
    def __init__(self, tensors):
        self.tensors = tensors

    def wait(self):
        return self.tensors


class TorchRing:
    """The ring of a torch.distributed process group (the default group when None)."""

    def __init__(self, group=None):
        import torch.distributed as dist
        self.dist, self.group = dist, group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        global_rank = (lambda r: r) if group is None else (lambda r: dist.get_global_rank(group, r))
        self.next, self.previous = global_rank((self.rank + 1) % self.world), global_rank((self.rank - 1) % self.world)

    def shift(self, tensors):
        if self.world == 1:
            return _Arrived(tuple(tensors))
        import torch
        sent = [t.contiguous() for t in tensors]
        received = tuple(torch.empty_like(t) for t in sent)
        P2POp = self.dist.P2POp
        ops = [P2POp(self.dist.isend, t, self.next, self.group) for t in sent]
        ops += [P2POp(self.dist.irecv, t, self.previous, self.group) for t in received]
        return _Pending(self.dist.batch_isend_irecv(ops), sent, received)


class _Pending:
    def __init__(self, requests, sent, received):
        self.requests, self.sent, self.received = requests, sent, received  # sent: alive until done

    def wait(self):
        for request in self.requests:
            request.wait()  # the current stream waits for NCCL's; the host does not block
        return self.received


def _autograd_function():
    import torch

    class RingAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale, sharding, group):
            ring = TorchRing(group)
            o, lse = forward(q, k, v, ring, causal, scale, sharding)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.mark_non_differentiable(lse)
            ctx.options = (causal, scale, sharding, group)
            return o, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            q, k, v, o, lse = ctx.saved_tensors
            causal, scale, sharding, group = ctx.options
            dout = dout if dout.stride(-1) == 1 else dout.contiguous()
            grads = backward(q, k, v, o, lse, dout, TorchRing(group), causal, scale, sharding)
            return (*(g.to(x.dtype) for g, x in zip(grads, (q, k, v))), None, None, None, None)

    return RingAttention


_function = None


def ring_attention(q, k, v, causal=False, scale=None, sharding="contiguous", group=None, return_lse=False,
                   layout="bshd"):
    """Attention of this rank's queries over the keys of every rank of `group` (torch tensors on
    this rank's GPU, each rank's shard of the sequence as `shard` cuts it), with autograd."""
    global _function
    _check_layout(layout)
    if not all(_is_torch(x) for x in (q, k, v)):
        raise TypeError("tessera.distributed.ring_attention takes torch tensors")
    if layout == "bhsd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    _function = _function or _autograd_function()
    o, lse = _function.apply(q, k, v, causal, scale, sharding, group)
    if layout == "bhsd":
        o = o.transpose(1, 2)
    return (o, lse) if return_lse else o
