"""tessera.flash_attn with torch: values and gradients against torch's math SDPA in float32,
the custom op under torch.compile without graph breaks; on CPU tensors through the
interpreter, and on the GPU where there is one. Skipped where torch is not installed."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import tessera  # noqa: E402

devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True)
def interpret_cpu_tensors(monkeypatch, request):
    if "cuda" not in request.node.name:
        monkeypatch.setenv("TESSERA_INTERPRET", "1")


def inputs(device, dtype, b=2, h=4, h_kv=2, n_q=70, n_kv=90, d=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda heads, n: torch.randn(b, heads, n, d, generator=g).to(device, dtype).requires_grad_()
    return make(h, n_q), make(h_kv, n_kv), make(h_kv, n_kv)


def math_sdpa(q, k, v, dout, mask, dtype):
    """torch's math SDPA and its gradients on q, k, v, dout cast to `dtype` (GQA by repetition)."""
    leaves = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
    group = q.shape[1] // k.shape[1]
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(leaves[0], leaves[1].repeat_interleave(group, 1),
                                           leaves[2].repeat_interleave(group, 1), attn_mask=mask)
    return [o, *torch.autograd.grad(o, leaves, dout.to(dtype))]


@pytest.mark.parametrize("device", devices)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("deterministic", [True, False])
def test_values_and_gradients_match_math_sdpa(device, dtype, causal, deterministic):
    """DESIGN.md's bars: the error against float32 math SDPA at most 2x (forward) and 3x
    (gradients) that of math SDPA in q's dtype, plus a small floor; deterministic=False adds dq
    up in the dk/dv pass."""
    q, k, v = inputs(device, dtype)
    o = tessera.flash_attn(q, k, v, causal=causal, layout="bhsd", deterministic=deterministic)
    dout = torch.randn_like(o)
    ours = [o, *torch.autograd.grad(o, (q, k, v), dout)]
    # SDPA's causal is top-left, ours bottom-right: the mask is built explicitly.
    n_q, n_kv = q.shape[2], k.shape[2]
    mask = None
    if causal:
        mask = torch.arange(n_kv, device=device)[None, :] <= torch.arange(n_q, device=device)[:, None] + (n_kv - n_q)
    exact, naive = math_sdpa(q, k, v, dout, mask, torch.float32), math_sdpa(q, k, v, dout, mask, dtype)
    floor = 8e-3 if dtype == torch.bfloat16 else 2e-3
    for name, got, want, rough, bar in zip(("o", "dq", "dk", "dv"), ours, exact, naive, (2, 3, 3, 3)):
        assert torch.isfinite(got).all(), name
        error, naive_error = ((x.float() - want).abs().max().item() for x in (got, rough))
        assert error <= bar * naive_error + floor * max(1.0, want.abs().max().item()), (name, error, naive_error)


@pytest.mark.parametrize("device", devices)
def test_return_lse_and_layouts_agree(device):
    q, k, v = inputs(device, torch.float16, h_kv=4)
    o1, lse = tessera.flash_attn(q, k, v, return_lse=True, layout="bhsd")
    o2 = tessera.flash_attn(*(x.transpose(1, 2) for x in (q, k, v)), layout="bshd").transpose(1, 2)
    assert torch.equal(o1, o2) and lse.shape == (2, 4, 70) and lse.dtype == torch.float32


@pytest.mark.parametrize("device", devices)
def test_torch_compile_traces_the_custom_op_without_graph_breaks(device):
    q, k, v = inputs(device, torch.float16, h_kv=4)

    def block(q, k, v):
        return tessera.flash_attn(q * 1.0, k, v, causal=True, layout="bhsd").sum()

    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(block, backend=backend, fullgraph=True)
    assert torch.allclose(compiled(q, k, v).float(), block(q, k, v).float(), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("device", devices)
def test_calls_without_autograd_skip_the_dispatcher_and_agree(device, monkeypatch):
    """Inference calls (no input needs a gradient, or grad mode off) run the kernel directly;
    a call autograd needs, or one a dispatch mode must see, goes through the custom op."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from tessera import _torch_ops

    class Ops(TorchDispatchMode):
        seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    q, k, v = inputs(device, torch.float16)
    with Ops():
        through_op = tessera.flash_attn(*(x.detach() for x in (q, k, v)), causal=True, layout="bhsd")
    assert "tessera.flash_attn_fwd.default" in Ops.seen
    dispatched = []
    custom_op = _torch_ops.flash_attn_fwd
    monkeypatch.setattr(_torch_ops, "flash_attn_fwd", lambda *a: dispatched.append(a) or custom_op(*a))
    direct = tessera.flash_attn(*(x.detach() for x in (q, k, v)), causal=True, layout="bhsd")
    with torch.no_grad():
        no_grad = tessera.flash_attn(q, k, v, causal=True, layout="bhsd")
    assert not dispatched and torch.equal(direct, through_op) and torch.equal(no_grad, through_op)
    assert not direct.requires_grad and not no_grad.requires_grad
    with_grad = tessera.flash_attn(q, k, v, causal=True, layout="bhsd")
    assert len(dispatched) == 1 and with_grad.grad_fn is not None and torch.equal(with_grad.detach(), direct)
    monkeypatch.delattr(torch._C, "_len_torch_dispatch_stack")  # a torch without one of the probes
    older = tessera.flash_attn(*(x.detach() for x in (q, k, v)), causal=True, layout="bhsd")
    assert len(dispatched) == 2 and torch.equal(older, direct)


def test_errors_are_python_exceptions():
    q = torch.zeros(1, 16, 2, 32, dtype=torch.float32)
    with pytest.raises(TypeError, match="dtype float32"):
        tessera.flash_attn(q, q, q)
    with pytest.raises(TypeError, match="takes torch tensors"):
        tessera.flash_attn(q.numpy(), q, q)
    h = torch.zeros(1, 16, 2, 32, dtype=torch.float16)
    with pytest.raises(tessera.Error, match="heads_q .* must be a multiple of heads_kv"):
        tessera.flash_attn(torch.zeros(1, 16, 3, 32, dtype=torch.float16), h, h)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_cuda_tensors_on_another_gpu_run_there():
    on_zero, on_one = inputs("cuda:0", torch.float16), inputs("cuda:1", torch.float16)
    with torch.cuda.device(0):  # the current device is not the tensors'
        results = []
        for q, k, v in (on_zero, on_one):
            o = tessera.flash_attn(q, k, v, causal=True, layout="bhsd")
            results.append([o, *torch.autograd.grad(o.sum(), (q, k, v))])
    for a, b in zip(*results):
        assert b.device == torch.device("cuda:1") and torch.equal(a, b.to("cuda:0"))


class Block(torch.nn.Module):
    """A tiny pre-norm transformer block whose attention is tessera's or SDPA's."""

    def __init__(self, attention, width=128, heads=4):
        super().__init__()
        self.attention, self.heads = attention, heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))

    def forward(self, x):
        b, n, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, width // self.heads).unbind(2)
        if self.attention == "tessera":
            a = tessera.flash_attn(q, k, v, causal=True)
        else:
            a = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True).transpose(1, 2)
        x = x + self.out(a.reshape(b, n, width))
        return x + self.mlp(self.norm2(x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("compiled", [False, True])
def test_cuda_training_loop_matches_sdpa(compiled):
    """Thirty Adam steps of next-token regression on a fixed batch: the same losses with
    tessera's attention as with SDPA's (bf16 autocast), compiled or not."""
    torch.manual_seed(0)
    data = torch.randn(4, 200, 128, device="cuda")
    target = data.roll(-1, dims=1)
    losses = {}
    for attention in ("tessera", "sdpa"):
        torch.manual_seed(1)
        model = Block(attention).cuda()
        step_model = torch.compile(model, fullgraph=True) if compiled else model
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        losses[attention] = []
        for _ in range(30):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.mse_loss(step_model(data).float(), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses[attention].append(loss.item())
    ours, theirs = losses["tessera"], losses["sdpa"]
    assert ours[-1] < 0.8 * ours[0], "the model learns"
    assert all(abs(a - b) <= 0.02 * abs(b) for a, b in zip(ours, theirs)), (ours, theirs)


@pytest.mark.parametrize("device", devices)
def test_block_mask_values_and_gradients_match_math_sdpa(device):
    """flash_attn(block_mask=...) (a sliding window) with autograd, to the same bars."""
    q, k, v = inputs(device, torch.float16, n_q=150, n_kv=150)
    mask = tessera.BlockMask.sliding_window(2, 150, 48, (32, 32))
    o = tessera.flash_attn(q, k, v, block_mask=mask, layout="bhsd")
    dout = torch.randn_like(o)
    ours = [o, *torch.autograd.grad(o, (q, k, v), dout)]
    qi, ki = torch.arange(150, device=device)[:, None], torch.arange(150, device=device)[None, :]
    visible = (ki <= qi) & (qi - ki < 48)
    exact, naive = math_sdpa(q, k, v, dout, visible, torch.float32), math_sdpa(q, k, v, dout, visible, torch.float16)
    for name, got, want, rough, bar in zip(("o", "dq", "dk", "dv"), ours, exact, naive, (2, 3, 3, 3)):
        error, naive_error = ((x.float() - want).abs().max().item() for x in (got, rough))
        assert error <= bar * naive_error + 2e-3 * max(1.0, want.abs().max().item()), (name, error, naive_error)
    with pytest.raises(ValueError, match="takes causal=False"):
        tessera.flash_attn(q, k, v, causal=True, block_mask=mask, layout="bhsd")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="tessera.pretune tunes on a CUDA GPU")
def test_pretune_on_cuda_stores_a_tuning_per_shape_and_batch_heads(tmp_path, monkeypatch):
    """pretune tunes the forward of each shape into the tuning database, keyed by its lengths
    and batch x heads (3 x 5 heads of 1500 rows: nq2048, bh16), causal and not."""
    import json
    database = tmp_path / "tuning.json"
    monkeypatch.setenv("TESSERA_TUNING_DB", str(database))
    monkeypatch.setenv("TESSERA_AUTOTUNE", "force")
    tessera.pretune([(3, 1500, 5, 64)])
    entries = [key for context in json.loads(database.read_text())["entries"].values() for key in context]
    tuned = [key for key in entries if key.startswith("attention_fwd") and key.endswith("|nq2048,nkv2048,bh16")]
    assert len(tuned) == 2, entries


def test_pretune_without_a_gpu_is_refused(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(RuntimeError, match="needs torch and a CUDA GPU"):
        tessera.pretune([(1, 128, 2, 64)])
