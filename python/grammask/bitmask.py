"""Token bitmasks: int32 arrays of shape ``(batch, ceil(vocab_size / 32))``, bit ``i % 32`` of word
``i // 32`` set when token ``i`` is allowed. ``apply_token_bitmask_inplace`` sets the logits of
disallowed tokens to ``-inf``. Works with numpy arrays, and with torch tensors (CPU or any device
torch supports) when torch is installed; torch is imported lazily."""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any, List, Optional, Tuple

import numpy as np

from . import _core
from .exception import InvalidArgumentError, UnsupportedFeatureError
from .kernels._common import rejected_bits

__all__ = [
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "get_bitmask_shape",
    "reset_token_bitmask",
]


def _torch() -> Any:
    """The torch module if it is installed (imported on first use), else None."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    try:
        import torch
    except ImportError:
        return None
    return torch


def _is_torch(x: Any) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _is_mlx(x: Any) -> bool:
    core = sys.modules.get("mlx.core")
    return core is not None and isinstance(x, core.array)


def get_bitmask_shape(batch_size: int, vocab_size: int) -> Tuple[int, int]:
    """``(batch_size, ceil(vocab_size / 32))``."""
    return (batch_size, math.ceil(vocab_size / 32))


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Any:
    """A bitmask with every token allowed: a torch int32 tensor when torch is installed (as
    XGrammar returns), else a numpy int32 array."""
    if batch_size < 1 or vocab_size < 0:
        raise ValueError(f"invalid bitmask size: batch_size={batch_size}, vocab_size={vocab_size}")
    torch = _torch()
    shape = get_bitmask_shape(batch_size, vocab_size)
    if torch is not None:
        return torch.full(shape, -1, dtype=torch.int32)
    return np.full(shape, -1, dtype=np.int32)


def reset_token_bitmask(bitmask: Any) -> None:
    """Allow every token again."""
    if _is_torch(bitmask):
        bitmask.fill_(-1)
    else:
        bitmask.fill(-1)


# The last torch bitmask seen and its numpy view: (tensor, view, data_ptr, shape, storage).
# Decode loops pass the same tensor every step; the view is reused while the tensor still starts
# at the same address with the same shape. Holding the storage keeps that address from being
# reused by other memory, so an equal data_ptr means the same (live) storage: the view only ever
# addresses memory that storage owns. One tuple, assigned at once, so threads never see a mixed
# entry. (A tensor re-typed or re-strided in place over the same memory with the same shape would
# keep the view; that is the caller's own bitmask reinterpreted, not memory outside it.)
_last_torch_view: Tuple[Any, ...] = (object(), None, 0, (), None)  # matches no bitmask

# The last torch bitmask filled by address: (tensor, data_ptr, shape, storage, rows, words), reused
# under the same rule as `_last_torch_view` (the held storage keeps the address its own).
_last_torch_address: Tuple[Any, ...] = (object(), 0, (), None, 0, 0)  # matches no bitmask


def _checked_storage(bitmask: Any) -> Any:
    """The storage of a CPU, contiguous int32 torch tensor (held by the caches above to keep its
    address the tensor's); TypeError or ValueError on anything else. Reads ``is_cpu``, not
    ``.device`` (slow on a new tensor: :func:`torch_int32_address`)."""
    if not _is_torch(bitmask):
        raise TypeError(f"the bitmask must be a numpy array or a torch tensor, got {type(bitmask).__name__}")
    if bitmask.dtype != sys.modules["torch"].int32:
        raise TypeError(f"the bitmask must have dtype torch.int32, got {bitmask.dtype}")
    if not bitmask.is_cpu:
        raise ValueError(f"the bitmask must be on the CPU, got device {bitmask.device}")
    if not bitmask.is_contiguous():
        raise ValueError("the bitmask must be contiguous")
    return bitmask.untyped_storage() if hasattr(bitmask, "untyped_storage") else bitmask.storage()


def as_int32_buffer(bitmask: Any) -> np.ndarray:
    """A numpy view of a CPU int32 bitmask (no copy); raises on anything else."""
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise TypeError(f"the bitmask must have dtype int32, got {bitmask.dtype}")
        return bitmask
    global _last_torch_view
    last, view, ptr, shape, _storage = _last_torch_view
    # PERF: two attribute reads (~0.4 us); the full checks and `.numpy()` below cost ~2 us per
    # fill, more than a memoized mask.
    if bitmask is last and bitmask.data_ptr() == ptr and bitmask.shape == shape:
        return view
    storage = _checked_storage(bitmask)
    view = bitmask.detach().numpy()
    _last_torch_view = (bitmask, view, bitmask.data_ptr(), bitmask.shape, storage)
    return view


def torch_int32_address(bitmask: Any) -> Tuple[int, int, int]:
    """``(address, rows, words)`` of a CPU, C-contiguous, 1-D or 2-D int32 torch tensor, for the
    binding's fill by address; raises like :func:`as_int32_buffer` on anything else.

    PERF: no numpy view: ``.numpy()`` and ``.device`` on a new tensor cost 50-100 us right after
    a compile (cold caches), the first mask of every request."""
    global _last_torch_address
    last, ptr, shape, _storage, rows, words = _last_torch_address
    if bitmask is last and bitmask.data_ptr() == ptr and bitmask.shape == shape:
        return ptr, rows, words
    storage = _checked_storage(bitmask)
    shape = bitmask.shape
    if len(shape) not in (1, 2):
        raise InvalidArgumentError(f"the bitmask must be 1-D or 2-D, got shape {list(shape)}")
    rows, words = (1, shape[0]) if len(shape) == 1 else shape
    ptr = bitmask.data_ptr()
    _last_torch_address = (bitmask, ptr, shape, storage, rows, words)
    return ptr, rows, words


def _bool_mask_numpy(bitmask: np.ndarray, width: int) -> np.ndarray:
    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :width].astype(bool)


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[List[int]] = None,
    backend: str = "auto",
) -> None:
    """Set ``logits[row, t] = -inf`` for every token ``t`` whose bit is 0.

    ``logits`` is ``(batch, vocab)`` or ``(vocab,)``; float32, float16 or bfloat16 (numpy also
    float64); a numpy array, a torch tensor, or an MLX ``mx.array`` (updated with item assignment,
    see :mod:`grammask.integrations.mlx`). ``vocab_size`` defaults to
    ``min(logits.shape[-1], bitmask.shape[-1] * 32)``; logits
    past it are left alone. ``indices`` restricts the rows (then the batch sizes may differ).

    ``backend``: ``"auto"`` (and ``"cpu"``/``"numpy"``) masks with numpy on the CPU and with torch
    operations on other devices; ``"triton"``, ``"cuda"``, ``"torch_compile"`` and
    ``"torch_native"`` run the kernel of that name from :mod:`grammask.kernels` (Triton and CUDA
    raise :class:`~grammask.UnsupportedFeatureError` without a GPU). On CUDA tensors ``"auto"``
    runs the Triton kernel when Triton is installed (one launch, as XGrammar's default; the first
    call JIT-compiles it) and torch operations otherwise.
    """
    # Fast path: CPU logits and bitmask through the Rust kernel (checks included there); it
    # declines anything else (MLX arrays included) before touching it.
    if backend in ("auto", "cpu", "numpy") and _apply_rust(logits, bitmask, vocab_size, indices):
        return
    if _is_mlx(logits):
        from .integrations.mlx import apply_token_bitmask_mlx

        apply_token_bitmask_mlx(logits, bitmask, vocab_size=vocab_size, indices=indices)
        return
    if backend in ("metal", "mlx"):
        raise ValueError(f"backend {backend!r} needs MLX logits (an mx.array)")
    if backend not in ("auto", "cpu", "numpy", "cuda", "triton", "torch_compile", "torch_native"):
        raise ValueError(f"unknown backend {backend!r}")
    v = _vocab_limit(logits.shape[-1], bitmask.shape[-1] * 32, vocab_size)
    if backend in _KERNELS:
        # An explicit backend runs the kernel of that name (grammask.kernels), as in XGrammar.
        import importlib

        module, fn = _KERNELS[backend]
        kernel = getattr(importlib.import_module(f"grammask.kernels.{module}"), fn)
        if backend == "cuda":
            kernel(logits, bitmask, indices)
        else:
            kernel(logits, bitmask, v, indices)
        return
    if _is_torch(logits) or _is_torch(bitmask):
        _apply_torch(logits, bitmask, v, indices)
    else:
        _apply_numpy(logits, bitmask, v, indices)


def _vocab_limit(width: int, covered: int, vocab_size: Optional[int]) -> int:
    """How many leading logits of a row the bitmask governs."""
    if vocab_size is None:
        if covered < width:
            warnings.warn(
                f"the bitmask covers {covered} tokens but the logits have {width}; "
                "allocate the bitmask with the model's vocab_size",
                UserWarning,
                stacklevel=3,
            )
        return min(width, covered)
    v = int(vocab_size)
    if v > width or v > covered:
        raise ValueError(f"vocab_size {v} exceeds the logits ({width}) or the bitmask ({covered})")
    return v


_NUMPY_FLOATS = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", np.dtype(np.float64): "float64"}


def _cpu_view(x: Any) -> Tuple[Any, Optional[str]]:
    """(numpy view, float dtype name) of CPU logits, or (None, None) when the Rust kernel cannot
    take them (another device, dtype or layout: the general path handles those)."""
    if isinstance(x, np.ndarray):
        return x, _NUMPY_FLOATS.get(x.dtype)
    if not _is_torch(x):
        return None, None
    # PERF: one dict lookup and `.numpy()` (no `.detach()`: requires_grad is checked) keep the
    # torch overhead per call near a microsecond; bfloat16 adds only its int16 `view`.
    kind = _torch_cpu_kinds().get(x.dtype)
    if kind is None or not x.is_cpu or x.requires_grad:
        return None, None
    bits, name = kind
    return (x if bits is None else x.view(bits)).numpy(), name


_TORCH_KINDS: dict = {}


def _torch_cpu_kinds() -> dict:
    """torch float dtype -> (dtype to view it as for numpy or None, kernel dtype name); numpy has
    no bfloat16, so its bit pattern goes as int16."""
    if not _TORCH_KINDS:
        torch = sys.modules["torch"]
        _TORCH_KINDS.update(
            {
                torch.float32: (None, "float32"),
                torch.float16: (None, "float16"),
                torch.bfloat16: (torch.int16, "bfloat16"),
            }
        )
    return _TORCH_KINDS


def _apply_rust(logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Any) -> bool:
    """Masks CPU logits with the Rust kernel (one pass, one thread, no temporaries); False, with
    nothing done, when the inputs are not CPU arrays it takes."""
    view, dtype = _cpu_view(logits)
    mask = _cpu_mask(bitmask) if dtype is not None else None
    if mask is None or (view.shape[-1] > 1 and view.strides[-1] != view.itemsize):
        return False  # e.g. a field of a structured array (llama-cpp-python): the numpy path
    v = _vocab_limit(view.shape[-1], mask.shape[-1] * 32, vocab_size)
    _core.apply_token_bitmask_inplace_cpu(view, mask, dtype, v, None if indices is None else [int(i) for i in indices])
    return True


def _cpu_mask(bitmask: Any) -> Optional[np.ndarray]:
    """A numpy int32 view of a CPU bitmask with contiguous rows, or None (general path)."""
    if isinstance(bitmask, np.ndarray):
        ok = bitmask.dtype == np.int32 and bitmask.ndim in (1, 2)
        return bitmask if ok and (bitmask.shape[-1] <= 1 or bitmask.strides[-1] == 4) else None
    last, view, ptr, shape, _storage = _last_torch_view
    if bitmask is last and bitmask.data_ptr() == ptr and bitmask.shape == shape:
        return view  # checked CPU and contiguous when cached (as_int32_buffer)
    if _is_torch(bitmask) and bitmask.is_cpu and bitmask.is_contiguous():
        try:
            return as_int32_buffer(bitmask)  # cached view of the same tensor across steps
        except (TypeError, ValueError):
            return None
    return None


# backend name -> (module of grammask.kernels, function)
_KERNELS = {
    "triton": ("apply_token_bitmask_inplace_triton", "apply_token_bitmask_inplace_triton"),
    "cuda": ("apply_token_bitmask_inplace_cuda", "apply_token_bitmask_inplace_cuda"),
    "torch_compile": ("apply_token_bitmask_inplace_torch_compile", "apply_token_bitmask_inplace_torch_compile"),
    "torch_native": ("apply_token_bitmask_inplace_torch", "apply_token_bitmask_inplace_torch"),
}


def _rows(logits_ndim: int, bitmask: Any, n_logit_rows: int, indices: Optional[List[int]]) -> List[Tuple[int, int]]:
    """(logits row, bitmask row) pairs."""
    if logits_ndim == 1:
        return [(0, 0)]
    n_mask = 1 if bitmask.ndim == 1 else bitmask.shape[0]
    if indices is not None:
        # XGrammar semantics: row i of the logits takes row i of the bitmask.
        for i in indices:
            if not 0 <= i < n_logit_rows or (n_mask > 1 and i >= n_mask):
                raise ValueError(f"index {i} is out of range for {n_logit_rows} logit rows / {n_mask} bitmask rows")
        return [(i, i if n_mask > 1 else 0) for i in indices]
    if n_mask != n_logit_rows:
        raise ValueError(f"the logits have {n_logit_rows} rows but the bitmask has {n_mask}")
    return [(i, i) for i in range(n_logit_rows)]


def _apply_numpy(logits: np.ndarray, bitmask: np.ndarray, v: int, indices: Optional[List[int]]) -> None:
    if not isinstance(logits, np.ndarray) or logits.dtype.kind != "f":
        raise TypeError("numpy logits must be a floating-point array")
    if bitmask.dtype != np.int32:
        raise TypeError(f"the bitmask must have dtype int32, got {bitmask.dtype}")
    if logits.ndim not in (1, 2) or bitmask.ndim not in (1, 2):
        raise ValueError("logits and bitmask must be 1-D or 2-D")
    mask2d = bitmask.reshape(1, -1) if bitmask.ndim == 1 else bitmask
    allowed = _bool_mask_numpy(mask2d, v)
    if logits.ndim == 1:
        logits[:v][~allowed[0]] = -np.inf
        return
    for lr, br in _rows(2, mask2d, logits.shape[0], indices):
        logits[lr, :v][~allowed[br]] = -np.inf


def _apply_torch(logits: Any, bitmask: Any, v: int, indices: Optional[List[int]]) -> None:
    torch = _torch()
    if not isinstance(logits, torch.Tensor):
        raise TypeError("when the bitmask is a torch tensor, the logits must be one too")
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"logits must be float32, float16 or bfloat16, got {logits.dtype}")
    if isinstance(bitmask, np.ndarray):
        bitmask = torch.from_numpy(bitmask)
    if bitmask.dtype != torch.int32:
        raise TypeError(f"the bitmask must have dtype torch.int32, got {bitmask.dtype}")
    if logits.dim() not in (1, 2) or bitmask.dim() not in (1, 2):
        raise ValueError("logits and bitmask must be 1-D or 2-D")
    if (
        logits.device.type == "cpu"
        and bitmask.device.type == "cpu"
        and logits.dtype in (torch.float32, torch.float16)
        and not logits.requires_grad
    ):
        # PERF: on CPU, numpy views of the same memory: ~0.2 ms for a 128k-token row, where the
        # torch ops below (broadcast int32 shift, advanced indexing) took 170-380 ms on the
        # 2-core CI VM under load (torch 2.15 CPU).
        _apply_numpy(logits.detach().numpy(), bitmask.numpy(), v, indices)
        return
    mask2d = bitmask.reshape(1, -1) if bitmask.dim() == 1 else bitmask
    mask2d = mask2d.to(logits.device, non_blocking=True)
    if logits.dim() == 1:
        if not _apply_triton(logits, mask2d[0], v, None):
            logits[:v].masked_fill_(rejected_bits(mask2d[0], v), float("-inf"))
        return
    pairs = _rows(2, mask2d, logits.shape[0], indices)  # validates rows and indices
    if indices is None:  # `_rows` checked that the rows pair up one to one
        if not _apply_triton(logits, mask2d, v, None):
            logits[:, :v].masked_fill_(rejected_bits(mask2d, v), float("-inf"))
        return
    # Triton reads bitmask row i for logits row i: not for one bitmask row shared by several.
    one_to_one = mask2d.shape[0] > 1 or logits.shape[0] == 1
    if not pairs or (one_to_one and _apply_triton(logits, mask2d, v, [p[0] for p in pairs])):
        return
    lrows = torch.tensor([p[0] for p in pairs], device=logits.device, dtype=torch.long)
    brows = torch.tensor([p[1] for p in pairs], device=logits.device, dtype=torch.long)
    logits[lrows, :v] = logits[lrows, :v].masked_fill(rejected_bits(mask2d[brows], v), float("-inf"))


#: Set once Triton was found missing here; the torch operations serve from then on.
_triton_missing = False


def _apply_triton(logits: Any, mask: Any, v: int, rows: Optional[List[int]]) -> bool:
    """Masks CUDA logits with the Triton kernel (one launch, as XGrammar's default on CUDA);
    False, with nothing done, when the logits are not on a CUDA device, their last dimension is
    not contiguous, or Triton is missing."""
    global _triton_missing
    if _triton_missing or logits.device.type != "cuda" or logits.stride(-1) != 1 or mask.stride(-1) != 1:
        return False
    from .kernels.apply_token_bitmask_inplace_triton import apply_token_bitmask_inplace_triton

    try:
        apply_token_bitmask_inplace_triton(logits, mask, v, rows)
    except UnsupportedFeatureError:  # Triton missing: raised before anything is launched
        _triton_missing = True
        return False
    return True
