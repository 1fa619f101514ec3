"""The Triton kernel, ``apply_token_bitmask_inplace_triton``, for CUDA and ROCm tensors.

Importing this module never imports Triton. The JIT kernel ``apply_token_bitmask_inplace_kernel``
is built on first use (attribute access or a call); without Triton, or without a GPU (unless
``TRITON_INTERPRET=1``, Triton's CPU interpreter), the call raises
:class:`~grammask.UnsupportedFeatureError`.

The grid is ``(rows, ceil(vocab_size / BLOCK_SIZE))``: each program masks one block of one row,
loading the bitmask word of each of its tokens.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Union

from ..exception import UnsupportedFeatureError
from ._common import indices_list, require_torch, resolve_vocab_size

__all__ = ["apply_token_bitmask_inplace_kernel", "apply_token_bitmask_inplace_triton"]  # noqa: F822

BLOCK_SIZE = 4096
_kernel: Any = None


def _require_triton() -> Any:
    try:
        import triton
    except ImportError:
        raise UnsupportedFeatureError(
            "apply_token_bitmask_inplace_triton needs Triton: pip install triton "
            "(or use grammask.kernels.apply_token_bitmask_inplace_torch)"
        ) from None
    return triton


def _build_kernel() -> Any:
    """The ``@triton.jit`` kernel (built once)."""
    global _kernel
    if _kernel is not None:
        return _kernel
    triton = _require_triton()
    import triton.language as tl

    @triton.jit
    def apply_token_bitmask_inplace_kernel(
        logits_ptr,
        bitmask_ptr,
        indices_ptr,
        vocab_size,
        logits_row_stride,
        bitmask_row_stride,
        HAS_INDICES: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        program_row = tl.program_id(0)
        block = tl.program_id(1)
        if HAS_INDICES:
            row = tl.load(indices_ptr + program_row).to(tl.int64)
        else:
            row = program_row.to(tl.int64)
        tokens = block * BLOCK + tl.arange(0, BLOCK)
        in_vocab = tokens < vocab_size
        words = tl.load(
            bitmask_ptr + row * bitmask_row_stride + tokens // 32, mask=in_vocab, other=-1
        )
        rejected = ((words >> (tokens % 32)) & 1) == 0
        neg_inf = tl.full([BLOCK], float("-inf"), tl.float32).to(logits_ptr.dtype.element_ty)
        tl.store(logits_ptr + row * logits_row_stride + tokens, neg_inf, mask=in_vocab & rejected)

    _kernel = apply_token_bitmask_inplace_kernel
    return _kernel


def __getattr__(name: str) -> Any:
    if name == "apply_token_bitmask_inplace_kernel":
        return _build_kernel()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def apply_token_bitmask_inplace_triton(
    logits: Any,
    bitmask: Any,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], Any]] = None,
) -> None:
    """Set ``logits[i, t] = -inf`` where bit ``t`` of bitmask row ``i`` is 0, with a Triton
    kernel on the logits' GPU. ``logits`` 1-D or 2-D (last dimension contiguous), ``bitmask``
    int32 on the same device; ``indices`` (a list or tensor) restricts the rows."""
    torch = require_torch()
    kernel = _build_kernel()
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if not interpret and not torch.cuda.is_available():
        raise UnsupportedFeatureError(
            "apply_token_bitmask_inplace_triton needs a CUDA or ROCm GPU "
            "(torch.cuda.is_available() "
            "is False); use grammask.apply_token_bitmask_inplace, which picks the CPU kernel"
        )
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be of type int32, got {bitmask.dtype}")
    if logits.stride(-1) != 1 or bitmask.stride(-1) != 1:
        raise ValueError("the last dimension of logits and bitmask must be contiguous")
    v = resolve_vocab_size(logits, bitmask, vocab_size)
    rows = indices_list(indices)
    logits2 = logits if logits.dim() == 2 else logits.unsqueeze(0)
    bitmask2 = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    if bitmask2.device != logits2.device:
        bitmask2 = bitmask2.to(logits2.device)
    if rows is None:
        num_rows = logits2.shape[0]
        index_tensor = bitmask2  # unused when HAS_INDICES is False
    else:
        num_rows = len(rows)
        index_tensor = torch.tensor(rows, dtype=torch.int32, device=logits2.device)
    if num_rows == 0 or v == 0:
        return
    grid = (num_rows, (v + BLOCK_SIZE - 1) // BLOCK_SIZE)
    kernel[grid](
        logits2,
        bitmask2,
        index_tensor,
        v,
        logits2.stride(0),
        bitmask2.stride(0),
        HAS_INDICES=rows is not None,
        BLOCK=BLOCK_SIZE,
    )
