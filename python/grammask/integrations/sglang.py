"""SGLang plugin: a ``grammask`` grammar backend (``--grammar-backend grammask``).

Installed as the entry point ``grammask = grammask.integrations.sglang:register`` in the group
``sglang.srt.plugins``. SGLang's ``load_plugins()`` runs it in the launcher (before the server
arguments are parsed) and in the scheduler process; :func:`register` then

* adds ``grammask`` to SGLang's ``--grammar-backend`` choices (``add_grammar_backend_choices``),
* registers :func:`create_backend` under that name (``register_grammar_backend``); SGLang's
  ``create_grammar_backend`` calls it as ``init(server_args, tokenizer, vocab_size,
  eos_token_ids)``.

:class:`GrammaskGrammar` implements SGLang's ``BaseGrammarObject`` contract: ``accept_token``
raises ``ValueError`` on a rejected token (the scheduler aborts that request only),
``fill_vocab_mask`` / ``fill_vocab_mask_batched`` write XGrammar's bitmask layout (the batched
form fills every row in one native call, in parallel, with the GIL released), the mask is moved
and applied with SGLang's own kernels (Triton on CUDA, ``sgl_kernel`` on ROCm, its NPU op) and
with grammask's on CPU; ``copy`` gives a fresh matcher on the same compiled grammar (SGLang's
cache hands out copies), ``rollback``, ``is_terminated`` and jump-forward as in SGLang's XGrammar
backend. Bad input gives SGLang's ``InvalidGrammarObject`` carrying grammask's message; the
request is then refused with it. ``sglang`` and ``torch`` are imported only when SGLang loads
the plugin.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Optional, Tuple

import grammask as _gm

from ..exception import GrammaskError

__all__ = ["BACKEND_NAME", "create_backend", "register"]

logger = logging.getLogger(__name__)

BACKEND_NAME = "grammask"
MAX_ROLLBACK_TOKENS = 200  # SGLang's value; grammask's rollback is unlimited anyway

_classes: Optional[Tuple[type, type]] = None


def register() -> None:
    """SGLang plugin entry point: make ``--grammar-backend grammask`` available. Idempotent."""
    from sglang.srt.constrained.base_grammar_backend import (
        GRAMMAR_BACKEND_REGISTRY,
        register_grammar_backend,
    )

    try:
        from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    except ImportError:  # older SGLang: choices live in server_args only
        GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices = None, None
    if add_grammar_backend_choices is not None and BACKEND_NAME not in (
        GRAMMAR_BACKEND_CHOICES or []
    ):
        add_grammar_backend_choices([BACKEND_NAME])
    if BACKEND_NAME not in GRAMMAR_BACKEND_REGISTRY:
        register_grammar_backend(BACKEND_NAME, create_backend)


def create_backend(
    server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[Any] = None
) -> Any:
    """SGLang's backend factory: ``init(server_args, tokenizer, vocab_size, eos_token_ids)``."""
    _, backend_cls = _build_classes()
    any_whitespace = not getattr(server_args, "constrained_json_disable_any_whitespace", False)
    max_whitespace_cnt = getattr(server_args, "constrained_json_max_whitespace_cnt", None)
    return backend_cls(
        tokenizer,
        vocab_size=vocab_size,
        model_eos_token_ids=sorted(eos_token_ids) if eos_token_ids else None,
        any_whitespace=any_whitespace,
        max_whitespace_cnt=max_whitespace_cnt,
    )


def _legacy_structural_tag_to_json(tag: Dict[str, Any]) -> str:
    """SGLang's legacy ``{"structures": [...], "triggers": [...]}`` in XGrammar's JSON format."""
    tags = [
        {
            "type": "tag",
            "begin": s["begin"],
            "content": {"type": "json_schema", "json_schema": s.get("schema") or {}},
            "end": s["end"],
        }
        for s in tag["structures"]
    ]
    fmt = {
        "type": "triggered_tags",
        "triggers": list(tag["triggers"]),
        "tags": tags,
        "at_least_one": bool(tag.get("at_least_one", False)),
    }
    return json.dumps({"type": "structural_tag", "format": fmt})


def _build_classes() -> Tuple[type, type]:
    """Subclass SGLang's base classes (imported here, on first use)."""
    global _classes
    if _classes is not None:
        return _classes
    import torch
    from sglang.srt.constrained.base_grammar_backend import (
        BaseGrammarBackend,
        BaseGrammarObject,
        GrammarStats,
        InvalidGrammarObject,
    )

    batch_filler = _gm.BatchGrammarMatcher()

    def apply_on_device(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        kind = logits.device.type
        if kind in ("cuda", "xpu", "musa"):
            from sglang.srt.utils import is_hip

            if is_hip():
                from sgl_kernel import apply_token_bitmask_inplace_cuda

                apply_token_bitmask_inplace_cuda(logits, vocab_mask)
            else:
                from sglang.kernels.ops.grammar.bitmask_ops import (
                    apply_token_bitmask_inplace_triton,
                )

                apply_token_bitmask_inplace_triton(logits, vocab_mask)
        elif kind == "npu":
            import sgl_kernel_npu  # noqa: F401

            torch.ops.npu.apply_token_bitmask(logits, vocab_mask)
        else:
            _gm.apply_token_bitmask_inplace(logits, vocab_mask)

    class GrammaskGrammar(BaseGrammarObject):
        """One request's grammar state in SGLang (BaseGrammarObject)."""

        def __init__(
            self,
            matcher: _gm.GrammarMatcher,
            vocab_size: int,
            ctx: _gm.CompiledGrammar,
            override_stop_tokens: Optional[List[int]],
            key_string: Optional[str] = None,
            grammar_stats: Optional[Any] = None,
        ) -> None:
            super().__init__()
            self.matcher = matcher
            self.vocab_size = vocab_size
            self.ctx = ctx
            self.override_stop_tokens = override_stop_tokens
            self.key_string = key_string
            self.grammar_stats = grammar_stats if grammar_stats is not None else GrammarStats()
            self.num_accepted = 0

        def accept_token(self, token: int) -> None:
            if self.matcher.is_terminated():
                return
            self.current_token = token
            if not self.matcher.accept_token(int(token)):
                raise ValueError(
                    f"grammask: token {token} is not allowed here (after {self.num_accepted} "
                    f"accepted tokens); grammar: {(self.key_string or '')[:200]}"
                )
            self.num_accepted += 1

        def rollback(self, k: int) -> None:
            if k > 0:
                self.matcher.rollback(k)
                self.num_accepted = max(0, self.num_accepted - k)

        def is_terminated(self) -> bool:
            return self.matcher.is_terminated()

        def allocate_vocab_mask(
            self, vocab_size: int, batch_size: int, device: Any
        ) -> torch.Tensor:
            return GrammaskGrammarBackend.allocate_vocab_mask(vocab_size, batch_size, device)

        def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
            self.matcher.fill_next_token_bitmask(vocab_mask, idx)

        @staticmethod
        def fill_vocab_mask_batched(entries: List[Any], vocab_mask: torch.Tensor) -> None:
            """All rows in one native call (parallel, GIL released) when every entry is ours."""
            if entries and all(isinstance(e.grammar, GrammaskGrammar) for e in entries):
                batch_filler.batch_fill_next_token_bitmask(
                    [e.grammar.matcher for e in entries], vocab_mask, [e.row for e in entries]
                )
                return
            for e in entries:
                e.grammar.fill_vocab_mask(vocab_mask, e.row)

        @staticmethod
        def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
            vocab_mask.fill_(-1)

        @staticmethod
        def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
            return vocab_mask.to(device, non_blocking=True)

        @staticmethod
        def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
            apply_on_device(logits, vocab_mask)

        def copy(self) -> "GrammaskGrammar":
            stats = self.grammar_stats
            if stats is not None:
                import dataclasses

                stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
            return GrammaskGrammar(
                _gm.GrammarMatcher(self.ctx, override_stop_tokens=self.override_stop_tokens),
                self.vocab_size,
                self.ctx,
                self.override_stop_tokens,
                self.key_string,
                stats,
            )

        def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
            if self.matcher.is_terminated():
                return None
            s = self.matcher.find_jump_forward_string()
            return ([], s) if s else None

        def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
            return helper[1], -1

        def jump_and_retokenize(
            self, old_output_ids: List[int], new_output_ids: List[int], next_state: int
        ) -> None:
            k = 0
            for old, new in zip(old_output_ids, new_output_ids):
                if old != new:
                    break
                k += 1
            if k < len(old_output_ids):
                self.rollback(len(old_output_ids) - k)
            for token in new_output_ids[k:]:
                self.accept_token(token)

        def __repr__(self) -> str:
            return f"GrammaskGrammar(key={(self.key_string or '')[:60]!r}, accepted={self.num_accepted})"

    class GrammaskGrammarBackend(BaseGrammarBackend):
        """SGLang's engine-level grammar backend on grammask."""

        def __init__(
            self,
            tokenizer: Any,
            vocab_size: int,
            model_eos_token_ids: Optional[List[int]] = None,
            any_whitespace: bool = True,
            max_whitespace_cnt: Optional[int] = None,
        ) -> None:
            super().__init__()
            override_stop_tokens = None
            if hasattr(tokenizer, "init_xgrammar"):
                info, override_stop_tokens = tokenizer.init_xgrammar()
                if not isinstance(info, _gm.TokenizerInfo):
                    # An XGrammar TokenizerInfo from a custom tokenizer: rebuild it as grammask's.
                    info = _gm.TokenizerInfo.from_vocab_and_metadata(
                        info.decoded_vocab, info.dump_metadata()
                    )
            else:
                info = _gm.TokenizerInfo.from_huggingface(
                    tokenizer, vocab_size=vocab_size, stop_token_ids=model_eos_token_ids or None
                )
            self.tokenizer_info = info
            self.grammar_compiler = _gm.GrammarCompiler(info)
            self.vocab_size = vocab_size
            self.override_stop_tokens = override_stop_tokens
            self.any_whitespace = any_whitespace
            self.max_whitespace_cnt = max_whitespace_cnt

        @staticmethod
        def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
            shape = _gm.get_bitmask_shape(batch_size, vocab_size)
            pin = torch.cuda.is_available()
            return torch.full(shape, -1, dtype=torch.int32, pin_memory=pin)

        @staticmethod
        def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
            return vocab_mask.to(device, non_blocking=True)

        @staticmethod
        def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
            apply_on_device(logits, vocab_mask)

        def _grammar(self, ctx: _gm.CompiledGrammar, key_string: str, kind: str) -> GrammaskGrammar:
            matcher = _gm.GrammarMatcher(ctx, override_stop_tokens=self.override_stop_tokens)
            return GrammaskGrammar(
                matcher,
                self.vocab_size,
                ctx,
                self.override_stop_tokens,
                key_string,
                GrammarStats(dispatch_type=kind),
            )

        def _invalid(self, kind: str, key_string: str, error: BaseException) -> Any:
            logger.error("grammask: invalid %s grammar %r: %s", kind, key_string[:200], error)
            return InvalidGrammarObject(str(error))

        def dispatch_json(self, key_string: str) -> Any:
            try:
                if key_string == "$$ANY$$":
                    ctx = self.grammar_compiler.compile_builtin_json_grammar()
                else:
                    ctx = self.grammar_compiler.compile_json_schema(
                        key_string,
                        any_whitespace=self.any_whitespace,
                        max_whitespace_cnt=self.max_whitespace_cnt,
                    )
            except (GrammaskError, ValueError, TypeError, RuntimeError) as e:
                return self._invalid("json", key_string, e)
            return self._grammar(ctx, key_string, "json")

        def dispatch_regex(self, key_string: str) -> Any:
            try:
                ctx = self.grammar_compiler.compile_regex(key_string)
            except (GrammaskError, ValueError, TypeError, RuntimeError) as e:
                return self._invalid("regex", key_string, e)
            return self._grammar(ctx, key_string, "regex")

        def dispatch_ebnf(self, key_string: str) -> Any:
            try:
                ctx = self.grammar_compiler.compile_grammar(key_string)
            except (GrammaskError, ValueError, TypeError, RuntimeError) as e:
                return self._invalid("ebnf", key_string, e)
            return self._grammar(ctx, key_string, "ebnf")

        def dispatch_structural_tag(self, key_string: str) -> Any:
            try:
                tag = json.loads(key_string)
                if isinstance(tag, dict) and tag.get("structures") is not None:
                    spec = _legacy_structural_tag_to_json(tag)
                else:
                    spec = key_string
                ctx = self.grammar_compiler.compile_structural_tag(spec)
            except (GrammaskError, ValueError, TypeError, KeyError, RuntimeError) as e:
                return self._invalid("structural_tag", key_string, e)
            return self._grammar(ctx, key_string, "structural_tag")

        def reset(self) -> None:
            super().reset()
            self.grammar_compiler.clear_cache()

    _classes = (GrammaskGrammar, GrammaskGrammarBackend)
    return _classes


def __getattr__(name: str) -> Any:
    # GrammaskGrammar / GrammaskGrammarBackend subclass SGLang's classes, built on first access.
    if name == "GrammaskGrammar":
        return _build_classes()[0]
    if name == "GrammaskGrammarBackend":
        return _build_classes()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
