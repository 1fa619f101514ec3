"""Shared checks and the torch implementation behind the kernel modules."""

from __future__ import annotations

from typing import Any, List, Optional, Union

from ..exception import UnsupportedFeatureError


def require_torch() -> Any:
    """The torch module, or :class:`UnsupportedFeatureError` when it is not installed."""
    try:
        import torch
    except ImportError:
        raise UnsupportedFeatureError("this kernel needs PyTorch: pip install torch") from None
    return torch


def resolve_vocab_size(logits: Any, bitmask: Any, vocab_size: Optional[int]) -> int:
    """``vocab_size``, defaulting to ``min(logits width, bitmask width * 32)``; larger raises."""
    detected = min(logits.shape[-1], bitmask.shape[-1] * 32)
    if vocab_size is None:
        return int(detected)
    if vocab_size > detected:
        raise ValueError(
            f"vocab_size {vocab_size} is larger than the detected vocab_size {detected}"
        )
    return int(vocab_size)


def indices_list(indices: Union[None, List[int], Any]) -> Optional[List[int]]:
    """Row indices as a list of ints (a tensor or array is converted)."""
    if indices is None:
        return None
    if hasattr(indices, "tolist"):
        return [int(i) for i in indices.tolist()]
    return [int(i) for i in indices]


def rejected_bits(bitmask: Any, vocab_size: int) -> Any:
    """``(rows, vocab_size)`` booleans, True where the bit is 0 (the token is masked out)."""
    torch = require_torch()
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1
    return (bits.reshape(*bitmask.shape[:-1], -1) == 0)[..., :vocab_size]


def kernel_no_indices(logits: Any, bitmask: Any, vocab_size: int) -> None:
    """Mask every row: logits ``(B, V)`` or ``(V,)`` with a bitmask of the same rows."""
    logits[..., :vocab_size].masked_fill_(
        rejected_bits(bitmask.to(logits.device), vocab_size), float("-inf")
    )


def kernel_indices(logits: Any, bitmask: Any, vocab_size: int, indices: List[int]) -> None:
    """Mask rows ``indices`` of 2-D logits with the same rows of the bitmask."""
    torch = require_torch()
    rows = torch.tensor(indices, dtype=torch.long, device=logits.device)
    rejected = rejected_bits(bitmask.to(logits.device)[rows], vocab_size)
    logits[rows, :vocab_size] = logits[rows, :vocab_size].masked_fill(rejected, float("-inf"))
