"""Engine benchmark: grammask side by side with XGrammar on the same grammars, documents and tokenizers.

    python bench/engine_bench.py [--tokenizers llama3,qwen2.5] [--engines grammask,xgrammar]
                                 [--grammars json,arith,sql,logline] [--reps N] [--out DIR]

For every tokenizer, repetition and grammar it measures, per engine (engines interleaved, their order
alternating between repetitions, so machine noise hits both alike):

* tokenizer preprocessing, split in three: ``TokenizerInfo.from_huggingface`` (the HF tokenizer
  itself is loaded once, outside the timing), ``GrammarCompiler(info)``, and the extra cost of the
  first compile on a fresh TokenizerInfo (first compile of a one-rule grammar minus the median of
  three more; grammask builds its token trie there, lazily). A fresh TokenizerInfo is made every
  repetition, so every repetition starts with cold per-vocabulary caches in both engines.
* compile time: ``--compiles`` compiles per grammar and repetition, with ``cache_enabled=False``.
* mask time along real token sequences: each document of the grammar (bench/grammars/docs/<g>/) is
  tokenized with the HF tokenizer; for each token ``fill_next_token_bitmask`` is timed, the token is
  checked against the mask and accepted (``accept_token`` timed separately); at the end the stop
  token is checked and accepted. "cold" = first pass over the documents with a freshly compiled
  grammar (what a request with a new grammar sees); "warm" = a second pass with the same compiled
  grammar (masks memoized by grammask; XGrammar has no per-state memo).

Results: a markdown table and a JSON file in --out (default bench/results/). Times are
``time.perf_counter_ns`` around one call; the garbage collector is off inside timed loops.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parent.parent
GRAMMAR_DIR = Path(__file__).resolve().parent / "grammars"
GRAMMARS = ("json", "arith", "sql", "logline")
# A one-rule grammar used to trigger each engine's per-tokenizer setup on first compile.
TINY_EBNF = 'root ::= "a"\n'


def shared_dir() -> Path:
    """$GRAMMASK_SHARED, else `shared/` next to the repository (or next to a parent of it, for git
    worktrees kept in a subfolder)."""
    env = os.environ.get("GRAMMASK_SHARED")
    if env:
        return Path(env)
    for parent in REPO.parents:
        if (parent / "shared" / "tokenizers").is_dir():
            return parent / "shared"
    return REPO.parent / "shared"


# ---------------------------------------------------------------------------------------------
# Engines: the same XGrammar-style API, so one adapter with a module handle covers both.
# ---------------------------------------------------------------------------------------------


class Engine:
    def __init__(self, name: str) -> None:
        self.name = name
        if name == "grammask":
            sys.path.insert(0, str(REPO / "python"))
            import grammask as mod
        elif name == "xgrammar":
            import xgrammar as mod
        else:
            raise SystemExit(f"unknown engine {name!r} (grammask, xgrammar)")
        self.mod = mod
        try:
            from importlib.metadata import version

            self.version = version(name)
        except Exception:  # noqa: BLE001  (a source checkout has no distribution metadata)
            self.version = getattr(mod, "__version__", "source")

    def tokenizer_info(self, tok: Any) -> Any:
        return self.mod.TokenizerInfo.from_huggingface(tok)

    def compiler(self, info: Any) -> Any:
        return self.mod.GrammarCompiler(info, cache_enabled=False)

    def compile(self, compiler: Any, grammar: str, text: str | None) -> Any:
        if text is None:
            return compiler.compile_builtin_json_grammar()
        return compiler.compile_grammar(text)

    def matcher(self, compiled: Any) -> Any:
        return self.mod.GrammarMatcher(compiled)

    def bitmask(self, vocab_size: int) -> tuple[Any, np.ndarray]:
        """The bitmask to fill and a numpy view of its first row (same memory) for checking."""
        bm = self.mod.allocate_token_bitmask(1, vocab_size)
        view = bm.numpy() if hasattr(bm, "numpy") else np.asarray(bm)
        assert np.shares_memory(view, view) and view.shape[0] == 1
        return bm, view[0]


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------


def ns() -> int:
    return time.perf_counter_ns()


def allowed(row: np.ndarray, token: int) -> bool:
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


def run_documents(engine: Engine, compiled: Any, vocab_size: int, stop: int, docs: Sequence[list[int]],
                  masks: list[int], accepts: list[int], errors: list[str]) -> None:
    """One pass over `docs`: fill, check, accept each token, then the stop token."""
    bm, row = engine.bitmask(vocab_size)
    fill_ns_before = len(masks)
    gc.disable()
    try:
        for di, ids in enumerate(docs):
            m = engine.matcher(compiled)
            for pos, t in enumerate(list(ids) + [stop]):
                t0 = ns()
                m.fill_next_token_bitmask(bm)
                t1 = ns()
                ok_mask = allowed(row, t)
                t2 = ns()
                ok_accept = m.accept_token(t)
                t3 = ns()
                masks.append(t1 - t0)
                accepts.append(t3 - t2)
                if not (ok_mask and ok_accept):
                    errors.append(f"doc {di} pos {pos} token {t}: in mask {ok_mask}, accepted {ok_accept}")
                    break
            else:
                if not m.is_terminated():
                    errors.append(f"doc {di}: not terminated after the stop token")
    finally:
        gc.enable()
    assert len(masks) > fill_ns_before


def pct(xs: Sequence[int], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of integer nanoseconds, in the same unit."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))
    return float(s[k])


def summary(xs: Sequence[int]) -> dict[str, float]:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "mean": statistics.fmean(xs), "p50": pct(xs, 50), "p90": pct(xs, 90),
            "p99": pct(xs, 99), "max": float(max(xs))}


def flat(per_rep: Sequence[Sequence[int]]) -> list[int]:
    return [x for r in per_rep for x in r]


def filtered(per_rep: Sequence[Sequence[int]]) -> list[int]:
    """Per token position, the minimum over repetitions. Every repetition replays the same tokens on
    a freshly built engine state, so the minimum keeps each position's own cost and drops most of
    the scheduler preemptions (multiples of the 4 ms tick on a loaded machine) that hit one run.
    Empty when runs differ in length (an engine rejected a token)."""
    if not per_rep or len({len(r) for r in per_rep}) != 1:
        return []
    return np.min(np.array(per_rep, dtype=np.int64), axis=0).tolist()


def load_docs(tok: Any, grammar: str) -> list[list[int]]:
    files = sorted((GRAMMAR_DIR / "docs" / grammar).glob("*.txt"))
    if not files:
        raise SystemExit(f"no documents in {GRAMMAR_DIR / 'docs' / grammar}")
    out = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        ids = tok.encode(text, add_special_tokens=False)
        if tok.decode(ids) != text:
            raise SystemExit(f"{f}: tokenization does not round-trip")
        out.append(ids)
    return out


def grammar_text(grammar: str) -> str | None:
    if grammar == "json":
        return None  # the builtin JSON grammar of each engine
    return (GRAMMAR_DIR / f"{grammar}.ebnf").read_text(encoding="utf-8")


def bench_tokenizer(tok_name: str, engines: list[Engine], grammars: Sequence[str], reps: int,
                    compiles: int, log: Callable[[str], None]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    path = shared_dir() / "tokenizers" / tok_name
    tok = AutoTokenizer.from_pretrained(str(path))
    docs = {g: load_docs(tok, g) for g in grammars}
    texts = {g: grammar_text(g) for g in grammars}
    res: dict[str, Any] = {
        "tokenizer": tok_name,
        "docs": {g: {"count": len(d), "tokens": sum(map(len, d)), "min": min(map(len, d)), "max": max(map(len, d))}
                 for g, d in docs.items()},
        "pre": {e.name: {"tokenizer_info_ns": [], "compiler_ns": [], "first_compile_extra_ns": []} for e in engines},
        "grammars": {g: {e.name: {"compile_ns": [], "cold_mask_ns": [], "warm_mask_ns": [], "cold_accept_ns": [],
                                  "errors": []} for e in engines} for g in grammars},
    }
    for rep in range(reps):
        order = engines if rep % 2 == 0 else engines[::-1]
        state = {}
        for e in order:
            t0 = ns()
            info = e.tokenizer_info(tok)
            t1 = ns()
            compiler = e.compiler(info)
            t2 = ns()
            pin = e.compile(compiler, "tiny", TINY_EBNF)
            t3 = ns()
            again = []
            for _ in range(3):
                a = ns()
                e.compile(compiler, "tiny", TINY_EBNF)
                again.append(ns() - a)
            pre = res["pre"][e.name]
            pre["tokenizer_info_ns"].append(t1 - t0)
            pre["compiler_ns"].append(t2 - t1)
            pre["first_compile_extra_ns"].append(max(0, (t3 - t2) - int(statistics.median(again))))
            # `pin` keeps the engine's per-vocabulary state alive for the whole repetition.
            state[e.name] = (info, compiler, pin)
            log(f"{tok_name} rep {rep} {e.name}: TokenizerInfo {(t1 - t0) / 1e6:.0f} ms, "
                f"first-compile extra {pre['first_compile_extra_ns'][-1] / 1e6:.1f} ms")
        for g in grammars:
            for e in order:
                info, compiler, _ = state[e.name]
                r = res["grammars"][g][e.name]
                compiled = None
                for _ in range(compiles):
                    a = ns()
                    c = e.compile(compiler, g, texts[g])
                    r["compile_ns"].append(ns() - a)
                    compiled = compiled or c
                stop = info.stop_token_ids[0]
                errs: list[str] = []
                cold_ns: list[int] = []
                warm_ns: list[int] = []
                run_documents(e, compiled, info.vocab_size, stop, docs[g], cold_ns, r["cold_accept_ns"], errs)
                run_documents(e, compiled, info.vocab_size, stop, docs[g], warm_ns, [], errs)
                r["cold_mask_ns"].append(cold_ns)
                r["warm_mask_ns"].append(warm_ns)
                r["errors"].extend(f"rep {rep}: {x}" for x in errs[:5])
                cold = summary(cold_ns)
                log(f"{tok_name} rep {rep} {g:8s} {e.name:9s} compile {statistics.median(r['compile_ns'][-compiles:]) / 1e6:8.2f} ms"
                    f"  cold mask p50 {cold['p50'] / 1e3:7.1f} us p99 {cold['p99'] / 1e3:8.1f} us"
                    f" max {cold['max'] / 1e3:8.1f} us{'  ERRORS ' + str(len(errs)) if errs else ''}")
                del compiled, c
            gc.collect()
        del state
        gc.collect()
    return res


# ---------------------------------------------------------------------------------------------
# Optional: compile_json_schema over sampled MaskBench schemas (compile time only)
# ---------------------------------------------------------------------------------------------


def _schema_worker(engine_name: str, tok_dir: str, conn: Any) -> None:
    """Child process: builds the engine's TokenizerInfo once, then compiles each schema it is sent
    (a fresh compiler per schema, cache disabled) and answers ("ok", ns) or ("error", message)."""
    from transformers import AutoTokenizer

    e = Engine(engine_name)
    info = e.tokenizer_info(AutoTokenizer.from_pretrained(tok_dir))
    pin = e.compile(e.compiler(info), "tiny", TINY_EBNF)  # keeps grammask's token index alive
    conn.send("ready")
    while True:
        schema = conn.recv()
        if schema is None:
            del pin
            return
        compiler = e.compiler(info)
        t0 = ns()
        try:
            compiler.compile_json_schema(schema)
            conn.send(("ok", ns() - t0))
        except Exception as exc:  # noqa: BLE001  (any engine error counts as a compile error)
            conn.send(("error", f"{type(exc).__name__}: {str(exc)[:200]}"))


def bench_schemas(tok_name: str, engines: list[Engine], n: int, seed: int, timeout_s: float,
                  log: Callable[[str], None]) -> dict[str, Any]:
    """Compile `n` MaskBench schemas (sampled with `seed`) with each engine in its own child
    process, engines interleaved per schema; a schema running past `timeout_s` costs a restart of
    that engine's process and counts as a timeout."""
    import multiprocessing as mp
    import random

    files = sorted((shared_dir() / "maskbench" / "data").glob("*.json"))
    if not files:
        raise SystemExit(f"no MaskBench files in {shared_dir() / 'maskbench' / 'data'}")
    picked = random.Random(seed).sample(files, min(n, len(files)))
    tok_dir = str(shared_dir() / "tokenizers" / tok_name)
    ctx = mp.get_context("spawn")
    workers: dict[str, Any] = {}

    def start(name: str) -> Any:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_schema_worker, args=(name, tok_dir, child), daemon=True)
        proc.start()
        if not parent.poll(300) or parent.recv() != "ready":
            raise SystemExit(f"{name} schema worker did not start")
        return proc, parent

    out = {e.name: {"compile_ns": [], "errors": 0, "timeouts": 0, "crashes": 0} for e in engines}
    for e in engines:
        workers[e.name] = start(e.name)
    for i, f in enumerate(picked):
        schema = json.dumps(json.loads(f.read_text(encoding="utf-8"))["schema"])
        order = engines if i % 2 == 0 else engines[::-1]
        for e in order:
            proc, conn = workers[e.name]
            r = out[e.name]
            try:
                conn.send(schema)
                if conn.poll(timeout_s):
                    kind, val = conn.recv()
                    if kind == "ok":
                        r["compile_ns"].append(val)
                    else:
                        r["errors"] += 1
                    continue
                r["timeouts"] += 1
            except (EOFError, OSError):
                r["crashes"] += 1
            proc.kill()
            proc.join()
            workers[e.name] = start(e.name)
        if (i + 1) % 50 == 0:
            log(f"{tok_name} schemas {i + 1}/{len(picked)}")
    for proc, conn in workers.values():
        try:
            conn.send(None)
        except OSError:
            pass
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    return {"tokenizer": tok_name, "count": len(picked), "seed": seed, "timeout_s": timeout_s, "engines": out}


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
    except OSError:
        commit = "?"
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "python": platform.python_version(),
            "platform": platform.platform(), "grammask_commit": commit}


nan = float("nan")


def us(x: float) -> str:
    return "-" if math.isnan(x) else (f"{x / 1e3:.1f}" if x < 1e7 else f"{x / 1e3:.0f}")


def ms(x: float) -> str:
    return "-" if math.isnan(x) else (f"{x / 1e6:.2f}" if x < 1e9 else f"{x / 1e6:.0f}")


def med(xs: Sequence[int]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def schema_report(schemas: list[dict[str, Any]]) -> list[str]:
    if not schemas:
        return []
    lines = ["", (f"## compile_json_schema on {schemas[0]['count']} MaskBench schemas (seed {schemas[0]['seed']}, "
             f"timeout {schemas[0]['timeout_s']:g} s)"), "",
             ("Default options of each engine, a fresh compiler per schema, compile time in ms over the schemas "
             "that compiled."), "",
             "| tokenizer | engine | compiled | errors | timeouts | crashes | p50 | p90 | p99 | max |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for sr in schemas:
        for e, x in sr["engines"].items():
            c = summary(x["compile_ns"])
            lines.append(f"| {sr['tokenizer']} | {e} | {c['n']} | {x['errors']} | {x['timeouts']} | {x['crashes']} "
                         f"| {ms(c.get('p50', nan))} | {ms(c.get('p90', nan))} | {ms(c.get('p99', nan))} "
                         f"| {ms(c.get('max', nan))} |")
    return lines


def report(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# Engine benchmark ({meta['date']})", "",
             f"Machine: {meta['machine']['cpu']}, {meta['machine']['cores']} cores, {meta['machine']['memory']}; "
             f"Python {meta['machine']['python']}; grammask {meta['machine']['grammask_commit']}; "
             + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
             f"Command: `{meta['command']}`", "",
             "## Tokenizer preprocessing (median over repetitions, ms)", "",
             "| tokenizer | engine | TokenizerInfo.from_huggingface | GrammarCompiler() | first-compile extra | total |",
             "|---|---|---:|---:|---:|---:|"]
    for r in results:
        for e, p in r["pre"].items():
            a, b, c = (med(p[k]) for k in ("tokenizer_info_ns", "compiler_ns", "first_compile_extra_ns"))
            lines.append(f"| {r['tokenizer']} | {e} | {ms(a)} | {ms(b)} | {ms(c)} | {ms(a + b + c)} |")
    lines += ["", "## Compile and mask times", "",
              ("Compile: ms over all compiles (cache disabled). Mask: µs per `fill_next_token_bitmask` along the "
              "documents' tokens plus the stop token; cold = first pass on a freshly compiled grammar, "
              "warm = second pass on the same compiled grammar. `ok` = every token was in its mask and accepted "
              "and every document terminated. Columns marked * are over the per-token minimum across repetitions (each "
              "repetition replays the same tokens on fresh engine state), which filters scheduler preemption out of "
              "the tail; the unmarked columns are raw. `cold >0.1 / >1 ms*` counts the token positions (of `tokens` + one "
              "stop per document) whose cold mask took longer than 0.1 ms and 1 ms."), "",
              ("| tokenizer | grammar | engine | compile p50 | compile max | cold p50 | cold p99 | cold max | cold mean "
              "| cold p99* | cold max* | cold >0.1 / >1 ms* | warm p50 | warm p99* | warm max* | accept p50 | tokens | ok |"),
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        for g, per in r["grammars"].items():
            for e, x in per.items():
                c, w, a = summary(flat(x["cold_mask_ns"])), summary(flat(x["warm_mask_ns"])), summary(x["cold_accept_ns"])
                cmin = filtered(x["cold_mask_ns"])
                cf, wf = summary(cmin), summary(filtered(x["warm_mask_ns"]))
                slow = (f"{sum(v > 100_000 for v in cmin)} / {sum(v > 1_000_000 for v in cmin)}" if cmin else "-")
                ok = "yes" if not x["errors"] else f"NO ({len(x['errors'])})"
                lines.append(
                    f"| {r['tokenizer']} | {g} | {e} | {ms(med(x['compile_ns']))} | {ms(max(x['compile_ns']))} "
                    f"| {us(c['p50'])} | {us(c['p99'])} | {us(c['max'])} | {us(c['mean'])} "
                    f"| {us(cf.get('p99', nan))} | {us(cf.get('max', nan))} | {slow} "
                    f"| {us(w['p50'])} | {us(wf.get('p99', nan))} | {us(wf.get('max', nan))} | {us(a['p50'])} "
                    f"| {r['docs'][g]['tokens']} | {ok} |")
    errs = [(r["tokenizer"], g, e, x["errors"]) for r in results for g, per in r["grammars"].items()
            for e, x in per.items() if x["errors"]]
    if errs:
        lines += ["", "## Errors (first few per cell)", ""]
        for t, g, e, xs in errs:
            lines += [f"- {t} / {g} / {e}: " + "; ".join(xs[:3])]
    lines += schema_report(meta.get("schemas", []))
    lines += ["", "Documents per grammar (tokens per tokenizer): " + "; ".join(
        f"{r['tokenizer']}: " + ", ".join(f"{g} {d['count']} docs / {d['tokens']} tok ({d['min']}-{d['max']})"
                                         for g, d in r["docs"].items()) for r in results), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizers", default="llama3,qwen2.5")
    ap.add_argument("--engines", default="grammask,xgrammar")
    ap.add_argument("--grammars", default=",".join(GRAMMARS))
    ap.add_argument("--reps", type=int, default=3, help="repetitions (each with a fresh TokenizerInfo)")
    ap.add_argument("--compiles", type=int, default=5, help="compiles per grammar and repetition")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--schemas", type=int, default=0,
                    help="also compile this many sampled MaskBench JSON schemas per tokenizer (0: skip)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed for --schemas")
    ap.add_argument("--schema-timeout", type=float, default=60.0, help="seconds per schema compile")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.compiles < 1:
        ap.error("--reps and --compiles must be >= 1")
    grammars = [g for g in args.grammars.split(",") if g]
    for g in grammars:
        if g not in GRAMMARS:
            ap.error(f"unknown grammar {g!r} (choose from {', '.join(GRAMMARS)})")
    engines = [Engine(n) for n in args.engines.split(",") if n]
    import transformers  # noqa: F401  (imported before any timing)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    def log(s: str) -> None:
        print(s, flush=True)

    results = [bench_tokenizer(t, engines, grammars, args.reps, args.compiles, log)
               for t in args.tokenizers.split(",") if t]
    schemas = [bench_schemas(t, engines, args.schemas, args.seed, args.schema_timeout, log)
               for t in args.tokenizers.split(",") if t] if args.schemas > 0 else []
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "versions": {e.name: e.version for e in engines},
            "command": "python bench/engine_bench.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "reps": args.reps, "compiles": args.compiles, "schemas": schemas}
    (out / "engine_bench.json").write_text(json.dumps({"meta": meta, "results": results}), encoding="utf-8")
    md = report(results, meta)
    (out / "engine_bench.md").write_text(md, encoding="utf-8")
    print(md)
    bad = any(x["errors"] for r in results for per in r["grammars"].values() for x in per.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
