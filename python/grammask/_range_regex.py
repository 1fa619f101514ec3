"""Regexes for numbers in a range, as ``xgrammar.testing._generate_range_regex`` and
``_generate_float_regex`` return them (same language, grammask's own spelling of the regex).

Languages (checked string by string against XGrammar 0.2.8 in tests/test_range_regex.py):

- integers: the canonical decimal integers in ``[start, end]`` (no leading zeros, no ``-0``); with
  neither bound, ``-?\\d+`` (any digits).
- numbers: canonical integer part, an optional fraction of 1 to 6 digits (trailing zeros allowed),
  value in the range (bounds exclusive on request); zero may also be written ``-0.0`` ... ``-0.000000``
  when the range contains zero and its lower bound is below zero (never ``-0``); with neither bound, ``-?\\d+(\\.\\d{1,6})?``.

An empty range gives ``^()$`` (what XGrammar returns)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import List, Optional, Union

#: Fraction digits a number may have.
FRACTION_DIGITS = 6
_UNIT = 10**FRACTION_DIGITS


def _digit_class(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    if (lo, hi) == (0, 9):
        return r"\d"
    return f"[{lo}-{hi}]"


def _fixed_width(width: int, lo: int, hi: int) -> str:
    """Strings of exactly ``width`` digits (leading zeros included) whose value is in ``[lo, hi]``."""
    if width == 0:
        return ""
    top = 10 ** (width - 1)
    dlo, dhi = lo // top, hi // top
    if dlo == dhi:
        return str(dlo) + _fixed_width(width - 1, lo % top, hi % top)
    if lo % top == 0 and hi % top == top - 1:
        # Whole blocks: the first digit ranges, the rest is free.
        return _digit_class(dlo, dhi) + _any_digits(width - 1)
    parts = []
    first, last = dlo, dhi
    if lo % top:
        parts.append(str(dlo) + _fixed_width(width - 1, lo % top, top - 1))
        first += 1
    if hi % top != top - 1:
        parts.append(str(dhi) + _fixed_width(width - 1, 0, hi % top))
        last -= 1
    if first <= last:
        parts.insert(1 if lo % top else 0, _digit_class(first, last) + _any_digits(width - 1))
    return "(" + "|".join(parts) + ")"


def _any_digits(n: int) -> str:
    return "" if n == 0 else (r"\d" if n == 1 else rf"\d{{{n}}}")


def _naturals(lo: int, hi: Optional[int]) -> str:
    """Canonical decimal spellings of the integers in ``[lo, hi]`` (``lo >= 0``; ``hi`` None: no
    upper bound); the caller ensures the range is not empty."""
    parts = []
    if lo == 0:
        parts.append("0")
        lo = 1
    width = len(str(lo))
    while hi is None or lo <= hi:
        top = 10**width - 1
        if hi is None and lo == 10 ** (width - 1):
            parts.append(rf"[1-9]\d{{{width - 1},}}" if width > 1 else r"[1-9]\d*")
            break
        parts.append(_fixed_width(width, lo, top if hi is None else min(hi, top)))
        lo, width = top + 1, width + 1
    return "|".join(parts)


def _wrap(alternatives: List[str]) -> str:
    return "^(" + "|".join(alternatives) + ")$"


def generate_range_regex(start: Optional[int] = None, end: Optional[int] = None) -> str:
    if start is None and end is None:
        return r"^-?\d+$"
    parts = []
    if start is None or start < 0:
        # Negative values: "-" and the magnitude in [max(1, -end), -start].
        hi = None if start is None else -start
        lo = 1 if end is None or end >= 0 else -end
        if hi is None or lo <= hi:
            parts.append("-(" + _naturals(lo, hi) + ")")
    if end is None or end >= 0:
        lo = 0 if start is None or start <= 0 else start
        if end is None or lo <= end:
            parts.append(_naturals(lo, end))
    return _wrap(parts)


def _units(x: Union[int, float], exclusive: bool, lower: bool) -> int:
    """A bound in millionths: the smallest (``lower``) or largest unit count in range."""
    value = Fraction(Decimal(repr(x))) * _UNIT if isinstance(x, float) else Fraction(x) * _UNIT
    whole = value.numerator // value.denominator
    if lower:
        units = whole if value == whole else whole + 1
        return units + 1 if exclusive and value == units else units
    return whole - 1 if exclusive and value == whole else whole


def _magnitudes(lo: int, hi: Optional[int]) -> List[str]:
    """Spellings of the non-negative numbers whose value in millionths is in ``[lo, hi]``:
    a canonical integer part and 0 to 6 fraction digits."""
    parts = []
    for k in range(FRACTION_DIGITS + 1):
        step = 10 ** (FRACTION_DIGITS - k)
        a = -(-lo // step)  # value in units of 10^-k
        b = None if hi is None else hi // step
        if b is not None and a > b:
            continue
        if k == 0:
            parts.append(_naturals(a, b))
            continue
        p = 10**k
        ilo, ihi = a // p, None if b is None else b // p
        if ihi is not None and ilo == ihi:
            parts.append(f"{ilo}\\.{_fixed_width(k, a % p, b % p)}")
            continue
        parts.append(f"{ilo}\\.{_fixed_width(k, a % p, p - 1)}")
        if ihi is None or ilo + 1 <= ihi - 1:
            parts.append(
                f"({_naturals(ilo + 1, None if ihi is None else ihi - 1)})\\.{_any_digits(k)}"
            )
        if ihi is not None:
            parts.append(f"{ihi}\\.{_fixed_width(k, 0, b % p)}")
    return parts


def generate_float_regex(
    start: Optional[float] = None,
    end: Optional[float] = None,
    exclusive_start: bool = False,
    exclusive_end: bool = False,
) -> str:
    if start is None and end is None:
        return rf"^-?\d+(\.\d{{1,{FRACTION_DIGITS}}})?$"
    lo = None if start is None else _units(start, exclusive_start, lower=True)
    hi = None if end is None else _units(end, exclusive_end, lower=False)
    if lo is not None and hi is not None and lo > hi:
        return "^()$"
    parts = []
    if lo is None or lo < 0:
        neg_hi = None if lo is None else -lo
        neg_lo = 1 if hi is None or hi >= 0 else -hi
        if neg_hi is None or neg_lo <= neg_hi:
            parts.append("-(" + "|".join(_magnitudes(neg_lo, neg_hi)) + ")")
    if hi is None or hi >= 0:
        pos_lo = 0 if lo is None or lo <= 0 else lo
        parts.extend(_magnitudes(pos_lo, hi))
        if start is None or (start < 0 and lo <= 0):
            # Zero with a minus sign, when the range (as given) reaches below zero.
            parts.append(rf"-0\.0{{1,{FRACTION_DIGITS}}}")
    return _wrap(parts)
