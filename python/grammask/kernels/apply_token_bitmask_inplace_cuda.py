"""The CUDA entry point, ``apply_token_bitmask_inplace_cuda``. XGrammar JIT-compiles a ``.cu``
kernel with nvcc; grammask ships no CUDA source and runs the torch operations on the GPU instead,
so no CUDA toolkit is needed. Importing this module never fails; calling it without a CUDA device
raises :class:`~grammask.UnsupportedFeatureError`."""

from __future__ import annotations

from typing import Any, List, Optional, Union

from ..exception import UnsupportedFeatureError
from ._common import indices_list, kernel_indices, kernel_no_indices, require_torch

__all__ = ["apply_token_bitmask_inplace_cuda"]


def apply_token_bitmask_inplace_cuda(
    logits: Any, bitmask: Any, indices: Optional[Union[List[int], Any]] = None
) -> None:
    """Set ``logits[i, t] = -inf`` where bit ``t`` of bitmask row ``i`` is 0, on a CUDA device.
    As in XGrammar there is no ``vocab_size``: it is ``min(logits.shape[-1], bitmask.shape[-1] *
    32)``. Raises :class:`~grammask.UnsupportedFeatureError` when torch has no CUDA device or the
    logits are not on one."""
    torch = require_torch()
    if not torch.cuda.is_available():
        raise UnsupportedFeatureError(
            "apply_token_bitmask_inplace_cuda needs a CUDA GPU "
            "(torch.cuda.is_available() is False); "
            "use grammask.apply_token_bitmask_inplace, which picks the CPU kernel"
        )
    if logits.device.type != "cuda":
        raise UnsupportedFeatureError(
            f"apply_token_bitmask_inplace_cuda needs CUDA logits, got device {logits.device}"
        )
    v = min(logits.shape[-1], bitmask.shape[-1] * 32)
    rows = indices_list(indices)
    if rows is None:
        kernel_no_indices(logits, bitmask, v)
    else:
        kernel_indices(logits, bitmask, v, rows)
