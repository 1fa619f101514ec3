"""JSON-Schema-Test-Suite through grammask's real engine (token by token, Llama 3 tokenizer).

Each test instance is serialized with ``json.dumps``, tokenized with the Llama 3 tokenizer and fed
to a ``GrammarMatcher`` one token at a time; after the last token the stop token must be accepted.
The engine's decision is "accept" iff every token and then the stop token were accepted. A
decision is correct iff it equals the suite's ``valid`` flag. A schema that does not compile
counts as wrong for all of its instances; wrong decisions on compiled schemas are *silent errors*
(split into invalid-accepted and valid-rejected).

Schemas are compiled with ``strict_mode=False`` (JSON Schema semantics: unlisted properties and
items are allowed unless a keyword says otherwise).

Usage::

    python3 bench/json_schema_suite.py [--draft draft2020-12|draft7] [--out FILE] [--workers 2]

Rows: one per test file; ``optional/`` and ``optional/format/`` are reported apart from the
required tests. ``--out`` writes every decision (and every compile error) as JSON.

The shared data directory is ``$GRAMMASK_SHARED`` or ``../shared`` next to the repository root.
This module also holds the worker pool and the token-by-token check used by
``bench/maskbench_coverage.py``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """`$GRAMMASK_SHARED`, else the first `shared/` beside the repository root or one of its
    ancestors (a git worktree may live deeper than the main checkout)."""
    env = os.environ.get("GRAMMASK_SHARED")
    if env:
        return Path(env)
    for base in REPO.parents:
        if (base / "shared").is_dir():
            return base / "shared"
    return REPO.parent / "shared"


# ------------------------------------------------------------------------------------ engine

_STATE: Dict[str, Any] = {}


def init_engine() -> None:
    """Per-process setup: tokenizer, TokenizerInfo and a compiler without cache."""
    import grammask as xgr
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(shared_dir() / "tokenizers" / "llama3"))
    info = xgr.TokenizerInfo.from_huggingface(tok)
    _STATE["xgr"] = xgr
    _STATE["tok"] = tok
    _STATE["info"] = info
    _STATE["compiler"] = xgr.GrammarCompiler(info, cache_enabled=False)
    _STATE["stop"] = info.stop_token_ids[0]


def compile_schema(
    schema: Any, registry: Optional[Dict[str, Any]] = None
) -> Tuple[Any, Optional[Dict[str, str]], float]:
    """(compiled grammar or None, error dict or None, seconds from schema to compiled grammar);
    `registry` (URI -> document) is passed as ``schema_registry``."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    t0 = time.perf_counter()
    try:
        cg = _STATE["compiler"].compile_json_schema(text, strict_mode=False, schema_registry=registry)
    except Exception as e:  # noqa: BLE001 - every failure is reported, by type
        return None, {"type": type(e).__name__, "message": str(e)}, time.perf_counter() - t0
    return cg, None, time.perf_counter() - t0


def token_decision(cg: Any, text: str) -> bool:
    """True iff the tokens of `text` and then the stop token are all accepted, one at a time."""
    xgr = _STATE["xgr"]
    ids = _STATE["tok"].encode(text, add_special_tokens=False)
    m = xgr.GrammarMatcher(cg)
    for t in ids:
        if not m.accept_token(t):
            return False
    return bool(m.accept_token(_STATE["stop"]))


def string_decision(cg: Any, text: str) -> bool:
    """Fast pre-check (not the reported decision): accept_string plus the stop token."""
    xgr = _STATE["xgr"]
    m = xgr.GrammarMatcher(cg)
    return bool(m.accept_string(text)) and bool(m.accept_token(_STATE["stop"]))


# ------------------------------------------------------------------------------------ pool


def _worker(fn: Callable[[Any], Any], tasks: "mp.Queue[Any]", results: "mp.Queue[Any]") -> None:
    init_engine()
    results.put(("ready", None, None))
    while True:
        item = tasks.get()
        if item is None:
            return
        idx, arg = item
        results.put(("start", idx, None))
        try:
            out = fn(arg)
        except Exception as e:  # noqa: BLE001
            out = {"crash": f"{type(e).__name__}: {e}"}
        results.put(("done", idx, out))


def run_pool(
    fn: Callable[[Any], Any],
    args: List[Any],
    workers: int,
    timeout_s: float,
    on_result: Callable[[int, Any], None],
) -> None:
    """Runs `fn` over `args` in `workers` processes. A task running longer than `timeout_s` kills
    its worker (a fresh one replaces it) and is reported as ``{"timeout": timeout_s}``."""
    ctx = mp.get_context("fork")
    results: "mp.Queue[Any]" = ctx.Queue()
    procs: List[Dict[str, Any]] = []

    def spawn() -> Dict[str, Any]:
        tq: "mp.Queue[Any]" = ctx.Queue()
        p = ctx.Process(target=_worker, args=(fn, tq, results), daemon=True)
        p.start()
        return {"proc": p, "tasks": tq, "busy": None, "since": 0.0}

    # Tasks are dealt one at a time so a timeout only loses the task in flight. The clock of a
    # task starts when its worker reports "start" (worker start-up is not counted).
    pending = list(range(len(args)))[::-1]
    procs = [spawn() for _ in range(max(1, workers))]
    owner: Dict[int, Dict[str, Any]] = {}
    done = 0

    def feed(w: Dict[str, Any]) -> None:
        w["busy"] = None
        w["since"] = None
        if pending:
            i = pending.pop()
            w["busy"] = i
            owner[i] = w
            w["tasks"].put((i, args[i]))

    for w in procs:
        feed(w)
    while done < len(args):
        try:
            kind, idx, out = results.get(timeout=1.0)
        except queue.Empty:
            kind = None
        if kind == "start" and idx in owner:
            owner[idx]["since"] = time.monotonic()
        elif kind == "done" and idx in owner:
            w = owner.pop(idx)
            on_result(idx, out)
            done += 1
            feed(w)
        now = time.monotonic()
        for j, w in enumerate(procs):
            i = w["busy"]
            if i is not None and w["since"] is not None and now - w["since"] > timeout_s:
                w["proc"].kill()
                w["proc"].join()
                owner.pop(i, None)
                on_result(i, {"timeout": timeout_s})
                done += 1
                procs[j] = spawn()
                feed(procs[j])
    for w in procs:
        w["tasks"].put(None)
    for w in procs:
        w["proc"].join(timeout=5)
        if w["proc"].is_alive():
            w["proc"].kill()


# ------------------------------------------------------------------------------------ suite


def suite_groups(draft: str) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """(category, file label, group) for every test group of `draft`."""
    root = shared_dir() / "json-schema-test-suite" / "tests" / draft
    for path in sorted(root.rglob("*.json")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("optional/format/"):
            cat = "format"
        elif rel.startswith("optional/"):
            cat = "optional"
        else:
            cat = "required"
        for group in json.loads(path.read_text(encoding="utf-8")):
            yield cat, rel[: -len(".json")], group


#: `$schema` given to a suite schema that names none (the suite's schemas are of their folder's draft).
DRAFT_URIS = {
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
    "draft7": "http://json-schema.org/draft-07/schema#",
}


def with_draft(schema: Any, draft: str) -> Any:
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DRAFT_URIS[draft], **schema}
    return schema


#: Where the suite's harness serves `remotes/` (the suite's README); documents are handed to
#: grammask as its `schema_registry`, nothing is fetched.
REMOTES_BASE = "http://localhost:1234/"


def suite_remotes() -> Dict[str, Any]:
    """URI -> document for every file of the suite's `remotes/` folder."""
    root = shared_dir() / "json-schema-test-suite" / "remotes"
    return {REMOTES_BASE + p.relative_to(root).as_posix(): json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(root.rglob("*.json"))}


def check_group(group: Dict[str, Any]) -> Dict[str, Any]:
    if "remotes" not in _STATE:
        _STATE["remotes"] = suite_remotes()
    cg, err, secs = compile_schema(group["schema"], _STATE["remotes"])
    out: Dict[str, Any] = {"compile_s": secs, "error": err, "decisions": []}
    if cg is None:
        return out
    for t in group["tests"]:
        text = json.dumps(t["data"])
        out["decisions"].append(token_decision(cg, text))
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draft", default="draft2020-12", choices=["draft2020-12", "draft7"])
    ap.add_argument("--out", help="write per-instance decisions as JSON")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema")
    ns = ap.parse_args(argv)

    groups = [(c, lbl, dict(g, schema=with_draft(g["schema"], ns.draft))) for c, lbl, g in suite_groups(ns.draft)]
    results: List[Optional[Dict[str, Any]]] = [None] * len(groups)

    def on_result(i: int, out: Any) -> None:
        results[i] = out

    t0 = time.monotonic()
    run_pool(check_group, [g for _, _, g in groups], ns.workers, ns.timeout, on_result)
    wall = time.monotonic() - t0

    rows: Dict[Tuple[str, str], Dict[str, int]] = {}
    records = []
    for (cat, label, group), res in zip(groups, results):
        res = res or {"crash": "no result"}
        err = res.get("error")
        if "timeout" in res:
            err = {"type": "Timeout", "message": f"over {res['timeout']} s"}
        elif "crash" in res:
            err = {"type": "Crash", "message": res["crash"]}
        decisions = res.get("decisions", [])
        for key in ((cat, label), ("", cat)):
            r = rows.setdefault(key, {"schemas": 0, "compiled": 0, "instances": 0, "correct": 0,
                                      "invalid_accepted": 0, "valid_rejected": 0})
            r["schemas"] += 1
            r["compiled"] += int(err is None)
        for j, t in enumerate(group["tests"]):
            ok = decisions[j] if err is None and j < len(decisions) else None
            correct = ok is not None and ok == bool(t["valid"])
            for key in ((cat, label), ("", cat)):
                r = rows[key]
                r["instances"] += 1
                r["correct"] += int(correct)
                if ok is not None and not correct:
                    r["invalid_accepted" if ok else "valid_rejected"] += 1
            records.append({"file": label, "group": group.get("description"), "test": t.get("description"),
                            "valid": bool(t["valid"]), "accepted": ok,
                            "error": err if err is None else f"{err['type']}: {err['message']}"})

    print(f"JSON-Schema-Test-Suite {ns.draft}: {len(groups)} schemas, wall {wall:.0f} s")
    hdr = f"{'file':46} {'schemas':>7} {'compiled':>8} {'inst':>5} {'correct':>7} {'share':>6} {'inv_acc':>7} {'val_rej':>7}"
    for cat in ("required", "optional", "format"):
        print()
        print(hdr.replace("file", cat.ljust(4)))
        for (c, label), r in sorted(rows.items()):
            if c != cat:
                continue
            share = r["correct"] / r["instances"] if r["instances"] else 1.0
            print(f"{label:46} {r['schemas']:7} {r['compiled']:8} {r['instances']:5} {r['correct']:7} {share:6.2f} "
                  f"{r['invalid_accepted']:7} {r['valid_rejected']:7}")
    print()
    print("summary (share = decided correctly / all instances; silent = wrong decisions on compiled schemas)")
    summary = {}
    for cat in ("required", "optional", "format"):
        r = rows.get(("", cat))
        if not r:
            continue
        share = r["correct"] / r["instances"] if r["instances"] else 1.0
        silent = r["invalid_accepted"] + r["valid_rejected"]
        summary[cat] = dict(r, share=share, silent=silent)
        print(f"  {cat:9} schemas {r['compiled']}/{r['schemas']} compiled, instances {r['instances']}, "
              f"correct {r['correct']} ({share:.3f}), silent errors {silent} ({silent / max(1, r['instances']):.4f}: "
              f"{r['invalid_accepted']} invalid accepted, {r['valid_rejected']} valid rejected)")
    if ns.out:
        Path(ns.out).write_text(json.dumps({"draft": ns.draft, "summary": summary, "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
