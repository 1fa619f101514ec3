"""The CPU kernel: ``apply_token_bitmask_inplace_cpu`` (torch CPU tensors or numpy arrays)."""

from __future__ import annotations

from typing import Any, List, Optional, Union

__all__ = ["apply_token_bitmask_inplace_cpu"]


def apply_token_bitmask_inplace_cpu(
    logits: Any,
    bitmask: Any,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], Any]] = None,
) -> None:
    """Set ``logits[i, t] = -inf`` where bit ``t`` of bitmask row ``i`` is 0, on the CPU.

    ``logits``: 1-D or 2-D float32/float16/bfloat16 (numpy: any float); ``bitmask``: int32 of
    width ``ceil(vocab/32)``; ``indices`` (a list or tensor) restricts the rows. Tensors on
    another device raise ``ValueError``, as in XGrammar."""
    from ..bitmask import _apply_numpy, _apply_rust, _apply_torch, _is_torch
    from ._common import indices_list, resolve_vocab_size

    for name, t in (("logits", logits), ("bitmask", bitmask)):
        if _is_torch(t) and t.device.type != "cpu":
            raise ValueError(f"{name} must be on CPU")
    if len(logits.shape) not in (1, 2):
        raise ValueError(f"logits should be 1D or 2D, but got {len(logits.shape)}D")
    if len(bitmask.shape) not in (1, 2):
        raise ValueError(f"bitmask should be 1D or 2D, but got {len(bitmask.shape)}D")
    v = resolve_vocab_size(logits, bitmask, vocab_size)
    rows = indices_list(indices)
    if _apply_rust(logits, bitmask, v, rows):
        return
    if _is_torch(logits) or _is_torch(bitmask):
        _apply_torch(logits, bitmask, v, rows)
    else:
        _apply_numpy(logits, bitmask, v, rows)
