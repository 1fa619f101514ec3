"""``GrammarMatcher``: the per-sequence state of constrained decoding, and ``BatchGrammarMatcher``
for filling many rows in parallel Rust threads with the GIL released."""

from __future__ import annotations

import operator
import os
import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from . import bitmask as _bitmask
from .bitmask import _is_torch, as_int32_buffer, torch_int32_address
from .compiler import CompiledGrammar
from .exception import InvalidArgumentError

__all__ = ["GrammarMatcher", "BatchGrammarMatcher"]


_MAX_ROW = 2**63


def _row_index(index: Any) -> int:
    """A bitmask row index as a non-negative int (ValueError otherwise, not OverflowError)."""
    index = operator.index(index)
    if not 0 <= index < _MAX_ROW:
        raise ValueError(f"bitmask row index {index} is out of range")
    return index


class GrammarMatcher:
    """Tracks one sequence: which tokens are allowed next, accepting tokens, rollback.

    A rejected token or string returns False and leaves the state unchanged. Not thread-safe:
    use one matcher per sequence (they share the compiled grammar and its mask cache)."""

    def __init__(
        self,
        compiled_grammar: CompiledGrammar,
        *,
        override_stop_tokens: Union[None, int, List[int]] = None,
        terminate_without_stop_token: bool = False,
        max_rollback_tokens: int = -1,
        default_temperature: Optional[float] = None,
        max_tokens: Optional[int] = None,
    ) -> None:
        """``max_tokens``: a token budget (grammask extension). Masks then allow only tokens after
        which the grammar can still be completed and the stop token accepted within ``max_tokens``
        accepted tokens (the stop token included; ``accept_string`` counts as one), so sampling
        from the masks ends, valid, within the budget. ``ValueError`` when ``max_tokens`` is below
        the grammar's shortest completion. See ``docs/limits.md`` for the exact guarantee."""
        if not isinstance(compiled_grammar, CompiledGrammar):
            raise ValueError("The grammar should be compiled before passing it to GrammarMatcher.")
        if max_rollback_tokens != -1:
            warnings.warn(
                "max_rollback_tokens is deprecated and ignored: rollback is unlimited",
                DeprecationWarning,
                stacklevel=2,
            )
        if default_temperature is not None and not (default_temperature >= 0 and default_temperature != float("inf")):
            raise ValueError(f"default_temperature must be finite and >= 0, got {default_temperature}")
        if isinstance(override_stop_tokens, int):
            override_stop_tokens = [override_stop_tokens]
        if override_stop_tokens is not None and len(override_stop_tokens) == 0:
            raise ValueError("override_stop_tokens must not be empty")
        self._compiled = compiled_grammar
        self._temperature = default_temperature
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
        self._handle = _core.GrammarMatcher(
            compiled_grammar._handle, override_stop_tokens, terminate_without_stop_token, max_tokens
        )

    @classmethod
    def _from_handle(cls, handle: Any, compiled: CompiledGrammar, temperature: Optional[float]) -> "GrammarMatcher":
        m = cls.__new__(cls)
        m._handle, m._compiled, m._temperature = handle, compiled, temperature
        return m

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        """Accept one token id; False (state unchanged) if it is not allowed."""
        token_id = operator.index(token_id)
        if not 0 <= token_id < 2**32:
            return False  # out of range (huge or negative ids would overflow the binding)
        return self._handle.accept_token(token_id)

    def accept_string(self, input_str: Union[str, bytes], *, debug_print: bool = False) -> bool:
        """Accept text as one rollback step; all or nothing."""
        if isinstance(input_str, str):
            data = input_str.encode("utf-8")
        elif isinstance(input_str, (bytes, bytearray, memoryview)):
            data = bytes(input_str)
        else:
            raise InvalidArgumentError(f"input_str must be str or bytes, got {type(input_str).__name__}")
        return self._handle.accept_bytes(data)

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0, *, debug_print: bool = False) -> bool:
        """Write the allowed tokens into row ``index`` of ``bitmask`` (CPU int32, shape
        ``(B, ceil(V/32))`` or 1-D). Returns True unless every token is allowed."""
        # PERF: a memoized mask takes ~0.5 us in Rust; the checks here are kept to type tests
        # (the binding checks a numpy array's dtype, layout and the row itself; a torch tensor is
        # checked once per new tensor by `torch_int32_address`).
        if type(index) is not int or not 0 <= index < _MAX_ROW:
            index = _row_index(index)
        if type(bitmask) is np.ndarray:
            return self._handle.fill_next_token_bitmask(bitmask, index)
        if isinstance(bitmask, np.ndarray):
            return self._handle.fill_next_token_bitmask(as_int32_buffer(bitmask), index)
        # A torch tensor, by address (raises on anything else); the cached tensor's check inline.
        last, ptr, shape, _storage, rows, words = _bitmask._last_torch_address
        if bitmask is last and bitmask.data_ptr() == ptr and bitmask.shape == shape:
            return self._handle.fill_next_token_bitmask_at(ptr, rows, words, index)
        return self._handle.fill_next_token_bitmask_at(*torch_int32_address(bitmask), index)

    def traverse_draft_tree(
        self,
        retrieve_next_token: Any,
        retrieve_next_sibling: Any,
        draft_tokens: Any,
        token_bitmask: Any,
        time_threshold: float = -1.0,
        temperatures: Optional[Any] = None,
    ) -> bool:
        """Fill one bitmask row per node of a speculative-decoding draft tree.

        ``retrieve_next_token[i]`` / ``retrieve_next_sibling[i]`` are the first child and the next
        sibling of node ``i`` (``-1``: none), ``draft_tokens[i]`` its token; all 1-D int64.
        ``token_bitmask`` is CPU int32 of shape ``(num_nodes, ceil(vocab_size / 32))``. Node 0 is
        the current state; a child whose token its parent's row allows and the matcher accepts
        gets the mask after it, a rejected or terminating child a zero row (its subtree is
        skipped). ``temperatures`` (1-D float32, optional) gets each filled node's temperature,
        ``-1`` elsewhere. The state is unchanged afterwards. Returns False when the walk took
        longer than ``time_threshold`` seconds (``<= 0``: no limit). Details in
        :mod:`grammask.draft_tree`."""
        from .draft_tree import traverse_draft_tree

        return traverse_draft_tree(
            self,
            retrieve_next_token,
            retrieve_next_sibling,
            draft_tokens,
            token_bitmask,
            time_threshold,
            temperatures,
        )

    def get_captures(self, *, deduplicate: bool = True) -> List[Tuple[str, bytes]]:
        """The occurrences of captured rules (``rule[capture]`` / ``rule[capture="name"]``) in the
        accepted text, as ``(name, bytes)`` ordered by end then start. Only occurrences on a
        derivation of the whole accepted text are reported (an ambiguous prefix may have several);
        with ``deduplicate`` (the default), only the longest occurrence per name and start
        position. Follows rollback and reset. Empty when the grammar captures nothing."""
        return [(name, bytes(b)) for name, b in self._handle.get_captures(bool(deduplicate))]

    def find_jump_forward_string(self) -> str:
        """The longest text the grammar forces next ("" if there is a choice). No state change."""
        return self._handle.find_jump_forward_bytes().decode("utf-8")

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens/strings (including a stop token)."""
        self._handle.rollback(num_tokens)

    def is_terminated(self) -> bool:
        """A stop token was accepted (or, with ``terminate_without_stop_token``, the grammar is
        complete)."""
        return self._handle.is_terminated()

    def is_completed(self) -> bool:
        """The grammar could end here (a stop token would be accepted)."""
        return self._handle.is_completed()

    def reset(self) -> None:
        """Back to the start state, with an empty history."""
        self._handle.reset()

    def fork(self) -> "GrammarMatcher":
        """An independent copy of the state; the compiled grammar is shared."""
        return GrammarMatcher._from_handle(self._handle.fork(), self._compiled, self._temperature)

    @property
    def max_rollback_tokens(self) -> int:
        """Always -1: rollback is unlimited (deprecated in XGrammar)."""
        return -1

    @property
    def stop_token_ids(self) -> List[int]:
        """The ids that end generation for this matcher."""
        return list(self._handle.stop_token_ids)

    @property
    def temperature(self) -> Optional[float]:
        """The sampling temperature for the next token: that of the innermost active rule with a
        ``temperature`` option (around the parse positions that can read a byte; the maximum, with
        a warning, when ambiguous paths disagree), else ``default_temperature``, else None."""
        t, ambiguous = self._handle.rule_temperature()
        if t is None:
            return self._temperature
        if ambiguous:
            warnings.warn(
                f"Multiple active grammar paths specify different temperatures; using the maximum {t}",
                UserWarning,
                stacklevel=2,
            )
        return t

    # ------------------------------------------------------------------ XGrammar 0.1 names

    @staticmethod
    def allocate_token_bitmask(vocab_size: int, batch_size: int = 1) -> Any:
        """Deprecated (XGrammar 0.1): ``grammask.allocate_token_bitmask(batch_size, vocab_size)``
        (note the argument order)."""
        from ._legacy import deprecated
        from .bitmask import allocate_token_bitmask

        deprecated(
            "GrammarMatcher.allocate_token_bitmask(vocab_size, batch_size)",
            "grammask.allocate_token_bitmask(batch_size, vocab_size)",
        )
        return allocate_token_bitmask(batch_size, vocab_size)

    @staticmethod
    def apply_token_bitmask_inplace(logits: Any, bitmask: Any) -> None:
        """Deprecated (XGrammar 0.1): ``grammask.apply_token_bitmask_inplace(logits, bitmask)``."""
        from ._legacy import deprecated
        from .bitmask import apply_token_bitmask_inplace

        deprecated("GrammarMatcher.apply_token_bitmask_inplace", "grammask.apply_token_bitmask_inplace")
        apply_token_bitmask_inplace(logits, bitmask)

    @staticmethod
    def get_rejected_tokens_from_bitmask(bitmask: Any, vocab_size: int) -> List[int]:
        """Deprecated (XGrammar 0.1): the rejected ids of row 0,
        ``grammask.testing._get_masked_tokens_from_bitmask(bitmask, vocab_size)``."""
        from ._legacy import deprecated
        from .testing import _get_masked_tokens_from_bitmask

        deprecated(
            "GrammarMatcher.get_rejected_tokens_from_bitmask",
            "grammask.testing._get_masked_tokens_from_bitmask",
        )
        return _get_masked_tokens_from_bitmask(bitmask, vocab_size)

    @property
    def vocab_size(self) -> int:
        """Deprecated (XGrammar 0.1): ``compiled_grammar.tokenizer_info.vocab_size``."""
        from ._legacy import deprecated

        deprecated("GrammarMatcher.vocab_size", "compiled_grammar.tokenizer_info.vocab_size")
        return self._compiled._handle.tokenizer_info.vocab_size

    def _allowed_token_ids(self) -> List[int]:
        return list(self._handle.allowed_tokens())

    def _debug_print_internal_state(self) -> str:
        """A one-line summary of the state (XGrammar prints its parser stacks)."""
        return f"GrammarMatcher(accepted={self._handle.num_accepted}, completed={self.is_completed()}, terminated={self.is_terminated()})"


class BatchGrammarMatcher:
    """Fills the bitmask rows of many matchers at once, in parallel Rust threads; batch accept,
    rollback and temperature helpers with XGrammar's semantics."""

    def __init__(self, max_threads: Union[int, str] = "auto") -> None:
        if max_threads == "auto":
            max_threads = max(1, (os.cpu_count() or 2) // 2)
        if not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be 'auto' or an int >= 1, got {max_threads!r}")
        self.max_threads = max_threads

    def batch_fill_next_token_bitmask(
        self,
        matchers: Sequence[GrammarMatcher],
        bitmask: Any,
        indices: Optional[List[int]] = None,
        debug_print: bool = False,
    ) -> None:
        """Fill row ``indices[i]`` (or ``i``) of ``bitmask`` for ``matchers[i]``, in parallel with
        the GIL released."""
        if indices is not None:
            indices = [_row_index(i) for i in indices]
        _core.batch_fill_next_token_bitmask(
            [m._handle for m in matchers], as_int32_buffer(bitmask), indices, self.max_threads
        )

    @staticmethod
    def batch_fill_temperature(
        matchers: Sequence[GrammarMatcher], temperatures: Any, indices: Optional[List[int]] = None
    ) -> None:
        """Write each matcher's temperature (``-1`` when it has none) into a 1-D float32 CPU
        tensor: ``temperatures[indices[i]]`` for matcher ``i``, or ``temperatures[i]``."""
        if _is_torch(temperatures):
            if temperatures.device.type != "cpu" or not temperatures.is_contiguous():
                raise InvalidArgumentError("temperatures must be a contiguous CPU tensor")
            temperatures = temperatures.detach().numpy()
        if not isinstance(temperatures, np.ndarray) or temperatures.ndim != 1 or temperatures.dtype != np.float32:
            raise InvalidArgumentError("temperatures must be a 1-D float32 tensor")
        positions = list(range(len(matchers))) if indices is None else [operator.index(i) for i in indices]
        if len(positions) != len(matchers):
            raise InvalidArgumentError(f"got {len(matchers)} matchers but {len(positions)} indices")
        for pos in positions:
            if not 0 <= pos < temperatures.shape[0]:
                raise InvalidArgumentError(
                    f"the index {pos} is out of bounds for temperatures of size {temperatures.shape[0]}"
                )
        for m, pos in zip(matchers, positions):
            t = m.temperature
            temperatures[pos] = -1.0 if t is None else t

    @staticmethod
    def batch_accept_token(
        matchers: Sequence[GrammarMatcher], tokens: Sequence[int], debug_print: bool = False
    ) -> List[bool]:
        """``[m.accept_token(t) for m, t in zip(matchers, tokens)]``, in order (a matcher listed
        twice accepts both of its tokens). A length mismatch raises ``RuntimeError`` before any
        token is accepted."""
        if len(matchers) != len(tokens):
            raise InvalidArgumentError(f"got {len(matchers)} matchers but {len(tokens)} tokens")
        return [m.accept_token(t) for m, t in zip(matchers, tokens)]

    @staticmethod
    def batch_accept_string(
        matchers: Sequence[GrammarMatcher], strings: Sequence[Union[str, bytes]], debug_print: bool = False
    ) -> List[bool]:
        """``[m.accept_string(s) for m, s in zip(matchers, strings)]``, in order; each string is
        one rollback step of its matcher. A length mismatch raises ``RuntimeError`` first."""
        if len(matchers) != len(strings):
            raise InvalidArgumentError(f"got {len(matchers)} matchers but {len(strings)} strings")
        return [m.accept_string(s) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(matchers: Sequence[GrammarMatcher], num_tokens: Union[int, List[int]] = 1) -> None:
        """Roll matcher ``i`` back by ``num_tokens`` (an int for all, or one count each), in
        order. As in XGrammar, a count larger than a matcher's history raises ``RuntimeError``
        after the matchers before it were rolled back, and the ones after it are untouched."""
        if isinstance(num_tokens, int):
            counts = [num_tokens] * len(matchers)
        else:
            counts = [operator.index(n) for n in num_tokens]
        if len(counts) != len(matchers):
            raise InvalidArgumentError(f"got {len(matchers)} matchers but {len(counts)} rollback counts")
        for m, n in zip(matchers, counts):
            m.rollback(n)
