"""Speculative decoding: one bitmask row per node of a draft token tree.

:meth:`GrammarMatcher.traverse_draft_tree` walks a draft tree (the EAGLE/SGLang layout: for each
node, the index of its first child and of its next sibling) depth-first from the matcher's current
state. It takes XGrammar 0.2.8's tensor contract: ``int64`` 1-D tree tensors, a 2-D CPU ``int32``
bitmask with one row per node, an optional 1-D ``float32`` temperature tensor. numpy arrays work
wherever torch tensors do.

Per node, with ``B`` the bitmask:

* node 0 is the root: its draft token is ignored (it is the token already sampled) and ``B[0]`` is
  the mask of the current state; a terminated matcher zeroes ``B[0]`` and stops;
* a child is *accepted* when its token is allowed by its parent's row and the matcher accepts it;
  then ``B[i]`` is the mask after it, the walk recurses into its children and rolls the token back;
* a rejected child, or one after which the matcher is terminated (a stop token, or any complete
  sentence with ``terminate_without_stop_token``), gets ``B[i] = 0`` and its subtree is skipped:
  those rows, and the rows of nodes the root cannot reach, are left as they were;
* ``temperatures`` is first filled with ``-1``; each node given a mask gets the matcher's
  temperature in that node's state (``-1`` when it has none).

The matcher's state is the same after the call as before. With ``time_threshold > 0`` the clock
is read before each non-root node; past the threshold the walk stops and returns False.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional

import numpy as np

from .bitmask import _is_torch, as_int32_buffer
from .exception import InvalidArgumentError

__all__ = ["traverse_draft_tree"]


def _tree_array(x: Any, name: str) -> np.ndarray:
    """A 1-D int64 tree tensor as a numpy array (a copy is fine: it is only read)."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise InvalidArgumentError(f"{name} must be on the CPU, got device {x.device}")
        x = x.detach().numpy()
    if not isinstance(x, np.ndarray):
        raise InvalidArgumentError(
            f"{name} must be a torch tensor or numpy array, got {type(x).__name__}"
        )
    if x.ndim != 1 or x.dtype != np.int64:
        raise InvalidArgumentError(
            f"{name} must be a 1-D int64 tensor, got shape {x.shape} dtype {x.dtype}"
        )
    return x


def _float32_view(x: Any, name: str) -> np.ndarray:
    """A writable numpy view of a 1-D float32 CPU tensor."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise InvalidArgumentError(f"{name} must be on the CPU, got device {x.device}")
        if not x.is_contiguous():
            raise InvalidArgumentError(f"{name} must be contiguous")
        x = x.detach().numpy()
    if not isinstance(x, np.ndarray) or x.ndim != 1 or x.dtype != np.float32:
        raise InvalidArgumentError(f"{name} must be a 1-D float32 tensor")
    return x


def _validate_tree(next_token: np.ndarray, next_sibling: np.ndarray, draft: np.ndarray) -> int:
    """Check the tree shape; the number of nodes."""
    n = len(next_token)
    if len(next_sibling) != n:
        raise InvalidArgumentError(
            f"retrieve_next_token ({n}) and retrieve_next_sibling ({len(next_sibling)}) "
            "must have the same length"
        )
    if len(draft) != n:
        raise InvalidArgumentError(
            f"retrieve_next_token ({n}) and draft_tokens ({len(draft)}) must have the same length"
        )
    if n == 0:
        raise InvalidArgumentError("the draft tree must not be empty")
    for name, arr in (("retrieve_next_token", next_token), ("retrieve_next_sibling", next_sibling)):
        bad = np.flatnonzero((arr < -1) | (arr >= n))
        if bad.size:
            i = int(bad[0])
            raise InvalidArgumentError(
                f"{name}[{i}] = {int(arr[i])} is out of bounds: it should be in [-1, {n})"
            )
    if next_sibling[0] != -1:
        raise InvalidArgumentError("the root node (node 0) must not have siblings")
    targets = np.concatenate([next_token[next_token >= 0], next_sibling[next_sibling >= 0]])
    in_degree = np.bincount(targets, minlength=n)
    if in_degree[0] != 0:
        raise InvalidArgumentError("the root node must not be the child or sibling of a node")
    shared = np.flatnonzero(in_degree > 1)
    if shared.size:
        i = int(shared[0])
        raise InvalidArgumentError(
            f"node {i} is the target of {int(in_degree[i])} retrieve_next_token / "
            "retrieve_next_sibling "
            "entries; the draft tree must not contain cycles or shared nodes"
        )
    return n


def traverse_draft_tree(
    matcher: Any,
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    token_bitmask: Any,
    time_threshold: float = -1.0,
    temperatures: Optional[Any] = None,
) -> bool:
    """The body of :meth:`grammask.GrammarMatcher.traverse_draft_tree` (see the module doc).

    Raises :class:`~grammask.InvalidArgumentError` (a ``RuntimeError`` and a ``ValueError``)
    for a malformed tree or buffer, before anything is written."""
    next_token = _tree_array(retrieve_next_token, "retrieve_next_token")
    next_sibling = _tree_array(retrieve_next_sibling, "retrieve_next_sibling")
    draft = _tree_array(draft_tokens, "draft_tokens")
    if _is_torch(token_bitmask) or isinstance(token_bitmask, np.ndarray):
        if token_bitmask.ndim != 2:
            raise InvalidArgumentError("token_bitmask must be a 2-D int32 tensor")
    try:
        bitmask = as_int32_buffer(token_bitmask)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"token_bitmask: {e}") from None
    n = _validate_tree(next_token, next_sibling, draft)
    if bitmask.shape[0] != n:
        raise InvalidArgumentError(
            f"the token_bitmask has {bitmask.shape[0]} rows; it must have one per node ({n})"
        )
    vocab_size = matcher._compiled._handle.tokenizer_info.vocab_size
    width = (vocab_size + 31) // 32
    if bitmask.shape[1] != width:
        raise InvalidArgumentError(
            f"the token_bitmask must have shape ({n}, {width}), got {bitmask.shape}"
        )
    temps = None
    if temperatures is not None:
        temps = _float32_view(temperatures, "temperatures")
        if len(temps) != n:
            raise InvalidArgumentError(
                f"temperatures has {len(temps)} entries; it must have one per node ({n})"
            )
        temps.fill(-1.0)
    temperature = matcher.temperature
    node_temperature = -1.0 if temperature is None else float(temperature)

    handle = matcher._handle
    if handle.is_terminated():
        bitmask[0].fill(0)
        return True
    handle.fill_next_token_bitmask(bitmask, 0)
    if temps is not None:
        temps[0] = node_temperature

    start = time.monotonic()
    # Iterative DFS. `frames[k]` is (node whose children are being visited, next child to visit);
    # every frame above the root holds one accepted token to roll back when it is popped.
    frames: List[List[int]] = [[0, int(next_token[0])]]
    while frames:
        frame = frames[-1]
        parent, child = frame
        if child == -1:
            frames.pop()
            if parent != 0:
                handle.rollback(1)
            continue
        frame[1] = int(next_sibling[child])
        if time_threshold > 0 and time.monotonic() - start > time_threshold:
            if len(frames) > 1:
                handle.rollback(len(frames) - 1)
            return False
        token = int(draft[child])
        allowed = 0 <= token < vocab_size and (int(bitmask[parent, token >> 5]) >> (token & 31)) & 1
        if not allowed or not handle.accept_token(token):
            bitmask[child].fill(0)
            continue
        if handle.is_terminated():
            bitmask[child].fill(0)
            handle.rollback(1)
            continue
        handle.fill_next_token_bitmask(bitmask, child)
        if temps is not None:
            # Per-rule temperatures depend on the node's state.
            t = matcher.temperature
            temps[child] = -1.0 if t is None else float(t)
        frames.append([child, int(next_token[child])])
    return True
