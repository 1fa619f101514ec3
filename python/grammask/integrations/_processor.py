"""The single-use logits processor shared by the llama.cpp and MLX integrations."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..matcher import GrammarMatcher

if TYPE_CHECKING:
    from ..compiler import CompiledGrammar


class SequenceProcessor(ABC):
    """Constrains one generation to a compiled grammar (single-use: make one per generation).

    The first call notes how many tokens the sequence has (the prompt); each later call accepts
    the tokens sampled since, then masks the logits. Once the grammar has terminated (a stop
    token was sampled) the logits are left alone. Ids past the grammar's vocabulary (a padded
    output layer) are masked out. Subclasses say how to read the ids (``_ids``) and how to mask
    the logits with ``self.token_bitmask`` (``_apply``).
    """

    def __init__(self, compiled_grammar: "CompiledGrammar") -> None:
        self.matcher = GrammarMatcher(compiled_grammar)
        self.vocab_size = compiled_grammar.tokenizer_info.vocab_size
        self.token_bitmask = np.full((1, (self.vocab_size + 31) // 32), -1, dtype=np.int32)
        self._seen: Optional[int] = None
        self._calls = 0
        self._seconds = 0.0  # spent in accept + fill + apply (not waiting for the model's tokens)

    @abstractmethod
    def _ids(self, tokens: Any) -> np.ndarray:
        """The sequence's token ids as a 1-D array (materializing them ends the model's step)."""

    @abstractmethod
    def _apply(self, logits: Any, covered: int) -> None:
        """Masks ``logits[..., :covered]`` in place with row 0 of ``self.token_bitmask``."""

    def __call__(self, tokens: Any, logits: Any) -> Any:
        try:
            ids = self._ids(tokens)
            start = time.perf_counter()  # the ids are materialized: the model's step is done
            try:
                return self._constrain(ids, logits)
            finally:
                self._seconds += time.perf_counter() - start
        finally:
            self._calls += 1

    def _constrain(self, ids: np.ndarray, logits: Any) -> Any:
        if self._seen is None:
            self._seen = len(ids)
        else:
            for token in ids[self._seen :].tolist():
                if self.matcher.is_terminated():
                    break
                if not self.matcher.accept_token(int(token)):
                    raise RuntimeError(
                        f"the grammar rejected token {token}, which its mask allowed; is this "
                        "processor shared between generations? Make one per call."
                    )
            self._seen = len(ids)
        if self.matcher.is_terminated():
            return logits
        self.matcher.fill_next_token_bitmask(self.token_bitmask, 0)
        width = logits.shape[-1]
        covered = min(width, self.vocab_size)
        self._apply(logits, covered)
        if width > covered:
            logits[..., covered:] = -np.inf
        return logits

    def stats(self) -> str:
        """Calls so far and the mean time grammask spent per call (accept + fill + apply)."""
        per = 1e6 * self._seconds / max(1, self._calls)
        return f"{self._calls} calls, {per:.1f} us/call"
