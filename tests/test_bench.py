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

from grammask.bench import data, engines, maskbench, report, stats  # noqa: E402
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
        else:
            assert s["grammar_kib"]["p50"] is None, e
    saved = json.loads((out / "results.json").read_text())
    assert len(saved["records"]) == len(_SAMPLE) * len(ran)
    assert {r["status"] for r in saved["records"]} <= {"pass", "fail", "compile_error"}
    table = (out / "results.md").read_text()
    for e in ran:
        assert e in table
    assert "grammar + mask caches p99 (KiB)" in table and "worker peak RSS (MiB)" in table
    times = np.load(out / "times.npz")
    assert times[f"{ran[0]}__mask_us"].size == res["engines"][ran[0]]["tokens"]
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "tbm_cdf.png").stat().st_size > 0
        assert (out / "ttfm_cdf.png").stat().st_size > 0
        (out / "tbm_cdf.png").unlink()
        assert main(["plot", str(out)]) == 0  # redraw from times.npz + results.json
        assert (out / "tbm_cdf.png").stat().st_size > 0


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
