"""TokenizerInfo: decoding of every token of real vocabularies, stop/special/padding ids,
serialization and errors.

The real-tokenizer tests read ``<shared>/tokenizers`` (``$GRAMMASK_SHARED``, else ``../shared``
next to the repository) and compare every id with what the Hugging Face tokenizer itself decodes.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import warnings
from functools import lru_cache
from pathlib import Path

import pytest

from grammask import _core
from grammask.tokenizer_info import _BYTE_LEVEL_CHARSET, TokenizerInfo, VocabType

REPO_ROOT = Path(__file__).resolve().parent.parent
FAMILIES = [
    "llama3",
    "qwen2.5",
    "deepseek-v3",
    "gemma2",
    "gemma3",
    "mistral-nemo",
    "mistral-7b-v0.3",
    "llama2",
    "gpt2",
    "phi3.5",
]


def shared_dir() -> Path | None:
    env = os.environ.get("GRAMMASK_SHARED")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared")
    for c in candidates:
        if (c / "tokenizers" / "manifest.json").is_file():
            return c
    return None


def require_tokenizers_dir() -> Path:
    d = shared_dir()
    if d is None:
        pytest.skip(
            "real tokenizers not found: set GRAMMASK_SHARED to the shared data dir "
            "(looked for tokenizers/manifest.json in $GRAMMASK_SHARED and "
            f"{REPO_ROOT.parent / 'shared'})"
        )
    return d / "tokenizers"


@lru_cache(maxsize=None)
def load_hf(family: str):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    path = require_tokenizers_dir() / family
    if not path.is_dir():
        pytest.skip(f"tokenizer family {family!r} missing under {path.parent}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = transformers.AutoTokenizer.from_pretrained(str(path))
    return tok


def manifest() -> dict:
    return json.loads((require_tokenizers_dir() / "manifest.json").read_text())


# ---------------------------------------------------------------------------------------------
# Hugging Face reference decoding


def _gpt2_alphabet() -> list[str]:
    """Char of each byte in GPT-2's byte-to-unicode map, by its published rule: printable bytes
    are their own char, the other 68 bytes are U+0100.. in byte order."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b]
    others = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable}
    chars.update({b: chr(0x100 + n) for n, b in enumerate(others)})
    return [chars[b] for b in range(256)]


GPT2_ALPHABET = _gpt2_alphabet()


def _single_byte_ids(tok, vocab_type: VocabType) -> dict[int, int]:
    """byte -> id of the token that is exactly that byte, from the tokenizer's own vocabulary."""
    vocab = tok.get_vocab()
    out = {}
    for b in range(256):
        spelled = GPT2_ALPHABET[b] if vocab_type == VocabType.BYTE_LEVEL else f"<0x{b:02X}>"
        if spelled in vocab:
            out[b] = vocab[spelled]
    return out


_LEADS = [b"", b"\xc2", b"\xe1", b"\xf1", b"\xe1\x80", b"\xf1\x80", b"\xf1\x80\x80"]
_TRAILS = [b"", b"\x80", b"\x80\x80", b"\x80\x80\x80", b"\xa0", b"\xa0\x80", b"\x90", b"\x90\x80",
           b"\x90\x80\x80"]


def _utf8_completion(data: bytes):
    """Bytes to put around ``data`` so that the whole is valid UTF-8, or None."""
    for lead in _LEADS:
        for trail in _TRAILS:
            try:
                (lead + data + trail).decode("utf-8")
            except UnicodeDecodeError:
                continue
            return lead, trail
    return None


def check_every_id_against_hf(tok, info: TokenizerInfo) -> dict[str, int]:
    """Compare our decoded bytes of every id with the HF backend's decoding of [x, id] minus the
    decoding of [x] (x = the token "a", so a leading space is never stripped). Tokens whose bytes
    are not valid UTF-8 are checked exactly by wrapping them in single-byte tokens that make the
    whole valid UTF-8; the rest (impossible bytes such as 0xFF) are checked with U+FFFD
    replacement, which is what HF's decoder yields."""
    backend = tok.backend_tokenizer
    decoded = info.decoded_vocab
    n = len(decoded)
    x = tok.get_vocab()["a"]
    prefix = backend.decode([x], skip_special_tokens=False)
    outs = backend.decode_batch([[x, i] for i in range(n)], skip_special_tokens=False)
    byte_ids = _single_byte_ids(tok, info.vocab_type)
    stats = {"exact": 0, "completed": 0, "lossy": 0}
    mismatches = []
    wrapped_ids = []
    wrapped_expect = []
    for i in range(n):
        hf = outs[i]
        assert hf.startswith(prefix), (i, prefix, hf)
        hf = hf[len(prefix):]
        ours = decoded[i]
        try:
            text = ours.decode("utf-8")
        except UnicodeDecodeError:
            if ours.decode("utf-8", "replace") != hf:
                mismatches.append((i, ours, hf))
                continue
            comp = _utf8_completion(ours)
            if comp is not None and all(b in byte_ids for b in comp[0] + comp[1]):
                lead, trail = comp
                lead_ids = [byte_ids[b] for b in lead]
                trail_ids = [byte_ids[b] for b in trail]
                wrapped_ids.append([x] + lead_ids + [i] + trail_ids)
                wrapped_expect.append((i, (lead + ours + trail).decode("utf-8")))
            else:
                stats["lossy"] += 1
            continue
        if text != hf:
            mismatches.append((i, ours, hf))
        else:
            stats["exact"] += 1
    wrapped_outs = backend.decode_batch(wrapped_ids, skip_special_tokens=False)
    for (i, expect), out in zip(wrapped_expect, wrapped_outs):
        if out[len(prefix):] != expect:
            mismatches.append((i, decoded[i], out[len(prefix):]))
        else:
            stats["completed"] += 1
    assert not mismatches, f"{len(mismatches)} ids differ from HF, first: {mismatches[:5]}"
    return stats


# ---------------------------------------------------------------------------------------------
# Real vocabularies


def _ids_in(text: str | None) -> list[int]:
    return [int(m) for m in re.findall(r"=(\d+)", text or "")]


EXPECTED_TYPE = {
    "llama3": (VocabType.BYTE_LEVEL, False),
    "qwen2.5": (VocabType.BYTE_LEVEL, False),
    "deepseek-v3": (VocabType.BYTE_LEVEL, False),
    "mistral-nemo": (VocabType.BYTE_LEVEL, False),
    "gpt2": (VocabType.BYTE_LEVEL, False),
    "gemma2": (VocabType.BYTE_FALLBACK, False),
    "gemma3": (VocabType.BYTE_FALLBACK, False),
    "mistral-7b-v0.3": (VocabType.BYTE_FALLBACK, True),
    "llama2": (VocabType.BYTE_FALLBACK, True),
    "phi3.5": (VocabType.BYTE_FALLBACK, True),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_real_vocabulary_matches_hf(family):
    tok = load_hf(family)
    info = TokenizerInfo.from_huggingface(tok)
    fam = manifest()["families"][family]

    assert (info.vocab_type, info.add_prefix_space) == EXPECTED_TYPE[family]
    assert info.vocab_size == fam["vocab_total"] == len(tok)
    assert len(info.decoded_vocab) == info.vocab_size

    stats = check_every_id_against_hf(tok, info)
    assert stats["exact"] > 0.9 * info.vocab_size, stats

    stop = set(info.stop_token_ids)
    special = set(info.special_token_ids)
    text = info._handle.sorted_text_token_ids
    assert not stop & special
    # The manifest's eos (and its "also" end markers) stop with extra_stop_tokens; by default
    # only eos_token_id does, as in XGrammar.
    assert stop == {tok.eos_token_id}, info.stop_token_ids
    extra = set(TokenizerInfo.from_huggingface(tok, extra_stop_tokens=True).stop_token_ids)
    assert set(_ids_in(fam["eos"])) <= extra, (fam["eos"], extra)
    assert set(_ids_in(fam["bos"])) <= special | stop  # GPT-2's bos is its eos
    assert set(text) == set(range(info.vocab_size)) - stop - special
    assert len(text) == len(set(text))
    decoded = info.decoded_vocab
    keys = [(decoded[i], i) for i in text]
    assert keys == sorted(keys)

    # Added tokens marked special (<|eot_id|>, <|im_start|>, <start_of_turn>, ...) are special or
    # stop, never text.
    for token_id, added in tok.added_tokens_decoder.items():
        if added.special:
            assert token_id in special or token_id in stop, (token_id, added.content)
    if family == "mistral-nemo":
        assert set(range(1000)) <= special | stop
    if family == "llama3":
        assert {128000, 128006, 128007} <= special  # <|begin_of_text|>, header markers
        assert stop == {128009}  # eos only, as XGrammar
        extra = TokenizerInfo.from_huggingface(tok, extra_stop_tokens=True)
        assert set(extra.stop_token_ids) == {128001, 128008, 128009}
    if family == "qwen2.5":
        vocab = tok.get_vocab()
        assert vocab["<|im_start|>"] in special and vocab["<|im_end|>"] in stop
        assert vocab["<|endoftext|>"] in special  # a stop token only with extra_stop_tokens
        # `<tool_call>` is an added token *not* marked special: still never grammar text (a
        # grammar names it with Token(id)); only special_tokens="marked" makes it text.
        tool_call = vocab["<tool_call>"]
        assert tool_call in special and decoded[tool_call] == b"<tool_call>"
        marked = TokenizerInfo.from_huggingface(tok, special_tokens="marked")
        assert tool_call not in set(marked.special_token_ids)
    if family == "gemma2":
        # `</s>` is an added token (not a stop token): special by default, text when "marked";
        # whitespace-only added tokens ("\n", "\n\n") stay text.
        vocab = tok.get_vocab()
        assert vocab["</s>"] not in stop and vocab["</s>"] in special
        assert vocab["\n"] not in special and vocab["\n\n"] not in special
        marked = TokenizerInfo.from_huggingface(tok, special_tokens="marked")
        assert vocab["</s>"] not in set(marked.special_token_ids)


@pytest.mark.parametrize("family", ["llama3", "deepseek-v3", "mistral-nemo", "llama2", "gemma2"])
def test_real_vocabulary_agrees_with_xgrammar(family):
    """Same decoded bytes, type, prefix-space flag and stop ids as XGrammar 0.2.8 (special ids
    differ by design; see test_stop_special_and_type_agree_with_xgrammar)."""
    xgrammar = pytest.importorskip("xgrammar", reason="xgrammar is not installed")
    tok = load_hf(family)
    ours = TokenizerInfo.from_huggingface(tok)
    theirs = xgrammar.TokenizerInfo.from_huggingface(tok)
    assert ours.vocab_type.value == theirs.vocab_type.value
    assert ours.add_prefix_space == theirs.add_prefix_space
    assert ours.vocab_size == theirs.vocab_size
    assert ours.decoded_vocab == theirs.decoded_vocab
    assert ours.stop_token_ids == theirs.stop_token_ids


ALL_FAMILIES = [
    "deepseek-v3", "gemma2", "gemma3", "gpt2", "llama2", "llama3", "mistral-7b-v0.3", "mistral-nemo",
    "phi3.5", "qwen2.5",
]


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_stop_special_and_type_agree_with_xgrammar(family):
    """For every shared tokenizer family: the same vocabulary type, prefix-space flag and stop
    tokens as XGrammar 0.2.8 by default, and the same special ids with
    ``special_tokens="xgrammar"``. By default grammask also marks the tokenizer's declared special
    tokens special (documented difference), a superset of XGrammar's."""
    xgrammar = pytest.importorskip("xgrammar", reason="xgrammar is not installed")
    tok = load_hf(family)
    theirs = xgrammar.TokenizerInfo.from_huggingface(tok)
    ours = TokenizerInfo.from_huggingface(tok)
    assert ours.vocab_type.value == theirs.vocab_type.value
    assert ours.add_prefix_space == theirs.add_prefix_space
    assert ours.vocab_size == theirs.vocab_size
    assert ours.stop_token_ids == theirs.stop_token_ids
    assert set(theirs.special_token_ids) <= set(ours.special_token_ids)
    like = TokenizerInfo.from_huggingface(tok, special_tokens="xgrammar")
    assert like.special_token_ids == sorted(theirs.special_token_ids)
    assert like.stop_token_ids == theirs.stop_token_ids


def test_raw_constructor_detects_xgrammars_stop_tokens():
    xgrammar = pytest.importorskip("xgrammar", reason="xgrammar is not installed")
    vocab = ["a", "<|endoftext|>", "</s>", "<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<eos>", "<|end|>"]
    assert TokenizerInfo(vocab).stop_token_ids == xgrammar.TokenizerInfo(vocab).stop_token_ids
    extra = TokenizerInfo(vocab, extra_stop_tokens=True).stop_token_ids
    assert set(extra) == set(range(1, 8))
    with pytest.raises(ValueError):
        TokenizerInfo.from_huggingface(load_hf("gpt2"), special_tokens="none")


def test_real_vocabulary_padding_and_truncation():
    tok = load_hf("gpt2")
    padded = TokenizerInfo.from_huggingface(tok, vocab_size=50304)
    assert padded.vocab_size == 50304
    assert len(padded.decoded_vocab) == 50257
    assert set(range(50257, 50304)) <= set(padded.special_token_ids)
    assert padded.stop_token_ids == [50256]

    with pytest.warns(UserWarning, match="no eos_token_id"):
        cut = TokenizerInfo.from_huggingface(tok, vocab_size=50000)
    assert cut.vocab_size == 50000 and len(cut.decoded_vocab) == 50000
    assert cut.stop_token_ids == []

    explicit = TokenizerInfo.from_huggingface(tok, stop_token_ids=[198, 50256])
    assert explicit.stop_token_ids == [198, 50256]
    assert 198 not in explicit._handle.sorted_text_token_ids
    assert TokenizerInfo.from_huggingface(tok, stop_token_ids=50256).stop_token_ids == [50256]
    with pytest.raises(ValueError, match="empty"):
        TokenizerInfo.from_huggingface(tok, stop_token_ids=[])
    with pytest.raises(ValueError, match="out of range"):
        TokenizerInfo.from_huggingface(tok, stop_token_ids=[50257])


def test_real_vocabulary_serialization_round_trip():
    tok = load_hf("llama2")
    info = TokenizerInfo.from_huggingface(tok, vocab_size=32064)
    again = TokenizerInfo.deserialize_json(info.serialize_json())
    assert again.serialize_json() == info.serialize_json()
    assert again.decoded_vocab == info.decoded_vocab
    assert again.special_token_ids == info.special_token_ids
    assert again._handle.sorted_text_token_ids == info._handle.sorted_text_token_ids
    meta = info.dump_metadata()
    assert meta == (
        '{"vocab_type":1,"vocab_size":32064,"add_prefix_space":true,"stop_token_ids":[2]}'
    )
    encoded = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    rebuilt = TokenizerInfo.from_vocab_and_metadata(encoded, meta)
    assert rebuilt.dump_metadata() == meta
    assert rebuilt.decoded_vocab == info.decoded_vocab


# ---------------------------------------------------------------------------------------------
# Small in-memory vocabularies (no shared data needed)


def test_byte_level_decoding_and_charset():
    assert _BYTE_LEVEL_CHARSET == frozenset(GPT2_ALPHABET)
    assert {"Ġ", "Ċ", "ĉ", "ÿ", "!"} <= _BYTE_LEVEL_CHARSET and " " not in _BYTE_LEVEL_CHARSET
    info = TokenizerInfo(["Ġhello", "ĊĠĠ", "ÿ", "âĢ", "<|eot_id|>"], VocabType.BYTE_LEVEL)
    assert info.decoded_vocab == [b" hello", b"\n  ", b"\xff", b"\xe2\x80", b"<|eot_id|>"]
    assert info.stop_token_ids == [4]
    assert info.vocab_type is VocabType.BYTE_LEVEL


def test_byte_fallback_and_raw_decoding():
    info = TokenizerInfo(["<0x0A>", "<0xE2>", "▁hello", "<s>", "</s>"], VocabType.BYTE_FALLBACK,
                         add_prefix_space=True)
    assert info.decoded_vocab == [b"\n", b"\xe2", b" hello", b"<s>", b"</s>"]
    assert info.add_prefix_space is True
    raw = TokenizerInfo([b"\xff\x00", "▁x"], VocabType.RAW)
    assert raw.decoded_vocab == [b"\xff\x00", "▁x".encode()]


def test_padding_special_and_stop_ids():
    info = TokenizerInfo(["a", "b", "", "<|im_start|>", "<|im_end|>"], vocab_size=8,
                         special_token_ids=[3], extra_stop_tokens=True)
    assert info.vocab_size == 8
    assert info.stop_token_ids == [4]
    assert info.special_token_ids == [2, 3, 5, 6, 7]
    assert info._handle.sorted_text_token_ids == [0, 1]
    assert len(info.decoded_vocab) == 5
    several = TokenizerInfo(["x", "<|end_of_text|>", "<|eot_id|>"], stop_token_ids=[2, 1, 2])
    assert several.stop_token_ids == [2, 1]


def test_metadata_and_json_round_trip():
    vocab = ["Ġa", "b", "<|endoftext|>"]
    info = TokenizerInfo(vocab, VocabType.BYTE_LEVEL, vocab_size=5, add_prefix_space=True)
    meta = info.dump_metadata()
    assert meta == '{"vocab_type":2,"vocab_size":5,"add_prefix_space":true,"stop_token_ids":[2]}'
    again = TokenizerInfo.from_vocab_and_metadata(vocab, meta)
    assert again.dump_metadata() == meta and again.decoded_vocab == info.decoded_vocab
    s = info.serialize_json()
    keys = list(json.loads(s))
    assert keys[:6] == ["vocab_type", "vocab_size", "add_prefix_space", "stop_token_ids",
                        "special_token_ids", "decoded_vocab"]
    assert json.loads(s)["decoded_vocab"] == ["2061", "62", b"<|endoftext|>".hex()]
    assert TokenizerInfo.deserialize_json(s).serialize_json() == s
    assert pickle.loads(pickle.dumps(info)).serialize_json() == s


def test_errors():
    with pytest.raises(ValueError, match="smaller"):
        TokenizerInfo(["a", "b"], vocab_size=1)
    with pytest.raises(ValueError, match="out of range"):
        TokenizerInfo(["a", "b"], stop_token_ids=[2])
    with pytest.raises(ValueError, match="out of range"):
        TokenizerInfo(["a", "b"], stop_token_ids=[-1])
    with pytest.raises(ValueError, match="out of range"):
        TokenizerInfo(["a", "b"], special_token_ids=[5])
    with pytest.raises(ValueError):
        TokenizerInfo(["a"], 7)
    with pytest.raises(TypeError):
        TokenizerInfo(["a", 3])
    with pytest.raises(_core.LimitExceededError):
        TokenizerInfo([b"x" * ((1 << 16) + 1)])
    with pytest.raises(_core.LimitExceededError):
        TokenizerInfo([], vocab_size=1 << 40)  # would be terabytes of per-id tables
    with pytest.raises(ValueError, match="UTF-8"):
        TokenizerInfo(["\ud800"])  # a lone surrogate has no bytes
    with pytest.raises(_core.InvalidJSONError):
        TokenizerInfo.deserialize_json("{")
    with pytest.raises(_core.DeserializeFormatError):
        TokenizerInfo.deserialize_json('{"vocab_type":0}')
    with pytest.raises(_core.DeserializeFormatError):
        TokenizerInfo.from_vocab_and_metadata(["a"], '{"vocab_type":9,"vocab_size":1,'
                                              '"add_prefix_space":false,"stop_token_ids":[]}')
    with pytest.raises(RuntimeError):  # every grammask error is a RuntimeError, as in XGrammar
        TokenizerInfo.deserialize_json("[]")
    with pytest.raises(ValueError, match="Unsupported tokenizer"):
        TokenizerInfo.from_huggingface(object())


def test_prepend_space_in_tokenization_is_deprecated():
    info = TokenizerInfo(["a"], add_prefix_space=True)
    with pytest.warns(DeprecationWarning):
        assert info.prepend_space_in_tokenization is True


def test_detect_metadata_from_hf():
    detect = TokenizerInfo._detect_metadata_from_hf
    byte_level = {"decoder": {"type": "ByteLevel"}, "pre_tokenizer": {"type": "ByteLevel",
                                                                        "add_prefix_space": False}}
    assert detect(json.dumps(byte_level)) == {"vocab_type": VocabType.BYTE_LEVEL,
                                              "add_prefix_space": False}
    llama2_old = {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "},
                                                  "content": "▁"}]},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace"}, {"type": "ByteFallback"},
                                                     {"type": "Fuse"}]},
    }
    assert detect(json.dumps(llama2_old)) == {"vocab_type": VocabType.BYTE_FALLBACK,
                                              "add_prefix_space": True}
    for scheme, expect in [("first", True), ("always", True), ("never", False)]:
        spec = {"pre_tokenizer": {"type": "Metaspace", "prepend_scheme": scheme}, "decoder": None}
        assert detect(json.dumps(spec)) == {"vocab_type": VocabType.RAW, "add_prefix_space": expect}


def test_detect_vocab_type_from_vocab():
    detect = TokenizerInfo._detect_vocab_type_from_vocab
    byte_level = {c: i for i, c in enumerate(sorted(_BYTE_LEVEL_CHARSET))}
    byte_level.update({"Ġhello": 256, "Ġworld": 257})
    assert detect(byte_level) is VocabType.BYTE_LEVEL
    fallback = {f"<0x{b:02X}>": b for b in range(256)}
    fallback["▁hello"] = 256
    assert detect(fallback) is VocabType.BYTE_FALLBACK
    assert detect({"hello": 0, "world": 1}) is None


def _tiny_hf_tokenizer(byte_level: bool):
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    if byte_level:
        vocab = {c: i for i, c in enumerate(GPT2_ALPHABET)}
        vocab.update({"Ġh": 256, "Ġhi": 257})
        model = tokenizers.models.BPE(vocab, [("Ġ", "h"), ("Ġh", "i")])
        tk = tokenizers.Tokenizer(model)
        tk.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = tokenizers.decoders.ByteLevel()
    else:
        vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
        vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
        vocab.update({"▁": 259, "h": 260, "i": 261, "▁h": 262, "▁hi": 263})
        model = tokenizers.models.BPE(vocab, [("▁", "h"), ("▁h", "i")], byte_fallback=True,
                                      unk_token="<unk>")
        tk = tokenizers.Tokenizer(model)
        tk.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(prepend_scheme="first")
        tk.decoder = tokenizers.decoders.Sequence([
            tokenizers.decoders.Replace("▁", " "), tokenizers.decoders.ByteFallback(),
            tokenizers.decoders.Fuse()])
    tk.add_special_tokens(["<|im_end|>", "<|im_start|>"])
    declared = {} if byte_level else {"unk_token": "<unk>", "bos_token": "<s>"}
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token="<|im_end|>", **declared
    )


@pytest.mark.parametrize("byte_level", [True, False])
def test_from_huggingface_in_memory(byte_level):
    tok = _tiny_hf_tokenizer(byte_level)
    info = TokenizerInfo.from_huggingface(tok, vocab_size=300)
    vocab = tok.get_vocab()
    im_end, im_start = vocab["<|im_end|>"], vocab["<|im_start|>"]
    assert info.vocab_type == (VocabType.BYTE_LEVEL if byte_level else VocabType.BYTE_FALLBACK)
    assert info.add_prefix_space == (not byte_level)
    assert info.vocab_size == 300
    assert im_end in info.stop_token_ids
    assert im_start in info.special_token_ids and im_start not in info._handle.sorted_text_token_ids
    hi = vocab["Ġhi" if byte_level else "▁hi"]
    assert info.decoded_vocab[hi] == b" hi"
    assert set(range(len(vocab), 300)) <= set(info.special_token_ids)
    if not byte_level:
        assert info.decoded_vocab[vocab["<0x0A>"]] == b"\n"
        assert {0, 1} <= set(info.special_token_ids)  # <unk>, <s> are declared special tokens
        # `</s>` is a plain vocabulary token here (not an added token): it stays text.
        assert 2 not in info.stop_token_ids and 2 in info._handle.sorted_text_token_ids


class _FakeSentencePiece:
    """The part of ``sentencepiece.SentencePieceProcessor`` that TokenizerInfo reads."""

    def __init__(self, pieces: list[str], eos: int) -> None:
        self._pieces, self._eos = pieces, eos

    def eos_id(self) -> int:
        return self._eos

    def id_to_piece(self, i: int) -> str:
        return self._pieces[i]


class _FakeSlowSentencePieceTokenizer:
    """A slow (``sp_model``) tokenizer without ``backend_tokenizer``, as transformers v4 had."""

    eos_token_id = None

    def __init__(self, pieces: list[str]) -> None:
        self._pieces = pieces
        self.sp_model = _FakeSentencePiece(pieces, eos=2)

    def get_vocab(self) -> dict[str, int]:
        return {p: i for i, p in enumerate(self._pieces)}


def test_from_slow_sentencepiece_tokenizer():
    pieces = ["<unk>", "<s>", "</s>", "<0x0A>", "<0xE2>", "▁hi", "x"]
    info = TokenizerInfo.from_huggingface(_FakeSlowSentencePieceTokenizer(pieces))
    assert info.vocab_type is VocabType.BYTE_FALLBACK and info.add_prefix_space
    assert info.stop_token_ids == [2]  # from sp_model.eos_id()
    assert info.decoded_vocab[3:6] == [b"\n", b"\xe2", b" hi"]
    no_bytes = _FakeSlowSentencePieceTokenizer(["<unk>", "<s>", "</s>", "▁a"])
    raw = TokenizerInfo.from_huggingface(no_bytes)
    assert raw.vocab_type is VocabType.RAW


# A stand-in for tiktoken.Encoding: detection looks at the type's name and module only.
_FakeEncoding = type("Encoding", (), {"__module__": "tiktoken.core"})


class _FakeTiktokenTokenizer:
    """A remote-code tokenizer wrapping tiktoken (Qwen-1 style): raw byte tokens."""

    def __init__(self, byte_level: bool) -> None:
        self.tokenizer = _FakeEncoding()
        space = "Ġ" if byte_level else b" "
        self._vocab = {b"a": 0, space: 1, b"\xe4\xbd": 2, b"<|endoftext|>": 3}
        self.eos_token_id = 3

    def get_vocab(self):
        return dict(self._vocab)

    def encode(self, text, add_special_tokens=False):
        return [1] if text == " " else [0]

    def convert_ids_to_tokens(self, ids):
        inverse = {v: k for k, v in self._vocab.items()}
        return [inverse[i] for i in ids]


def test_from_tiktoken_tokenizer():
    info = TokenizerInfo.from_huggingface(_FakeTiktokenTokenizer(byte_level=False), vocab_size=8)
    assert info.vocab_type is VocabType.RAW and not info.add_prefix_space
    assert info.decoded_vocab == [b"a", b" ", b"\xe4\xbd", b"<|endoftext|>"]
    assert info.stop_token_ids == [3]
    assert info.special_token_ids == [4, 5, 6, 7]
    kimi = TokenizerInfo.from_huggingface(_FakeTiktokenTokenizer(byte_level=True))
    assert kimi.vocab_type is VocabType.BYTE_LEVEL
