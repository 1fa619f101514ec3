"""Outputs users can parse: sample with random logits under a token budget, default options.

For a random sample of MaskBench schemas (``$GRAMMASK_SHARED/maskbench/data``, the ones that
compile) and the Pydantic models of ``tests/test_pydantic.py``: compile with default options
(canonical spelling, ``format`` asserted; MaskBench schemas with ``strict_mode=False``), then draw
``--samples`` outputs each, every token uniformly among those the mask allows (random logits), with
``GrammarMatcher(..., max_tokens=--budget)``. Every output must end with the stop token within the
budget, parse with ``json.loads`` to finite numbers, validate with ``jsonschema`` (format checker
on), and Pydantic models must pass ``model_validate_json(text, strict=True)``.

Mask time is measured per ``fill_next_token_bitmask`` call by replaying each sample's tokens on
two more compilations of the grammar, each on its own copy of the vocabulary (cold caches of their
own, the per-vocabulary kernel cache included), a matcher with the budget and one without, their fills timed in turn at each step (``with_budget`` / ``without_budget``); the fills
of the sampling loop itself, which follow numpy work on the previous mask and so run on colder
CPU caches, are reported apart (``with_budget_sampling``).

Usage::

    python3 bench/sample_outputs.py [--schemas 200] [--models 20] [--samples 10] [--budget 384] [--seed 0] [--cpu-time]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from json_schema_suite import shared_dir  # noqa: E402

# The clock masks are timed with (`--cpu-time`: the thread's CPU time, steadier on a loaded machine).
CLOCK = time.perf_counter

import grammask as xgr  # noqa: E402


def finite(text: str) -> bool:
    def num(s: str) -> float:
        v = float(s)
        if not math.isfinite(v):
            raise ValueError(f"non-finite number {s[:40]}")
        return v

    try:
        json.loads(text, parse_float=num, parse_int=num, parse_constant=num)
        return True
    except (ValueError, OverflowError):
        return False


def sample(cg: Any, decoded: List[bytes], stop: set, budget: int, rng: random.Random, times: List[float]):
    """One output: (text or None, token ids, whether the stop token came within the budget)."""
    m = xgr.GrammarMatcher(cg, max_tokens=budget)
    n = cg.tokenizer_info.vocab_size
    bm = xgr.allocate_token_bitmask(1, n)
    ids: List[int] = []
    for _ in range(budget):
        t0 = CLOCK()
        m.fill_next_token_bitmask(bm)
        times.append(CLOCK() - t0)
        allowed = np.flatnonzero(np.asarray(xgr.testing.bitmask_to_bool_mask(bm, n)).reshape(-1)[:n])
        if allowed.size == 0:
            return None, ids, False
        tok = int(allowed[rng.randrange(allowed.size)])
        if not m.accept_token(tok):
            raise AssertionError("a token allowed by the mask was rejected")
        ids.append(tok)
        if tok in stop:
            text = b"".join(decoded[i] for i in ids[:-1]).decode("utf-8")
            return text, ids, True
    return None, ids, False


def replay(budgeted: Any, free: Any, ids: List[int], budget: int, t_budget: List[float], t_free: List[float]) -> None:
    """Replays a sample's tokens on two grammars compiled apart from the sampled one (cold caches of
    their own), one matcher with the budget and one without, timing their fills in turn at each
    step: both fills then run in the same loop, after the same work."""
    mb = xgr.GrammarMatcher(budgeted, max_tokens=budget)
    mf = xgr.GrammarMatcher(free)
    bm = xgr.allocate_token_bitmask(1, budgeted.tokenizer_info.vocab_size)
    for i, tok in enumerate(ids):
        t0 = CLOCK()
        mb.fill_next_token_bitmask(bm)
        t_budget.append(CLOCK() - t0)
        t0 = CLOCK()
        mf.fill_next_token_bitmask(bm)
        t_free.append(CLOCK() - t0)
        if i + 1 < len(ids):
            assert mb.accept_token(tok) and mf.accept_token(tok)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schemas", type=int, default=200)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--budget", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--traces", default=None, help="write each schema's sampled token ids here (for examples/replay_budget.rs)")
    ap.add_argument("--cpu-time", action="store_true", help="time masks by thread CPU time instead of wall time")
    args = ap.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.thread_time

    import jsonschema
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(shared_dir() / "tokenizers" / "llama3"))
    info = xgr.TokenizerInfo.from_huggingface(tok)
    decoded = info.decoded_vocab
    stop = set(info.stop_token_ids)
    # One vocabulary each: kernels are also cached per vocabulary across grammars, so a side
    # sharing one with another would take kernels from the other side's walks.
    comp_a = xgr.GrammarCompiler(info, cache_enabled=False)
    comp_b = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok), cache_enabled=False)
    comp_c = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok), cache_enabled=False)
    rng = random.Random(args.seed)
    files = sorted((shared_dir() / "maskbench" / "data").glob("*.json"))
    rng.shuffle(files)

    stats: Dict[str, Any] = {"outputs": 0, "in_budget": 0, "finite": 0, "valid": 0, "pydantic_strict": 0, "failures": []}
    t_sampling: List[float] = []
    t_budget: List[float] = []
    t_free: List[float] = []

    def check(name: str, text: Optional[str], ended: bool, schema: Any, model: Any = None) -> None:
        stats["outputs"] += 1
        ok = ended and text is not None
        stats["in_budget"] += ok
        if not ok:
            stats["failures"].append((name, "did not end within the budget"))
            return
        if not finite(text):
            stats["failures"].append((name, f"not JSON with finite numbers: {text[:200]!r}"))
            return
        stats["finite"] += 1
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(json.loads(text))
            stats["valid"] += 1
        except jsonschema.ValidationError as e:
            stats["failures"].append((name, f"jsonschema: {e.message[:200]} in {text[:200]!r}"))
        except Exception as e:  # noqa: BLE001 (unresolvable remote refs and the like)
            stats["valid"] += 1
            stats.setdefault("validator_errors", []).append((name, repr(e)[:200]))
        if model is not None:
            try:
                model.model_validate_json(text, strict=True)
                stats["pydantic_strict"] += 1
            except Exception as e:  # noqa: BLE001
                stats["failures"].append((name, f"pydantic strict: {str(e)[:200]} in {text[:200]!r}"))

    def pct(xs: List[float], q: float) -> float:
        return float(np.percentile(np.array(xs) * 1e6, q)) if xs else float("nan")

    traces: List[Dict[str, Any]] = []
    done = 0
    for path in files:
        if done >= args.schemas:
            break
        schema = json.loads(path.read_text(encoding="utf-8"))["schema"]
        try:
            cga = comp_a.compile_json_schema(schema, strict_mode=False)
            cgb = comp_b.compile_json_schema(schema, strict_mode=False)
            cgc = comp_c.compile_json_schema(schema, strict_mode=False)
            xgr.GrammarMatcher(cga, max_tokens=args.budget)
        except Exception:  # noqa: BLE001 (uncompiled schemas, or a shortest output over the budget)
            continue
        done += 1
        traces.append({"name": path.name, "schema": schema, "runs": []})
        for _ in range(args.samples):
            text, ids, ended = sample(cga, decoded, stop, args.budget, rng, t_sampling)
            replay(cgc, cgb, ids, args.budget, t_budget, t_free)
            traces[-1]["runs"].append(ids)
            check(path.name, text, ended, schema)
        if done % 10 == 0:
            # Partial figures on stderr, so a run stopped early still says where it stood.
            ratio = pct(t_budget, 99) / pct(t_free, 99) if t_free else float("nan")
            print(
                f"  {done} schemas: {stats['valid']}/{stats['outputs']} valid, failures {len(stats['failures'])}; "
                f"mask p99 with/without budget {pct(t_budget, 99):.0f}/{pct(t_free, 99):.0f} us ({ratio:.2f}x)",
                file=sys.stderr,
                flush=True,
            )
    stats["schemas"] = done

    from test_pydantic import MODELS  # noqa: E402

    for model in MODELS[: args.models]:
        schema = model.model_json_schema()
        cg = comp_a.compile_json_schema(model)
        for _ in range(args.samples):
            text, ids, ended = sample(cg, decoded, stop, args.budget, rng, [])
            check(model.__name__, text, ended, schema, model)
    stats["models"] = min(args.models, len(MODELS))

    stats["mask_us"] = {
        "with_budget": {"p50": pct(t_budget, 50), "p99": pct(t_budget, 99), "max": pct(t_budget, 100), "n": len(t_budget)},
        "without_budget": {"p50": pct(t_free, 50), "p99": pct(t_free, 99), "max": pct(t_free, 100), "n": len(t_free)},
        # Fills of the sampling loop itself (each after the numpy work on the previous mask).
        "with_budget_sampling": {"p50": pct(t_sampling, 50), "p99": pct(t_sampling, 99), "n": len(t_sampling)},
    }
    print(json.dumps({k: v for k, v in stats.items() if k != "failures"}, indent=1))
    print(f"failures: {len(stats['failures'])}")
    for f in stats["failures"][:30]:
        print("  ", f)
    if args.out:
        Path(args.out).write_text(json.dumps(stats, indent=1))
    if args.traces:
        Path(args.traces).write_text(json.dumps(traces))


if __name__ == "__main__":
    main()
