//! JSON string spelling: turns sets of Unicode codepoints (and finite sets of strings) into EBNF that
//! matches *every* JSON spelling of them inside a string literal: the raw character where JSON allows
//! it, the short escapes (`\n`, `\"`, `\/`, ...), and `\uXXXX` in any hex case, with codepoints above
//! U+FFFF as surrogate pairs. Lone surrogates are never produced (a string value is a sequence of
//! Unicode scalar values), which keeps character counts (minLength/maxLength) exact.

use std::collections::BTreeMap;

use super::emit::{self, Ebnf};
use crate::error::Result;

/// Body of the shared rule matching one JSON string character (any scalar value).
pub const CHAR_ANY_BODY: &str = "[^\"\\\\\\u0000-\\u001f] | \"\\\\\" [\"\\\\/bfnrt] | \"\\\\u\" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}) | \"\\\\u\" [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}";

const MAX_CP: u32 = 0x10_FFFF;

/// Codepoints that may appear unescaped inside a JSON string.
const RAW_OK: [(u32, u32); 4] = [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, MAX_CP)];

fn intersect(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for &(x0, x1) in a {
        for &(y0, y1) in b {
            let lo = x0.max(y0);
            let hi = x1.min(y1);
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    out.sort_unstable();
    out
}

/// The complement of a sorted set of codepoints within the scalar values.
pub fn complement(points: &[u32]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut next = 0u32;
    for &p in points {
        if p > next {
            out.push((next, p - 1));
        }
        next = p + 1;
    }
    if next <= MAX_CP {
        out.push((next, MAX_CP));
    }
    intersect(&out, &[(0, 0xD7FF), (0xE000, MAX_CP)])
}

/// Hex digit class for digits `a..=b`, both letter cases.
fn hex_class(a: u8, b: u8) -> String {
    if a == b && a < 10 {
        return emit::lit(&char::from_digit(u32::from(a), 16).unwrap_or('0').to_string());
    }
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    if a <= 9 {
        ranges.push((u32::from(b'0' + a), u32::from(b'0' + b.min(9))));
    }
    if b >= 10 {
        let lo = a.max(10) - 10;
        let hi = b - 10;
        ranges.push((u32::from(b'A' + lo), u32::from(b'A' + hi)));
        ranges.push((u32::from(b'a' + lo), u32::from(b'a' + hi)));
    }
    emit::class(&ranges)
}

/// Sequences of per-digit ranges matching fixed-width numbers in `[lo, hi]` (digit vectors of equal
/// length, most significant first). Recursion depth is the width.
pub fn fixed_width(lo: &[u8], hi: &[u8], base: u8, out: &mut Vec<Vec<(u8, u8)>>, prefix: &mut Vec<(u8, u8)>) {
    debug_assert_eq!(lo.len(), hi.len());
    if lo.is_empty() {
        out.push(prefix.clone());
        return;
    }
    let max = base - 1;
    if lo[0] == hi[0] {
        prefix.push((lo[0], lo[0]));
        fixed_width(&lo[1..], &hi[1..], base, out, prefix);
        prefix.pop();
        return;
    }
    let lo_rest_min = lo[1..].iter().all(|&d| d == 0);
    let hi_rest_max = hi[1..].iter().all(|&d| d == max);
    let mid_lo = if lo_rest_min { lo[0] } else { lo[0] + 1 };
    let mid_hi = if hi_rest_max { hi[0] } else { hi[0] - 1 };
    if !lo_rest_min {
        prefix.push((lo[0], lo[0]));
        let maxes = vec![max; lo.len() - 1];
        fixed_width(&lo[1..], &maxes, base, out, prefix);
        prefix.pop();
    }
    if mid_lo <= mid_hi {
        let mut seq = prefix.clone();
        seq.push((mid_lo, mid_hi));
        seq.extend(std::iter::repeat((0, max)).take(lo.len() - 1));
        out.push(seq);
    }
    if !hi_rest_max {
        prefix.push((hi[0], hi[0]));
        let zeros = vec![0; hi.len() - 1];
        fixed_width(&zeros, &hi[1..], base, out, prefix);
        prefix.pop();
    }
}

fn hex_digits(v: u32, width: usize) -> Vec<u8> {
    (0..width).rev().map(|i| ((v >> (4 * i)) & 0xF) as u8).collect()
}

/// Alternatives matching 4-hex-digit spellings of values in `ranges` (case-insensitive).
fn hex4_alts(ranges: &[(u32, u32)], alts: &mut Vec<String>, prefix: &str) {
    for &(a, b) in ranges {
        let mut seqs = Vec::new();
        fixed_width(&hex_digits(a, 4), &hex_digits(b, 4), 16, &mut seqs, &mut Vec::new());
        for seq in seqs {
            let mut s = String::from(prefix);
            for (x, y) in seq {
                s.push(' ');
                s.push_str(&hex_class(x, y));
            }
            alts.push(s);
        }
    }
}

/// EBNF matching one JSON string character spelling whose codepoint is in `set` (sorted ranges of
/// scalar values). `None` when the set is empty.
pub fn spell_set(set: &[(u32, u32)]) -> Option<String> {
    if set.is_empty() {
        return None;
    }
    let mut alts = Vec::new();
    let raw = intersect(set, &RAW_OK);
    if !raw.is_empty() {
        alts.push(emit::class(&raw));
    }
    let shorts: Vec<u32> = [(0x22u32, '"'), (0x5C, '\\'), (0x2F, '/'), (0x08, 'b'), (0x0C, 'f'), (0x0A, 'n'), (0x0D, 'r'), (0x09, 't')]
        .iter()
        .filter(|(cp, _)| set.iter().any(|&(a, b)| a <= *cp && *cp <= b))
        .map(|&(_, c)| c as u32)
        .collect();
    if !shorts.is_empty() {
        let mut cls: Vec<(u32, u32)> = shorts.iter().map(|&c| (c, c)).collect();
        cls.sort_unstable();
        alts.push(format!("\"\\\\\" {}", emit::class(&cls)));
    }
    let bmp = intersect(set, &[(0, 0xD7FF), (0xE000, 0xFFFF)]);
    hex4_alts(&bmp, &mut alts, "\"\\\\u\"");
    for (a, b) in intersect(set, &[(0x1_0000, MAX_CP)]) {
        // Split the astral range by high surrogate.
        let (ha, la) = surrogates(a);
        let (hb, lb) = surrogates(b);
        let mut pairs = Vec::new();
        if ha == hb {
            pairs.push(((ha, ha), (la, lb)));
        } else {
            pairs.push(((ha, ha), (la, 0xDFFF)));
            if ha + 1 < hb {
                pairs.push(((ha + 1, hb - 1), (0xDC00, 0xDFFF)));
            }
            pairs.push(((hb, hb), (0xDC00, lb)));
        }
        for (h, l) in pairs {
            let mut hs = Vec::new();
            hex4_alts(&[h], &mut hs, "\"\\\\u\"");
            let mut ls = Vec::new();
            hex4_alts(&[l], &mut ls, "\"\\\\u\"");
            alts.push(format!("{} {}", emit::alt(&hs), emit::alt(&ls)));
        }
    }
    Some(emit::alt(&alts))
}

fn surrogates(cp: u32) -> (u32, u32) {
    let v = cp - 0x1_0000;
    (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
}

/// EBNF matching every JSON spelling of the string body `s` (without the quotes).
pub fn spell_str(s: &str) -> String {
    if s.is_empty() {
        return "\"\"".to_string();
    }
    let parts: Vec<String> = s
        .chars()
        .map(|c| spell_set(&[(c as u32, c as u32)]).unwrap_or_default())
        .collect();
    parts.join(" ")
}

/// A trie over codepoints; node 0 is the root.
struct Trie {
    children: Vec<BTreeMap<u32, usize>>,
    terminal: Vec<bool>,
}

/// Defines rules matching the body of any JSON string whose value is not in `keys`, and returns
/// the expression. `char_any` names the rule for one arbitrary character.
pub fn not_in(e: &mut Ebnf, keys: &[&str], char_any: &str) -> Result<String> {
    if keys.is_empty() {
        return Ok(format!("{char_any}*"));
    }
    let mut t = Trie { children: vec![BTreeMap::new()], terminal: vec![false] };
    for k in keys {
        let mut n = 0;
        for c in k.chars() {
            let next = t.children.len();
            let id = *t.children[n].entry(c as u32).or_insert(next);
            if id == next {
                t.children.push(BTreeMap::new());
                t.terminal.push(false);
            }
            n = id;
        }
        t.terminal[n] = true;
    }
    let names: Vec<String> = (0..t.children.len()).map(|_| e.fresh("key_not_in")).collect();
    for n in 0..t.children.len() {
        let mut alts = Vec::new();
        if !t.terminal[n] {
            alts.push("\"\"".to_string());
        }
        let pts: Vec<u32> = t.children[n].keys().copied().collect();
        if let Some(other) = spell_set(&complement(&pts)) {
            alts.push(format!("{other} {char_any}*"));
        }
        for (&c, &child) in &t.children[n] {
            let sp = spell_set(&[(c, c)]).unwrap_or_default();
            alts.push(format!("{sp} {}", names[child]));
        }
        e.define(&names[n], &alts.join(" | "))?;
    }
    Ok(names[0].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_covers_range() {
        let mut out = Vec::new();
        fixed_width(&[1, 2], &[3, 4], 10, &mut out, &mut Vec::new());
        // 12-19, 20-29, 30-34
        assert_eq!(out, vec![vec![(1, 1), (2, 9)], vec![(2, 2), (0, 9)], vec![(3, 3), (0, 4)]]);
    }

    #[test]
    fn spell_letter() {
        assert_eq!(spell_str("n"), r#"([n] | "\\u" "0" "0" "6" [Ee])"#);
    }

    #[test]
    fn complement_skips_surrogates() {
        let c = complement(&[0x61]);
        assert_eq!(c, vec![(0, 0x60), (0x62, 0xD7FF), (0xE000, MAX_CP)]);
    }
}
