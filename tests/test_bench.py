"""Tests for grammask.bench: the MaskBench harness, its statistics and its crash isolation.

Small and fast: a handful of schemas, no timing assertions. Engines that are not installed are
skipped; at least one real engine must run for the harness test.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
try:
    import grammask.bench  # noqa: F401
except ImportError:  # running from a source checkout without an installed package
    sys.path.insert(0, str(ROOT / "python"))

from grammask.bench import data, engines, maskbench, report, stats, store  # noqa: E402
from grammask.bench.__main__ import main  # noqa: E402


def _shared_or_skip() -> Path:
    try:
        return data.shared_dir()
    except data.MissingDataError as e:
        pytest.skip(str(e))


# --- statistics on synthetic data -------------------------------------------------------------


def test_percentiles_match_order_statistics():
    s = stats.percentiles(np.arange(1, 101, dtype=float), (50, 90, 99.9))
    assert s["p50"] == pytest.approx(50.5)
    assert s["p90"] == pytest.approx(90.1)
    assert s["p99.9"] == pytest.approx(99.901)
    assert s["max"] == 100.0
    assert s["avg"] == pytest.approx(50.5)
    empty = stats.percentiles([], (50,))
    assert empty == {"p50": None, "max": None, "avg": None}


def _rec(status, vr=0, ia=0, dis=0, err=0, ttfm=None, compiled=False):
    return {"status": status, "valid_rejected": vr, "invalid_accepted": ia,
            "disagreements": dis, "matcher_errors": err, "ttfm_us": ttfm, "compiled": compiled}


def test_outcome_counts_and_ttfm_timeout_convention():
    recs = [
        _rec("pass", ttfm=100.0),
        _rec("pass", ttfm=300.0),
        _rec("fail", vr=2, ttfm=50.0),
        _rec("fail", ia=1, dis=3, ttfm=70.0),
        _rec("compile_error"),
        _rec("timeout"),  # before its first mask: counts as the limit in TTFM
        _rec("timeout", ttfm=10.0, compiled=True),  # hung while matching
        _rec("crash"),
        _rec("oom"),
    ]
    c = stats.count_outcomes(recs)
    assert c["schemas"] == 9
    assert c["passing"] == 2
    assert c["compile_error"] == 1
    assert c["valid_rejected"] == 1 and c["instances_valid_rejected"] == 2
    assert c["invalid_accepted"] == 1 and c["instances_invalid_accepted"] == 1
    assert c["mask_disagrees"] == 1 and c["tokens_mask_disagrees"] == 3
    assert (c["timeout"], c["crash"], c["oom"]) == (2, 1, 1)
    vals = sorted(stats.ttfm_values(recs, timeout_s=2.0))
    assert vals == [10.0, 50.0, 70.0, 100.0, 300.0, 2e6]

    s = stats.summarize(recs, np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, 0.5]), 2.0)
    assert s["tokens"] == 4
    assert s["tbm_us"]["p50"] == pytest.approx(2.5)
    assert s["tbm_us"]["max"] == 4.0
    assert s["accept_us"]["p99"] == pytest.approx(0.5)
    table = report.markdown_table({"a": s, "b": s})
    assert "| metric | a | b |" in table
    assert "| passing | 2 | 2 |" in table
    assert "TBM p99.9 (µs)" in table


def test_engine_list_expansion():
    assert engines.expand_engine_list("xgrammar,llguidance") == [
        "xgrammar", "xgrammar-flex", "llguidance"]
    assert engines.expand_engine_list("xgrammar-default, outlines-core") == [
        "xgrammar", "outlines"]
    with pytest.raises(ValueError, match="unknown engine"):
        engines.expand_engine_list("nope")


def test_sampling_is_seeded_and_a_subset(tmp_path):
    for i in range(20):
        (tmp_path / f"f{i:02d}.json").write_text("{}")
    a = data.list_files(tmp_path, 5, seed=7)
    assert a == data.list_files(tmp_path, 5, seed=7)
    assert len(set(a)) == 5
    assert sorted(data.list_files(tmp_path, None, seed=1)) == sorted(tmp_path.glob("*.json"))


def test_missing_data_is_reported(tmp_path, capsys):
    rc = main(["maskbench", str(tmp_path / "absent"), "--out", str(tmp_path / "o"),
               "--tokenizer", str(tmp_path)])
    assert rc == 2
    assert "not found" in capsys.readouterr().err


def test_token_bytes_table_inverts_byte_level_alphabet():
    class Tok:
        all_special_ids = (3,)
        added_tokens_decoder = None

        def get_vocab(self):
            return {"Ġa": 0, "b": 1, "Ċ": 2, "<s>": 3}

    t = engines.token_bytes_table(Tok())
    assert t == {0: b" a", 1: b"b", 2: b"\n"}


# --- the harness on real MaskBench schemas ----------------------------------------------------

# Small schemas from MaskBench with both valid and invalid instances.
_SAMPLE = ["Github_trivial---o10021.json", "Github_trivial---o10055.json",
           "Github_trivial---o10082.json"]


def _installed(name: str) -> bool:
    module = {"xgrammar": "xgrammar", "llguidance": "llguidance", "outlines": "outlines_core"}
    return importlib.util.find_spec(module[name]) is not None


def test_harness_runs_installed_engines_on_maskbench(tmp_path):
    shared = _shared_or_skip()
    src = shared / "maskbench" / "data"
    d = tmp_path / "data"
    d.mkdir()
    for name in _SAMPLE:
        if not (src / name).exists():
            pytest.skip(f"{name} missing from {src}")
        shutil.copy(src / name, d / name)
    wanted = [e for e in ("xgrammar", "llguidance", "outlines") if _installed(e)]
    assert wanted, "no peer engine installed: install xgrammar, llguidance or outlines-core"
    names = ["grammask"] + ["xgrammar-default" if e == "xgrammar" else e for e in wanted]
    out = tmp_path / "out"
    res = maskbench.run(str(d), ",".join(names), str(out), str(shared / "tokenizers" / "llama3"),
                        timeout_s=120, memory_mb=8192, plots=True, quiet=True)

    ran = list(res["engines"])
    assert ran == [engines.expand_engine_list(n)[0] for n in names]
    for e, s in res["engines"].items():
        assert s["schemas"] == len(_SAMPLE), e
        assert s["crash"] == s["timeout"] == s["oom"] == 0, e
        assert s["passing"] >= 1, (e, [r for r in res["records"] if r["engine"] == e])
        assert s["tokens"] > 0 and s["tbm_us"]["p50"] is not None
        assert s["peak_rss_mb"] > 10, e
        if e == "grammask" or e.startswith("xgrammar"):  # both count a compiled grammar's memory
            assert 0 < s["grammar_kib"]["p50"] <= s["grammar_cached_kib"]["max"], e
            # grammask counts its per-vocabulary tables too (Llama 3: trie, run bases, ...).
            assert (s["vocab_index_mib"] > 5) if e == "grammask" else s["vocab_index_mib"] is None
        else:
            assert s["grammar_kib"]["p50"] is None, e
    saved = json.loads((out / "results.json").read_text())
    assert len(saved["records"]) == len(_SAMPLE) * len(ran)
    assert {r["status"] for r in saved["records"]} <= {"pass", "fail", "compile_error"}
    table = (out / "results.md").read_text()
    for e in ran:
        assert e in table
    assert "grammar + mask caches p99 (KiB)" in table and "worker peak RSS (MiB)" in table
    assert "vocabulary tables, shared (MiB)" in table
    times = np.load(out / "times.npz")
    assert times[f"{ran[0]}__mask_us"].size == res["engines"][ran[0]]["tokens"]
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "tbm_cdf.png").stat().st_size > 0
        assert (out / "ttfm_cdf.png").stat().st_size > 0
        (out / "tbm_cdf.png").unlink()
        assert main(["plot", str(out)]) == 0  # redraw from times.npz + results.json
        assert (out / "tbm_cdf.png").stat().st_size > 0


def test_grammask_matcher_mask_shows_every_fill():
    """The XGrammar-like adapter's `mask` (a numpy view of the matcher's bitmask, made on first
    use) is one array that every fill writes to, whether taken before the fill or after."""
    tok = data.load_hf_tokenizer(_shared_or_skip() / "tokenizers" / "llama3")
    ad = engines.ENGINES["grammask"](tok)
    m = ad.matcher(ad.compile('{"type": "boolean"}'))
    before = m.mask
    assert (before == -1).all()
    m.fill()
    assert m.mask is before and np.array_equal(before, m._bitmask.numpy().reshape(-1))
    first = before.copy()
    allowed = [t for t in range(ad.vocab_size) if m.allowed(t)]
    assert 0 < len(allowed) < ad.vocab_size
    tok_t = next(t for t in allowed if tok.decode([t]) == "t")
    assert m.accept(tok_t)
    m.fill()
    assert not np.array_equal(before, first)
    assert np.array_equal(before, m._bitmask.numpy().reshape(-1))


def test_bitmask_pool_lends_each_bitmask_to_one_live_matcher():
    """Reused bitmasks: allocated once before any matcher, lent to one live matcher at a time
    (a second live matcher gets another), returned when the matcher is freed; per request, a new
    bitmask for every matcher and none pooled."""
    made: list[np.ndarray] = []

    def allocate() -> np.ndarray:
        made.append(np.full(4, -1, dtype=np.int32))
        return made[-1]

    class M(engines._PooledMatcher):
        def __init__(self, pool):
            self._bitmask = pool.lend()
            self._pool = pool

        def fill(self):
            pass

        def accept(self, token):
            return True

    pool = engines.BitmaskPool(allocate)
    assert len(made) == 1  # before any matcher, outside a timed window
    a = M(pool)
    assert a._bitmask is made[0] and len(made) == 1
    b = M(pool)  # `a` is alive: `b` must not write into its mask
    assert b._bitmask is made[1] and pool.allocated == 2
    del a, b
    c = M(pool)
    assert any(c._bitmask is x for x in made) and len(made) == 2
    del c
    per_request = engines.BitmaskPool(allocate, per_request=True)
    made.clear()
    d = M(per_request)
    del d
    e = M(per_request)
    assert len(made) == 2 and e._bitmask is made[1]


def test_reused_bitmask_holds_each_matchers_own_mask():
    """With the pooled bitmask, a new matcher's first fill writes its whole mask (no bit left from
    the previous matcher's fill), for each installed engine with a bitmask; every fill shows in
    `mask`; the masks equal the per-request protocol's."""
    tok = data.load_hf_tokenizer(_shared_or_skip() / "tokenizers" / "llama3")
    names = ["grammask"] + [e for e in ("xgrammar", "llguidance", "outlines") if _installed(e)]
    schemas = ['{"type": "string"}', '{"type": "boolean"}', '{"type": "integer"}']
    for name in names:
        reused = engines.ENGINES[name](tok)
        fresh = engines.ENGINES[name](tok, bitmask_per_request=True)
        assert reused.bitmasks.allocated == 1 and fresh.bitmasks.allocated == 0, name
        first = None
        for s in schemas:
            m = reused.matcher(reused.compile(s))
            m.fill()
            if first is None:
                first = m.mask.ctypes.data
            assert m.mask.ctypes.data == first, name  # the one pooled bitmask, refilled
            want = fresh.matcher(fresh.compile(s))
            want.fill()
            assert np.array_equal(m.mask, want.mask), (name, s)
            del m
        assert reused.bitmasks.allocated == 1, name
        m = reused.matcher(reused.compile('{"type": "boolean"}'))
        view = m.mask
        m.fill()
        tok_t = next(t for t in range(reused.vocab_size) if m.allowed(t) and tok.decode([t]) == "t")
        assert m.accept(tok_t)
        before = view.copy()
        m.fill()
        assert m.mask is view and not np.array_equal(view, before), name


def test_fill_cpu_times_follow_the_mask_times():
    """`run_task(..., fill_cpu=...)` (bench/fill_cpu_replay.py) records one (instance, position,
    thread CPU) per timed fill, in the order of `mask_us`, the stop token's fill last."""
    from grammask.bench.worker import run_task

    class Tok:
        eos_token_id = 7

        def __len__(self):
            return 64

    adapter = engines.FakeAdapter(Tok())
    task = data.Task("t", "{}", [data.Instance(True, [1, 2, 3], "abc"), data.Instance(False, [4], "d")])
    cpu: list = []
    res = run_task(adapter, task, lambda _msg: None, fill_cpu=cpu)
    assert [(i, p) for i, p, _ in cpu] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
    assert len(res["mask_us"]) == len(cpu) and all(ns >= 0 for *_, ns in cpu)
    assert list(res["mask_cpu_us"]) == [ns / 1000.0 for *_, ns in cpu]
    plain = run_task(adapter, task, lambda _msg: None)
    assert len(plain["mask_us"]) == len(plain["mask_cpu_us"]) == len(cpu)


# --- crash isolation with the fake engine -----------------------------------------------------


def _write_case(d: Path, name: str, schema: dict) -> None:
    tests = [{"description": "v", "valid": True, "data": {"a": 1}},
             {"description": "i", "valid": False, "data": {"a": "x"}}]
    (d / name).write_text(json.dumps({"description": name, "schema": schema, "tests": tests}))


def test_crash_and_memory_blowup_cost_one_schema_each(tmp_path):
    shared = _shared_or_skip()
    d = tmp_path / "data"
    d.mkdir()
    base = {"type": "object"}
    _write_case(d, "a_ok.json", base)
    _write_case(d, "b_abort.json", {**base, "x-fake": "abort"})
    _write_case(d, "d_oom.json", {**base, "x-fake": "oom"})
    _write_case(d, "e_error.json", {**base, "x-fake": "error"})
    _write_case(d, "f_ok.json", base)
    # The fake worker idles at about 650 MiB (transformers + the GPT-2 tokenizer); its "oom"
    # mode grows by 64 MiB steps until the supervisor sees RSS over the limit.
    res = maskbench.run(str(d), "fake", str(tmp_path / "out"),
                        str(shared / "tokenizers" / "gpt2"), timeout_s=120, memory_mb=900,
                        plots=False, quiet=True)
    status = {r["file"]: r["status"] for r in res["records"]}
    assert status == {
        "a_ok.json": "fail",  # the fake engine accepts the invalid instance too
        "b_abort.json": "crash",
        "d_oom.json": "oom",
        "e_error.json": "compile_error",
        "f_ok.json": "fail",
    }
    s = res["engines"]["fake"]
    assert (s["crash"], s["timeout"], s["oom"], s["compile_error"]) == (1, 0, 1, 1)
    assert s["invalid_accepted"] == 2 and s["valid_rejected"] == 0
    assert res["config"]["restarts"]["fake"] >= 1  # dead or killed workers were replaced
    by_file = {r["file"]: r for r in res["records"]}
    assert "SIGABRT" in by_file["b_abort.json"]["detail"]
    assert "RSS" in by_file["d_oom.json"]["detail"]


def test_hang_costs_one_schema(tmp_path):
    shared = _shared_or_skip()
    d = tmp_path / "data"
    d.mkdir()
    _write_case(d, "a_hang.json", {"type": "object", "x-fake": "hang"})
    _write_case(d, "b_ok.json", {"type": "object"})
    res = maskbench.run(str(d), "fake", str(tmp_path / "out"),
                        str(shared / "tokenizers" / "gpt2"), timeout_s=2, memory_mb=100_000,
                        plots=False, quiet=True)
    status = {r["file"]: r["status"] for r in res["records"]}
    assert status == {"a_hang.json": "timeout", "b_ok.json": "fail"}
    assert res["engines"]["fake"]["timeout"] == 1
    # A hang before the first mask counts as the time limit in TTFM (MaskBench's convention).
    assert res["engines"]["fake"]["ttfm_us"]["max"] == pytest.approx(2e6)


# --- shards, resume and merge -----------------------------------------------------------------


def test_shards_are_disjoint_and_cover_the_sample(tmp_path):
    for i in range(23):
        (tmp_path / f"f{i:02d}.json").write_text("{}")
    sample = data.list_files(tmp_path, 17, seed=3)
    for n in (1, 2, 3, 5, 17, 20):
        shards = [data.shard_files(sample, i, n) for i in range(1, n + 1)]
        flat = [f for s in shards for f in s]
        assert len(flat) == len(set(flat)) == len(sample), n  # disjoint
        assert set(flat) == set(sample), n  # covering
        for s in shards:  # each shard keeps the sample's order
            assert s == sorted(s, key=sample.index)
    assert data.parse_shard("2/4") == (2, 4)
    for bad in ("0/2", "3/2", "2", "a/b"):
        with pytest.raises(ValueError):
            data.parse_shard(bad)


def _fake_data(d: Path, n: int) -> None:
    d.mkdir()
    for i in range(n):
        # Instances of different lengths, so each schema owns a different number of raw times.
        tests = [{"valid": True, "data": {"a": "x" * k}} for k in range(1 + i % 3)]
        schema = {"type": "object"} if i != 2 else {"type": "object", "x-fake": "error"}
        (d / f"s{i:02d}.json").write_text(json.dumps({"schema": schema, "tests": tests}))


def _fake_run(d: Path, out: Path, **kw):
    shared = _shared_or_skip()
    kw = {"timeout_s": 60, "memory_mb": 100_000, "plots": False, "quiet": True, "seed": 5, **kw}
    return maskbench.run(str(d), "fake", str(out), str(shared / "tokenizers" / "gpt2"), **kw)


def _check_raw_alignment(folder: Path) -> None:
    """Every record owns exactly its slice of the raw files: the slice sums to its mask_us_sum."""
    got = store.read_folder(folder)
    at = 0
    for r in got.records:
        part = got.times[r["engine"]]["mask_us"][at:at + r["tokens"]]
        assert part.sum() == pytest.approx(r["mask_us_sum"], rel=1e-5, abs=1e-3), r["file"]
        at += r["tokens"]
    assert at == got.times["fake"]["mask_us"].size


def test_mask_cpu_times_are_stored_and_reported(tmp_path, monkeypatch):
    """Each mask's thread CPU time is stored beside its wall time and summarised in its own rows;
    a folder written before CPU times were kept reads back with NaN there (no CPU rows), and a
    resumed run pads its CPU file so that later schemas' values stay aligned."""
    d = tmp_path / "data"
    _fake_data(d, 5)
    out = tmp_path / "out"
    res = _fake_run(d, out)
    s = res["engines"]["fake"]
    got = store.read_folder(out)
    cpu = got.times["fake"]["mask_cpu_us"]
    assert cpu.size == got.times["fake"]["mask_us"].size == s["tokens"] > 0
    assert not np.isnan(cpu).any() and (cpu >= 0).all()
    want = stats.percentiles(cpu, stats.TBM_PCTS)
    assert s["tbm_cpu_us"] == pytest.approx(want)
    assert "TBM thread CPU max (µs)" in (out / "results.md").read_text()

    # A run cut off after two schemas, its folder then as an older version wrote it: no CPU file.
    old = tmp_path / "old"
    real_load, calls = maskbench.load_task, []

    def interrupt_third(path, tok):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_load(path, tok)

    monkeypatch.setattr(maskbench, "load_task", interrupt_third)
    _fake_run(d, old)
    monkeypatch.setattr(maskbench, "load_task", real_load)
    (old / "raw" / "fake.mask_cpu_us.f32").unlink()
    back = store.read_folder(old)
    n_old = back.times["fake"]["mask_us"].size
    assert n_old > 0 and np.isnan(back.times["fake"]["mask_cpu_us"]).all()
    assert back.times["fake"]["mask_cpu_us"].size == n_old
    merged = maskbench.finish(tmp_path / "merged", [old], plots=False)
    assert merged["engines"]["fake"]["tbm_cpu_us"] is None
    assert "TBM thread CPU" not in (tmp_path / "merged" / "results.md").read_text()

    # Resumed to the end: the old masks' CPU values stay NaN, the new ones are kept, aligned.
    _fake_run(d, old, resume=True)
    again = store.read_folder(old)
    cpu2 = again.times["fake"]["mask_cpu_us"]
    assert cpu2.size == again.times["fake"]["mask_us"].size == cpu.size
    assert np.isnan(cpu2[:n_old]).all() and not np.isnan(cpu2[n_old:]).any()
    _check_raw_alignment(old)


def test_bitmask_protocol_is_part_of_a_runs_identity(tmp_path):
    """The TTFM's bitmask protocol is recorded and reported; a run is not resumed under the other
    protocol; a folder saved before the key was recorded counts as per-request."""
    d = tmp_path / "data"
    _fake_data(d, 3)
    out = tmp_path / "out"
    res = _fake_run(d, out, bitmask_per_request=True)
    assert res["config"]["bitmask"] == "per-request"
    assert "allocated per matcher" in (out / "results.md").read_text()
    with pytest.raises(store.FolderMismatch, match="bitmask"):
        _fake_run(d, out, resume=True)
    run = json.loads((out / store.RUN_FILE).read_text())
    del run["bitmask"]
    (out / store.RUN_FILE).write_text(json.dumps(run))
    again = _fake_run(d, out, resume=True, bitmask_per_request=True)
    assert again["config"]["bitmask"] == "per-request"
    reused = _fake_run(d, tmp_path / "reused")
    assert reused["config"]["bitmask"] == "reused"
    assert "allocated before (reused)" in (tmp_path / "reused" / "results.md").read_text()
    with pytest.raises(store.FolderMismatch, match="bitmask"):
        maskbench.finish(tmp_path / "merged", [out, tmp_path / "reused"], plots=False)


def test_resume_runs_each_schema_once(tmp_path, monkeypatch):
    d = tmp_path / "data"
    _fake_data(d, 7)
    out = tmp_path / "out"
    real_load = maskbench.load_task
    calls = []

    def interrupt_third(path, tok):  # Ctrl-C while the third schema is being prepared
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_load(path, tok)

    monkeypatch.setattr(maskbench, "load_task", interrupt_third)
    first = _fake_run(d, out)
    assert first["config"]["stopped_early"] == "interrupted"
    assert len(first["records"]) == 2
    monkeypatch.setattr(maskbench, "load_task", real_load)

    # A hard kill in the middle of writing: raw values of a schema without its records, a
    # schema with one of its two records, and a torn line. Resume must drop all three.
    rec = dict(first["records"][-1], file="ghost.json", index=99, group=2)
    with open(out / "records.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n" + '{"file": "torn')
    with open(out / "raw" / "fake.mask_us.f32", "ab") as f:
        f.write(np.ones(5, dtype=np.float32).tobytes())

    with pytest.raises(store.FolderMismatch, match="timeout_s"):
        _fake_run(d, out, resume=True, timeout_s=30)  # not the same run: refused
    second = _fake_run(d, out, resume=True)
    files = [r["file"] for r in second["records"]]
    assert sorted(files) == sorted(p.name for p in d.iterdir())  # none lost, none twice
    assert second["config"]["stopped_early"] is None
    assert second["engines"]["fake"]["schemas"] == 7
    assert second["engines"]["fake"]["compile_error"] == 1
    _check_raw_alignment(out)
    sessions = json.loads((out / "run.json").read_text())["sessions"]
    assert [s["skipped_done"] for s in sessions] == [0, 2]


def test_merged_shards_give_the_statistics_of_one_run(tmp_path):
    d = tmp_path / "data"
    _fake_data(d, 7)
    one = _fake_run(d, tmp_path / "one")
    parts = [tmp_path / "s1", tmp_path / "s2"]
    for i, p in enumerate(parts, 1):
        _fake_run(d, p, shard=(i, 2))
        _check_raw_alignment(p)
    merged = maskbench.finish(tmp_path / "merged", parts, plots=False)

    def per_file(res):
        keep = ("index", "status", "tokens", "accepts", "instances", "compile_error")
        return [{k: r[k] for k in keep} | {"file": r["file"]} for r in res["records"]]

    assert per_file(merged) == per_file(one)  # same schemas, outcomes and counts, same order
    a, b = merged["engines"]["fake"], one["engines"]["fake"]
    for key in ("schemas", "passing", "compile_error", "invalid_accepted", "tokens"):
        assert a[key] == b[key], key
    # The times differ between runs; the merged statistics are those of the shards' raw times.
    raw = np.concatenate([store.read_folder(p).times["fake"]["mask_us"] for p in parts])
    assert raw.size == a["tokens"]
    want = stats.percentiles(raw, stats.TBM_PCTS)
    for k, v in want.items():
        assert a["tbm_us"][k] == pytest.approx(v), k
    assert merged["config"]["n_schemas_run"] == 7 and merged["config"]["stopped_early"] is None
    assert [s["shard"] for s in merged["config"]["shards"]] == [[1, 2], [2, 2]]
    assert "shards: 1/2" in (tmp_path / "merged" / "results.md").read_text()
    assert main(["merge", str(parts[0]), str(parts[1]), "--out", str(tmp_path / "m2"),
                 "--no-plots"]) == 0

    # Refused: a schema twice, and folders that differ in a run setting.
    with pytest.raises(store.FolderMismatch, match="in both"):
        maskbench.finish(tmp_path / "bad", [parts[0], tmp_path / "one"], plots=False)
    other = tmp_path / "s2-other"
    shutil.copytree(parts[1], other)
    cfg = json.loads((other / "run.json").read_text())
    for key, value in (("timeout_s", 5.0), ("versions", {"fake": "other"}), ("seed", 6),
                       ("limit", 3), ("tokenizer_sha", "x"), ("engines", ["fake", "grammask"])):
        (other / "run.json").write_text(json.dumps({**cfg, key: value}))
        with pytest.raises(store.FolderMismatch, match=key):
            maskbench.finish(tmp_path / "bad", [parts[0], other], plots=False)
    assert main(["merge", str(parts[0]), str(other), "--out", str(tmp_path / "bad")]) == 2
