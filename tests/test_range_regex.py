"""``testing._generate_range_regex`` / ``_generate_float_regex``: the language of XGrammar 0.2.8's,
checked string by string (the regex text differs), and against the value each string spells."""

from __future__ import annotations

import random
import re
from decimal import Decimal
from typing import List, Optional, Set, Tuple

import pytest

from grammask.testing import _generate_float_regex, _generate_range_regex

INT_CASES = [
    (None, None),
    (None, 0),
    (0, None),
    (None, -3),
    (5, None),
    (-5, 12),
    (1, 100),
    (7, 7),
    (-100, -10),
    (0, 0),
    (3, 1),
    (-999, 999),
    (10, 1099),
    (123, 1000),
    (-1000, -1),
    (-9, 9),
]
FLOAT_CASES = [
    (None, None),
    (0.5, 2),
    (-1.5, None),
    (None, 3.25),
    (0, 1),
    (-1, 0),
    (-1, 1),
    (0, 0),
    (-0.5, 0.5),
    (0, None),
    (None, 0),
    (1e-7, 1),
    (1.5, 1.5),
    (2, 1.5),
    (0.1234567, 0.2),
    (-2, -1),
    (-12.345, 99.99),
    (0.999999, 1.000001),
    (-0.0000005, 0.0000005),
]
EXCLUSIVE = [(False, False), (True, False), (False, True), (True, True)]


def _random_cases(
    seed: int,
) -> Tuple[
    List[Tuple[Optional[int], Optional[int]]], List[Tuple[Optional[float], Optional[float]]]
]:
    rng = random.Random(seed)
    ints, floats = list(INT_CASES), list(FLOAT_CASES)
    for _ in range(30):
        a, b = sorted(rng.randint(-1200, 1200) for _ in range(2))
        ints += [(a, b), (rng.choice([None, a]), rng.choice([None, b]))]
        x, y = sorted(round(rng.uniform(-1100, 1100), rng.randint(0, 7)) for _ in range(2))
        floats += [(x, y), (rng.choice([None, x]), rng.choice([None, y]))]
    return ints, floats


def _strings_near(bounds) -> Set[str]:
    """Spellings of values at and around each bound, with 0 to 7 fraction digits."""
    out = {"0", "-0", "00", "01", "-0.0", "0.0", "-0.000000", "-0.0000000", "", "1e3", ".5", "-"}
    for v in bounds:
        if v is None:
            continue
        d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
        for k in range(8):
            step = Decimal(1).scaleb(-k)
            for w in (d - 2 * step, d - step, d, d + step, d + 2 * step):
                out.update(f"{w:.{q}f}" for q in range(8))
    return out


def _spells_number(s: str, lo, hi, ex_lo: bool, ex_hi: bool) -> bool:
    """The reference: canonical integer part, 0-6 fraction digits, value in range; -0 only with a
    fraction and when the range reaches below zero."""
    m = re.fullmatch(r"(-?)(0|[1-9]\d*)(\.\d{1,6})?", s)
    if lo is None and hi is None:
        return bool(re.fullmatch(r"-?\d+(\.\d{1,6})?", s))
    if not m:
        return False
    v = Decimal(s)
    lo_d = None if lo is None else Decimal(repr(lo)) if isinstance(lo, float) else Decimal(lo)
    hi_d = None if hi is None else Decimal(repr(hi)) if isinstance(hi, float) else Decimal(hi)
    if m.group(1) and v == 0 and (not m.group(3) or not (lo_d is None or lo_d < 0)):  # "-0.0"
        return False
    if lo_d is not None and (v < lo_d or (ex_lo and v == lo_d)):
        return False
    return hi_d is None or not (v > hi_d or (ex_hi and v == hi_d))


def test_float_regex_spells_the_numbers_in_range():
    _, floats = _random_cases(7)
    for lo, hi in floats:
        for ex in EXCLUSIVE:
            regex = _generate_float_regex(lo, hi, *ex)
            if lo is not None and hi is not None and lo > hi:
                assert regex == "^()$"
                continue
            # An empty range gives "^()$", XGrammar's answer, which matches "" only.
            for s in _strings_near((lo, hi, 0)) - {""}:
                assert bool(re.fullmatch(regex, s)) == _spells_number(s, lo, hi, *ex), (
                    lo,
                    hi,
                    ex,
                    s,
                )


def test_range_regex_spells_the_integers_in_range():
    ints, _ = _random_cases(8)
    for lo, hi in ints:
        regex = _generate_range_regex(lo, hi)
        if lo is not None and hi is not None and lo > hi:
            assert regex == "^()$"
            continue
        for s in [str(n) for n in range(-1300, 1300)] + ["-0", "00", "007", "", "+1"]:
            if lo is None and hi is None:
                expected = bool(re.fullmatch(r"-?\d+", s))
            else:
                expected = (
                    bool(re.fullmatch(r"0|-?[1-9]\d*", s))
                    and (lo is None or int(s) >= lo)
                    and (hi is None or int(s) <= hi)
                )
            assert bool(re.fullmatch(regex, s)) == expected, (lo, hi, s)


def test_same_language_as_xgrammar():
    xt = pytest.importorskip("xgrammar.testing")
    ints, floats = _random_cases(9)
    compared = 0
    for lo, hi in ints:
        theirs, ours = xt._generate_range_regex(lo, hi), _generate_range_regex(lo, hi)
        for s in [str(n) for n in range(-1300, 1300)] + ["-0", "00", "007", ""]:
            assert bool(re.fullmatch(theirs, s)) == bool(re.fullmatch(ours, s)), (lo, hi, s)
            compared += 1
    for lo, hi in floats:
        strings = _strings_near((lo, hi, 0))
        for ex in EXCLUSIVE:
            theirs, ours = xt._generate_float_regex(lo, hi, *ex), _generate_float_regex(lo, hi, *ex)
            for s in strings:
                assert bool(re.fullmatch(theirs, s)) == bool(re.fullmatch(ours, s)), (lo, hi, ex, s)
                compared += 1
    assert compared > 100_000
