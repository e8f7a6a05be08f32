"""tessera: flash attention written in the tessera tile DSL, called from Python.

    import tessera
    out = tessera.flash_attn(q, k, v, causal=True)       # torch tensors, with autograd
    out, lse = tessera.attention_forward(q, k, v)         # numpy arrays or any DLPack producer

Tensors are (batch, seqlen, heads, head_dim) ("bshd", FlashAttention's order) or, with
layout="bhsd", (batch, heads, seqlen, head_dim) (PyTorch SDPA's order); fp16 or bf16; k and v
may have fewer heads than q (GQA/MQA). Without a GPU, TESSERA_INTERPRET=1 runs the same
kernels on the CPU through the interpreter (slowly), on CPU tensors.
"""
import math
import os

from . import _tessera
from ._tessera import Error

__all__ = ["Error", "attention_forward", "attention_backward", "flash_attn", "info", "cache_dir", "cache_clear",
           "autotune", "pretune", "attention_forward_configs", "attention_backward_configs", "BlockMask",
           "block_sparse_attention", "block_sparse_attention_backward"]

_LAYOUTS = ("bshd", "bhsd")


def info():
    """The GPU tessera would use (or why none), its kernel cache, and whether it interprets."""
    available, why = _tessera.gpu_available()
    return {"gpu": _tessera.device_name() if available else None, "why_no_gpu": None if available else why,
            "interpret": os.environ.get("TESSERA_INTERPRET", "0") not in ("", "0"), "cache_dir": _tessera.cache_dir()}


def cache_dir():
    """Where compiled kernels and tuning results are kept ($TESSERA_CACHE_DIR)."""
    return _tessera.cache_dir()


def cache_clear():
    """Remove every compiled kernel from the disk cache; how many were removed."""
    return _tessera.cache_clear()


_TUNE_MODES = ("off", "cached", "on", "force")


def autotune(mode=None):
    """The autotuning mode (TESSERA_AUTOTUNE), set to `mode` when given: "on" tunes what is not
    stored yet (default), "cached" uses stored results only, "off" the default configs,
    "force" tunes again. Results are kept per GPU model in cache_dir()."""
    if mode is not None:
        if mode not in _TUNE_MODES:
            raise ValueError(f"tessera: autotune mode must be one of {_TUNE_MODES}, not {mode!r}")
        os.environ["TESSERA_AUTOTUNE"] = mode
    return os.environ.get("TESSERA_AUTOTUNE") or "on"


def pretune(shapes, dtype="float16", causal=(False, True)):
    """Tune attention_forward now for each (batch, seqlen, heads, head_dim) in `shapes` (on
    the GPU, with torch), so that the first real call does not pay for it. It times standard
    normal inputs: zeros would flatter every config alike (no row max moves, few bits toggle,
    less power drawn at the cap) and could pick another."""
    torch = _torch()
    if torch is None or not torch.cuda.is_available():
        raise RuntimeError("tessera.pretune needs torch and a CUDA GPU")
    for batch, seqlen, heads, head_dim in shapes:
        q, k, v = (torch.randn(batch, seqlen, heads, head_dim, dtype=getattr(torch, dtype), device="cuda")
                   for _ in range(3))
        for c in causal:
            attention_forward(q, k, v, causal=c)
    torch.cuda.synchronize()


# torch once looked for (False where it is not installed): it is optional, and a call's host
# time before its launch counts in every single-call timing, so nothing is imported per call.
_torch_module = None
_torch_dtype_names = {}  # by torch dtype, once torch is imported: _dtype_name's text costs more


def attention_forward_configs(head_dim, causal=False):
    """The configs attention_forward tunes over for `head_dim` (dicts of meta-parameters; the
    first is the default). Pass one as attention_forward's config= to run it untuned."""
    return _tessera.attention_forward_configs(head_dim, causal)


def attention_backward_configs(head_dim, causal=False, backward_pass="keys_values"):
    """The configs a backward pass tunes over: "keys_values" (dK/dV), "queries" (dQ), or
    "keys_values_adding_dq" (dK/dV adding dQ, deterministic=False); for attention_backward's
    keys_values_config= and queries_config=."""
    return _tessera.attention_backward_configs(head_dim, causal, backward_pass)


def _config(config, name):
    """config as a {str: int} dict for the library (None passes), or a TypeError naming it."""
    if config is None:
        return None
    if not isinstance(config, dict) or not all(isinstance(key, str) and isinstance(value, int) and
                                               not isinstance(value, bool) for key, value in config.items()):
        raise TypeError(f"tessera: {name} must be a dict of meta-parameter names to ints (one of "
                        f"attention_*_configs), not {config!r}")
    return config


def _torch():
    global _torch_module, _torch_dtype_names
    if _torch_module is None:
        try:
            import torch
            _torch_module = torch
            _torch_dtype_names = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}
        except ImportError:
            _torch_module = False
    return _torch_module or None


def _is_torch(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _as_array(x, name):
    """x as a numpy array or a torch tensor (other DLPack producers converted without a copy)."""
    if _is_torch(x):
        return x
    import numpy
    if isinstance(x, numpy.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        device, _ = x.__dlpack_device__()
        if device == 1:
            return numpy.from_dlpack(x)
        torch = _torch()
        if torch is None:
            raise TypeError(f"tessera: {name} is a GPU DLPack tensor; converting it needs torch")
        return torch.utils.dlpack.from_dlpack(x)
    raise TypeError(f"tessera: {name} must be a torch tensor, a numpy array or a DLPack producer, "
                    f"not {type(x).__name__}")


# By the dtype's text: torch.compile traces these checks, and fails on a dict keyed by dtypes
# once it holds a numpy one (torch 2.11).
_DTYPE_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


def _dtype_name(x, name):
    text = str(x.dtype).replace("torch.", "")
    if text not in _DTYPE_NAMES:
        raise TypeError(f"tessera: {name} has dtype {text}; f16 or bf16 (f32 for lse)")
    return _DTYPE_NAMES[text]


def _check_inputs(q, k, v, layout):
    """What Python can say best: the types, dtypes and rank of q, k, v (the library checks the rest)."""
    for x, name in ((q, "q"), (k, "k"), (v, "v")):
        if _dtype_name(x, name) == "f32":
            raise TypeError(f"tessera: {name} has dtype float32; f16 or bf16")
    if q.ndim != 4:
        raise ValueError(f"tessera: q must have 4 dimensions ({layout}), got shape {tuple(q.shape)}")


def _descriptor(x, name, layout="bshd"):
    """(data, dtype, shape, strides, device) of x seen as (batch, seqlen, heads, head_dim)."""
    if _is_torch(x):
        if x.is_cuda:
            device = 2
        elif x.device.type == "cpu":
            device = 1
        else:
            raise ValueError(f"tessera: {name} is on {x.device}; CPU or CUDA tensors only")
        data, shape, strides = x.data_ptr(), x.shape, x.stride()
        dtype = _torch_dtype_names.get(x.dtype) or _dtype_name(x, name)
    else:
        data, shape = x.ctypes.data, x.shape
        if any(s % x.itemsize for s in x.strides):
            raise ValueError(f"tessera: {name} has strides that are not whole elements")
        strides, device = tuple(s // x.itemsize for s in x.strides), 1
        dtype = _dtype_name(x, name)
    if layout == "bhsd" and len(shape) == 4:
        shape = (shape[0], shape[2], shape[1], shape[3])
        strides = (strides[0], strides[2], strides[1], strides[3])
    return (data, dtype, shape, strides, device)


def _stream(x):
    """The current CUDA stream of x's GPU (0 for CPU arrays), through torch's raw query where
    it has one (H200 host: 0.4 us against current_stream()'s 2.9)."""
    if _is_torch(x) and x.is_cuda:
        torch = _torch()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        return raw(x.get_device()) if raw else torch.cuda.current_stream(x.device).cuda_stream
    return 0


def _check_layout(layout):
    if layout not in _LAYOUTS:
        raise ValueError(f"tessera: layout must be one of {_LAYOUTS}, not {layout!r}")


def _empty_like(x, shape=None, float32=False):
    if _is_torch(x):
        torch = _torch()
        if shape is None:
            return torch.empty_like(x)
        return x.new_empty(shape, dtype=torch.float32) if float32 else x.new_empty(shape)
    import numpy
    return numpy.empty_like(x) if shape is None else numpy.empty(shape, numpy.float32 if float32 else x.dtype)


def _lse_shape(q, layout):
    """(batch, heads, seqlen) of q."""
    batch, a, b, _ = q.shape
    return (batch, a, b) if layout == "bhsd" else (batch, b, a)


def attention_forward(q, k, v, causal=False, scale=None, layout="bshd", config=None):
    """O = softmax(q k^T * scale) v and the fp32 natural-log LSE per query row, (batch, heads,
    seqlen_q). Causal masks are aligned bottom-right when seqlen_q != seqlen_k. scale: positive,
    default 1/sqrt(head_dim) (the same for every function here). config: one of
    attention_forward_configs(head_dim, causal), run instead of the tuned one. No autograd (see
    flash_attn)."""
    _check_layout(layout)
    config = _config(config, "config")
    q, k, v = (_as_array(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    _check_inputs(q, k, v, layout)
    o = _empty_like(q)
    lse = _empty_like(q, _lse_shape(q, layout), float32=True)
    _tessera.attention_forward(*(_descriptor(x, n, layout) for x, n in ((q, "q"), (k, "k"), (v, "v"), (o, "o"))),
                               _descriptor(lse, "lse"), causal, scale, _stream(q), config)
    return o, lse


def attention_backward(q, k, v, o, lse, dout, causal=False, scale=None, layout="bshd", deterministic=True,
                       keys_values_config=None, queries_config=None):
    """dq, dk, dv of attention_forward for the output gradient dout. deterministic=False lets
    the dk/dv pass add dq up where that is not slower (on Hopper at head dims 33-128: one pass
    over the scores instead of two; dq's rounding may then vary from run to run).
    keys_values_config, queries_config: the passes' configs (attention_backward_configs),
    run instead of the tuned ones."""
    _check_layout(layout)
    keys_values_config = _config(keys_values_config, "keys_values_config")
    queries_config = _config(queries_config, "queries_config")
    q, k, v, o, lse, dout = (_as_array(x, n) for x, n in
                             ((q, "q"), (k, "k"), (v, "v"), (o, "o"), (lse, "lse"), (dout, "dout")))
    _check_inputs(q, k, v, layout)
    dq, dk, dv = _empty_like(q), _empty_like(k), _empty_like(v)
    named = ((q, "q"), (k, "k"), (v, "v"), (o, "o"))
    _tessera.attention_backward(*(_descriptor(x, n, layout) for x, n in named), _descriptor(lse, "lse"),
                                *(_descriptor(x, n, layout) for x, n in ((dout, "dout"), (dq, "dq"), (dk, "dk"), (dv, "dv"))),
                                causal, scale, _stream(q), deterministic, keys_values_config, queries_config)
    return dq, dk, dv


class BlockMask:
    """Which blocks (128x128 by default) of the attention matrix a block-sparse call visits,
    with the elementwise mask of the partially visible ones; built by the class methods.
    Sequences are (batch, seqlen) as in the tensors; one mask serves every head unless built
    per head (from_blocks)."""

    def __init__(self, native):
        self._native = native

    @classmethod
    def causal(cls, batch, n_q, n_kv=None, block_size=(128, 128)):
        """Bottom-right aligned causal: query i sees keys j <= i + n_kv - n_q."""
        return cls(_tessera.block_mask_causal(batch, n_q, n_q if n_kv is None else n_kv, *block_size))

    @classmethod
    def sliding_window(cls, batch, n, window, block_size=(128, 128)):
        """Causal within a window: query i sees keys i - window < j <= i."""
        return cls(_tessera.block_mask_sliding_window(batch, n, window, *block_size))

    @classmethod
    def prefix_lm(cls, batch, n, prefix, block_size=(128, 128)):
        """Every query sees the first `prefix` keys, and causally after them."""
        return cls(_tessera.block_mask_prefix_lm(batch, n, prefix, *block_size))

    @classmethod
    def documents(cls, document_ids, causal=True, block_size=(128, 128)):
        """Queries see the keys of their own document: `document_ids` is (batch, seqlen) ints."""
        import numpy
        ids = numpy.asarray(document_ids.cpu() if _is_torch(document_ids) else document_ids)
        if ids.ndim != 2:
            raise ValueError(f"tessera: document_ids must be (batch, seqlen), got shape {ids.shape}")
        return cls(_tessera.block_mask_documents(ids.shape[0], ids.shape[1], ids.astype("int32").ravel().tolist(),
                                                 causal, *block_size))

    @classmethod
    def from_blocks(cls, visited, n_q, n_kv, block_size=(128, 128)):
        """From a boolean (batch, heads, q_blocks, kv_blocks) array of the blocks to visit whole
        (heads 1: shared by every head)."""
        import numpy
        blocks = numpy.asarray(visited.cpu() if _is_torch(visited) else visited, dtype=bool)
        if blocks.ndim != 4:
            raise ValueError(f"tessera: visited must be (batch, heads, q_blocks, kv_blocks), got shape {blocks.shape}")
        return cls(_tessera.block_mask_from_blocks(blocks.shape[0], blocks.shape[1], n_q, n_kv,
                                                   blocks.ravel().tolist(), *block_size))

    @property
    def density(self):
        """Visited blocks over all blocks."""
        return self._native.density

    def states(self):
        """numpy int8 (batch, heads, q_blocks, kv_blocks): 0 skipped, 1 partial, 2 full."""
        import numpy
        m = self._native
        bm, bn = m.block_size
        shape = (m.batch, m.heads, -(-m.n_q // bm), -(-m.n_kv // bn))
        return numpy.array(m.states(), dtype=numpy.int8).reshape(shape)


def block_sparse_attention(q, k, v, block_mask, scale=None, layout="bshd"):
    """attention_forward visiting only `block_mask`'s blocks: O and the fp32 LSE; rows that see
    no key give 0 and -inf. No autograd (flash_attn(block_mask=...) has it)."""
    _check_layout(layout)
    q, k, v = (_as_array(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    _check_inputs(q, k, v, layout)
    o = _empty_like(q)
    lse = _empty_like(q, _lse_shape(q, layout), float32=True)
    _tessera.block_sparse_forward(block_mask._native, *(_descriptor(x, n, layout) for x, n in
                                                        ((q, "q"), (k, "k"), (v, "v"), (o, "o"))),
                                  _descriptor(lse, "lse"), scale, _stream(q))
    return o, lse


def block_sparse_attention_backward(q, k, v, o, lse, dout, block_mask, scale=None, layout="bshd"):
    """dq, dk, dv of block_sparse_attention (deterministic)."""
    _check_layout(layout)
    q, k, v, o, lse, dout = (_as_array(x, n) for x, n in
                             ((q, "q"), (k, "k"), (v, "v"), (o, "o"), (lse, "lse"), (dout, "dout")))
    _check_inputs(q, k, v, layout)
    dq, dk, dv = _empty_like(q), _empty_like(k), _empty_like(v)
    _tessera.block_sparse_backward(block_mask._native, *(_descriptor(x, n, layout) for x, n in
                                                         ((q, "q"), (k, "k"), (v, "v"), (o, "o"))),
                                   _descriptor(lse, "lse"),
                                   *(_descriptor(x, n, layout) for x, n in
                                     ((dout, "dout"), (dq, "dq"), (dk, "dk"), (dv, "dv"))),
                                   scale, _stream(q))
    return dq, dk, dv


def flash_attn(q, k, v, causal=False, scale=None, block_mask=None, return_lse=False, layout="bshd",
               deterministic=True):
    """Attention on torch tensors with autograd through tessera's backward kernels; a torch
    custom op (tessera::flash_attn) with a fake implementation, so torch.compile traces it.
    deterministic=False: the backward may add dq up in the dk/dv pass (see attention_backward).
    With a BlockMask (causal must then be False: the mask decides), block-sparse attention with
    autograd (a torch.autograd.Function: torch.compile breaks the graph around it)."""
    _check_layout(layout)
    torch = _torch()
    if torch is None or not all(_is_torch(x) for x in (q, k, v)):
        raise TypeError("tessera.flash_attn takes torch tensors (attention_forward takes numpy/DLPack)")
    _check_inputs(q, k, v, layout)
    if layout == "bhsd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    from . import _torch_ops
    if block_mask is not None:
        if causal:
            raise ValueError("tessera: flash_attn with a block_mask takes causal=False (the mask decides)")
        o, lse = _torch_ops.BlockSparse.apply(q, k, v, block_mask, scale)
    else:
        o, lse = _torch_ops.flash_attn(q, k, v, causal, scale, deterministic)
    if layout == "bhsd":
        o = o.transpose(1, 2)
    return (o, lse) if return_lse else o
