"""The constrained decode loop shared by ``grammask demo`` and ``grammask serve``.

Takes a ``transformers`` causal LM, prompt token ids and (optionally) a future that yields a
:class:`~grammask.CompiledGrammar`; produces a :class:`Generation`: the tokens, why decoding
stopped, and the time spent in the grammar versus in the model. The grammar is compiled while the
prompt is prefilled (the caller starts the compile in another thread and passes its future).

The token budget: ``max_tokens`` counts every generated token, the stop token included. When
``GrammarMatcher`` accepts ``max_tokens=`` (the token-budget feature) the matcher enforces it.
Otherwise :class:`Closer` does: it estimates how many tokens a greedy "close the structure"
policy needs from the current state (on a forked matcher), and once a sampled token would leave
too few, decoding switches to that policy, which ends in a completed grammar. ``finish_reason``
is ``"stop"`` when the grammar (or the model) ended the output, ``"length"`` when the budget ran
out first; ``budget_closed`` says the closing policy was used.
"""

from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from ..bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from ..compiler import CompiledGrammar
from ..matcher import GrammarMatcher
from ..tokenizer_info import TokenizerInfo

__all__ = [
    "Closer",
    "ClosingState",
    "Generation",
    "generate",
    "make_matcher",
    "matcher_has_token_budget",
]

# Characters that end a structure, best first: a string quote, then brackets. Then, one character at
# a time: a separator (only offered where a required member is still missing), a short value.
_CLOSING_CHARS = b'"]}'
_SHORT_VALUE_CHARS = b",0:"
# How far past the estimated closing length the estimate is refreshed every token.
_GUARD_MARGIN = 48
_REFRESH_EVERY = 8


def matcher_has_token_budget() -> bool:
    """Whether this build's ``GrammarMatcher`` takes ``max_tokens=`` (the token-budget feature)."""
    try:
        return "max_tokens" in inspect.signature(GrammarMatcher.__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False


def make_matcher(compiled: CompiledGrammar, max_tokens: int) -> "tuple[GrammarMatcher, bool]":
    """A matcher for one sequence, and whether it enforces ``max_tokens`` itself."""
    if matcher_has_token_budget():
        try:
            return GrammarMatcher(compiled, max_tokens=max_tokens), True  # type: ignore[call-arg]
        except TypeError:
            pass
        except ValueError:
            # The matcher refuses a budget below the grammar's shortest completion
            # (`InvalidArgumentError`); decode unbudgeted, which ends with "length".
            pass
    return GrammarMatcher(compiled), False


class Closer:
    """A greedy policy that drives a matcher to a completed state, and the estimate of how many
    tokens it needs. Built once per vocabulary (it ranks the tokens made of closing characters)."""

    def __init__(self, info: TokenizerInfo) -> None:
        vocab = info.decoded_vocab
        special = set(info.special_token_ids)
        self.vocab_size = info.vocab_size
        self.stop_ids = list(info.stop_token_ids)
        ranked = []
        for tid, piece in enumerate(vocab):
            if tid in special or not piece:
                continue
            if all(b in _CLOSING_CHARS for b in piece):
                ranked.append(((0, _CLOSING_CHARS.index(piece[0]), -len(piece)), tid))
            elif len(piece) == 1 and piece[0] in _SHORT_VALUE_CHARS:
                ranked.append(((1, _SHORT_VALUE_CHARS.index(piece[0]), 0), tid))
        ranked.sort()
        #: Token ids made only of closing characters (then short values), best first.
        self.closers = np.array([tid for _, tid in ranked], dtype=np.int64)
        lengths = np.zeros(info.vocab_size, dtype=np.int32)
        for tid, piece in enumerate(vocab):
            if tid not in special:
                lengths[tid] = len(piece)
        self._lengths = lengths
        self._is_space = np.array(
            [bool(p) and p.isspace() for p in vocab] + [False] * (info.vocab_size - len(vocab))
        )

    def _allowed(self, bitmask: Any) -> np.ndarray:
        bits = np.unpackbits(np.asarray(bitmask).reshape(-1).view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.vocab_size])

    def pick(
        self, matcher: GrammarMatcher, bitmask: Any, policy: Optional["ClosingState"] = None
    ) -> int:
        """The closing policy's token for ``matcher`` whose mask is in ``bitmask`` (1 row).

        Order: a stop token (the grammar can end); a token made of closing characters; a token
        after which the grammar can end; the longest non-space token. When the same token has been
        picked three times in a row without ending (closing characters inside free text), the
        next pick commits instead: it prefers a token after which the grammar forces text (a
        trigger or tag opening, which leads on to the tag's end)."""
        policy = policy if policy is not None else ClosingState()
        token = self._pick(matcher, bitmask, policy.commit)
        policy.update(token)
        return token

    def _pick(self, matcher: GrammarMatcher, bitmask: Any, commit: bool) -> int:
        words = np.asarray(bitmask).reshape(-1)
        for s in self.stop_ids:
            if (words[s >> 5] >> (s & 31)) & 1:
                return s
        allowed = None
        if commit:
            allowed = self._allowed(bitmask)
            allowed = allowed[(self._lengths[allowed] > 0) & ~self._is_space[allowed]]
            for tid in allowed[np.argsort(self._lengths[allowed], kind="stable")][:64]:
                probe = matcher.fork()
                if probe.accept_token(int(tid)) and probe.find_jump_forward_string():
                    return int(tid)
        if len(self.closers):
            hit = (words[self.closers >> 5] >> (self.closers & 31)) & 1
            idx = np.flatnonzero(hit)
            if len(idx):
                return int(self.closers[idx[0]])
        allowed = self._allowed(bitmask)
        allowed = allowed[self._lengths[allowed] > 0]
        if len(allowed) == 0:
            return int(self._allowed(bitmask)[0])
        # A token after which the grammar can end wins; else the longest non-space token (a
        # forced keyword or key is taken in as few tokens as possible).
        order = allowed[np.argsort(self._lengths[allowed], kind="stable")]
        for tid in order[:32]:
            probe = matcher.fork()
            if probe.accept_token(int(tid)) and probe.is_completed():
                return int(tid)
        non_space = order[~self._is_space[order]]
        return int((non_space if len(non_space) else order)[-1])

    def closing_length(self, matcher: GrammarMatcher, limit: int) -> Optional[int]:
        """Tokens the closing policy needs from ``matcher``'s state (stop token included), or
        None if it needs more than ``limit``. Works on a fork; ``matcher`` is unchanged. The
        policy is deterministic, so following :meth:`pick` from the same state with a fresh
        :class:`ClosingState` takes exactly this many tokens."""
        probe = matcher.fork()
        policy = ClosingState()
        scratch = allocate_token_bitmask(1, self.vocab_size)  # per call: decode threads share self
        for n in range(1, limit + 1):
            if probe.is_completed():
                return n
            probe.fill_next_token_bitmask(scratch)
            tid = self.pick(probe, scratch, policy)
            if not probe.accept_token(tid):  # pragma: no cover - the mask allowed it
                return None
        return None


class ClosingState:
    """The closing policy's memory: the last token, how often it repeated, commit mode."""

    def __init__(self) -> None:
        self.last, self.repeats, self.commit = -1, 0, False

    def update(self, token: int) -> None:
        if self.commit:  # one committing pick, then back to closing
            self.last, self.repeats, self.commit = token, 0, False
            return
        self.repeats = self.repeats + 1 if token == self.last else 0
        self.last = token
        self.commit = self.repeats >= 2


@dataclass
class Generation:
    """What one decode produced and what it cost."""

    token_ids: List[int] = field(default_factory=list)  # stop token excluded
    finish_reason: str = "length"
    prompt_tokens: int = 0
    completion_tokens: int = 0  # stop token included
    budget_closed: bool = False
    grammar_completed: Optional[bool] = None  # None without a grammar
    prefill_s: float = 0.0
    grammar_init_s: float = 0.0  # compile + matcher creation (overlapped with prefill)
    grammar_wait_s: float = 0.0  # time the decode waited for the compile after prefill
    grammar_s: float = 0.0  # mask fill + mask apply + accept (+ closing picks once closing)
    budget_s: float = 0.0  # the token-budget fallback's look-ahead (Closer.closing_length)
    model_s: float = 0.0  # decode forward passes + sampling
    cancelled: bool = False

    @property
    def grammar_per_token_s(self) -> float:
        return self.grammar_s / max(1, self.completion_tokens)

    @property
    def budget_per_token_s(self) -> float:
        return self.budget_s / max(1, self.completion_tokens)

    @property
    def model_per_token_s(self) -> float:
        return self.model_s / max(1, self.completion_tokens)


def _forward(model: Any, ids: Any, cache: Any, cache_arg: str) -> "tuple[Any, Any]":
    """One forward pass; (new cache, last-position logits). ``cache_arg`` is the keyword the
    model takes its KV cache by (``cache`` in transformers 5.x, ``past_key_values`` before)."""
    kwargs = {cache_arg: cache} if cache is not None else {}
    out = model(input_ids=ids, use_cache=True, **kwargs)
    new_cache = getattr(out, "cache", None)
    if new_cache is None:
        new_cache = out.past_key_values
    return new_cache, out.logits[0, -1]


def _cache_arg(model: Any) -> str:
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _sample(logits: Any, temperature: float, top_p: float, generator: Any) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < top_p
        keep[0] = True
        probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=generator))


def generate(
    model: Any,
    prompt_ids: Sequence[int],
    *,
    info: TokenizerInfo,
    compile_future: Any = None,
    closer: Optional[Closer] = None,
    max_tokens: int = 256,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: Optional[int] = None,
    stop_ids: Optional[Sequence[int]] = None,
    cancel: Optional[threading.Event] = None,
    on_token: Optional[Callable[[int], None]] = None,
) -> Generation:
    """Decode up to ``max_tokens`` tokens after ``prompt_ids``. ``compile_future`` (anything with
    ``.result()`` returning a ``CompiledGrammar``, or None for unconstrained text) is awaited after
    the prefill. ``on_token`` is called with each output token (not the stop token)."""
    import torch

    gen = Generation(prompt_tokens=len(prompt_ids))
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(
        seed if seed is not None else int(time.time_ns() % 2**31)
    )
    stops = set(stop_ids if stop_ids is not None else info.stop_token_ids)
    vocab_size = info.vocab_size

    with torch.inference_mode():
        cache_arg = _cache_arg(model)
        device = next(model.parameters()).device
        start = time.perf_counter()
        past, logits = _forward(
            model,
            torch.tensor([list(prompt_ids)], dtype=torch.long, device=device),
            None,
            cache_arg,
        )
        gen.prefill_s = time.perf_counter() - start

        matcher = bitmask = None
        own_budget = False
        if compile_future is not None:
            start = time.perf_counter()
            compiled, compile_s = compile_future.result()
            gen.grammar_wait_s = time.perf_counter() - start
            start = time.perf_counter()
            matcher, own_budget = make_matcher(compiled, max_tokens)
            bitmask = allocate_token_bitmask(1, vocab_size)
            gen.grammar_init_s = compile_s + time.perf_counter() - start
            stops = set(matcher.stop_token_ids)
            if closer is None and not own_budget:
                closer = Closer(info)
        guarded = matcher is not None and not own_budget
        b0 = time.perf_counter()
        estimate = closer.closing_length(matcher, max_tokens) if guarded else None
        gen.budget_s += time.perf_counter() - b0
        closing = False
        policy = ClosingState()
        since_estimate = 0

        for step in range(max_tokens):
            if cancel is not None and cancel.is_set():
                gen.cancelled = True
                gen.finish_reason = "cancelled"
                break
            remaining = max_tokens - step  # tokens left, this one included
            if matcher is not None:
                # grammar time = this block minus sampling (model) and the budget look-ahead
                g0 = time.perf_counter()
                t_sample = t_budget = 0.0
                matcher.fill_next_token_bitmask(bitmask)
                if closing:
                    token = closer.pick(matcher, bitmask, policy)
                else:
                    row = logits[:vocab_size].clone() if logits.shape[-1] != vocab_size else logits
                    apply_token_bitmask_inplace(row, bitmask)
                    g1 = time.perf_counter()
                    token = _sample(row, temperature, top_p, generator)
                    g2 = time.perf_counter()
                    t_sample = g2 - g1
                    if guarded and token not in stops:
                        since_estimate += 1
                        near = estimate is None or remaining - 1 <= estimate + _GUARD_MARGIN
                        if near or since_estimate >= _REFRESH_EVERY:
                            probe = matcher.fork()
                            probe.accept_token(token)
                            estimate = closer.closing_length(probe, remaining - 1)
                            since_estimate = 0
                            if estimate is None:  # this token would leave too few: close now
                                closing = gen.budget_closed = True
                                token = closer.pick(matcher, bitmask, policy)
                    t_budget = time.perf_counter() - g2
                if not matcher.accept_token(token):
                    raise RuntimeError(
                        f"the matcher rejected token {token}, which its mask allowed"
                    )
                gen.grammar_s += time.perf_counter() - g0 - t_sample - t_budget
                gen.model_s += t_sample
                gen.budget_s += t_budget
            else:
                g1 = time.perf_counter()
                token = _sample(logits[:vocab_size], temperature, top_p, generator)
                gen.model_s += time.perf_counter() - g1
            gen.completion_tokens += 1
            if token in stops or (matcher is not None and matcher.is_terminated()):
                gen.finish_reason = "stop"
                if token not in stops:
                    gen.token_ids.append(token)
                    if on_token is not None:
                        on_token(token)
                break
            gen.token_ids.append(token)
            if on_token is not None:
                on_token(token)
            if step + 1 == max_tokens:
                break
            start = time.perf_counter()
            past, logits = _forward(
                model, torch.tensor([[token]], dtype=torch.long, device=device), past, cache_arg
            )
            gen.model_s += time.perf_counter() - start
        if matcher is not None:
            gen.grammar_completed = matcher.is_completed() or matcher.is_terminated()
    return gen
