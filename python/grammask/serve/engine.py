"""The serving engine: one model, its tokenizer, a grammar compiler with a cache of compiled
grammars keyed by response format, and the threads that compile and decode.

Takes prompts (chat messages or text) and a :class:`~grammask.serve.formats.GrammarSpec`;
produces :class:`~grammask.serve.decode.Generation` results. Each request's grammar is compiled
in the compile pool while its prompt is prefilled in the decode thread (the decode loop waits for
the compile only after the prefill); a compiled grammar is reused by every later request with the
same canonical response format, and concurrent requests for one uncached format share a single
compile. Slots (``max_concurrency``) are managed by the app; this module is thread-safe.
"""

from __future__ import annotations

import codecs
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..compiler import GrammarCompiler
from ..tokenizer_info import TokenizerInfo
from .decode import Closer, Generation, generate, matcher_has_token_budget
from .formats import GrammarSpec
from .tools import RequestError

__all__ = ["Engine", "TextDecoder", "detect_tool_format"]


def detect_tool_format(tokenizer: Any, model_id: str) -> str:
    """The model family whose tool-call format to use (a ``get_model_structural_tag`` name, or
    "hermes" for the generic ``<tool_call>`` format), from the chat template and model name."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if not isinstance(template, str):
        template = " ".join(str(v) for v in dict(template).values())
    name = model_id.lower()
    if "<tool_call>" in template or "qwen" in name:
        return "hermes"
    if "<|python_tag|>" in template or "llama-3" in name or "llama3" in name:
        return "llama"
    if "deepseek" in name and "v3" in name:
        return "deepseek_v3_1"
    return "hermes"


class TextDecoder:
    """Incremental detokenizer over the grammar's own vocabulary bytes (the text the grammar saw)."""

    def __init__(self, info: TokenizerInfo, skip: Sequence[int] = ()) -> None:
        self._vocab = info.decoded_vocab
        self._skip = set(skip)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token: int) -> str:
        if token in self._skip or token >= len(self._vocab):
            return ""
        return self._utf8.decode(self._vocab[token])

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(self.push(t) for t in tokens) + self.flush()


class Engine:
    """Holds the model and the grammar machinery; :meth:`run` decodes one request (blocking)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        model_id: str,
        *,
        max_concurrency: int = 4,
        tool_format: str = "auto",
        cache_size: int = 128,
        max_model_len: int = 4096,
    ) -> None:
        import torch

        self.model, self.tokenizer, self.model_id = model, tokenizer, model_id
        # The vocabulary is as wide as the model's logits (ids past the tokenizer are padding).
        self.info = TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=getattr(model.config, "vocab_size", None) or len(tokenizer)
        )
        self.compiler = GrammarCompiler(self.info)
        self.closer = None if matcher_has_token_budget() else Closer(self.info)
        self.tool_format = (
            detect_tool_format(tokenizer, model_id) if tool_format == "auto" else tool_format
        )
        self.max_model_len = max_model_len
        self._special = set(self.info.special_token_ids) | set(self.info.stop_token_ids)
        self._cache: "OrderedDict[str, Future]" = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.cache_hits = self.cache_misses = 0
        self._compile_pool = ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="grammask-compile"
        )
        self.decode_pool = ThreadPoolExecutor(
            max_workers=max_concurrency, thread_name_prefix="grammask-decode"
        )
        # Decode threads run side by side: give each a share of the cores rather than all of them.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, max_concurrency)))

    # ------------------------------------------------------------------ grammars

    def compiled(self, spec: GrammarSpec) -> Future:
        """A future of (CompiledGrammar, compile seconds); cached by ``spec.key``. A cache hit
        reports 0 compile seconds. Failed compiles are not cached."""
        with self._lock:
            hit = self._cache.get(spec.key)
            if hit is not None and not (hit.done() and hit.exception() is not None):
                self._cache.move_to_end(spec.key)
                self.cache_hits += 1
                if hit.done():
                    done: Future = Future()
                    done.set_result((hit.result()[0], 0.0))
                    return done
                return hit
            self.cache_misses += 1

            def work() -> Any:
                start = time.perf_counter()
                compiled = spec.compile(self.compiler)
                return compiled, time.perf_counter() - start

            fut = self._compile_pool.submit(work)
            self._cache[spec.key] = fut
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            fut.add_done_callback(lambda f, key=spec.key: self._forget_failure(key, f))
            return fut

    def _forget_failure(self, key: str, fut: Future) -> None:
        if fut.exception() is not None:
            with self._lock:
                if self._cache.get(key) is fut:
                    del self._cache[key]

    # ------------------------------------------------------------------ prompts

    def chat_prompt(
        self, messages: List[Dict[str, Any]], tools: Optional[List[Dict[str, Any]]]
    ) -> List[int]:
        """Token ids of the chat template applied to ``messages`` (with a generation prompt)."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise RequestError(
                "this model's tokenizer has no chat template: use /v1/completions", "messages"
            )
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=tools or None, add_generation_prompt=True, tokenize=False
            )
        except Exception as e:  # jinja errors: a message the template cannot render
            raise RequestError(
                f"the chat template could not render these messages: {e}", "messages"
            ) from None
        return self.text_prompt(text)

    def text_prompt(self, text: str) -> List[int]:
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if not ids:
            bos = getattr(self.tokenizer, "bos_token_id", None)
            ids = [bos if bos is not None else self.info.stop_token_ids[0]]
        if len(ids) >= self.max_model_len:
            raise RequestError(
                f"the prompt has {len(ids)} tokens; this server allows at most {self.max_model_len - 1}",
                "messages",
            )
        return ids

    # ------------------------------------------------------------------ decoding

    def run(
        self,
        prompt_ids: List[int],
        compile_future: Optional[Future],
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: Optional[int],
        cancel: threading.Event,
        on_token: Optional[Callable[[int], None]] = None,
    ) -> Generation:
        max_tokens = min(max_tokens, self.max_model_len - len(prompt_ids))
        return generate(
            self.model,
            prompt_ids,
            info=self.info,
            compile_future=compile_future,
            closer=self.closer,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            cancel=cancel,
            on_token=on_token,
        )

    def text_decoder(self) -> TextDecoder:
        return TextDecoder(self.info, skip=self._special)

    def close(self) -> None:
        self._compile_pool.shutdown(wait=False, cancel_futures=True)
        self.decode_pool.shutdown(wait=False, cancel_futures=True)
