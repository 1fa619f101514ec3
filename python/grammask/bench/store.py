"""Results folder of a MaskBench run: append records and raw times, resume, read back, merge.

Takes what ``maskbench.run`` produces per schema (one record and the raw mask/accept times per
engine); keeps them on disk as the run goes, so that a run can stop at any point and continue
(``--resume``), and so that several runs over disjoint parts of one sample (``--shard I/N``) can
be combined into one report (``merge``). Files in a run folder:

- ``run.json``: what makes runs comparable (``IDENTITY_KEYS``: engines, their versions, tokenizer,
  limits, seed, limit, the sampled file list), the shard, and one entry per session;
- ``records.jsonl``: one line per (schema, engine). A schema's lines are written together, after
  every engine ran it; each carries ``index`` (the schema's position in the whole sample) and
  ``group`` (how many lines the schema has), so a schema cut off by a hard kill is recognised;
- ``raw/<engine>.mask_us.f32``, ``.accept_us.f32`` and ``.mask_cpu_us.f32``: every mask and
  accept time (wall clock) and every mask's thread CPU time (µs, float32), appended in record
  order; a record's ``tokens`` and ``accepts`` say how many values it owns. A folder written
  before CPU times were kept has no ``.mask_cpu_us.f32``: its masks read back as NaN there (and
  a resumed run pads the file with NaN for them), so a report leaves the CPU rows out.

Invariant: the raw files hold at least the values of the records in ``records.jsonl``, in the same
order; values past them (a schema cut off before its records were written) belong to no record and
are dropped on resume.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RUN_FILE = "run.json"
RECORDS_FILE = "records.jsonl"
RAW_DIR = "raw"
RAW_KINDS = ("mask_us", "accept_us", "mask_cpu_us")
#: The record field counting each raw kind's values.
COUNT_FIELD = {"mask_us": "tokens", "accept_us": "accepts", "mask_cpu_us": "tokens"}
#: Raw kinds added after the first runs: a folder without their file reads them as NaN.
LATER_KINDS = ("mask_cpu_us",)
#: Runs that differ in any of these are not comparable: resume and merge refuse them.
IDENTITY_KEYS = (
    "engines", "versions", "tokenizer_sha", "timeout_s", "memory_mb", "seed", "limit", "sample_sha",
    "bitmask",
)
#: Values of identity keys added later, for runs saved before them (bitmask: session 70).
IDENTITY_DEFAULTS = {"bitmask": "per-request"}
_RAW_DTYPE = np.float32


class FolderMismatch(ValueError):
    """Results folders (or a folder and a run asked to resume it) are not comparable."""


def sample_digest(names: list[str]) -> str:
    """Digest of the sampled file list, in order: equal iff same data files, limit and seed."""
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]


def tokenizer_digest(tokenizer_dir: str | os.PathLike) -> str:
    """Digest of the files of a tokenizer folder (names and contents), so that two copies of
    one tokenizer at different paths compare equal."""
    h = hashlib.sha256()
    for p in sorted(Path(tokenizer_dir).iterdir()):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _raw_path(folder: Path, engine: str, kind: str) -> Path:
    return folder / RAW_DIR / f"{engine}.{kind}.f32"


def check_identity(a: dict[str, Any], b: dict[str, Any], what: str,
                   keys: tuple[str, ...] = IDENTITY_KEYS) -> None:
    """Raise FolderMismatch naming every identity key on which two run descriptions differ."""
    def get(run: dict[str, Any], k: str) -> Any:
        return run.get(k, IDENTITY_DEFAULTS.get(k))

    diffs = [f"{k}: {get(a, k)!r} vs {get(b, k)!r}" for k in keys if get(a, k) != get(b, k)]
    if diffs:
        raise FolderMismatch(f"{what} differ in " + "; ".join(diffs))


@dataclass
class FolderContents:
    """A run folder read back: its run.json, its complete records, and their raw times."""

    run: dict[str, Any]
    records: list[dict[str, Any]]
    #: engine -> kind -> the values of ``records`` (in record order), float64.
    times: dict[str, dict[str, np.ndarray]]
    #: Records past the last complete schema (dropped), and raw values past the records.
    dropped_records: int = 0


def _read_records(folder: Path) -> tuple[list[dict[str, Any]], int]:
    """Complete schemas' records in file order, and the number of lines dropped after them."""
    path = folder / RECORDS_FILE
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.split("\n")
    torn = 1 if lines[-1] else 0  # a last line without its newline was cut off mid-write
    recs = [json.loads(line) for line in lines[:-1] if line]
    kept: list[dict[str, Any]] = []
    i = 0
    while i < len(recs):
        n = recs[i]["group"]
        group = recs[i:i + n]
        if len(group) < n or any(r["index"] != recs[i]["index"] for r in group):
            if i + len(group) < len(recs):
                raise ValueError(f"{path}: schema {recs[i]['file']} has {len(group)} of its "
                                 f"{n} records before other schemas' records: folder damaged")
            break  # the last schema was cut off
        kept.extend(group)
        i += n
    return kept, len(recs) - len(kept) + torn


def read_folder(folder: str | os.PathLike) -> FolderContents:
    """Read a run folder; raises FileNotFoundError without run.json, ValueError if damaged."""
    folder = Path(folder)
    run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    records, dropped = _read_records(folder)
    times: dict[str, dict[str, np.ndarray]] = {}
    for engine in run["versions"]:
        mine = [r for r in records if r["engine"] == engine]
        times[engine] = {}
        for kind in RAW_KINDS:
            need = sum(r[COUNT_FIELD[kind]] for r in mine)
            path = _raw_path(folder, engine, kind)
            if kind in LATER_KINDS and not path.exists():
                times[engine][kind] = np.full(need, np.nan)
                continue
            have = path.stat().st_size // _RAW_DTYPE().itemsize if path.exists() else 0
            if have < need:
                raise ValueError(f"{path} holds {have} values, its records need {need}: "
                                 "folder damaged")
            arr = np.fromfile(path, dtype=_RAW_DTYPE, count=need) if need else np.zeros(0)
            times[engine][kind] = arr.astype(np.float64)
    return FolderContents(run, records, times, dropped)


def check_resumable(folder: str | os.PathLike, run: dict[str, Any]) -> None:
    """Before engines start: refuse to resume a folder whose run differs from ``run`` in a key
    known without the engines (everything but versions) or in its shard."""
    path = Path(folder) / RUN_FILE
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        keys = tuple(k for k in IDENTITY_KEYS if k != "versions")
        check_identity(old, run, f"{folder} and this run", keys)
        if old.get("shard") != run.get("shard"):
            raise FolderMismatch(f"{folder} holds shard {old.get('shard')}, "
                                 f"this run is shard {run.get('shard')}")


class RunWriter:
    """Appends one schema at a time to a run folder (fresh, or resumed after its last complete
    schema)."""

    def __init__(self, folder: str | os.PathLike, run: dict[str, Any], resume: bool):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / RAW_DIR).mkdir(exist_ok=True)
        self.run = run
        self.done: set[str] = set()
        if resume and (self.folder / RUN_FILE).exists():
            old = read_folder(self.folder)
            check_resumable(self.folder, run)
            check_identity(old.run, run, f"{self.folder} and this run")
            self.run = old.run
            self._truncate_to(old)
            self.done = {r["file"] for r in old.records}
        else:
            (self.folder / RECORDS_FILE).write_text("", encoding="utf-8")
            for engine in run["versions"]:
                for kind in RAW_KINDS:
                    _raw_path(self.folder, engine, kind).write_bytes(b"")
        self.save_run()
        self._records = open(self.folder / RECORDS_FILE, "a", encoding="utf-8")  # noqa: SIM115
        self._raw = {(e, k): open(_raw_path(self.folder, e, k), "ab")  # noqa: SIM115
                     for e in self.run["versions"] for k in RAW_KINDS}

    def _truncate_to(self, old: FolderContents) -> None:
        """Drop what belongs to no complete schema: cut-off records and their raw values."""
        if old.dropped_records:
            tmp = self.folder / (RECORDS_FILE + ".tmp")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in old.records), encoding="utf-8")
            tmp.replace(self.folder / RECORDS_FILE)
        for engine, kinds in old.times.items():
            for kind, arr in kinds.items():
                path = _raw_path(self.folder, engine, kind)
                if not path.exists():  # a later kind: NaN for the records before it
                    path.write_bytes(np.asarray(arr, dtype=_RAW_DTYPE).tobytes())
                with open(path, "ab") as f:
                    f.truncate(arr.size * _RAW_DTYPE().itemsize)

    def save_run(self) -> None:
        tmp = self.folder / (RUN_FILE + ".tmp")
        tmp.write_text(json.dumps(self.run, indent=1), encoding="utf-8")
        tmp.replace(self.folder / RUN_FILE)

    def append_schema(self, results: list[tuple[dict[str, Any], dict[str, np.ndarray]]]) -> None:
        """Store one schema: (record, its raw arrays by kind) per engine that ran it. Raw values
        go first, so that a record never points past its raw file."""
        for rec, raw in results:
            for kind in RAW_KINDS:
                self._raw[rec["engine"], kind].write(np.asarray(raw[kind], dtype=_RAW_DTYPE).tobytes())
        for f in self._raw.values():
            f.flush()
        lines = [json.dumps({**rec, "group": len(results)}) + "\n" for rec, _ in results]
        self._records.write("".join(lines))
        self._records.flush()
        self.done.update(rec["file"] for rec, _ in results)

    def close(self) -> None:
        self._records.close()
        for f in self._raw.values():
            f.close()


def read_merged(folders: list[str | os.PathLike]) -> tuple[list[FolderContents], list[dict],
                                                           dict[str, dict[str, np.ndarray]]]:
    """Read several run folders of one sample; refuse (FolderMismatch) folders whose runs are
    not comparable or that hold a schema twice. Returns the folders, all records ordered by
    their position in the sample, and each engine's raw times in that same order, so the result
    equals what one run over the same schemas would have stored."""
    parts = [read_folder(f) for f in folders]
    for f, p in zip(folders[1:], parts[1:]):
        check_identity(parts[0].run, p.run, f"{folders[0]} and {f}")
    seen: dict[str, str] = {}
    for f, p in zip(folders, parts):
        for name in {r["file"] for r in p.records}:
            if name in seen:
                raise FolderMismatch(f"schema {name} is in both {seen[name]} and {f}")
            seen[name] = str(f)
    # Each record's slice of its folder's raw arrays, then everything in sample order.
    pieces = []
    for p in parts:
        at = {(e, k): 0 for e in p.times for k in RAW_KINDS}
        for r in p.records:
            sl = {}
            for k in RAW_KINDS:
                n = r[COUNT_FIELD[k]]
                sl[k] = p.times[r["engine"]][k][at[r["engine"], k]:at[r["engine"], k] + n]
                at[r["engine"], k] += n
            pieces.append((r, sl))
    pieces.sort(key=lambda rs: rs[0]["index"])  # stable: engine order within a schema is kept
    engines = list(parts[0].run["versions"])
    times = {e: {k: np.concatenate([np.zeros(0)] + [sl[k] for r, sl in pieces if r["engine"] == e])
                 for k in RAW_KINDS} for e in engines}
    return parts, [r for r, _ in pieces], times
