"""Hugging Face transformers integration: a ``LogitsProcessor`` that constrains ``generate()``.

Drop-in for ``xgrammar.contrib.hf.LogitsProcessor``: give it one compiled grammar (shared by every
row of the batch) or one per prompt. It is single-use: make a new one for each ``generate()`` call.

What ``generate()`` does that the processor must follow (transformers 4.38 to 5.x):

* the first call comes after the prompt's prefill and brings no sampled token; every later call
  brings the token sampled at the previous step as ``input_ids[:, -1]``;
* rows are prompts, left-padded, each repeated ``num_return_sequences`` times in a row;
* a row that has finished keeps being fed padding; its matcher is terminated and left alone;
* ``scores`` is ``(rows, config.vocab_size)``, which may be wider than the tokenizer: the ids past
  the vocabulary are masked out too, since no grammar can accept them.

Beam search (and anything else that reorders or regroups rows between steps) cannot work with a
per-row matcher: the processor refuses it on its first call, naming the cause, rather than failing
later with a rejected token.
"""

from __future__ import annotations

import sys
from typing import Any, List, Optional, Union

from ..bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from ..compiler import CompiledGrammar
from ..matcher import GrammarMatcher

try:  # subclass transformers' base class when it is installed, as generate() checks for it
    from transformers import LogitsProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without transformers
    _Base = object  # type: ignore[assignment,misc]

__all__ = ["LogitsProcessor"]

# generate()'s decoding loops that keep several hypotheses per prompt and reorder them.
_BEAM_LOOPS = frozenset(
    {"_beam_search", "_group_beam_search", "_constrained_beam_search", "beam_search"}
)


def _beam_search_in_caller() -> Optional[str]:
    """A description of the beam search that called us, if a frame of generate() shows one."""
    frame = sys._getframe(2)
    depth = 0
    while frame is not None and depth < 12:
        code = frame.f_code
        if code.co_name in _BEAM_LOOPS:
            return f"transformers' {code.co_name}()"
        config = frame.f_locals.get("generation_config")
        num_beams = getattr(config, "num_beams", None)
        if isinstance(num_beams, int) and num_beams > 1:
            return f"generate() with num_beams={num_beams}"
        frame = frame.f_back
        depth += 1
    return None


class LogitsProcessor(_Base):  # type: ignore[misc,valid-type]
    """Masks the scores of tokens the grammar does not allow at each generation step."""

    # One matcher per row, created on the first call: continuous batching would need per-request
    # state, which this processor does not keep.
    supports_continuous_batching = False

    def __init__(self, compiled_grammar: Union[CompiledGrammar, List[CompiledGrammar]]) -> None:
        self.compiled_grammars = (
            compiled_grammar if isinstance(compiled_grammar, list) else [compiled_grammar]
        )
        if not self.compiled_grammars:
            raise ValueError("give at least one compiled grammar")
        self.full_vocab_size = self.compiled_grammars[0].tokenizer_info.vocab_size
        for g in self.compiled_grammars[1:]:
            if g.tokenizer_info.vocab_size != self.full_vocab_size:
                raise ValueError("all compiled grammars must share one vocabulary size")
        self.matchers: Optional[List[GrammarMatcher]] = None
        self.token_bitmask: Any = None
        self.prefix_len: Optional[int] = None
        self.batch_size = 0
        self._previous_ids: Any = None  # input_ids of the previous call, to detect reordering

    def _start(self, input_ids: Any) -> None:
        how = _beam_search_in_caller()
        if how is not None:
            raise ValueError(
                f"grammask's LogitsProcessor does not support beam search ({how}): beams are "
                "reordered between steps and each row's grammar state would follow the wrong "
                "hypothesis. Use greedy decoding or sampling (num_beams=1)."
            )
        self.batch_size = input_ids.shape[0]
        grammars = self.compiled_grammars
        if self.batch_size % len(grammars) != 0:
            raise ValueError(
                f"got {len(grammars)} compiled grammars for a batch of {self.batch_size}: give one "
                "grammar, or one per prompt (each prompt's rows then share it)"
            )
        per_prompt = self.batch_size // len(grammars)  # num_return_sequences
        self.matchers = [
            GrammarMatcher(grammars[row // per_prompt]) for row in range(self.batch_size)
        ]
        self.token_bitmask = allocate_token_bitmask(self.batch_size, self.full_vocab_size)
        self.prefix_len = input_ids.shape[1]

    def _check_same_rows(self, input_ids: Any) -> None:
        previous = self._previous_ids
        if input_ids.shape[0] != self.batch_size:
            raise ValueError(
                f"the batch changed from {self.batch_size} to {input_ids.shape[0]} rows between "
                "steps; grammask's LogitsProcessor needs the same rows at every step (no beam "
                "search, no continuous batching) and is single-use: make a new one per generate()"
            )
        if input_ids.shape[1] != previous.shape[1] + 1 or not bool(
            (input_ids[:, :-1] == previous).all()
        ):
            raise ValueError(
                "the rows of input_ids were reordered or rewritten between steps (beam search or "
                "another batch reordering); grammask's LogitsProcessor follows each row's tokens "
                "and supports only greedy decoding and sampling. It is also single-use: make a "
                "new one for each generate() call"
            )

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Masks ``scores`` (batch, vocab) in place for the next step and returns them; on later
        calls first accepts the tokens ``generate()`` appended to ``input_ids``."""
        if self.matchers is None:
            self._start(input_ids)
        else:
            self._check_same_rows(input_ids)
            # Every call after the first brings the token sampled at the previous step.
            last = input_ids[:, -1].tolist()
            for i, m in enumerate(self.matchers):
                if not m.is_terminated() and not m.accept_token(last[i]):
                    raise RuntimeError(
                        f"row {i}: the grammar rejected token {last[i]}, which its mask allowed at "
                        "the previous step; was a token sampled from unmasked scores?"
                    )
        self._previous_ids = input_ids
        matchers = self.matchers
        assert matchers is not None
        live = []
        for i, m in enumerate(matchers):
            # Terminated rows keep whatever the model wants (generate() pads them anyway).
            if not m.is_terminated():
                m.fill_next_token_bitmask(self.token_bitmask, i)
                live.append(i)
        if not live:
            return scores
        width = scores.shape[-1]
        covered = min(width, self.full_vocab_size)
        mask = self.token_bitmask
        if getattr(scores, "device", None) is not None and scores.device.type != "cpu":
            mask = mask.to(scores.device, non_blocking=True)
        apply_token_bitmask_inplace(scores, mask, vocab_size=covered, indices=live)
        if width > covered:
            # Logits past the vocabulary (an output layer padded beyond the tokenizer) are not
            # tokens any grammar accepts.
            scores[live, covered:] = float("-inf")
        return scores
