//! Numbers for the JSON Schema converter: exact decimal values of schema numbers ([`Dec`]), and EBNF
//! for integer ranges (digit-range decomposition, any size), number ranges over plain decimal
//! spellings (`-?int(.frac)?`), and `multipleOf` (a remainder automaton over the digits).
//!
//! Spelling policy (documented in the module docs of `json_schema`): an unconstrained `number` takes
//! every JSON spelling; an unconstrained `integer` takes `-?int(.0+)?` and `-?int(.0+)?[eE]+?digits`
//! (draft 4: `-?int` only);
//! with bounds or `multipleOf`, exponent spellings are refused (value-exact on what is accepted).

use std::cmp::Ordering;

use super::emit;

/// A finite decimal: sign, integer digits without leading zeros (empty for 0), fraction digits
/// without trailing zeros. Invariant: zero is never negative.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dec {
    pub neg: bool,
    pub int: Vec<u8>,
    pub frac: Vec<u8>,
}

impl Dec {
    /// Parses the exact decimal of a JSON number as serde_json holds it.
    pub fn from_number(n: &serde_json::Number) -> Option<Dec> {
        let text = if let Some(i) = n.as_i64() {
            i.to_string()
        } else if let Some(u) = n.as_u64() {
            u.to_string()
        } else {
            let f = n.as_f64()?;
            if !f.is_finite() {
                return None;
            }
            format!("{f}")
        };
        Dec::parse(&text)
    }

    /// Parses `-?digits(.digits)?` (no exponent).
    pub fn parse(s: &str) -> Option<Dec> {
        let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
        let (i, f) = s.split_once('.').unwrap_or((s, ""));
        if i.is_empty() || !i.bytes().chain(f.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut int: Vec<u8> = i.bytes().map(|b| b - b'0').skip_while(|&d| d == 0).collect();
        let mut frac: Vec<u8> = f.bytes().map(|b| b - b'0').collect();
        while frac.last() == Some(&0) {
            frac.pop();
        }
        if int.is_empty() && frac.is_empty() {
            return Some(Dec { neg: false, int, frac });
        }
        int.shrink_to_fit();
        Some(Dec { neg, int, frac })
    }

    pub fn is_zero(&self) -> bool {
        self.int.is_empty() && self.frac.is_empty()
    }

    pub fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    pub fn negate(&self) -> Dec {
        let mut d = self.clone();
        d.neg = !d.neg && !d.is_zero();
        d
    }

    /// Magnitude comparison.
    fn cmp_abs(&self, o: &Dec) -> Ordering {
        self.int.len().cmp(&o.int.len()).then_with(|| self.int.cmp(&o.int)).then_with(|| self.frac.cmp(&o.frac))
    }
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Dec {
    fn cmp(&self, o: &Self) -> Ordering {
        match (self.neg, o.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_abs(o),
            (true, true) => o.cmp_abs(self),
        }
    }
}

/// Natural number digit helpers (most significant first, no leading zeros, empty = 0).
fn nat_inc(d: &[u8]) -> Vec<u8> {
    let mut v = d.to_vec();
    let mut i = v.len();
    loop {
        if i == 0 {
            v.insert(0, 1);
            return v;
        }
        i -= 1;
        if v[i] == 9 {
            v[i] = 0;
        } else {
            v[i] += 1;
            return v;
        }
    }
}

/// `d - 1` for `d >= 1`.
fn nat_dec(d: &[u8]) -> Vec<u8> {
    let mut v = d.to_vec();
    let mut i = v.len();
    while i > 0 {
        i -= 1;
        if v[i] == 0 {
            v[i] = 9;
        } else {
            v[i] -= 1;
            break;
        }
    }
    let lead = v.iter().take_while(|&&x| x == 0).count();
    v.drain(..lead);
    v
}

/// An integer as sign and magnitude. Invariant: zero is not negative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SInt {
    pub neg: bool,
    pub mag: Vec<u8>,
}

impl SInt {
    fn from_dec_int(neg: bool, mag: Vec<u8>) -> SInt {
        SInt { neg: neg && !mag.is_empty(), mag }
    }
    fn to_dec(&self) -> Dec {
        Dec { neg: self.neg, int: self.mag.clone(), frac: Vec::new() }
    }
    /// Smallest integer `>= d` (or `> d` when `strict`).
    pub fn ceil(d: &Dec, strict: bool) -> SInt {
        let t = SInt::from_dec_int(d.neg, d.int.clone()); // truncation toward zero
        let up = if d.is_integer() { strict } else { !d.neg };
        if up {
            t.plus_one()
        } else {
            t
        }
    }
    /// Largest integer `<= d` (or `< d` when `strict`).
    pub fn floor(d: &Dec, strict: bool) -> SInt {
        let t = SInt::from_dec_int(d.neg, d.int.clone());
        let down = if d.is_integer() { strict } else { d.neg };
        if down {
            t.minus_one()
        } else {
            t
        }
    }
    fn plus_one(&self) -> SInt {
        if self.neg {
            SInt::from_dec_int(true, nat_dec(&self.mag))
        } else {
            SInt { neg: false, mag: nat_inc(&self.mag) }
        }
    }
    fn minus_one(&self) -> SInt {
        if self.neg || self.mag.is_empty() {
            SInt { neg: true, mag: nat_inc(&self.mag) }
        } else {
            SInt { neg: false, mag: nat_dec(&self.mag) }
        }
    }
}

fn digits_str(d: &[u8]) -> String {
    if d.is_empty() {
        "0".into()
    } else {
        d.iter().map(|x| char::from(b'0' + x)).collect()
    }
}

fn class09(a: u8, b: u8) -> String {
    if a == b {
        emit::lit(&digits_str(&[a]))
    } else {
        format!("[{a}-{b}]")
    }
}

/// Naturals spelled without leading zeros with value in `[a, b]` (`b = None`: unbounded).
fn nat_range(a: &[u8], b: Option<&[u8]>, alts: &mut Vec<String>) {
    if let Some(b) = b {
        if a.len() > b.len() || (a.len() == b.len() && a > b) {
            return;
        }
    }
    let mut a = a.to_vec();
    if a.is_empty() {
        alts.push("\"0\"".into());
        a = vec![1];
        if b.is_some_and(<[u8]>::is_empty) {
            return;
        }
    }
    let push_fixed = |lo: &[u8], hi: &[u8], alts: &mut Vec<String>| {
        let mut seqs = Vec::new();
        super::jstr::fixed_width(lo, hi, 10, &mut seqs, &mut Vec::new());
        for seq in seqs {
            let parts: Vec<String> = seq.iter().map(|&(x, y)| class09(x, y)).collect();
            alts.push(compress(&parts));
        }
    };
    let la = a.len();
    match b {
        Some(b) if b.len() == la => push_fixed(&a, b, alts),
        _ => {
            push_fixed(&a, &vec![9; la], alts);
            match b {
                Some(b) => {
                    let lb = b.len();
                    if lb > la + 1 {
                        alts.push(format!("[1-9] [0-9]{{{},{}}}", la, lb - 2));
                    }
                    let mut lo = vec![0; lb];
                    lo[0] = 1;
                    push_fixed(&lo, b, alts);
                }
                None => alts.push(format!("[1-9] [0-9]{{{la},}}")),
            }
        }
    }
}

/// Joins digit-class parts, merging runs of `[0-9]` into a bounded repeat.
fn compress(parts: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < parts.len() {
        if parts[i] == "[0-9]" {
            let mut j = i;
            while j < parts.len() && parts[j] == "[0-9]" {
                j += 1;
            }
            if j - i > 1 {
                out.push(format!("[0-9]{{{}}}", j - i));
            } else {
                out.push("[0-9]".into());
            }
            i = j;
        } else {
            out.push(parts[i].clone());
            i += 1;
        }
    }
    out.join(" ")
}

/// Integers in `[lo, hi]` spelled `-?digits` (plus `-0` when 0 is in range). `None` if empty.
pub fn int_range(lo: Option<&SInt>, hi: Option<&SInt>) -> Option<String> {
    int_range_with(lo, hi, true)
}

/// The canonical spelling (`crate::spelling`) of a number schema, or `None` when the caller's
/// general path applies (`multipleOf`, non-integers only). `lo`/`hi` are (bound, exclusive).
/// Integers: `int_range` without `-0`; numbers: the canonical unbounded language, or plain
/// decimals in the range. A missing side is capped at 10^308 in magnitude (exclusive), so every
/// value is finite as a float64; the result is the usual `Option` (`None`: no value).
#[allow(clippy::option_option)] // outer `None`: not handled here; inner `None`: no value
pub fn emit_canonical_number(
    lo: Option<&(Dec, bool)>,
    hi: Option<&(Dec, bool)>,
    non_integers_only: bool,
    integer: bool,
    has_multiple_of: bool,
) -> Option<Option<String>> {
    if has_multiple_of || non_integers_only {
        return None;
    }
    if !integer && lo.is_none() && hi.is_none() {
        return Some(Some(NUMBER_RULE.to_string()));
    }
    if integer {
        let l = lo.map(|(d, x)| SInt::ceil(d, *x));
        let h = hi.map(|(d, x)| SInt::floor(d, *x));
        return Some(capped_int_range(l.as_ref(), h.as_ref()));
    }
    // One-sided number ranges keep an uncapped integer part (capping them by digit ranges
    // multiplies automaton states); plain decimals, no `-0`.
    Some(number_range_with(lo.map(|(d, x)| (d, *x)), hi.map(|(d, x)| (d, *x)), false))
}

/// Integers in `[lo, hi]` without `-0`, a missing side capped at 308 digits (below 10^308 in
/// magnitude): `int_range` up to the width of the given bound, then `[1-9] [0-9]{k,307}` for the
/// wider magnitudes (all inside the range), so the cap costs states linear in 308, once.
fn capped_int_range(lo: Option<&SInt>, hi: Option<&SInt>) -> Option<String> {
    if let (Some(_), Some(_)) = (lo, hi) {
        return int_range_with(lo, hi, false);
    }
    let max = crate::spelling::MAX_INT_DIGITS as usize;
    // Magnitudes from `a` (no leading zeros) upwards, capped: the part up to a's width, then wider.
    let open_above = |a: &[u8]| -> Vec<String> {
        let k = a.len().max(1);
        let nines = SInt { neg: false, mag: vec![9; k] };
        let from = SInt { neg: false, mag: a.to_vec() };
        let mut v: Vec<String> = int_range_with(Some(&from), Some(&nines), false).into_iter().collect();
        if k < max {
            v.push(format!("[1-9] [0-9]{{{k},{}}}", max - 1));
        }
        v
    };
    let mut alts = Vec::new();
    match (lo, hi) {
        (Some(l), None) => {
            if l.neg {
                // [l, -1] and [0, cap].
                let minus_one = SInt { neg: true, mag: vec![1] };
                alts.extend(int_range_with(Some(l), Some(&minus_one), false));
                alts.extend(open_above(&[]));
            } else {
                alts.extend(open_above(&l.mag));
            }
        }
        (None, Some(h)) => {
            if h.neg {
                // Magnitudes from |h| up.
                alts.extend(open_above(&h.mag).into_iter().map(|x| format!("\"-\" ({x})")));
            } else {
                let zero = SInt { neg: false, mag: Vec::new() };
                alts.extend(int_range_with(Some(&zero), Some(h), false));
                alts.extend(open_above(&[1]).into_iter().map(|x| format!("\"-\" ({x})")));
            }
        }
        _ => return Some(INTEGER_RULE.to_string()),
    }
    if alts.is_empty() {
        None
    } else {
        Some(emit::alt(&alts))
    }
}

/// Shared rules of the canonical unbounded integer and number languages (defined once by the
/// converter, so a schema with many numeric fields pays their 308-digit caps once).
pub const INTEGER_RULE: &str = "json_integer";
pub const NUMBER_RULE: &str = "json_number";

/// [`int_range`], with the spelling `-0` only when `neg_zero`.
fn int_range_with(lo: Option<&SInt>, hi: Option<&SInt>, neg_zero: bool) -> Option<String> {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l.to_dec() > h.to_dec() {
            return None;
        }
    }
    let mut alts = Vec::new();
    // Non-negative part: [max(lo, 0), hi].
    if hi.is_none_or(|h| !h.neg) {
        let a: Vec<u8> = lo.filter(|l| !l.neg).map(|l| l.mag.clone()).unwrap_or_default();
        nat_range(&a, hi.map(|h| h.mag.as_slice()), &mut alts);
    }
    // Negative part: magnitudes [max(-hi, 1), -lo].
    if lo.is_none_or(|l| l.neg) {
        let a = match hi {
            Some(h) if h.neg => h.mag.clone(),
            _ => vec![1],
        };
        let mut neg = Vec::new();
        nat_range(&a, lo.map(|l| l.mag.as_slice()), &mut neg);
        if !neg.is_empty() {
            alts.push(format!("\"-\" {}", emit::alt(&neg)));
        }
    }
    let zero_in = lo.is_none_or(|l| l.neg || l.mag.is_empty()) && hi.is_none_or(|h| !h.neg);
    if zero_in && neg_zero {
        alts.push("\"-0\"".into());
    }
    if alts.is_empty() {
        None
    } else {
        Some(emit::alt(&alts))
    }
}

/// A decimal bound for the fraction automaton: digits and whether the bound is exclusive.
struct FracBound<'a> {
    d: &'a [u8],
    strict: bool,
}

/// Digit strings S (empty allowed iff `allow_empty`) such that the fraction read so far followed
/// by S satisfies the bounds still tight at position `i`. Recursion depth is bounded by the bound
/// lengths (at most a few hundred digits for f64 values).
fn frac_rest(i: usize, lo: Option<&FracBound>, hi: Option<&FracBound>, allow_empty: bool) -> Option<String> {
    let star = if allow_empty { "[0-9]*" } else { "[0-9]+" };
    match (lo, hi) {
        (None, None) => return Some(star.into()),
        (Some(l), None) if i >= l.d.len() => {
            return Some(if l.strict { "\"0\"* [1-9] [0-9]*".into() } else { star.into() })
        }
        (None, Some(h)) if i >= h.d.len() => {
            return if h.strict {
                None
            } else if allow_empty {
                Some("\"0\"*".into())
            } else {
                Some("\"0\"+".into())
            }
        }
        (Some(l), Some(h)) if i >= l.d.len() && i >= h.d.len() => {
            return if l.strict || h.strict {
                None
            } else if allow_empty {
                Some("\"0\"*".into())
            } else {
                Some("\"0\"+".into())
            }
        }
        _ => {}
    }
    let mut alts = Vec::new();
    if allow_empty {
        let lo_ok = lo.is_none_or(|l| l.d[i.min(l.d.len())..].iter().all(|&x| x == 0) && !l.strict);
        let hi_ok = hi.is_none_or(|h| !h.d[i.min(h.d.len())..].iter().all(|&x| x == 0) || !h.strict);
        if lo_ok && hi_ok {
            alts.push("\"\"".into());
        }
    }
    let ld = lo.map_or(0, |l| l.d.get(i).copied().unwrap_or(0));
    let hd = hi.map_or(9, |h| h.d.get(i).copied().unwrap_or(0));
    if ld <= hd {
        let free_lo = if lo.is_some() { ld + 1 } else { ld };
        let free_hi = if hi.is_some() { hd.wrapping_sub(1) } else { hd };
        if hi.is_none() || hd > 0 {
            if free_lo <= free_hi && free_hi <= 9 {
                alts.push(format!("{} [0-9]*", class09(free_lo, free_hi)));
            }
        }
        if lo.is_some() {
            let h2 = hi.filter(|_| hd == ld);
            if let Some(r) = frac_rest(i + 1, lo, h2, true) {
                alts.push(format!("{} {r}", class09(ld, ld)));
            }
        }
        if hi.is_some() && (lo.is_none() || hd != ld) {
            if let Some(r) = frac_rest(i + 1, None, hi, true) {
                alts.push(format!("{} {r}", class09(hd, hd)));
            }
        }
    }
    if alts.is_empty() {
        None
    } else {
        Some(emit::alt(&alts))
    }
}

/// Optional fraction `("." digits)?` whose value `0.F` lies within the given fraction bounds.
fn frac_lang(lo: Option<(&[u8], bool)>, hi: Option<(&[u8], bool)>) -> Option<String> {
    let lo = lo.map(|(d, strict)| FracBound { d, strict });
    let hi = hi.map(|(d, strict)| FracBound { d, strict });
    let mut alts = Vec::new();
    let lo_ok = lo.as_ref().is_none_or(|l| l.d.is_empty() && !l.strict);
    let hi_ok = hi.as_ref().is_none_or(|h| !h.d.is_empty() || !h.strict);
    if lo_ok && hi_ok {
        alts.push("\"\"".to_string());
    }
    if let Some(r) = frac_rest(0, lo.as_ref(), hi.as_ref(), false) {
        alts.push(format!("\".\" {r}"));
    }
    if alts.is_empty() {
        None
    } else {
        Some(emit::alt(&alts))
    }
}

/// Non-negative decimals `x` spelled `int(.frac)?` with `lo <= x <= hi` (each bound optional,
/// non-negative, with its exclusivity).
fn pos_range(lo: Option<(&Dec, bool)>, hi: Option<(&Dec, bool)>) -> Option<String> {
    let (a_int, a_frac, a_strict) = lo.map_or((&[][..], &[][..], false), |(d, s)| (&d.int[..], &d.frac[..], s));
    let mut alts = Vec::new();
    let any_frac = "(\".\" [0-9]+)?";
    let lit_int = |d: &[u8]| emit::lit(&digits_str(d));
    match hi {
        None => {
            let mut ints = Vec::new();
            nat_range(&nat_inc(a_int), None, &mut ints);
            if !ints.is_empty() {
                alts.push(format!("{} {any_frac}", emit::alt(&ints)));
            }
            if let Some(f) = frac_lang(Some((a_frac, a_strict)), None) {
                alts.push(format!("{} {f}", lit_int(a_int)));
            }
        }
        Some((b, b_strict)) => match a_int.len().cmp(&b.int.len()).then_with(|| a_int.cmp(&b.int[..])) {
            Ordering::Greater => return None,
            Ordering::Equal => {
                let f = frac_lang(Some((a_frac, a_strict)), Some((&b.frac, b_strict)))?;
                alts.push(format!("{} {f}", lit_int(a_int)));
            }
            Ordering::Less => {
                let mid_lo = nat_inc(a_int);
                if !b.int.is_empty() {
                    let mid_hi = nat_dec(&b.int);
                    let mut ints = Vec::new();
                    nat_range(&mid_lo, Some(&mid_hi), &mut ints);
                    if !ints.is_empty() {
                        alts.push(format!("{} {any_frac}", emit::alt(&ints)));
                    }
                }
                if let Some(f) = frac_lang(Some((a_frac, a_strict)), None) {
                    alts.push(format!("{} {f}", lit_int(a_int)));
                }
                if let Some(f) = frac_lang(None, Some((&b.frac, b_strict))) {
                    alts.push(format!("{} {f}", lit_int(&b.int)));
                }
            }
        },
    }
    if alts.is_empty() {
        None
    } else {
        Some(emit::alt(&alts))
    }
}

/// Decimals in the given range, spelled `-?int(.frac)?` (no exponent). `None` if empty.
pub fn number_range(lo: Option<(&Dec, bool)>, hi: Option<(&Dec, bool)>) -> Option<String> {
    number_range_with(lo, hi, true)
}

/// [`number_range`]; with `!neg_zero`, zero is spelled without a sign only (no `-0`, `-0.0`).
fn number_range_with(lo: Option<(&Dec, bool)>, hi: Option<(&Dec, bool)>, neg_zero: bool) -> Option<String> {
    let zero = Dec { neg: false, int: Vec::new(), frac: Vec::new() };
    let mut alts = Vec::new();
    // x >= 0 part.
    if hi.is_none_or(|(h, _)| !h.neg) {
        let plo = match lo {
            Some((l, s)) if !l.neg => Some((l, s)),
            _ => Some((&zero, false)),
        };
        if let Some(p) = pos_range(plo, hi) {
            alts.push(p);
        }
    }
    // x <= 0 part as "-" y with y = -x in [max(-hi, 0), -lo].
    if lo.is_none_or(|(l, _)| l.neg || l.is_zero()) {
        let nhi_owned = lo.map(|(l, s)| (l.negate(), s));
        let nlo_owned = match hi {
            Some((h, s)) if h.neg || (h.is_zero() && neg_zero) => (h.negate(), s),
            // Without `-0`, the negative side starts strictly below zero.
            _ => (zero.clone(), !neg_zero),
        };
        if let Some(p) = pos_range(Some((&nlo_owned.0, nlo_owned.1)), nhi_owned.as_ref().map(|(d, s)| (d, *s))) {
            alts.push(format!("\"-\" {p}"));
        }
    }
    if alts.is_empty() {
        None
    } else {
        Some(emit::alt(&alts))
    }
}

/// A `multipleOf` divisor as `p / 10^s` with `p` a positive integer that fits in u32.
pub fn divisor(d: &Dec) -> Option<(u32, usize)> {
    if d.neg || d.is_zero() {
        return None;
    }
    let mut digits = d.int.clone();
    digits.extend_from_slice(&d.frac);
    let mut p: u64 = 0;
    for x in digits {
        p = p * 10 + u64::from(x);
        if p > u64::from(u32::MAX) {
            return None;
        }
    }
    Some((p as u32, d.frac.len()))
}

/// The least common multiple of several `multipleOf` divisors `p / 10^s`: a value is a multiple of
/// each of them iff it is a multiple of this one. `None` when it does not fit in u32.
pub fn lcm_divisor(divs: &[(u32, usize)]) -> Option<(u32, usize)> {
    let s = divs.iter().map(|d| d.1).max()?;
    let mut acc: u64 = 1;
    for &(p, ds) in divs {
        // Same scale for all: p * 10^(s - ds) / 10^s.
        let mut q = u64::from(p);
        for _ in ds..s {
            q = q.checked_mul(10)?;
        }
        let g = gcd(acc, q);
        acc = (acc / g).checked_mul(q)?;
        if acc > u64::from(u32::MAX) {
            return None;
        }
    }
    Some((acc as u32, s))
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Most states of a `multipleOf` remainder automaton.
pub const MAX_MULTIPLE_STATES: usize = 4096;

/// Defines rules for decimals (plain spelling `-?int(.frac)?`) that are multiples of `p / 10^s`,
/// with fraction digits restricted to `0` when `integer`, and no fraction at all when `plain`
/// (draft 4 integers); only those `>= 0` when `nonneg` (no sign, except on spellings of zero).
/// Returns the name of the rule, or `None` when the automaton would exceed
/// [`MAX_MULTIPLE_STATES`].
///
/// States: `i{r}` = inside the integer part with remainder r of the value scaled by 10^s;
/// `f{j}_{r}` = j fraction digits read. The value is a multiple iff the scaled, zero-padded digit
/// string has remainder 0; digits beyond the s-th fraction digit must be zeros.
pub fn multiple_of(
    e: &mut emit::Ebnf,
    p: u32,
    s: usize,
    integer: bool,
    plain: bool,
    nonneg: bool,
) -> crate::error::Result<Option<String>> {
    let pu = p as usize;
    if pu.saturating_mul(s + 2) > MAX_MULTIPLE_STATES {
        return Ok(None);
    }
    let base = e.fresh("mult");
    let pow10 = |r: usize, k: usize| (0..k).fold(r, |v, _| v * 10 % pu);
    let max_digit = if integer { 0 } else { 9 };
    // Alternatives after j fraction digits with remainder r; `at_int`: the "." is still to come.
    let tail = |r: usize, j: usize, at_int: bool| -> Vec<String> {
        let mut alts = Vec::new();
        if pow10(r, s - j) == 0 {
            alts.push("\"\"".to_string());
        }
        let dot = if at_int { "\".\" " } else { "" };
        if plain && at_int {
            return alts;
        }
        if j < s {
            let mut ds = Vec::new();
            for d in 0..=max_digit {
                let r2 = (r * 10 + d) % pu;
                if j + 1 < s || r2 == 0 {
                    ds.push(format!("\"{d}\" {base}.f{}_{r2}", j + 1));
                }
            }
            if !ds.is_empty() {
                alts.push(format!("{dot}({})", ds.join(" | ")));
            }
        } else if r == 0 {
            alts.push(format!("{dot}\"0\"+"));
        }
        alts
    };
    for r in 0..pu {
        let mut alts: Vec<String> = (0..10usize).map(|d| format!("\"{d}\" {base}.i{}", (r * 10 + d) % pu)).collect();
        alts.extend(tail(r, 0, true));
        e.define(&format!("{base}.i{r}"), &alts.join(" | "))?;
    }
    for j in 1..=s {
        for r in 0..pu {
            if j == s && r != 0 {
                continue;
            }
            let alts = tail(r, j, false);
            e.define(&format!("{base}.f{j}_{r}"), &alts.join(" | "))?;
        }
    }
    let z = tail(0, 0, true);
    e.define(&format!("{base}.z"), &z.join(" | "))?;
    let mut first = vec![format!("\"0\" {base}.z")];
    for d in 1..10usize {
        first.push(format!("\"{d}\" {base}.i{}", d % pu));
    }
    let name = format!("{base}.num");
    let body = if nonneg {
        // `-0`, `-0.00`: zero is not below zero.
        let zero = if plain { "\"-0\"" } else { "\"-0\" (\".\" \"0\"+)?" };
        format!("{} | {zero}", first.join(" | "))
    } else {
        format!("\"-\"? ({})", first.join(" | "))
    };
    e.define(&name, &body)?;
    Ok(Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).unwrap()
    }

    #[test]
    fn dec_parse_and_order() {
        assert_eq!(d("-0.0"), d("0"));
        assert!(d("-1.5") < d("-1.25"));
        assert!(d("10") > d("9.99"));
        assert_eq!(d("007.100"), Dec { neg: false, int: vec![7], frac: vec![1] });
    }

    #[test]
    fn ceil_floor() {
        let c = SInt::ceil(&d("1.5"), false);
        assert_eq!(c, SInt { neg: false, mag: vec![2] });
        assert_eq!(SInt::ceil(&d("-1.5"), false), SInt { neg: true, mag: vec![1] });
        assert_eq!(SInt::ceil(&d("-1"), true), SInt { neg: false, mag: vec![] });
        assert_eq!(SInt::floor(&d("0"), true), SInt { neg: true, mag: vec![1] });
        assert_eq!(SInt::floor(&d("-0.5"), false), SInt { neg: true, mag: vec![1] });
    }

    #[test]
    fn lcm_of_divisors() {
        assert_eq!(lcm_divisor(&[(2, 0), (3, 0)]), Some((6, 0)));
        // 0.5 and 0.3 -> multiples of 1.5
        assert_eq!(lcm_divisor(&[(5, 1), (3, 1)]), Some((15, 1)));
        // 2 and 0.25 -> 200/100 and 25/100 -> 200/100
        assert_eq!(lcm_divisor(&[(2, 0), (25, 2)]), Some((200, 2)));
        assert_eq!(lcm_divisor(&[(4_000_000_000, 0), (3, 0)]), None);
    }

    #[test]
    fn int_range_shapes() {
        let lo = SInt { neg: false, mag: vec![1, 2] };
        let hi = SInt { neg: false, mag: vec![3, 4, 5] };
        let g = int_range(Some(&lo), Some(&hi)).unwrap();
        assert!(g.contains("[2-9]"), "{g}");
        assert!(int_range(Some(&hi), Some(&lo)).is_none());
    }
}
