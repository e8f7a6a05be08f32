"""Block-sparse attention from Python without a GPU: the BlockMask builders, forward and
gradients through the interpreter against the float64 reference with the same dense mask,
and the errors."""
import math

import numpy as np
import pytest

import tessera
from test_attention import reference


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")


def dense(mask, n_q, n_kv, partial):
    """The (batch, heads, n_q, n_kv) visibility a BlockMask means: full blocks whole, partial
    blocks through `partial(q, kv)` (index grids), the rest hidden."""
    states = mask.states()
    bm, bn = mask._native.block_size
    expanded = states.repeat(bm, axis=2).repeat(bn, axis=3)[:, :, :n_q, :n_kv]
    q, kv = np.arange(n_q)[:, None], np.arange(n_kv)[None, :]
    return (expanded == 2) | ((expanded == 1) & partial(q, kv))


@pytest.mark.parametrize("kind", ["causal", "sliding_window", "prefix_lm", "documents", "from_blocks"])
def test_forward_and_gradients_match_float64(kind):
    rng = np.random.default_rng(2)
    b, n, h, h_kv, d = 2, 150, 4, 2, 32
    ids = np.repeat([[0, 1, 2]], b, 0).repeat([37, 63, 50], axis=1)
    visited = rng.random((b, 1, 5, 5)) < 0.5
    masks = {
        "causal": (tessera.BlockMask.causal(b, n, block_size=(32, 32)), lambda q, kv: kv <= q),
        "sliding_window": (tessera.BlockMask.sliding_window(b, n, 48, (32, 32)), lambda q, kv: (kv <= q) & (q - kv < 48)),
        "prefix_lm": (tessera.BlockMask.prefix_lm(b, n, 40, (64, 32)), lambda q, kv: (kv < 40) | (kv <= q)),
        "documents": (tessera.BlockMask.documents(ids, True, (32, 32)), None),
        "from_blocks": (tessera.BlockMask.from_blocks(visited, n, n, (32, 32)), lambda q, kv: True),
    }
    mask, partial = masks[kind]
    if kind == "documents":
        visible = (ids[:, None, :, None] == ids[:, None, None, :]) & (np.arange(n)[None, :] <= np.arange(n)[:, None])
    else:
        visible = dense(mask, n, n, partial)
    q, k, v = (rng.standard_normal((b, n, heads, d)).astype(np.float16) for heads in (h, h_kv, h_kv))
    dout = rng.standard_normal((b, n, h, d)).astype(np.float16)
    o, lse = tessera.block_sparse_attention(q, k, v, mask)
    dq, dk, dv = tessera.block_sparse_attention_backward(q, k, v, o, lse, dout, mask)
    want = reference(q, k, v, dout, False, 1 / math.sqrt(d), visible)
    for name, g, w, tol in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, dq, dk, dv), want,
                               (2e-3, 1e-3, 1e-2, 1e-2, 1e-2)):
        g = g.astype(np.float64)
        finite = np.isfinite(w)
        assert np.array_equal(np.isfinite(g), finite), name
        assert np.abs(g[finite] - w[finite]).max() <= tol, name
    assert 0 < mask.density <= 1


def test_builders_and_errors():
    mask = tessera.BlockMask.causal(1, 1024)
    assert mask.states().shape == (1, 1, 8, 8) and mask.density == pytest.approx(36 / 64)
    with pytest.raises(ValueError, match="block sizes must be powers of two"):
        tessera.BlockMask.causal(1, 64, block_size=(24, 32))
    with pytest.raises(ValueError, match="document_ids must be"):
        tessera.BlockMask.documents(np.zeros(10, np.int32))
    q = np.zeros((1, 64, 2, 32), np.float16)
    with pytest.raises(tessera.Error, match="the block mask is for batch 1, 1 heads, n_q 128"):
        tessera.block_sparse_attention(q, q, q, tessera.BlockMask.causal(1, 128))
