"""The MLX kernel, ``apply_token_bitmask_mlx`` (Apple silicon). ``mlx`` is imported on the first
call; without it the call raises :class:`~grammask.UnsupportedFeatureError`."""

from __future__ import annotations

from typing import Any

from ..exception import UnsupportedFeatureError

__all__ = ["apply_token_bitmask_mlx"]


def apply_token_bitmask_mlx(bitmask: Any, logits: Any, vocab_size: int) -> Any:
    """The logits ``(..., vocab_size)`` with ``-inf`` where the bit of ``bitmask``
    ``(..., ceil(vocab_size / 32))`` is 0. MLX arrays are immutable: this returns a new array
    (note XGrammar's argument order: the bitmask first)."""
    try:
        import mlx.core as mx
    except ImportError:
        raise UnsupportedFeatureError(
            "apply_token_bitmask_mlx needs MLX: pip install mlx"
        ) from None
    shifts = mx.arange(32, dtype=mx.int32)
    bits = (bitmask.astype(mx.int32)[..., None] >> shifts) & 1
    allowed = bits.reshape(*bitmask.shape[:-1], -1)[..., :vocab_size] != 0
    return mx.where(allowed, logits[..., :vocab_size], mx.array(float("-inf"), dtype=logits.dtype))
