"""The tessera package without a GPU: numpy arrays through the interpreter against a float64
numpy reference (forward and gradients, causal, GQA, both layouts), and errors as Python
exceptions (torch: test_torch.py)."""
import math
import random

import numpy as np
import pytest

import tessera


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")


def reference(q, k, v, dout, causal, scale, visible=None):
    """Float64 attention and its gradients, (batch, seqlen, heads, d) arrays, GQA by repetition;
    `visible` (optional, broadcast to (batch, heads, n_q, n_kv)) masks more pairs."""
    q, k, v, dout = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v, dout))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    n_q, n_kv = s.shape[-2:]
    if causal:
        s = np.where(np.arange(n_kv)[None, :] <= np.arange(n_q)[:, None] + (n_kv - n_q), s, -np.inf)
    if visible is not None:
        s = np.where(visible, s, -np.inf)
    peak = s.max(-1, keepdims=True)
    peak = np.where(np.isinf(peak), 0, peak)
    e = np.exp(s - peak)
    total = e.sum(-1, keepdims=True)
    p = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    o = p @ v
    lse = np.where(total[..., 0] > 0, np.log(np.where(total[..., 0] > 0, total[..., 0], 1)) + peak[..., 0], -np.inf)
    dv = p.transpose(0, 1, 3, 2) @ dout
    dp = dout @ v.transpose(0, 1, 3, 2)
    ds = p * (dp - (dout * o).sum(-1, keepdims=True))
    dq, dk = ds @ k * scale, ds.transpose(0, 1, 3, 2) @ q * scale
    fold = lambda x: x.reshape(x.shape[0], -1, group, *x.shape[2:]).sum(2)  # GQA: sum the group
    back = lambda x: x.transpose(0, 2, 1, 3)
    return back(o), lse, back(dq), back(fold(dk)), back(fold(dv))


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_forward_and_backward_match_float64(causal, layout, deterministic):
    rng = np.random.default_rng(0)
    b, n_q, n_kv, h, h_kv, d = 2, 37, 45, 4, 2, 32
    shape = lambda n, heads: (b, n, heads, d) if layout == "bshd" else (b, heads, n, d)
    q, k, v = (rng.standard_normal(shape(n, heads)).astype(np.float16)
               for n, heads in ((n_q, h), (n_kv, h_kv), (n_kv, h_kv)))
    dout = rng.standard_normal(shape(n_q, h)).astype(np.float16)
    o, lse = tessera.attention_forward(q, k, v, causal=causal, layout=layout)
    assert o.shape == q.shape and o.dtype == np.float16 and lse.shape == (b, h, n_q) and lse.dtype == np.float32
    dq, dk, dv = tessera.attention_backward(q, k, v, o, lse, dout, causal=causal, layout=layout,
                                            deterministic=deterministic)

    to_bshd = (lambda x: x) if layout == "bshd" else (lambda x: x.transpose(0, 2, 1, 3))
    want = reference(*(to_bshd(x) for x in (q, k, v, dout)), causal, 1 / math.sqrt(d))
    got = [to_bshd(x).astype(np.float64) for x in (o,)] + [lse] + [to_bshd(x).astype(np.float64) for x in (dq, dk, dv)]
    for name, g, w, tol in zip(("o", "lse", "dq", "dk", "dv"), got, want, (2e-3, 1e-3, 1e-2, 1e-2, 1e-2)):
        finite = np.isfinite(w)
        assert np.array_equal(np.isfinite(g), finite), name
        assert np.abs(g[finite] - w[finite]).max() <= tol, name


@pytest.mark.parametrize("causal", [False, True])
def test_given_configs_run_instead_of_the_tuned_ones(causal):
    rng = np.random.default_rng(2)
    b, n_q, n_kv, h, d = 1, 70, 90, 2, 32
    q, k, v, dout = (rng.standard_normal((b, n, h, d)).astype(np.float16) for n in (n_q, n_kv, n_kv, n_q))
    want = reference(q, k, v, dout, causal, 1 / math.sqrt(d))
    forward = tessera.attention_forward_configs(d, causal)
    assert forward and all(c["HEAD_DIM"] == 32 and c["CAUSAL"] == int(causal) for c in forward)
    keys_values = tessera.attention_backward_configs(d, causal, "keys_values")
    queries = tessera.attention_backward_configs(d, causal, "queries")
    for config, kv_config, q_config in ((forward[-1], keys_values[-1], queries[-1]),
                                        (forward[1], keys_values[0], queries[-1])):
        o, lse = tessera.attention_forward(q, k, v, causal=causal, config=config)
        dq, dk, dv = tessera.attention_backward(q, k, v, o, lse, dout, causal=causal, keys_values_config=kv_config,
                                                queries_config=q_config)
        for name, g, w, tol in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, dq, dk, dv), want,
                                   (2e-3, 1e-3, 1e-2, 1e-2, 1e-2)):
            finite = np.isfinite(w)
            assert np.abs(g.astype(np.float64)[finite] - w[finite]).max() <= tol, (name, config)
    # The config reaches the library, which checks it against the call.
    with pytest.raises(tessera.Error, match="is not for head_dim 32"):
        tessera.attention_forward(q, k, v, causal=causal, config=tessera.attention_forward_configs(64, causal)[0])
    with pytest.raises(tessera.Error, match="BLOCK_M must be a power of two"):
        tessera.attention_forward(q, k, v, causal=causal, config={**forward[0], "BLOCK_M": 48})
    with pytest.raises(tessera.Error, match="attention_backward_configs"):
        tessera.attention_backward(q, k, v, o, lse, dout, causal=causal, queries_config=forward[0] | {"HEAD_DIM": 64})


def random_case(index):
    """Case `index` of a fixed random draw: a config of the forward space with three valid
    knobs changed (beyond the space's combinations), a shape with ragged lengths, GQA, padded head
    dims and causal diagonals on block boundaries, and configs of the backward spaces."""
    draw = random.Random(index)
    d = draw.choice([8, 24, 32, 40, 64, 72, 96, 128, 160, 256])
    causal = draw.random() < 0.5
    config = dict(draw.choice(tessera.attention_forward_configs(d, causal)))
    knobs = {"PERSISTENT": [0, 1], "FULL_TILE_STORES": [0, 1], "SKIP_VISIBLE_MASKS": [0, 1],
             "SPLIT_MASKED": [0, 1], "BLOCK_POINTERS": [0, 1], "Q_BLOCK_POINTER": [0, 1]}
    if config["OVERLAP_SOFTMAX"]:
        knobs["LAST_PRODUCT_IN_LOOP"] = knobs["RESCALE_AT_SETTLE"] = [0, 1]
    else:
        knobs["MASKED_BLOCK_N"] = [m for m in (16, 32, 64, 128, 256) if m <= config["BLOCK_N"]]
    for name in draw.sample(sorted(knobs), 3):
        config[name] = draw.choice(knobs[name])
    heads_kv = draw.choice([1, 2])
    n_q = draw.choice([1, 17, 64, 129, 200, 300])
    # n_kv - n_q, the causal diagonal: where blocks' last keys fall on a query block's first
    # row's horizon or one past it (widths 16 to 128), and the square.
    diagonals = [0, 0, -1, 1, 14, 15, 30, 31, 62, 63, 126, 127, -65]
    return dict(d=d, causal=causal, config=config, batch=draw.choice([1, 2]), heads_kv=heads_kv,
                heads=heads_kv * draw.choice([1, 3]), n_q=n_q,
                n_kv=max(1, n_q + draw.choice(diagonals)) if draw.random() < 0.6 else draw.choice([1, 7, 128, 255]),
                layout=draw.choice(["bshd", "bhsd"]),
                keys_values=draw.choice(tessera.attention_backward_configs(d, causal, "keys_values")),
                queries=draw.choice(tessera.attention_backward_configs(d, causal, "queries")),
                deterministic=draw.random() < 0.5)


@pytest.mark.parametrize("index", range(40))
def test_random_configs_and_shapes_match_float64(index):
    c = random_case(index)
    rng = np.random.default_rng(index)
    shape = lambda n, heads: (c["batch"], n, heads, c["d"]) if c["layout"] == "bshd" else (c["batch"], heads, n, c["d"])
    q, dout = (rng.standard_normal(shape(c["n_q"], c["heads"])).astype(np.float16) for _ in range(2))
    k, v = (rng.standard_normal(shape(c["n_kv"], c["heads_kv"])).astype(np.float16) for _ in range(2))
    o, lse = tessera.attention_forward(q, k, v, causal=c["causal"], layout=c["layout"], config=c["config"])
    dq, dk, dv = tessera.attention_backward(q, k, v, o, lse, dout, causal=c["causal"], layout=c["layout"],
                                            deterministic=c["deterministic"], keys_values_config=c["keys_values"],
                                            queries_config=c["queries"])
    to_bshd = (lambda x: x) if c["layout"] == "bshd" else (lambda x: x.transpose(0, 2, 1, 3))
    want = reference(*(to_bshd(x) for x in (q, k, v, dout)), c["causal"], 1 / math.sqrt(c["d"]))
    got = [to_bshd(o), lse] + [to_bshd(x) for x in (dq, dk, dv)]
    # The gradients' bar grows with their size (they reach ~10 where few keys are visible).
    for name, g, w, tol in zip(("o", "lse", "dq", "dk", "dv"), got, want, (2e-3, 1e-3, 1e-2, 1e-2, 1e-2)):
        finite = np.isfinite(w)
        assert np.array_equal(np.isfinite(g), finite), (name, c)
        size = 1 if name in ("o", "lse") else max(1, np.abs(w[finite]).max(initial=0))
        assert np.abs(g.astype(np.float64)[finite] - w[finite]).max(initial=0) <= tol * size, (name, c)


def test_config_errors_name_what_is_wrong():
    q = np.zeros((1, 16, 1, 32), np.float16)
    with pytest.raises(TypeError, match="config must be a dict of meta-parameter names to ints"):
        tessera.attention_forward(q, q, q, config="BLOCK_M=64")
    with pytest.raises(TypeError, match="keys_values_config must be a dict"):
        tessera.attention_backward(q, q, q, q, np.zeros((1, 1, 16), np.float32), q, keys_values_config={"BLOCK_M": 1.5})
    with pytest.raises(tessera.Error, match="attention_forward_configs: head_dim 300 is not supported"):
        tessera.attention_forward_configs(300)
    with pytest.raises(tessera.Error, match="attention_backward_configs: head_dim 0 is not supported"):
        tessera.attention_backward_configs(0)
    with pytest.raises(tessera.Error, match="'keys_values', 'queries' or 'keys_values_adding_dq', not 'dq'"):
        tessera.attention_backward_configs(64, False, "dq")


def test_rows_without_keys_give_zero_and_minus_infinity():
    q = np.ones((1, 8, 1, 16), np.float16)
    k = v = np.ones((1, 3, 1, 16), np.float16)
    o, lse = tessera.attention_forward(q, k, v, causal=True)
    assert (o[0, :5] == 0).all() and np.isneginf(lse[0, 0, :5]).all()
    assert np.isfinite(o).all() and np.isfinite(lse[0, 0, 5:]).all()


def test_any_dlpack_producer_works_for_the_forward():
    class Producer:  # a minimal DLPack producer wrapping a numpy array
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 20, 2, 16)).astype(np.float16) for _ in range(3))
    o, _ = tessera.attention_forward(Producer(q), Producer(k), Producer(v))
    expected, _ = tessera.attention_forward(q, k, v)
    assert np.array_equal(o, expected)


def test_errors_are_python_exceptions_with_the_message():
    q = np.zeros((1, 16, 2, 32), np.float16)
    with pytest.raises(TypeError, match="dtype float64"):
        tessera.attention_forward(q.astype(np.float64), q, q)
    with pytest.raises(TypeError, match="k has dtype float32; f16 or bf16"):
        tessera.attention_forward(q, q.astype(np.float32), q)
    with pytest.raises(tessera.Error, match="k .* does not match q"):
        tessera.attention_forward(q, np.zeros((1, 16, 2, 64), np.float16), np.zeros((1, 16, 2, 64), np.float16))
    with pytest.raises(ValueError, match="head_dim 300 is not supported"):
        big = np.zeros((1, 4, 1, 300), np.float16)
        tessera.attention_forward(big, big, big)
    with pytest.raises(ValueError, match="layout must be one of"):
        tessera.attention_forward(q, q, q, layout="sbhd")
    with pytest.raises(TypeError, match="must be a torch tensor, a numpy array or a DLPack producer"):
        tessera.attention_forward([1, 2], q, q)


def test_cpu_memory_without_the_interpreter_is_refused(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "0")
    q = np.zeros((1, 16, 2, 32), np.float16)
    with pytest.raises(tessera.Error, match="q is host memory; expected CUDA memory"):
        tessera.attention_forward(q, q, q)


def test_info_and_cache():
    info = tessera.info()
    assert info["interpret"] is True and isinstance(info["cache_dir"], str)
    assert (info["gpu"] is None) == (info["why_no_gpu"] is not None)
    assert tessera.cache_dir() == info["cache_dir"]


def test_autotune_mode(monkeypatch):
    monkeypatch.delenv("TESSERA_AUTOTUNE", raising=False)
    assert tessera.autotune() == "on"
    assert tessera.autotune("off") == "off" and tessera.autotune() == "off"
    with pytest.raises(ValueError, match="autotune mode must be one of"):
        tessera.autotune("sometimes")
