"""The plain-torch kernel under ``torch.compile(dynamic=True)``. The compiled functions are built
on the first call (compiling on the CPU needs a C++ compiler, as torch's inductor does)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ._common import (
    indices_list,
    kernel_indices,
    kernel_no_indices,
    require_torch,
    resolve_vocab_size,
)

__all__ = [
    "apply_token_bitmask_inplace_kernel_no_indices_torch_compile",
    "apply_token_bitmask_inplace_kernel_indices_torch_compile",
    "apply_token_bitmask_inplace_torch_compile",
]

_compiled: Dict[str, Callable[..., None]] = {}


def _get(name: str, fn: Callable[..., None]) -> Callable[..., None]:
    if name not in _compiled:
        _compiled[name] = require_torch().compile(fn, dynamic=True)
    return _compiled[name]


def apply_token_bitmask_inplace_kernel_no_indices_torch_compile(
    logits: Any, bitmask: Any, vocab_size: int
) -> None:
    """``apply_token_bitmask_inplace_kernel_no_indices_torch`` under ``torch.compile``."""
    _get("no_indices", kernel_no_indices)(logits, bitmask, vocab_size)


def apply_token_bitmask_inplace_kernel_indices_torch_compile(
    logits: Any, bitmask: Any, vocab_size: int, indices: List[int]
) -> None:
    """``apply_token_bitmask_inplace_kernel_indices_torch`` under ``torch.compile``."""
    _get("indices", kernel_indices)(logits, bitmask, vocab_size, indices)


def apply_token_bitmask_inplace_torch_compile(
    logits: Any, bitmask: Any, vocab_size: Optional[int] = None, indices: Optional[List[int]] = None
) -> None:
    """Set ``logits[i, t] = -inf`` where bit ``t`` of bitmask row ``i`` is 0, with compiled torch
    operations. ``vocab_size`` defaults to ``min(logits.shape[-1], bitmask.shape[-1] * 32)``."""
    v = resolve_vocab_size(logits, bitmask, vocab_size)
    rows = indices_list(indices)
    if rows is None:
        apply_token_bitmask_inplace_kernel_no_indices_torch_compile(logits, bitmask, v)
    else:
        apply_token_bitmask_inplace_kernel_indices_torch_compile(logits, bitmask, v, rows)
