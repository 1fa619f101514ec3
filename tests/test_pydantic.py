"""Pydantic v2 models through ``compile_json_schema(Model)``: random sampling under the token mask.

Each model's grammar is sampled 20 times with random logits (seeded numpy RNG): at every step the
bitmask is filled, a random allowed token is taken and accepted. After a soft budget the sampler
prefers the stop token, then tokens that close strings/containers, then short tokens, so samples
finish. Every finished sample must pass ``Model.model_validate_json``.

Uses the Llama 3 tokenizer when the shared data exists (``$GRAMMASK_SHARED`` or ``shared/`` beside
the repository root or an ancestor), else a small byte-level vocabulary.
"""

from __future__ import annotations

import datetime as dt
import enum
import os
import uuid
from pathlib import Path
from typing import Dict, List, Literal, Optional, Tuple, Union

import pytest

np = pytest.importorskip("numpy")
pydantic = pytest.importorskip("pydantic")
from pydantic import BaseModel, ConfigDict, Field, conint, constr  # noqa: E402
from typing_extensions import Annotated  # noqa: E402

import grammask as xgr  # noqa: E402

SAMPLES = 20
SOFT_BUDGET = 32
HARD_BUDGET = 240


# ------------------------------------------------------------------------------------ models


class Color(str, enum.Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Priority(enum.IntEnum):
    low = 1
    mid = 2
    high = 3


class Address(BaseModel):
    street: str = Field(max_length=40)
    city: str = Field(min_length=1, max_length=20)
    zip_code: str = Field(pattern=r"^\d{5}$")


class Person(BaseModel):
    name: constr(min_length=1, max_length=20)
    age: conint(ge=0, le=130)
    address: Address


class OptionalFields(BaseModel):
    nickname: Optional[str] = Field(default=None, max_length=10)
    score: Optional[float] = None
    active: bool = True


class IntOrStr(BaseModel):
    value: Union[int, str]
    values: List[Union[int, bool]] = Field(max_length=4)


class Paint(BaseModel):
    color: Color
    priority: Priority
    finish: Literal["matte", "gloss"]


class Sku(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{3}$")
    quantity: int = Field(ge=1, le=999)
    price: float = Field(gt=0, le=10000)


class Tags(BaseModel):
    tags: List[constr(min_length=1, max_length=8)] = Field(min_length=1, max_length=5)


class Scores(BaseModel):
    scores: Dict[str, float] = Field(max_length=3)


class TreeNode(BaseModel):
    label: str = Field(max_length=6)
    children: List["TreeNode"] = Field(default_factory=list, max_length=2)


class Event(BaseModel):
    title: str = Field(max_length=12)
    at: dt.datetime
    day: dt.date


class Ticket(BaseModel):
    id: uuid.UUID
    status: Literal["open", "closed"]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: conint(ge=1, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(BaseModel):
    pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")]


class LineItem(BaseModel):
    product: str = Field(max_length=10)
    qty: conint(ge=1, le=100)


class Order(BaseModel):
    items: List[LineItem] = Field(min_length=1, max_length=3)
    note: Optional[str] = Field(default=None, max_length=15)


class Point(BaseModel):
    coords: Tuple[int, int]
    label: Optional[Tuple[str, float]] = None


class Ratio(BaseModel):
    ratio: float = Field(ge=0, le=1)
    step: int = Field(multiple_of=5)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: Optional[str] = None


class Nested3(BaseModel):
    class Inner(BaseModel):
        class Leaf(BaseModel):
            v: Literal[1, 2, 3]

        leaf: "Nested3.Inner.Leaf"
        leaves: List["Nested3.Inner.Leaf"] = Field(max_length=2)

    inner: Inner


class Config(BaseModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,11}$")
    retries: int = Field(ge=0, le=10, default=3)
    mode: Literal["fast", "safe"] = "safe"
    env: Dict[str, str] = Field(default_factory=dict, max_length=2)


class Matrix(BaseModel):
    rows: List[List[int]] = Field(max_length=3)


class MaybeList(BaseModel):
    data: Union[List[int], Dict[str, int], None] = None


class Measurement(BaseModel):
    sensor: Literal["temp", "humidity"]
    value: float = Field(ge=-50, le=150)
    unit: Optional[Literal["C", "F", "%"]] = None
    ok: bool


MODELS = [
    Person, OptionalFields, IntOrStr, Paint, Sku, Tags, Scores, TreeNode, Event, Ticket, Pet, Order,
    Point, Ratio, Strict, Nested3, Config, Matrix, MaybeList, Measurement, Address,
]


# ------------------------------------------------------------------------------------ tokenizer


def _shared() -> Optional[Path]:
    env = os.environ.get("GRAMMASK_SHARED")
    if env:
        return Path(env)
    for base in Path(__file__).resolve().parents:
        if (base / "shared" / "tokenizers").is_dir():
            return base / "shared"
    return None


class _Vocab:
    """Token texts (bytes) for decoding, closer tokens and short tokens."""

    def __init__(self, info: "xgr.TokenizerInfo", texts: List[bytes]) -> None:
        self.info = info
        self.texts = texts
        self.stop = info.stop_token_ids[0]
        self.decode = None
        n = info.vocab_size
        self.closers = np.zeros(n, dtype=bool)
        self.short = np.zeros(n, dtype=bool)
        self.blank = np.zeros(n, dtype=bool)
        self.numeric = np.zeros(n, dtype=bool)
        for i, t in enumerate(texts):
            if t and all(c in b'"}]' for c in t):
                self.closers[i] = True
            if 1 <= len(t) <= 2:
                self.short[i] = True
            if t and not t.strip():
                self.blank[i] = True
            if t and all(c in b"0123456789.eE+-" for c in t):
                self.numeric[i] = True


@pytest.fixture(scope="module")
def vocab() -> _Vocab:
    shared = _shared()
    tokdir = shared / "tokenizers" / "llama3" if shared else None
    if tokdir is not None and tokdir.is_dir():
        transformers = pytest.importorskip("transformers")
        tok = transformers.AutoTokenizer.from_pretrained(str(tokdir))
        info = xgr.TokenizerInfo.from_huggingface(tok)
        texts = []
        for i in range(info.vocab_size):
            try:
                texts.append(tok.convert_tokens_to_string([tok.convert_ids_to_tokens(i)]).encode("utf-8", "surrogatepass")
                             if i < len(tok) else b"")
            except Exception:  # noqa: BLE001
                texts.append(b"")
        # Byte-exact texts come from decoding the sampled ids (see _decode); these are for biasing.
        v = _Vocab(info, texts)
        v.decode = lambda ids: tok.decode(ids)  # type: ignore[attr-defined]
        return v
    # Fallback: raw single bytes plus a few JSON-ish multi-byte tokens and a stop token.
    toks: List[bytes] = [bytes([b]) for b in range(256)]
    toks += [b'"}', b'"]', b'}}', b'":', b'", "', b'true', b'false', b'null', b'</s>']
    info = xgr.TokenizerInfo(toks, xgr.VocabType.RAW, stop_token_ids=[len(toks) - 1])
    v = _Vocab(info, toks)
    v.decode = lambda ids: b"".join(toks[i] for i in ids).decode("utf-8")  # type: ignore[attr-defined]
    return v


@pytest.fixture(scope="module")
def compiler(vocab: _Vocab) -> "xgr.GrammarCompiler":
    return xgr.GrammarCompiler(vocab.info)


def _sample(matcher: "xgr.GrammarMatcher", vocab: _Vocab, rng: "np.random.Generator") -> Optional[str]:
    n = vocab.info.vocab_size
    bitmask = xgr.allocate_token_bitmask(1, n)
    ids: List[int] = []
    run = 0
    for step in range(HARD_BUDGET):
        matcher.fill_next_token_bitmask(bitmask)
        allowed = xgr.testing.bitmask_to_bool_mask(bitmask, n)
        allowed = np.asarray(allowed).reshape(-1)[:n]
        if not allowed.any():
            return None
        # Whitespace-only tokens are rare picks (5% of steps), as in real decoding.
        if rng.random() > 0.05 and (allowed & ~vocab.blank).any():
            allowed = allowed & ~vocab.blank
        # Numbers: after 3 numeric tokens in a row prefer ending the number. JSON Schema numbers
        # are unbounded, but Pydantic rejects what overflows a float (see test_number_gap).
        if run >= 3 and (allowed & ~vocab.numeric).any():
            allowed = allowed & ~vocab.numeric
        if step >= SOFT_BUDGET:
            if allowed[vocab.stop]:
                return vocab.decode(ids)  # type: ignore[attr-defined]
            for pref in (vocab.closers, vocab.short):
                sub = allowed & pref
                if sub.any():
                    allowed = sub
                    break
        logits = rng.standard_normal(n)
        logits[~allowed] = -np.inf
        tok = int(np.argmax(logits))
        if tok in vocab.info.stop_token_ids:
            assert matcher.accept_token(tok)
            return vocab.decode(ids)  # type: ignore[attr-defined]
        assert matcher.accept_token(tok), "a token allowed by the mask was rejected"
        ids.append(tok)
        run = run + 1 if vocab.numeric[tok] else 0
    print("unfinished:", vocab.decode(ids)[:300])  # type: ignore[attr-defined]
    return None


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_pydantic_samples_validate(model, vocab: _Vocab, compiler) -> None:
    cg = compiler.compile_json_schema(model)
    rng = np.random.default_rng(1234)
    finished = 0
    for _ in range(SAMPLES):
        m = xgr.GrammarMatcher(cg)
        text = _sample(m, vocab, rng)
        if text is None:
            continue
        finished += 1
        try:
            model.model_validate_json(text)
        except pydantic.ValidationError as e:
            raise AssertionError(f"sample {text!r} fails validation: {e}") from None
    assert finished >= SAMPLES // 2, f"only {finished}/{SAMPLES} samples finished"


def test_number_gap(compiler) -> None:
    """The former gap: JSON Schema `integer` has no size limit, and `1000...0.0` is an integer
    there that Pydantic cannot parse. Canonical spelling (the default) takes integers without a
    fraction only; `spelling="any"` keeps the exact language, gap included."""
    text = '{"a": 1' + "0" * 80 + '.0}'
    with pytest.raises(pydantic.ValidationError):
        Strict.model_validate_json(text)
    m = xgr.GrammarMatcher(compiler.compile_json_schema(Strict), terminate_without_stop_token=True)
    assert not (m.accept_string(text) and m.is_completed())
    m = xgr.GrammarMatcher(compiler.compile_json_schema(Strict, spelling="any"), terminate_without_stop_token=True)
    assert m.accept_string(text) and m.is_completed()


def test_grammar_from_model_class() -> None:
    g = xgr.Grammar.from_json_schema(Person)
    assert "root" in str(g)
