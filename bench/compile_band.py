"""Compile time of the typical schema against llguidance: the "p50 band" (issue 18).

The band is the MaskBench schemas whose grammask compile + first mask takes ``--lo``..``--hi`` ms in
a random sample (process CPU time, best of 2, one fresh ``GrammarCompiler`` each, Llama 3). Each
round runs in its own process as a server would: one ``TokenizerInfo`` kept for the whole run, a
warm phase compiling OTHER schemas of the sample first (compiles of one vocabulary share rule
automata, so a served schema meets a memo filled by others, not by itself), then each band schema
compiled once by grammask (its first compile in the process) and three times by llguidance (best
of 3), compile + first mask in process CPU time each. ``stats`` takes the per-schema minimum over
rounds and prints the medians and the median per-schema ratio.

    python bench/compile_band.py band --out DIR [--sample 1500] [--seed 2828] [--lo 1] [--hi 2]
    python bench/compile_band.py round --dir DIR --out ROUND.json      # run with each package's PYTHONPATH
    python bench/compile_band.py stats ROUND.json [ROUND.json ...]

``band`` writes ``DIR/band.txt`` and ``DIR/warm.txt`` (file names; the warm list is the sample's
other schemas that compile, at most ``--warm``). Run rounds of two packages at once, so that load
hits both alike; compare their ``stats``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from json_schema_suite import shared_dir  # noqa: E402


def setup():
    from transformers import AutoTokenizer

    import grammask

    sh = shared_dir()
    hf = AutoTokenizer.from_pretrained(str(sh / "tokenizers" / "llama3"))
    info = grammask.TokenizerInfo.from_huggingface(hf)
    return sh / "maskbench" / "data", hf, info


def schema_text(data: Path, name: str) -> str:
    return json.dumps(json.loads((data / name).read_text())["schema"])


def grammask_ms(info, bitmask, schema: str) -> float:
    import grammask

    c = grammask.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    t = time.process_time_ns()
    m = grammask.GrammarMatcher(c.compile_json_schema(schema, strict_mode=False))
    m.fill_next_token_bitmask(bitmask)
    return (time.process_time_ns() - t) / 1e6


def cmd_band(args) -> None:
    import grammask

    data, _, info = setup()
    bitmask = grammask.allocate_token_bitmask(1, info.vocab_size)
    grammask_ms(info, bitmask, '{"type": "string"}')  # the per-vocabulary index, kept out
    names = sorted(p.name for p in data.glob("*.json"))
    random.seed(args.seed)
    band, other = [], []
    for n in random.sample(names, args.sample):
        try:
            t = min(grammask_ms(info, bitmask, schema_text(data, n)) for _ in range(2))
        except grammask.GrammaskError:
            continue
        (band if args.lo <= t <= args.hi else other).append(n)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "band.txt").write_text("\n".join(band) + "\n")
    (out / "warm.txt").write_text("\n".join(other[: args.warm]) + "\n")
    print(f"{len(band)} band schemas, {min(len(other), args.warm)} warm -> {out}")


def cmd_round(args) -> None:
    import llguidance
    import llguidance.hf
    import llguidance.numpy

    import grammask

    data, hf, info = setup()
    bitmask = grammask.allocate_token_bitmask(1, info.vocab_size)
    tok = llguidance.hf.from_tokenizer(hf)
    lmask = llguidance.numpy.allocate_token_bitmask(1, tok.vocab_size)

    def llguidance_ms(schema: str) -> float:
        t = time.process_time_ns()
        g = llguidance.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": True}
        )
        m = llguidance.LLMatcher(tok, g, log_level=0)
        llguidance.numpy.fill_next_token_bitmask(m, lmask)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return (time.process_time_ns() - t) / 1e6

    # Held for the whole round, as a server holds its compiler: the vocabulary's index stays alive.
    keep = grammask.GrammarCompiler(info, max_threads=1, cache_enabled=False)  # noqa: F841
    grammask_ms(info, bitmask, '{"type": "string"}')
    llguidance_ms('{"type": "string"}')
    lists = Path(args.dir)
    for n in (lists / "warm.txt").read_text().split():
        try:
            grammask_ms(info, bitmask, schema_text(data, n))
        except grammask.GrammaskError:
            pass
    res = {}
    for n in (lists / "band.txt").read_text().split():
        s = schema_text(data, n)
        try:
            res[n] = [grammask_ms(info, bitmask, s), min(llguidance_ms(s) for _ in range(3))]
        except (grammask.GrammaskError, RuntimeError, ValueError):
            continue
    Path(args.out).write_text(json.dumps(res))


def cmd_stats(args) -> None:
    rounds = [json.loads(Path(f).read_text()) for f in args.rounds]
    names = set.intersection(*(set(r) for r in rounds))
    best = {n: (min(r[n][0] for r in rounds), min(r[n][1] for r in rounds)) for n in names}
    g = sorted(v[0] for v in best.values())
    lg = [v[1] for v in best.values()]
    ratio = statistics.median(v[0] / v[1] for v in best.values())
    print(
        f"{len(best)} schemas: grammask p50 {statistics.median(g):.3f} ms, p90 {g[int(0.9 * len(g))]:.3f}; "
        f"llguidance p50 {statistics.median(lg):.3f} ms; median per-schema ratio {ratio:.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("band")
    b.add_argument("--out", required=True)
    b.add_argument("--sample", type=int, default=1500)
    b.add_argument("--seed", type=int, default=2828)
    b.add_argument("--lo", type=float, default=1.0)
    b.add_argument("--hi", type=float, default=2.0)
    b.add_argument("--warm", type=int, default=253)
    r = sub.add_parser("round")
    r.add_argument("--dir", required=True)
    r.add_argument("--out", required=True)
    s = sub.add_parser("stats")
    s.add_argument("rounds", nargs="+")
    args = ap.parse_args()
    {"band": cmd_band, "round": cmd_round, "stats": cmd_stats}[args.cmd](args)


if __name__ == "__main__":
    main()
