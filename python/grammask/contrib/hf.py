"""Hugging Face transformers integration: a ``LogitsProcessor`` that constrains ``generate()``.

Drop-in for ``xgrammar.contrib.hf.LogitsProcessor``: give it one compiled grammar (shared by every
row of the batch) or one per row. It is single-use: make a new one for each ``generate()`` call.
"""

from __future__ import annotations

from typing import List, Optional, Union

from ..bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from ..compiler import CompiledGrammar
from ..matcher import GrammarMatcher

try:  # subclass transformers' base class when it is installed, as generate() checks for it
    from transformers import LogitsProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without transformers
    _Base = object  # type: ignore[assignment,misc]

__all__ = ["LogitsProcessor"]


class LogitsProcessor(_Base):  # type: ignore[misc,valid-type]
    """Masks the scores of tokens the grammar does not allow at each generation step.

    Pass it to ``model.generate(..., logits_processor=[LogitsProcessor(compiled)])``. It is
    single-use: make a new one for each ``generate()`` call. Rows whose matcher has terminated
    are left unmasked (``generate()`` pads them).

    Args:
        compiled_grammar: one compiled grammar for every row of the batch, or a list with one
            per row.
    """

    def __init__(self, compiled_grammar: Union[CompiledGrammar, List[CompiledGrammar]]) -> None:
        self.compiled_grammars = (
            compiled_grammar if isinstance(compiled_grammar, list) else [compiled_grammar]
        )
        self.full_vocab_size = self.compiled_grammars[0].tokenizer_info.vocab_size
        self.matchers: Optional[List[GrammarMatcher]] = None
        self.token_bitmask = None
        self.prefix_len: Optional[int] = None
        self.batch_size = 0

    def __call__(self, input_ids, scores):
        """Accept each row's last sampled token, then mask ``scores`` in place.

        The first call sets up one matcher per row; every later call first feeds each live
        matcher the token ``generate()`` sampled at the previous step.

        Args:
            input_ids (torch.Tensor): the token ids so far, shape ``(batch, length)``.
            scores (torch.Tensor): the next-token scores, shape ``(batch, vocab_size)``, on any device.

        Returns:
            scores (torch.Tensor): the same tensor, with disallowed tokens set to ``-inf``.

        Raises:
            ValueError: the number of compiled grammars is neither 1 nor the batch size.
            RuntimeError: a row's matcher rejected a token its mask allowed (a bug).
        """
        import torch

        if self.matchers is None:
            self.batch_size = input_ids.shape[0]
            grammars = self.compiled_grammars
            if len(grammars) == 1:
                grammars = grammars * self.batch_size
            if len(grammars) != self.batch_size:
                raise ValueError(f"got {len(grammars)} compiled grammars for a batch of {self.batch_size}")
            self.matchers = [GrammarMatcher(g) for g in grammars]
            self.token_bitmask = allocate_token_bitmask(self.batch_size, self.full_vocab_size)
            self.prefix_len = input_ids.shape[1]
        else:
            # Every call after the first brings the token sampled at the previous step.
            for i, m in enumerate(self.matchers):
                if not m.is_terminated():
                    token = int(input_ids[i][-1])
                    if not m.accept_token(token):
                        raise RuntimeError(f"row {i}: the grammar rejected token {token}, which its mask allowed")
        for i, m in enumerate(self.matchers):
            if not m.is_terminated():
                m.fill_next_token_bitmask(self.token_bitmask, i)
        # Terminated rows keep whatever the model wants (generate() pads them anyway).
        device_mask = self.token_bitmask.to(scores.device) if isinstance(scores, torch.Tensor) else self.token_bitmask
        live = [i for i, m in enumerate(self.matchers) if not m.is_terminated()]
        if live:
            apply_token_bitmask_inplace(scores, device_mask, indices=live)
        return scores
