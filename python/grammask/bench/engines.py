"""Engine adapters: one uniform compile / mask / accept interface over each peer library.

Runs inside a worker process (see ``worker``). Takes a Hugging Face tokenizer and a JSON Schema
string; produces matchers whose ``fill()`` computes the next-token mask into a numpy int32 bitmask
(bit ``t % 32`` of word ``t // 32`` set iff token ``t`` is allowed) and whose ``accept(t)`` advances
the engine. Every engine library is imported inside its adapter's constructor, never at module
import, so this module loads without any engine installed.

Bitmasks (the MaskBench protocol's "bitmask" setting): by default each adapter allocates its
engine's bitmask once, outside any timed window, and lends it to each new matcher (``BitmaskPool``),
as a server allocates its batch bitmask once and refills it; so time to first mask is compile +
matcher + first fill into an existing bitmask, for every engine alike. A matcher's ``mask`` is its
own for the matcher's life: a matcher made while another one holds the pooled bitmask gets another
(allocated then, and pooled in turn). With ``bitmask_per_request=True`` each matcher allocates its
own bitmask in ``matcher()`` (the protocol before session 70).

Engine names (``ENGINES``) and what each runs:

- ``grammask``: ``grammask`` through its XGrammar-compatible API, JSON Schema semantics
  (``strict_mode=False``, ``any_whitespace=True``).
- ``xgrammar``: XGrammar ``compile_json_schema`` with default options.
- ``xgrammar-flex``: XGrammar with ``any_whitespace=True, strict_mode=False``.
- ``llguidance``: ``LLMatcher.grammar_from_json_schema`` with llguidance's defaults (flexible
  whitespace, ``additionalProperties`` open unless the schema closes it, unimplemented keywords are
  compile errors); a fresh matcher per instance is a ``deep_copy`` of the compiled one.
- ``outlines``: ``outlines_core.json_schema.build_regex_from_schema`` with its default whitespace
  pattern, ``Index`` over a ``Vocabulary`` built from the tokenizer's byte strings, ``Guide`` per
  instance, masks through ``Guide.write_mask_into``.
- ``fake``: a test double; obeys ``"x-fake"`` in the schema (``abort``, ``hang``, ``oom``,
  ``error``), otherwise allows every token. Not part of the default engine list.
"""

from __future__ import annotations

import abc
import functools
import json
import os
import time
from typing import Any, Callable, ClassVar

import numpy as np


class CompileError(Exception):
    """The engine refused the schema (its own error, passed on as text)."""


class Matcher(abc.ABC):
    """State of one engine on one instance. ``mask`` is the bitmask ``fill`` writes to."""

    mask: np.ndarray
    stop_tokens: list[int]

    @abc.abstractmethod
    def fill(self) -> None:
        """Compute the mask for the next token into ``self.mask``."""

    @abc.abstractmethod
    def accept(self, token: int) -> bool:
        """Advance by ``token``; False if the engine refuses it."""

    def allowed(self, token: int) -> bool:
        """Whether the last ``fill`` allowed ``token`` (False for ids past the mask)."""
        word = token >> 5
        if word >= self.mask.shape[0]:
            return False
        return bool((int(self.mask[word]) >> (token & 31)) & 1)


class BitmaskPool:
    """One adapter's bitmasks, each lent to one live matcher at a time.

    ``allocate()`` makes one engine bitmask. Unless ``per_request``, one is allocated here (so
    that the first matcher's fill does not pay for it) and a matcher returns its bitmask with
    ``give_back`` when it is freed; ``lend`` allocates only when every pooled bitmask is lent.
    Invariant: a bitmask is in ``_free`` iff no live matcher holds it.
    """

    def __init__(self, allocate: Callable[[], Any], per_request: bool = False):
        self._allocate = allocate
        self.per_request = per_request
        self._free: list[Any] = [] if per_request else [allocate()]
        self.allocated = len(self._free)

    def lend(self) -> Any:
        if self._free:
            return self._free.pop()
        self.allocated += 0 if self.per_request else 1
        return self._allocate()

    def give_back(self, bitmask: Any) -> None:
        if not self.per_request:
            self._free.append(bitmask)

    def touch(self) -> None:
        """Write every pooled bitmask once (in a forked runner: its pages copied from the
        template now, not in a timed fill)."""
        for b in self._free:
            _as_numpy_row(b)[:] = -1


class _PooledMatcher(Matcher):
    """A matcher that fills a bitmask lent by its adapter's pool and returns it when freed."""

    _pool: BitmaskPool | None = None
    _bitmask: Any = None

    def __del__(self) -> None:
        if self._pool is not None and self._bitmask is not None:
            self._pool.give_back(self._bitmask)


class Adapter(abc.ABC):
    name = "?"
    version = "?"
    #: The adapter's bitmasks (None for an adapter that has none, e.g. the fake engine).
    bitmasks: BitmaskPool | None = None

    def after_fork(self) -> None:
        """In a freshly forked runner, before its first task: own the pooled bitmasks' pages."""
        if self.bitmasks is not None:
            self.bitmasks.touch()

    @abc.abstractmethod
    def compile(self, schema: str) -> Any:
        """Compile a JSON Schema (text); raise CompileError when the engine refuses it."""

    @abc.abstractmethod
    def matcher(self, compiled: Any) -> Matcher:
        """A fresh matcher for one instance."""

    def memory_bytes(self, compiled: Any) -> int | None:
        """The engine's own count of the compiled grammar's memory (with its mask caches), or None
        when the engine does not report one."""
        return None

    def vocabulary_memory_bytes(self) -> int | None:
        """The engine's own count of its per-vocabulary tables (shared by all grammars, in no
        grammar's count), or None when the engine does not report one."""
        return None


def _as_numpy_row(bitmask) -> np.ndarray:
    """First row of a (1, W) int32 bitmask as a numpy view sharing its memory."""
    arr = bitmask.numpy() if hasattr(bitmask, "numpy") else np.asarray(bitmask)
    assert arr.dtype == np.int32, arr.dtype
    return arr.reshape(-1)


# --- XGrammar and grammask (same API) ---------------------------------------------------------


class _XgrMatcher(_PooledMatcher):
    def __init__(self, xgr, compiled, pool: BitmaskPool, stop_tokens: list[int]):
        self._m = xgr.GrammarMatcher(compiled)
        self._bitmask = pool.lend()
        self._pool = pool
        self.stop_tokens = stop_tokens

    @functools.cached_property
    def mask(self) -> np.ndarray:
        # A view of the bitmask (every later fill shows in it), made on first use: no engine needs
        # it to fill, and `.numpy()` on a new tensor right after a compile (cold caches) took
        # ~50 us of the time to first mask the harness times (`matcher` + first `fill`).
        return _as_numpy_row(self._bitmask)

    def fill(self) -> None:
        self._m.fill_next_token_bitmask(self._bitmask)

    def accept(self, token: int) -> bool:
        return bool(self._m.accept_token(token))


class XgrammarLikeAdapter(Adapter):
    """XGrammar 0.2.8's API, served either by xgrammar itself or by grammask."""

    def __init__(self, hf_tokenizer, module_name: str, options: dict[str, Any], name: str,
                 bitmask_per_request: bool = False):
        import importlib

        self.xgr = importlib.import_module(module_name)
        self.name = name
        self.options = dict(options)
        self.version = _module_version(module_name)
        if module_name == "grammask":  # its version number does not change between builds
            self.version += f" (build {_file_digest(self.xgr._core.__file__)})"
        self.info = self.xgr.TokenizerInfo.from_huggingface(hf_tokenizer)
        try:
            # Single-threaded and uncached: each schema is compiled once, on one core.
            self.compiler = self.xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        except TypeError:
            self.compiler = self.xgr.GrammarCompiler(self.info)
        self.stop_tokens = [int(t) for t in self.info.stop_token_ids]
        self.vocab_size = int(self.info.vocab_size)
        self.bitmasks = BitmaskPool(
            lambda: self.xgr.allocate_token_bitmask(1, self.vocab_size), bitmask_per_request
        )

    def compile(self, schema: str) -> Any:
        try:
            return self.compiler.compile_json_schema(schema, **self.options)
        except Exception as e:  # the engine's own error type varies (RuntimeError, ValueError)
            raise CompileError(f"{type(e).__name__}: {e}") from e

    def matcher(self, compiled: Any) -> Matcher:
        return _XgrMatcher(self.xgr, compiled, self.bitmasks, self.stop_tokens)

    def memory_bytes(self, compiled: Any) -> int | None:
        return int(compiled.memory_size_bytes)

    def vocabulary_memory_bytes(self) -> int | None:
        report = getattr(self.compiler, "get_vocabulary_memory_bytes", None)  # grammask only
        return int(report()["total"]) if report is not None else None


# --- llguidance -------------------------------------------------------------------------------


class _LlgMatcher(_PooledMatcher):
    def __init__(self, llg_numpy, m, pool: BitmaskPool, stop_tokens: list[int]):
        self._np = llg_numpy
        self._m = m
        self._bitmask = pool.lend()
        self._pool = pool
        self.mask = self._bitmask.reshape(-1)
        self.stop_tokens = stop_tokens

    def fill(self) -> None:
        self._np.fill_next_token_bitmask(self._m, self._bitmask)
        if self._m.is_error():
            raise RuntimeError(f"llguidance matcher error: {self._m.get_error()}")

    def accept(self, token: int) -> bool:
        return bool(self._m.consume_token(token))


class LlguidanceAdapter(Adapter):
    name = "llguidance"
    #: Options passed as ``defaults`` to grammar_from_json_schema (documented in benchmarks.md).
    JSON_OPTIONS: ClassVar[dict[str, Any]] = {"whitespace_flexible": True}

    def __init__(self, hf_tokenizer, bitmask_per_request: bool = False):
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.llg = llguidance
        self.llg_numpy = llguidance.numpy
        self.version = _module_version("llguidance")
        self.tok = llguidance.hf.from_tokenizer(hf_tokenizer)
        self.vocab_size = int(self.tok.vocab_size)
        self.stop_tokens = [int(t) for t in self.tok.eos_tokens]
        self.bitmasks = BitmaskPool(
            lambda: self.llg_numpy.allocate_token_bitmask(1, self.vocab_size), bitmask_per_request
        )

    def compile(self, schema: str) -> Any:
        try:
            grammar = self.llg.LLMatcher.grammar_from_json_schema(
                schema, defaults=dict(self.JSON_OPTIONS)
            )
        except Exception as e:
            raise CompileError(f"{type(e).__name__}: {e}") from e
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise CompileError(m.get_error())
        return m

    def matcher(self, compiled: Any) -> Matcher:
        return _LlgMatcher(self.llg_numpy, compiled.deep_copy(), self.bitmasks, self.stop_tokens)


# --- outlines-core ----------------------------------------------------------------------------


def _byte_decoder() -> dict[str, int]:
    """Inverse of the GPT-2 byte-level alphabet (printable stand-ins for the 256 bytes)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes_table(hf_tokenizer) -> dict[int, bytes]:
    """Bytes of every non-special token: byte-level BPE (GPT-2 alphabet) or SentencePiece."""
    vocab: dict[str, int] = hf_tokenizer.get_vocab()
    special = set(getattr(hf_tokenizer, "all_special_ids", []) or [])
    special |= set(getattr(hf_tokenizer, "added_tokens_decoder", {}) or {})
    dec = _byte_decoder()
    byte_level = all(ch in dec for tok in list(vocab)[:2000] for ch in tok if tok)
    out: dict[int, bytes] = {}
    for tok, tid in vocab.items():
        if tid in special:
            continue
        if byte_level and all(ch in dec for ch in tok):
            out[tid] = bytes(dec[ch] for ch in tok)
        elif tok.startswith("<0x") and tok.endswith(">") and len(tok) == 6:
            out[tid] = bytes([int(tok[3:5], 16)])
        else:
            out[tid] = tok.replace("\u2581", " ").encode("utf-8")
    return out


class _OutlinesMatcher(_PooledMatcher):
    def __init__(self, guide, pool: BitmaskPool, stop_tokens: list[int]):
        self._g = guide
        self._bitmask = pool.lend()
        self._pool = pool
        self.mask = self._bitmask
        self.stop_tokens = stop_tokens

    def fill(self) -> None:
        self._g.write_mask_into(self.mask.ctypes.data, self.mask.size, 4)

    def accept(self, token: int) -> bool:
        if token in self.stop_tokens:
            # outlines-core has no transition on EOS: its mask allows EOS exactly in final
            # states and a generator stops there, so EOS is accepted iff the guide is finished.
            return bool(self._g.is_finished())
        try:
            self._g.advance(token, return_tokens=False)
        except ValueError:  # outlines-core raises on a token with no transition
            return False
        return True


class OutlinesAdapter(Adapter):
    name = "outlines"

    def __init__(self, hf_tokenizer, bitmask_per_request: bool = False):
        import outlines_core
        from outlines_core.json_schema import build_regex_from_schema

        self.oc = outlines_core
        self.build_regex = build_regex_from_schema
        self.version = _module_version("outlines_core")
        eos = hf_tokenizer.eos_token_id
        table = token_bytes_table(hf_tokenizer)
        by_bytes: dict[bytes, list[int]] = {}
        for tid, b in table.items():
            if tid != eos:
                by_bytes.setdefault(b, []).append(tid)
        self.vocab = outlines_core.Vocabulary(eos, by_bytes)
        self.stop_tokens = [int(eos)]
        self.vocab_size = max(len(hf_tokenizer), max(table) + 1, eos + 1)
        words = (self.vocab_size + 31) // 32
        self.bitmasks = BitmaskPool(lambda: np.zeros(words, dtype=np.int32), bitmask_per_request)

    def compile(self, schema: str) -> Any:
        try:
            regex = self.build_regex(schema)
            return self.oc.Index(regex, self.vocab)
        except Exception as e:
            raise CompileError(f"{type(e).__name__}: {e}") from e

    def matcher(self, compiled: Any) -> Matcher:
        return _OutlinesMatcher(self.oc.Guide(compiled), self.bitmasks, self.stop_tokens)


# --- fake engine for tests --------------------------------------------------------------------


class _FakeMatcher(_PooledMatcher):
    def __init__(self, pool: BitmaskPool, stop: int):
        self._bitmask = pool.lend()
        self._pool = pool
        self.mask = self._bitmask
        self.stop_tokens = [stop]

    def fill(self) -> None:
        self.mask[:] = -1

    def accept(self, token: int) -> bool:
        return True


class FakeAdapter(Adapter):
    """Allows every token; ``"x-fake"`` in the schema makes compile misbehave on purpose."""

    name = "fake"
    version = "test"

    def __init__(self, hf_tokenizer, bitmask_per_request: bool = False):
        self.vocab_size = len(hf_tokenizer)
        self.stop = int(hf_tokenizer.eos_token_id or 0)
        words = (self.vocab_size + 31) // 32
        self.bitmasks = BitmaskPool(lambda: np.full(words, -1, dtype=np.int32), bitmask_per_request)

    def compile(self, schema: str) -> Any:
        obj = json.loads(schema)
        how = obj.get("x-fake") if isinstance(obj, dict) else None
        if how == "abort":
            os.abort()
        elif how == "hang":
            time.sleep(10_000)
        elif how == "oom":
            hog = []
            while True:  # touch memory until the supervisor kills us
                hog.append(np.ones(64 * 1024 * 1024, dtype=np.uint8))
        elif how == "error":
            raise CompileError("fake compile error")
        return None

    def matcher(self, compiled: Any) -> Matcher:
        return _FakeMatcher(self.bitmasks, self.stop)


# --- registry ---------------------------------------------------------------------------------


def _file_digest(path: str) -> str:
    """Short digest of a file's contents (tells two builds of one version apart)."""
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:12]


def _module_version(module_name: str) -> str:
    from importlib import metadata

    dist = {"outlines_core": "outlines-core"}.get(module_name, module_name)
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown (not installed as a distribution)"


#: Engine name -> factory(hf_tokenizer) -> Adapter. Order is the report's column order.
#: Each factory takes ``bitmask_per_request`` (keyword; default False: one pooled bitmask).
ENGINES: dict[str, Callable[..., Adapter]] = {
    "grammask": lambda tok, **kw: XgrammarLikeAdapter(
        tok, "grammask", {"any_whitespace": True, "strict_mode": False}, "grammask", **kw
    ),
    "xgrammar": lambda tok, **kw: XgrammarLikeAdapter(tok, "xgrammar", {}, "xgrammar", **kw),
    "xgrammar-flex": lambda tok, **kw: XgrammarLikeAdapter(
        tok, "xgrammar", {"any_whitespace": True, "strict_mode": False}, "xgrammar-flex", **kw
    ),
    "llguidance": LlguidanceAdapter,
    "outlines": OutlinesAdapter,
    "fake": FakeAdapter,
}

#: Names accepted by --engines that stand for several configurations.
ALIASES = {
    "xgrammar": ["xgrammar", "xgrammar-flex"],
    "xgrammar-default": ["xgrammar"],
    "outlines-core": ["outlines"],
}

DEFAULT_ENGINES = "grammask,xgrammar,llguidance,outlines"


def expand_engine_list(spec: str) -> list[str]:
    """Parse a comma-separated --engines value into configuration names, deduplicated in order."""
    out: list[str] = []
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        names = ALIASES.get(name, [name])
        for n in names:
            if n not in ENGINES:
                known = sorted(set(ENGINES) | set(ALIASES))
                raise ValueError(f"unknown engine {n!r}; known: {', '.join(known)}")
            if n not in out:
                out.append(n)
    if not out:
        raise ValueError("no engine selected")
    return out
