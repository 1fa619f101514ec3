"""MLX: masking ``mx.array`` logits and a logits processor for mlx-lm.

``apply_token_bitmask_inplace(logits, bitmask)`` of :mod:`grammask.bitmask` hands ``mx.array``
logits to :func:`apply_token_bitmask_mlx` here. MLX arrays are values in a lazy graph, so "in
place" means the Python object is updated with ``logits[...] = ...`` (MLX's item assignment); the
masked array is also returned, which is what mlx-lm's processors must do.

:class:`LogitsProcessor` follows mlx-lm's contract, ``processor(tokens, logits) -> logits``, with
``tokens`` the sequence so far and ``logits`` of shape ``(1, vocab)``; pass it as
``generate_step(prompt, model, logits_processors=[proc])`` or
``mlx_lm.generate(model, tokenizer, prompt, logits_processors=[proc])``. ``mlx`` is imported lazily.
"""

from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ._processor import SequenceProcessor

__all__ = ["LogitsProcessor", "apply_token_bitmask_mlx", "is_mlx_array"]


def is_mlx_array(x: Any) -> bool:
    """Whether ``x`` is an ``mx.array`` (without importing mlx when it is not loaded)."""
    import sys

    core = sys.modules.get("mlx.core")
    return core is not None and isinstance(x, core.array)


def _allowed(bitmask: Any, width: int) -> np.ndarray:
    words = np.ascontiguousarray(np.asarray(bitmask, dtype=np.int32))
    if words.ndim == 1:
        words = words[None, :]
    bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
    return bits[:, :width].astype(bool)


def apply_token_bitmask_mlx(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[List[int]] = None,
) -> Any:
    """Set the logits of disallowed tokens to ``-inf``; returns ``logits`` (updated in place).

    ``logits``: ``mx.array`` of shape ``(vocab,)`` or ``(batch, vocab)``. ``bitmask``: int32 numpy
    array, torch CPU tensor or ``mx.array`` of shape ``(ceil(vocab/32),)`` or ``(batch, ...)``.
    Logits past ``vocab_size`` (default: what the bitmask covers) are left alone.
    """
    import mlx.core as mx

    if (
        hasattr(bitmask, "numpy")
        and not isinstance(bitmask, np.ndarray)
        and not is_mlx_array(bitmask)
    ):
        bitmask = bitmask.numpy()  # a torch CPU tensor
    words = np.asarray(bitmask)
    width = logits.shape[-1]
    v = min(width, words.shape[-1] * 32) if vocab_size is None else int(vocab_size)
    allowed = _allowed(words, v)
    if logits.ndim == 1:
        rows = allowed[:1]
    else:
        if indices is None:
            if allowed.shape[0] not in (1, logits.shape[0]):
                raise ValueError(
                    f"the logits have {logits.shape[0]} rows but the bitmask has {allowed.shape[0]}"
                )
            rows = np.broadcast_to(allowed, (logits.shape[0], v))
        else:
            rows = np.ones((logits.shape[0], v), dtype=bool)
            for i in indices:
                rows[i] = allowed[i if allowed.shape[0] > 1 else 0]
    keep = mx.array(rows if logits.ndim > 1 else rows[0])
    neg_inf = mx.array(-np.inf, dtype=logits.dtype)
    if v == width:
        logits[...] = mx.where(keep, logits, neg_inf)
    else:
        logits[..., :v] = mx.where(keep, logits[..., :v], neg_inf)
    return logits


class LogitsProcessor(SequenceProcessor):
    """Constrains an mlx-lm generation to a compiled grammar (single-use: one per generation).

    The first call notes how many tokens the sequence has; each later call accepts the tokens
    sampled since. Ids past the grammar's vocabulary (a padded output layer) are masked out.
    """

    def _ids(self, tokens: Any) -> np.ndarray:
        return np.asarray(tokens).reshape(-1)  # waits for mlx-lm's pending step

    def _apply(self, logits: Any, covered: int) -> None:
        apply_token_bitmask_mlx(logits, self.token_bitmask, vocab_size=covered)
