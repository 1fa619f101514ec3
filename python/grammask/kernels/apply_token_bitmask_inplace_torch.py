"""The plain-torch kernel (XGrammar's ``"torch_native"`` backend): works on any device torch
supports. torch is imported on the first call."""

from __future__ import annotations

from typing import Any, List, Optional

from ._common import indices_list, kernel_indices, kernel_no_indices, resolve_vocab_size

__all__ = [
    "apply_token_bitmask_inplace_kernel_no_indices_torch",
    "apply_token_bitmask_inplace_kernel_indices_torch",
    "apply_token_bitmask_inplace_torch",
]


def apply_token_bitmask_inplace_kernel_no_indices_torch(
    logits: Any, bitmask: Any, vocab_size: int
) -> None:
    """Mask every row of ``logits`` (``(B, V)`` or ``(V,)``) with the same row of ``bitmask``."""
    kernel_no_indices(logits, bitmask, vocab_size)


def apply_token_bitmask_inplace_kernel_indices_torch(
    logits: Any, bitmask: Any, vocab_size: int, indices: List[int]
) -> None:
    """Mask rows ``indices`` of 2-D ``logits`` with the same rows of ``bitmask``."""
    kernel_indices(logits, bitmask, vocab_size, indices)


def apply_token_bitmask_inplace_torch(
    logits: Any, bitmask: Any, vocab_size: Optional[int] = None, indices: Optional[List[int]] = None
) -> None:
    """Set ``logits[i, t] = -inf`` where bit ``t`` of bitmask row ``i`` is 0, with torch
    operations on the logits' device. ``vocab_size`` defaults to
    ``min(logits.shape[-1], bitmask.shape[-1] * 32)``."""
    v = resolve_vocab_size(logits, bitmask, vocab_size)
    rows = indices_list(indices)
    if rows is None:
        kernel_no_indices(logits, bitmask, v)
    else:
        kernel_indices(logits, bitmask, v, rows)
