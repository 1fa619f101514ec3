"""Benchmark inputs: where the shared data lives, MaskBench files, and their tokenization.

Takes a folder of MaskBench files (JSON objects with ``schema`` and ``tests``, each test holding
``valid`` and ``data``) and produces :class:`Task` objects: the schema as a string plus every
instance tokenized once with the benchmark tokenizer, so that all engines see the same tokens.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Environment variable naming the shared data folder (tokenizers/, maskbench/).
SHARED_ENV = "GRAMMASK_SHARED"


class MissingDataError(RuntimeError):
    """A benchmark input (shared folder, tokenizer, data folder) does not exist."""


def repo_root() -> Path:
    """The repository root, assuming this file lies in python/grammask/bench/."""
    return Path(__file__).resolve().parents[3]


def shared_dir() -> Path:
    """The shared data folder: $GRAMMASK_SHARED, else ../shared next to the repository root.

    Raises MissingDataError naming both places when neither exists.
    """
    tried = []
    env = os.environ.get(SHARED_ENV)
    if env:
        p = Path(env)
        if p.is_dir():
            return p
        tried.append(f"${SHARED_ENV}={env}")
    fallback = repo_root().parent / "shared"
    if fallback.is_dir():
        return fallback
    tried.append(str(fallback))
    raise MissingDataError(
        "shared data folder not found (tried " + ", ".join(tried) + "); set "
        f"{SHARED_ENV} to a folder holding tokenizers/llama3 and maskbench/data, or pass "
        "the data folder and --tokenizer explicitly"
    )


def default_data_dir() -> Path:
    return shared_dir() / "maskbench" / "data"


def default_tokenizer_dir() -> Path:
    return shared_dir() / "tokenizers" / "llama3"


def load_hf_tokenizer(tokenizer_dir: str | os.PathLike):
    """Load a Hugging Face tokenizer from a local folder (no network)."""
    p = Path(tokenizer_dir)
    if not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
        raise MissingDataError(f"no tokenizer found in {p} (expected tokenizer.json)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(p))


def list_files(data_dir: str | os.PathLike, limit: int | None, seed: int) -> list[Path]:
    """All *.json files of data_dir, or `limit` of them, sampled and shuffled with `seed`.

    The sample and its order are a function of (sorted file list, limit, seed) only, so a run
    is repeatable. Files come in seeded random order, so that every prefix of the list (a run
    stopped early) is itself a uniform sample.
    """
    d = Path(data_dir)
    if not d.is_dir():
        raise MissingDataError(f"MaskBench data folder not found: {d}")
    files = sorted(p for p in d.iterdir() if p.suffix == ".json")
    if not files:
        raise MissingDataError(f"no *.json files in {d}")
    n = len(files) if limit is None else min(limit, len(files))
    return random.Random(seed).sample(files, n)


def shard_files(files: list[Path], index: int, count: int) -> list[Path]:
    """Shard `index` of `count` (1-based): every count-th file of the sample from the index-th.

    The shards of one sample are disjoint and together hold every file; each keeps the sample's
    order, so each shard, and each prefix of it, is itself a uniform sample.
    """
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: need 1 <= I <= N")
    return files[index - 1::count]


def parse_shard(spec: str) -> tuple[int, int]:
    """'I/N' -> (I, N), for --shard."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard {spec!r}: expected I/N, e.g. 1/4") from None
    shard_files([], i, n)  # range check
    return i, n


@dataclass
class Instance:
    valid: bool
    tokens: list[int]
    text: str


@dataclass
class Task:
    """One schema with its tokenized instances, as sent to every engine worker."""

    name: str
    schema: str
    instances: list[Instance] = field(default_factory=list)
    #: Set when the file itself could not be read (never sent to engines).
    load_error: str | None = None


def serialize_instance(data: Any) -> str:
    """MaskBench's serialization: json.dumps with default separators, non-ASCII kept."""
    return json.dumps(data, ensure_ascii=False)


def load_task(path: Path, tokenizer) -> Task:
    """Read one MaskBench file and tokenize its instances (no special tokens)."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        schema = json.dumps(obj["schema"])
        tests = obj.get("tests") or []
    except (OSError, ValueError, KeyError, TypeError) as e:
        return Task(path.name, "", load_error=f"{type(e).__name__}: {e}")
    insts = []
    for t in tests:
        text = serialize_instance(t["data"])
        toks = tokenizer.encode(text, add_special_tokens=False)
        insts.append(Instance(bool(t["valid"]), [int(x) for x in toks], text))
    return Task(path.name, schema, insts)
