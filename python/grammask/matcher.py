"""``GrammarMatcher``: the per-sequence state of constrained decoding, and ``BatchGrammarMatcher``
for filling many rows in parallel Rust threads with the GIL released."""

from __future__ import annotations

import operator
import os
import warnings
from typing import Any, List, Optional, Sequence, Union

from . import _core
from .bitmask import as_int32_buffer
from .compiler import CompiledGrammar

__all__ = ["GrammarMatcher", "BatchGrammarMatcher"]


def _row_index(index: Any) -> int:
    """A bitmask row index as a non-negative int (ValueError otherwise, not OverflowError)."""
    index = operator.index(index)
    if not 0 <= index < 2**63:
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
        data = input_str.encode("utf-8") if isinstance(input_str, str) else bytes(input_str)
        return self._handle.accept_bytes(data)

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0, *, debug_print: bool = False) -> bool:
        """Write the allowed tokens into row ``index`` of ``bitmask`` (CPU int32, shape
        ``(B, ceil(V/32))`` or 1-D). Returns True unless every token is allowed."""
        return self._handle.fill_next_token_bitmask(as_int32_buffer(bitmask), _row_index(index))

    def find_jump_forward_string(self) -> str:
        """The longest text the grammar forces next ("" if there is a choice). No state change."""
        return self._handle.find_jump_forward_bytes().decode("utf-8")

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens/strings (including a stop token)."""
        self._handle.rollback(num_tokens)

    def is_terminated(self) -> bool:
        return self._handle.is_terminated()

    def is_completed(self) -> bool:
        """The grammar could end here (a stop token would be accepted)."""
        return self._handle.is_completed()

    def reset(self) -> None:
        self._handle.reset()

    def fork(self) -> "GrammarMatcher":
        """An independent copy of the state; the compiled grammar is shared."""
        return GrammarMatcher._from_handle(self._handle.fork(), self._compiled, self._temperature)

    @property
    def max_rollback_tokens(self) -> int:
        return -1

    @property
    def stop_token_ids(self) -> List[int]:
        return list(self._handle.stop_token_ids)

    @property
    def temperature(self) -> Optional[float]:
        return self._temperature

    def _allowed_token_ids(self) -> List[int]:
        return list(self._handle.allowed_tokens())

    def _debug_print_internal_state(self) -> str:
        return f"GrammarMatcher(accepted={self._handle.num_accepted}, completed={self.is_completed()}, terminated={self.is_terminated()})"


class BatchGrammarMatcher:
    """Fills the bitmask rows of many matchers at once, in parallel Rust threads."""

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
        if indices is not None:
            indices = [_row_index(i) for i in indices]
        _core.batch_fill_next_token_bitmask(
            [m._handle for m in matchers], as_int32_buffer(bitmask), indices, self.max_threads
        )

    @staticmethod
    def batch_accept_token(matchers: Sequence[GrammarMatcher], tokens: Sequence[int], debug_print: bool = False) -> List[bool]:
        if len(matchers) != len(tokens):
            raise RuntimeError(f"got {len(matchers)} matchers but {len(tokens)} tokens")
        return [m.accept_token(t) for m, t in zip(matchers, tokens)]

    @staticmethod
    def batch_accept_string(
        matchers: Sequence[GrammarMatcher], strings: Sequence[Union[str, bytes]], debug_print: bool = False
    ) -> List[bool]:
        if len(matchers) != len(strings):
            raise RuntimeError(f"got {len(matchers)} matchers but {len(strings)} strings")
        return [m.accept_string(s) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(matchers: Sequence[GrammarMatcher], num_tokens: Union[int, List[int]] = 1) -> None:
        counts = [num_tokens] * len(matchers) if isinstance(num_tokens, int) else list(num_tokens)
        if len(counts) != len(matchers):
            raise RuntimeError(f"got {len(matchers)} matchers but {len(counts)} rollback counts")
        for m, n in zip(matchers, counts):
            m.rollback(n)
