"""tessera's attention as torch custom ops (tessera::flash_attn_fwd/bwd) with fake
implementations for torch.compile and autograd through the backward kernels. Tensors here
are (batch, seqlen, heads, head_dim) views."""
import torch

from . import _descriptor, _stream, _tessera, block_sparse_attention, block_sparse_attention_backward


def _needs_dispatcher(tensors):
    """Whether a call must go through torch's dispatcher (the custom ops below): torch.compile
    traces it, autograd will need its backward, or a tensor subclass (fake tensors among them),
    a torch function or dispatch mode or a functorch transform must see it. Otherwise the
    kernels are called directly: the dispatch costs ~10 us of host time a call, more than the
    kernel takes at small shapes. A torch without these probes always takes the op."""
    try:
        return (torch.compiler.is_compiling()
                or (torch.is_grad_enabled() and any(x.requires_grad for x in tensors))
                or any(type(x) is not torch.Tensor for x in tensors)
                or torch._C._is_torch_function_mode_enabled()
                or torch._C._len_torch_dispatch_stack() > 0
                or torch._C._functorch.peek_interpreter_stack() is not None)
    except AttributeError:
        return True


def _forward(q, k, v, causal, scale):
    o = torch.empty_like(q)
    lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    _tessera.attention_forward(_descriptor(q, "q"), _descriptor(k, "k"), _descriptor(v, "v"), _descriptor(o, "o"),
                               _descriptor(lse, "lse"), causal, scale, _stream(q))
    return o, lse


@torch.library.custom_op("tessera::flash_attn_fwd", mutates_args=())
def flash_attn_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   scale: float, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _forward(q, k, v, causal, scale)


@flash_attn_fwd.register_fake
def _(q, k, v, causal, scale, deterministic):
    return torch.empty_like(q), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


def _backward_kernels(q, k, v, o, lse, dout, causal, scale, deterministic):
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    _tessera.attention_backward(*(_descriptor(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"), (o, "o"),
                                                                   (lse, "lse"), (dout, "dout"), (dq, "dq"),
                                                                   (dk, "dk"), (dv, "dv"))),
                                causal, scale, _stream(q), deterministic)
    return dq, dk, dv


@torch.library.custom_op("tessera::flash_attn_bwd", mutates_args=())
def flash_attn_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                   dout: torch.Tensor, causal: bool, scale: float,
                   deterministic: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _backward_kernels(q, k, v, o, lse, dout, causal, scale, deterministic)


@flash_attn_bwd.register_fake
def _(q, k, v, o, lse, dout, causal, scale, deterministic):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, deterministic = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.mark_non_differentiable(lse)  # no gradient flows through the LSE (as in FlashAttention)
    ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic


def _backward(ctx, dout, dlse):
    q, k, v, o, lse = ctx.saved_tensors
    # The kernels need a dense last dimension; autograd may hand an expanded gradient.
    dout = dout if dout.stride(-1) == 1 else dout.contiguous()
    backward = flash_attn_bwd if _needs_dispatcher((q, k, v, o, lse, dout)) else _backward_kernels
    dq, dk, dv = backward(q, k, v, o, lse, dout, ctx.causal, ctx.scale, ctx.deterministic)
    return dq, dk, dv, None, None, None


flash_attn_fwd.register_autograd(_backward, setup_context=_setup_context)


def flash_attn(q, k, v, causal, scale, deterministic=True):
    if _needs_dispatcher((q, k, v)):
        return flash_attn_fwd(q, k, v, causal, scale, deterministic)
    return _forward(q, k, v, causal, scale)


class BlockSparse(torch.autograd.Function):
    """Block-sparse attention with autograd (the mask is not a tensor, so not a custom op)."""

    @staticmethod
    def forward(ctx, q, k, v, block_mask, scale):
        o, lse = block_sparse_attention(q, k, v, block_mask, scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.mark_non_differentiable(lse)
        ctx.block_mask, ctx.scale = block_mask, scale
        return o, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dout = dout if dout.stride(-1) == 1 else dout.contiguous()
        dq, dk, dv = block_sparse_attention_backward(q, k, v, o, lse, dout, ctx.block_mask, ctx.scale)
        return dq, dk, dv, None, None
