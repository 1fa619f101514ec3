"""MaskBench coverage through grammask's real engine (token by token, Llama 3 tokenizer).

For every file of ``$GRAMMASK_SHARED/maskbench/data`` (default ``../shared`` next to the repo):
compile the schema with ``strict_mode=False``; feed each test instance (``json.dumps`` of its data)
token by token and then the stop token. A valid instance must be accepted through the stop token;
an invalid one must never be. A schema *passes* when it compiles and every instance is decided
correctly (a file without tests passes when it compiles).

Reported: schemas passing, compile errors by keyword (taken from the JSON pointer / message of the
error), valid instances rejected, invalid instances accepted, timeouts, and compile time p50/p99
(schema text to compiled grammar, measured in the worker).

Usage::

    python3 bench/maskbench_coverage.py [--limit N] [--seed S] [--out FILE] [--workers 2] [--timeout 60]

``--limit N`` checks a random sample of N files (``--seed``, default 0); without it all files.
``--failed-in OLD.json`` checks only the files that did not pass in an earlier ``--out`` file (to
measure a change on the failures; the passing ones need a sample or a full run for regressions).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_schema_suite import compile_schema, run_pool, shared_dir, string_decision, token_decision  # noqa: E402

#: Keywords an error can be attributed to (pointer segments are matched from the end).
KEYWORDS = {
    "$ref", "$defs", "definitions", "$dynamicRef", "$recursiveRef", "$anchor", "$id", "$schema",
    "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "items", "prefixItems", "additionalItems",
    "unevaluatedItems", "contains", "minContains", "maxContains", "minItems", "maxItems", "uniqueItems",
    "properties", "patternProperties", "additionalProperties", "unevaluatedProperties", "required",
    "propertyNames", "minProperties", "maxProperties", "dependencies", "dependentRequired",
    "dependentSchemas", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
}
_CONTAINERS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}


def error_keyword(err: Dict[str, str]) -> str:
    """A short label for a compile error: the keyword its pointer ends in, else from the message."""
    msg = err.get("message", "")
    typ = err.get("type", "")
    if typ in ("Timeout", "Crash"):
        return typ
    m = re.match(r"at (#|/\S*): (.*)", msg, re.S)
    label = None
    if m:
        segs = [] if m.group(1) == "#" else m.group(1).split("/")[1:]
        # Walk forward so a property *named* like a keyword is skipped.
        i = 0
        last = None
        while i < len(segs):
            s = segs[i]
            if s in _CONTAINERS:
                last = s
                i += 2
                continue
            if s in KEYWORDS:
                last = s
            i += 1
        rest = m.group(2)
        label = last
        if label in (None, "properties", "$defs", "definitions", "items", "anyOf", "allOf", "oneOf"):
            # The keyword named first in the message (longest on a tie): deterministic, unlike
            # iterating the set, whose order changes with the hash seed.
            found = [
                (hit.start(), -len(k), k)
                for k in KEYWORDS
                if (hit := re.search(rf"(^|\W){re.escape(k)}(\W|$)", rest))
            ]
            if found:
                k = min(found)[2]
                label = k if label is None else f"{label}>{k}" if label != k else k
        if label in ("format",):
            f = re.search(r'format "([^"]+)"', rest)
            if f:
                label = f"format:{f.group(1)}"
        msg_short = rest
    else:
        msg_short = msg
    if label is None:
        label = msg_short.split(":")[0][:60]
    return f"{typ}: {label}"


def check_file(path: str) -> Dict[str, Any]:
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    cg, err, secs = compile_schema(d["schema"])
    out: Dict[str, Any] = {"compile_s": secs, "error": err, "tests": []}
    if cg is None:
        return out
    for t in d.get("tests", []):
        text = json.dumps(t["data"])
        fast = string_decision(cg, text)
        tok = token_decision(cg, text)
        out["tests"].append({"valid": bool(t["valid"]), "accepted": tok, "string_accepted": fast})
    return out


def pct(xs: List[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, help="check a random sample of N files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--failed-in", help="check only the files that failed in this earlier --out file")
    ap.add_argument("--out", help="write per-file results as JSON")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per file")
    ns = ap.parse_args(argv)

    files = sorted(str(p) for p in (shared_dir() / "maskbench" / "data").glob("*.json"))
    if ns.failed_in:
        failed = {r["file"] for r in json.loads(Path(ns.failed_in).read_text())["per_file"] if not r["pass"]}
        files = [f for f in files if Path(f).name in failed]
    if ns.limit is not None and ns.limit < len(files):
        files = sorted(random.Random(ns.seed).sample(files, ns.limit))
    results: List[Optional[Dict[str, Any]]] = [None] * len(files)
    t0 = time.monotonic()
    last = [t0]

    def on_result(i: int, out: Any) -> None:
        results[i] = out
        n = sum(r is not None for r in results)
        if time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            print(f"  ... {n}/{len(files)} files, {last[0] - t0:.0f} s", file=sys.stderr, flush=True)

    run_pool(check_file, files, ns.workers, ns.timeout, on_result)
    wall = time.monotonic() - t0

    passing = compiled = 0
    errors: collections.Counter = collections.Counter()
    valid_total = valid_rej = invalid_total = invalid_acc = disagree = 0
    compile_times: List[float] = []
    per_file = []
    for path, res in zip(files, results):
        res = res or {"crash": "no result"}
        err = res.get("error")
        if "timeout" in res:
            err = {"type": "Timeout", "message": f"over {res['timeout']} s"}
        elif "crash" in res:
            err = {"type": "Crash", "message": res["crash"]}
        name = Path(path).name
        tests = res.get("tests", [])
        if err is None:
            compiled += 1
            compile_times.append(res["compile_s"])
        else:
            errors[error_keyword(err)] += 1
        ok = err is None
        vr = ia = 0
        for t in tests:
            if t["valid"]:
                valid_total += 1
                if not t["accepted"]:
                    vr += 1
            else:
                invalid_total += 1
                if t["accepted"]:
                    ia += 1
            disagree += int(t["accepted"] != t["string_accepted"])
        valid_rej += vr
        invalid_acc += ia
        ok = ok and vr == 0 and ia == 0
        passing += int(ok)
        per_file.append({"file": name, "pass": ok, "error": err, "valid_rejected": vr, "invalid_accepted": ia,
                         "compile_s": res.get("compile_s")})

    n = len(files)
    print(f"MaskBench coverage: {n} files, wall {wall:.0f} s, {ns.workers} workers")
    print(f"  schemas passing        {passing}/{n} ({passing / max(1, n):.1%})")
    print(f"  compiled               {compiled}/{n} ({compiled / max(1, n):.1%})")
    print(f"  valid rejected         {valid_rej}/{valid_total} valid instances of compiled schemas")
    print(f"  invalid accepted       {invalid_acc}/{invalid_total} invalid instances of compiled schemas")
    print(f"  token vs string check disagreements: {disagree}")
    print(f"  compile time (schema -> compiled grammar) p50 {pct(compile_times, 0.5) * 1e3:.1f} ms, "
          f"p99 {pct(compile_times, 0.99) * 1e3:.1f} ms, max {max(compile_times, default=0) * 1e3:.0f} ms")
    print("  compile errors by keyword:")
    for k, c in errors.most_common():
        print(f"    {c:6}  {k}")
    bad = [f for f in per_file if f["error"] is None and (f["valid_rejected"] or f["invalid_accepted"])]
    if bad:
        print("  files with wrong decisions (first 30):")
        for f in bad[:30]:
            print(f"    {f['file']}: valid rejected {f['valid_rejected']}, invalid accepted {f['invalid_accepted']}")
    if ns.out:
        Path(ns.out).write_text(json.dumps({
            "files": n, "passing": passing, "compiled": compiled, "valid_rejected": valid_rej,
            "valid_total": valid_total, "invalid_accepted": invalid_acc, "invalid_total": invalid_total,
            "compile_p50_s": pct(compile_times, 0.5), "compile_p99_s": pct(compile_times, 0.99),
            "errors_by_keyword": dict(errors.most_common()), "per_file": per_file,
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
