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

/// The short escapes: (codepoint, letter after the backslash).
const SHORT_ESCAPES: [(u32, char); 8] = [(0x22, '"'), (0x5C, '\\'), (0x2F, '/'), (0x08, 'b'), (0x0C, 'f'), (0x0A, 'n'), (0x0D, 'r'), (0x09, 't')];

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
        seq.extend(std::iter::repeat_n((0, max), lo.len() - 1));
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
    let shorts: Vec<u32> = SHORT_ESCAPES
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
    let parts: Vec<String> = s.chars().map(|c| spell_char(c as u32)).collect();
    parts.join(" ")
}

/// Appends the `\uXXXX` spelling of the BMP value `v` (any hex letter case) to `pieces`, with
/// decimal digits merged into the literal `lit`.
fn push_u_escape(v: u32, lit: &mut String, pieces: &mut Vec<String>) {
    lit.push_str("\\u");
    for d in hex_digits(v, 4) {
        if d < 10 {
            lit.push(char::from(b'0' + d));
        } else {
            pieces.push(emit::lit(lit));
            lit.clear();
            let (upper, lower) = (u32::from(b'A' + d - 10), u32::from(b'a' + d - 10));
            pieces.push(emit::class(&[(upper, upper), (lower, lower)]));
        }
    }
}

/// EBNF matching every JSON spelling of the scalar value `c`: the same language as
/// `spell_set(&[(c, c)])`, with each escape written as one literal where its hex digits are
/// decimal (`"\\u0064"` rather than `"\\u" "0" "0" "6" "4"`).
/// PERF: a third of the automaton states of a key, and of the text, for every key character.
pub fn spell_char(c: u32) -> String {
    let mut alts = Vec::new();
    if RAW_OK.iter().any(|&(a, b)| a <= c && c <= b) {
        alts.push(emit::lit(&char::from_u32(c).unwrap_or_default().to_string()));
    }
    if let Some(&(_, letter)) = SHORT_ESCAPES.iter().find(|&&(cp, _)| cp == c) {
        alts.push(emit::lit(&format!("\\{letter}")));
    }
    let mut pieces = Vec::new();
    let mut lit = String::new();
    if c <= 0xFFFF {
        push_u_escape(c, &mut lit, &mut pieces);
    } else {
        let (hi, lo) = surrogates(c);
        push_u_escape(hi, &mut lit, &mut pieces);
        push_u_escape(lo, &mut lit, &mut pieces);
    }
    if !lit.is_empty() {
        pieces.push(emit::lit(&lit));
    }
    alts.push(pieces.join(" "));
    emit::alt(&alts)
}

/// A trie over codepoints; node 0 is the root. Children are created after their parent, so
/// they have larger ids.
struct Trie {
    children: Vec<BTreeMap<u32, usize>>,
    terminal: Vec<bool>,
}

/// Hex digit class for the digit values in `mask` (bit d: digit d), both letter cases.
fn hex_mask_class(mask: u16) -> String {
    if mask.is_power_of_two() && mask.trailing_zeros() < 10 {
        return hex_class(mask.trailing_zeros() as u8, mask.trailing_zeros() as u8);
    }
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    let mut push = |lo: u32, hi: u32| match ranges.last_mut() {
        Some(last) if last.1 + 1 == lo => last.1 = hi,
        _ => ranges.push((lo, hi)),
    };
    for d in 0..10u32 {
        if mask & (1 << d) != 0 {
            push(u32::from(b'0') + d, u32::from(b'0') + d);
        }
    }
    for base in [b'A', b'a'] {
        for d in 10..16u32 {
            if mask & (1 << d) != 0 {
                push(u32::from(base) + d - 10, u32::from(base) + d - 10);
            }
        }
    }
    emit::class(&ranges)
}

const HEX: &str = "[0-9A-Fa-f]";

/// Number of values of `[lo, hi]` in `allowed` (sorted, disjoint ranges).
fn covered(allowed: &[(u32, u32)], lo: u32, hi: u32) -> u32 {
    allowed.iter().map(|&(a, b)| if a.max(lo) <= b.min(hi) { b.min(hi) - a.max(lo) + 1 } else { 0 }).sum()
}

/// EBNF matching the `width`-hex-digit spellings (any letter case) of the values in `allowed`
/// within `[prefix << 4 * width, (prefix + 1) << 4 * width)`, as a trie over the digits: digits
/// whose whole block is allowed share one class followed by free digits. `None` when no value is
/// allowed. Recursion depth is `width` (at most 4).
fn hex_trie(allowed: &[(u32, u32)], prefix: u32, width: u32) -> Option<String> {
    let size = 1u32 << (4 * (width - 1));
    let base = prefix << (4 * width);
    let mut full: u16 = 0;
    let mut alts: Vec<String> = Vec::new();
    for d in 0..16u32 {
        let lo = base + d * size;
        let n = covered(allowed, lo, lo + size - 1);
        if n == size {
            full |= 1 << d;
        } else if n > 0 {
            let rest = hex_trie(allowed, (prefix << 4) | d, width - 1)?;
            alts.push(format!("{} {rest}", hex_mask_class(1 << d)));
        }
    }
    if full != 0 {
        let tail = match width - 1 {
            0 => String::new(),
            1 => format!(" {HEX}"),
            k => format!(" {HEX}{{{k}}}"),
        };
        alts.insert(0, format!("{}{tail}", hex_mask_class(full)));
    }
    (!alts.is_empty()).then(|| emit::alt(&alts))
}

/// The letters of the short escapes (`\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`) whose codepoint is
/// not in `points` (sorted), as a sorted class.
fn short_escapes_except(points: &[u32]) -> Vec<(u32, u32)> {
    let mut letters: Vec<u32> = SHORT_ESCAPES
        .iter()
        .filter(|(cp, _)| points.binary_search(cp).is_err())
        .map(|&(_, c)| c as u32)
        .collect();
    letters.sort_unstable();
    letters.into_iter().map(|c| (c, c)).collect()
}

/// The raw class of the codepoints in `rest` (one alternative, if any) and the class of the short
/// escape letters whose codepoint is not in `points` (one escape alternative, if any).
fn raw_and_short_except(rest: &[(u32, u32)], points: &[u32]) -> (Vec<String>, Vec<String>) {
    let raw = intersect(rest, &RAW_OK);
    let alts = if raw.is_empty() { Vec::new() } else { vec![emit::class(&raw)] };
    let shorts = short_escapes_except(points);
    let esc = if shorts.is_empty() { Vec::new() } else { vec![emit::class(&shorts)] };
    (alts, esc)
}

/// The alternatives of an EBNF expression matching one JSON string character spelling whose
/// codepoint is not in `points` (sorted BMP scalar values); same language as
/// `spell_set(&complement(points))`, written compactly: one raw class, one escape branch whose
/// `\uXXXX` part is a trie over the hex digits, and the surrogate pairs of all astral codepoints.
fn spell_except_bmp(points: &[u32]) -> Vec<String> {
    let rest = complement(points);
    let (mut alts, mut esc) = raw_and_short_except(&rest, points);
    let bmp = intersect(&rest, &[(0, 0xD7FF), (0xE000, 0xFFFF)]);
    let mut u = Vec::new();
    if let Some(t) = hex_trie(&bmp, 0, 4) {
        u.push(t);
    }
    u.push(format!("[Dd] [89ABab] {HEX}{{2}} \"\\\\u\" [Dd] [C-Fc-f] {HEX}{{2}}"));
    esc.push(format!("\"u\" {}", emit::alt(&u)));
    alts.push(format!("\"\\\\\" {}", emit::alt(&esc)));
    alts
}

/// The alternatives of an EBNF expression matching one JSON string character spelling whose
/// codepoint is ASCII and not in `points` (sorted ASCII codepoints), leaving out the short escapes
/// of the codepoints not in `shorts_of` (sorted); empty when nothing is left.
fn spell_ascii_except(points: &[u32], shorts_of: &[u32]) -> Vec<String> {
    let rest: Vec<(u32, u32)> = intersect(&complement(points), &[(0, 0x7F)]);
    if rest.is_empty() {
        return Vec::new();
    }
    let raw = intersect(&rest, &RAW_OK);
    let mut alts = if raw.is_empty() { Vec::new() } else { vec![emit::class(&raw)] };
    let mut letters: Vec<u32> = SHORT_ESCAPES
        .iter()
        .filter(|(cp, _)| points.binary_search(cp).is_err() && shorts_of.binary_search(cp).is_ok())
        .map(|&(_, c)| c as u32)
        .collect();
    letters.sort_unstable();
    let u = hex_trie(&rest, 0, 2);
    match (letters.is_empty(), u) {
        (true, Some(t)) => alts.push(format!("\"\\\\u00\" {t}")),
        (false, Some(t)) => {
            let cls: Vec<(u32, u32)> = letters.iter().map(|&c| (c, c)).collect();
            alts.push(format!("\"\\\\\" ({} | \"u00\" {t})", emit::class(&cls)));
        }
        (_, None) => {}
    }
    alts
}

/// EBNF matching one JSON string character spelling whose codepoint is not ASCII, or that is the
/// short escape of an ASCII codepoint not in `keyed` (sorted): the characters that deviate at
/// every node of a trie of ASCII keys using only the characters `keyed`, whatever their spelling.
fn spell_foreign(keyed: &[u32]) -> String {
    let raw = emit::class(&intersect(&[(0x80, MAX_CP)], &RAW_OK));
    let bmp = hex_trie(&[(0x80, 0xD7FF), (0xE000, 0xFFFF)], 0, 4).unwrap_or_default();
    let pair = format!("[Dd] [89ABab] {HEX}{{2}} \"\\\\u\" [Dd] [C-Fc-f] {HEX}{{2}}");
    let shorts = short_escapes_except(keyed);
    if shorts.is_empty() {
        format!("({raw} | \"\\\\u\" ({bmp} | {pair}))")
    } else {
        format!("({raw} | \"\\\\\" ({} | \"u\" ({bmp} | {pair})))", emit::class(&shorts))
    }
}

/// Trie levels per rule in [`not_in`]: deeper subtrees move to rules of their own, bounding the
/// nesting of the generated expressions.
const NOT_IN_LEVELS: usize = 48;

/// The tries that [`not_in`] spells, each from a node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// `T`: the rest of a proper prefix of keys that is not a key.
    Prefix,
    /// `D`: the rest of a key prefix, then one character that does not continue it.
    Deviate,
    /// `P`: the rest of any key prefix (ASCII keys only).
    All,
}

impl Part {
    fn stem(self) -> &'static str {
        match self {
            Part::Prefix => "key_not_in_p",
            Part::Deviate => "key_not_in_d",
            Part::All => "key_not_in_q",
        }
    }
}

/// One alternative of a node's expression.
#[derive(Clone, Copy)]
enum Alt {
    /// The empty string: the prefix ends here.
    End,
    /// A character that continues no key here (`dev[node]`).
    Dev,
    /// The character `.0`, then the rest from child node `.1`.
    Child(u32, usize),
    /// Any of the node's children that are leaves (keys without longer keys), when there are
    /// several: their expressions are all alike, so the rest is spelled once after the group of
    /// their characters, and they share its automaton states.
    Leaves,
}

/// Writes the expressions of [`not_in`]. Per-node strings are shared: the spelling of each
/// character and the deviation of each distinct set of continuing characters are made once.
struct KeyTrieWriter<'a> {
    trie: &'a Trie,
    depth: Vec<usize>,
    /// `spell[c]`: every JSON spelling of the codepoint `c` of some trie edge.
    spell: BTreeMap<u32, String>,
    /// `dev[n]`: index into `devs` of node `n`'s own deviation, if it has one.
    dev: Vec<Option<usize>>,
    /// Deviations, as (bare alternatives joined by `|`, the same as one expression).
    devs: Vec<(String, String)>,
    /// `has[part][n]`: the part's expression from `n` matches something.
    has: [Vec<bool>; 3],
}

impl<'a> KeyTrieWriter<'a> {
    /// Prepares the shared strings. `deviation` gives the alternatives of the characters that
    /// deviate at a node with the given (sorted) continuing characters; empty when none does.
    fn new(trie: &'a Trie, deviation: impl Fn(&[u32]) -> Vec<String>) -> Self {
        let count = trie.children.len();
        let mut depth = vec![0usize; count];
        let mut spell = BTreeMap::new();
        let mut by_points: std::collections::HashMap<Vec<u32>, Option<usize>> = std::collections::HashMap::new();
        let mut devs = Vec::new();
        let mut dev = vec![None; count];
        for n in 0..count {
            for (&c, &child) in &trie.children[n] {
                depth[child] = depth[n] + 1;
                spell.entry(c).or_insert_with(|| spell_char(c));
            }
            let pts: Vec<u32> = trie.children[n].keys().copied().collect();
            dev[n] = *by_points.entry(pts).or_insert_with_key(|pts| {
                let alts = deviation(pts);
                (!alts.is_empty()).then(|| {
                    devs.push((alts.join(" | "), emit::alt(&alts)));
                    devs.len() - 1
                })
            });
        }
        // Bottom-up (children have larger ids).
        let mut has = [vec![false; count], vec![false; count], vec![true; count]];
        for n in (0..count).rev() {
            has[0][n] = !trie.terminal[n] || trie.children[n].values().any(|&c| has[0][c]);
            has[1][n] = dev[n].is_some() || trie.children[n].values().any(|&c| has[1][c]);
        }
        KeyTrieWriter { trie, depth, spell, dev, devs, has }
    }

    fn has(&self, part: Part, n: usize) -> bool {
        self.has[part as usize][n]
    }

    fn alts(&self, part: Part, n: usize) -> Vec<Alt> {
        let mut alts = Vec::new();
        match part {
            Part::Prefix if !self.trie.terminal[n] => alts.push(Alt::End),
            Part::Deviate if self.dev[n].is_some() => alts.push(Alt::Dev),
            Part::All => alts.push(Alt::End),
            _ => {}
        }
        let leaf = |child: usize| self.trie.children[child].is_empty();
        let kids: Vec<(u32, usize)> =
            self.trie.children[n].iter().map(|(&c, &k)| (c, k)).filter(|&(_, k)| self.has(part, k)).collect();
        let leaves: Vec<usize> = (0..kids.len()).filter(|&i| leaf(kids[i].1)).collect();
        // The leaves come last among the children, grouped when there are several.
        for &(c, child) in &kids {
            if !leaf(child) || leaves.len() == 1 {
                alts.push(Alt::Child(c, child));
            }
        }
        if leaves.len() > 1 {
            alts.push(Alt::Leaves);
        }
        alts
    }

    /// The children of `n` that are leaves of `part`'s trie: (character, node).
    fn leaves(&self, part: Part, n: usize) -> Vec<(u32, usize)> {
        self.trie.children[n]
            .iter()
            .map(|(&c, &k)| (c, k))
            .filter(|&(_, k)| self.has(part, k) && self.trie.children[k].is_empty())
            .collect()
    }

    /// The expression of `part` from node `root` (which must match something). Subtrees at
    /// split depths (see [`NOT_IN_LEVELS`]) become rules of their own, written here as well.
    /// An explicit stack of pending text keeps this free of recursion over the trie.
    fn write(&self, e: &mut Ebnf, part: Part, root: usize) -> Result<String> {
        enum Work<'s> {
            Text(&'s str),
            Node(usize),
        }
        let mut queue = vec![(root, None::<String>)];
        let mut top = String::new();
        while let Some((start, name)) = queue.pop() {
            let mut out = String::new();
            let mut stack = vec![Work::Node(start)];
            while let Some(w) = stack.pop() {
                let n = match w {
                    Work::Text(t) => {
                        out.push_str(t);
                        continue;
                    }
                    Work::Node(n) => n,
                };
                if n != start && self.depth[n].is_multiple_of(NOT_IN_LEVELS) {
                    let rule = e.fresh(part.stem());
                    out.push_str(&rule);
                    queue.push((n, Some(rule)));
                    continue;
                }
                let alts = self.alts(part, n);
                let many = alts.len() > 1;
                if many {
                    stack.push(Work::Text(")"));
                }
                for (i, alt) in alts.iter().enumerate().rev() {
                    match *alt {
                        Alt::End => stack.push(Work::Text("\"\"")),
                        Alt::Dev => {
                            let (bare, whole) = &self.devs[self.dev[n].unwrap_or_default()];
                            // Bare alternatives only inside this node's parentheses.
                            stack.push(Work::Text(if many { bare } else { whole }));
                        }
                        Alt::Child(c, child) => {
                            stack.push(Work::Node(child));
                            stack.push(Work::Text(" "));
                            stack.push(Work::Text(self.spell.get(&c).map_or("", String::as_str)));
                        }
                        Alt::Leaves => {
                            let leaves = self.leaves(part, n);
                            stack.push(Work::Node(leaves[0].1));
                            stack.push(Work::Text(") "));
                            for (j, &(c, _)) in leaves.iter().enumerate().rev() {
                                stack.push(Work::Text(self.spell.get(&c).map_or("", String::as_str)));
                                if j > 0 {
                                    stack.push(Work::Text(" | "));
                                }
                            }
                            stack.push(Work::Text("("));
                        }
                    }
                    if i > 0 {
                        stack.push(Work::Text(" | "));
                    }
                }
                if many {
                    stack.push(Work::Text("("));
                }
            }
            match name {
                Some(rule) => e.define(&rule, &out)?,
                None => top = out,
            }
        }
        Ok(top)
    }
}

/// Defines rules matching the body of any JSON string whose value is not in `keys`, and returns
/// the expression. `char_any` names the rule for one arbitrary character.
///
/// Shape: `T | D char_any*`, where `T` spells the proper prefixes of keys that are not keys
/// themselves and `D` spells a prefix of some key followed by one character that does not
/// continue it (a trie of both, nested in one expression). Every spelling of a character is
/// covered (escapes included), so `"\u0061"` counts as `"a"`. When every key is ASCII, the
/// non-ASCII characters (which never continue a key) are factored out of `D`:
/// `D = D' | P foreign`, with `P` the trie of all prefixes and `D'` deviating by an ASCII
/// character only; `foreign` also takes the short escapes (`\n`, `\/`, ...) of the characters
/// that occur in no key, which deviate wherever they come.
/// PERF: the former shape repeated `char_any*` at every trie node, and the full spelling of "any
/// other character" with `\uXXXX` enumerated; both blew up the automata of lax objects. The
/// text is written top-down into one buffer per rule (it was nested bottom-up, copying each
/// subtree's text once per level), with each character's spelling and each node's deviation
/// made once per distinct value, and a node's deviation alternatives inlined into its own
/// alternation (one choice less per node in the automaton).
pub fn not_in(e: &mut Ebnf, keys: &[&str], char_any: &str) -> Result<String> {
    if keys.is_empty() {
        return Ok(format!("{char_any}*"));
    }
    let mut trie = Trie { children: vec![BTreeMap::new()], terminal: vec![false] };
    for k in keys {
        let mut n = 0;
        for c in k.chars() {
            let next = trie.children.len();
            let id = *trie.children[n].entry(c as u32).or_insert(next);
            if id == next {
                trie.children.push(BTreeMap::new());
                trie.terminal.push(false);
            }
            n = id;
        }
        trie.terminal[n] = true;
    }
    let ascii = keys.iter().all(|k| k.is_ascii());
    // The codepoints of the keys (ASCII keys): a short escape of any other character deviates
    // at every node, so it is spelled once, after `P`.
    let mut keyed: Vec<u32> = keys.iter().flat_map(|k| k.chars().map(|c| c as u32)).collect();
    keyed.sort_unstable();
    keyed.dedup();
    let w = KeyTrieWriter::new(&trie, |pts| {
        if ascii {
            spell_ascii_except(pts, &keyed)
        } else if pts.iter().all(|&c| c < 0x1_0000) {
            spell_except_bmp(pts)
        } else {
            spell_set(&complement(pts)).into_iter().collect()
        }
    });
    let mut deviate = Vec::new();
    if w.has(Part::Deviate, 0) {
        deviate.push(w.write(e, Part::Deviate, 0)?);
    }
    if ascii {
        deviate.push(format!("{} {}", w.write(e, Part::All, 0)?, spell_foreign(&keyed)));
    }
    let tail = format!("{} {char_any}*", emit::alt(&deviate));
    let body = if w.has(Part::Prefix, 0) { format!("{} | {tail}", w.write(e, Part::Prefix, 0)?) } else { tail };
    let name = e.fresh("key_not_in");
    e.define(&name, &body)?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The former `not_in` (a chain of rules, each spelling "any other character" in full):
    /// the reference for the language of the compact one.
    fn not_in_reference(e: &mut Ebnf, keys: &[&str], char_any: &str) -> Result<String> {
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

    /// The byte automaton of `root ::= "\"" <not_in keys> "\""`, fully inlined.
    fn key_automaton(keys: &[&str], reference: bool) -> crate::compiler::Automata {
        let mut e = Ebnf::default();
        e.define("json_char", CHAR_ANY_BODY).unwrap();
        let x = if reference { not_in_reference(&mut e, keys, "json_char") } else { not_in(&mut e, keys, "json_char") };
        e.define("root", &format!("\"\\\"\" {} \"\\\"\"", x.unwrap())).unwrap();
        let g = crate::ebnf::parse_ebnf(&e.into_text(), "root").unwrap();
        crate::compiler::Automata::build(&g).unwrap()
    }

    /// Configurations of a non-recursive automaton set: call stacks, innermost state last.
    type Configs = std::collections::BTreeSet<Vec<crate::compiler::StateId>>;

    /// Closes `set` under entering referenced rules and returning from completed ones.
    fn close(a: &crate::compiler::Automata, set: Configs) -> Configs {
        let mut out = Configs::new();
        let mut work: Vec<_> = set.into_iter().collect();
        while let Some(stack) = work.pop() {
            if !out.insert(stack.clone()) {
                continue;
            }
            let top = *stack.last().unwrap();
            for &(r, t) in a.rule_edges(top) {
                let mut s = stack.clone();
                *s.last_mut().unwrap() = t;
                s.push(a.rule_start(r));
                work.push(s);
            }
            if a.state(top).is_final && stack.len() > 1 {
                work.push(stack[..stack.len() - 1].to_vec());
            }
        }
        out
    }

    fn accepting(a: &crate::compiler::Automata, set: &Configs) -> bool {
        set.iter().any(|s| s.len() == 1 && a.state(s[0]).is_final)
    }

    fn step(a: &crate::compiler::Automata, set: &Configs, byte: u8) -> Configs {
        let next = set
            .iter()
            .filter_map(|s| {
                let t = a.step(*s.last().unwrap(), byte)?;
                let mut s = s.clone();
                *s.last_mut().unwrap() = t;
                Some(s)
            })
            .collect();
        close(a, next)
    }

    /// Whether the root rules of two (non-recursive) automata accept the same byte strings:
    /// breadth-first search over pairs of configuration sets.
    fn same_language(a: &crate::compiler::Automata, b: &crate::compiler::Automata) -> bool {
        let start = (close(a, Configs::from([vec![a.rule_start(a.root())]])), close(b, Configs::from([vec![b.rule_start(b.root())]])));
        let mut seen = std::collections::HashSet::from([start.clone()]);
        let mut work = vec![start];
        while let Some((x, y)) = work.pop() {
            if accepting(a, &x) != accepting(b, &y) {
                return false;
            }
            for byte in 0..=255u8 {
                let pair = (step(a, &x, byte), step(b, &y, byte));
                if pair.0.is_empty() != pair.1.is_empty() {
                    return false;
                }
                if !pair.0.is_empty() && seen.insert(pair.clone()) {
                    work.push(pair);
                }
            }
        }
        true
    }

    #[test]
    fn not_in_matches_reference() {
        // Characters with every kind of spelling: plain, short escapes, control (\u only),
        // escape letters, 2/3-byte UTF-8, surrogate-pair astral, and \uXXXX neighbours.
        let alphabet = ['a', 'b', 'u', '"', '\\', '/', '\n', '\u{0}', '\u{7f}', 'é', '\u{d7ff}', '\u{e000}', '\u{ffff}', '😀', '0'];
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut cases: Vec<Vec<String>> = vec![
            vec![String::new()],
            vec!["a".into()],
            vec![String::new(), "a".into(), "ab".into()],
            vec!["base".into(), "height".into(), "u\"\\/\n".into()],
            // Every ASCII character continues a key at the root.
            vec![(0u8..128).map(char::from).collect::<String>(), "xy".into()],
            (0u8..128).map(|b| char::from(b).to_string()).collect(),
            // Typical property names: shared prefixes, keys that are prefixes of others.
            ["base", "height", "length", "radius", "width"].map(String::from).to_vec(),
            ["i", "id", "ids", "idx", "index", "in"].map(String::from).to_vec(),
            ["", "a", "ab", "abc", "b"].map(String::from).to_vec(),
            // Sibling leaves, digits and upper case (hex digits and letters in `\u00XX`).
            ["x", "y", "z", "X1", "X2", "a_b", "A-B"].map(String::from).to_vec(),
            // Short-escaped and control characters in keys: their short escapes are spelled per
            // node; the other short escapes after `P`.
            ["a/b", "\n", "q\"", "\\", "\u{8}\u{c}\r\t", "\u{1}\u{1f}"].map(String::from).to_vec(),
            vec!["/".into()],
            // Non-ASCII BMP and astral characters (the general path).
            ["caf\u{e9}", "cafe", "\u{ffff}", "\u{d7ff}x"].map(String::from).to_vec(),
            ["\u{1f600}", "\u{1f600}\u{1f601}", "a\u{10ffff}"].map(String::from).to_vec(),
            // Many keys.
            (0..24).map(|i| format!("k{}_{}", i % 7, ["alpha", "beta", "gamma", "delta"][i % 4])).collect(),
        ];
        for _ in 0..60 {
            let n = 1 + next(4);
            // Every other case is ASCII only (the first 9 characters of the alphabet).
            let chars = if cases.len().is_multiple_of(2) { 9 } else { alphabet.len() };
            let keys = (0..n).map(|_| (0..next(4)).map(|_| alphabet[next(chars)]).collect()).collect();
            cases.push(keys);
        }
        for keys in cases {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let (new, old) = (key_automaton(&keys, false), key_automaton(&keys, true));
            assert!(same_language(&new, &old), "keys {keys:?}");
        }
    }

    #[test]
    fn not_in_deep_keys_nest_boundedly() {
        // A key far longer than NOT_IN_LEVELS: the trie is split into rules, and it still
        // compiles (and the key itself stays excluded, its prefixes allowed).
        let long = "k".repeat(5 * NOT_IN_LEVELS + 3);
        let mut e = Ebnf::default();
        e.define("json_char", CHAR_ANY_BODY).unwrap();
        let x = not_in(&mut e, &[long.as_str()], "json_char").unwrap();
        e.define("root", &x).unwrap();
        let text = e.into_text();
        assert!(text.lines().count() > 5);
        let g = crate::ebnf::parse_ebnf(&text, "root").unwrap();
        let a = crate::compiler::Automata::build(&g).unwrap();
        assert!(a.num_rules() > 5);
    }

    #[test]
    fn not_in_split_levels_match_reference() {
        // Sibling leaves exactly at a split depth, and a key crossing two split depths.
        let stem = "k".repeat(NOT_IN_LEVELS - 1);
        let keys = [format!("{stem}a"), format!("{stem}b"), "k".repeat(2 * NOT_IN_LEVELS + 1), format!("{stem}a/")];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let (new, old) = (key_automaton(&keys, false), key_automaton(&keys, true));
        assert!(new.num_rules() > 3);
        assert!(same_language(&new, &old), "keys {keys:?}");
    }

    /// The automaton of `root ::= "\"" <expr> "\""`.
    fn expr_automaton(expr: &str) -> crate::compiler::Automata {
        let g = crate::ebnf::parse_ebnf(&format!("root ::= \"\\\"\" {expr} \"\\\"\""), "root").unwrap();
        crate::compiler::Automata::build(&g).unwrap()
    }

    #[test]
    fn spell_char_matches_spell_set() {
        let chars = ['a', 'n', 'D', '0', '"', '\\', '/', '\n', '\u{8}', '\u{0}', '\u{1f}', '\u{7f}', '\u{ad}', 'é', '\u{d7ff}', '\u{e000}', '\u{fffd}', '\u{ffff}', '😀', '\u{10ffff}'];
        for c in chars {
            let c = c as u32;
            let (a, b) = (expr_automaton(&spell_char(c)), expr_automaton(&spell_set(&[(c, c)]).unwrap()));
            assert!(same_language(&a, &b), "U+{c:04X}: {}", spell_char(c));
        }
    }

    #[test]
    fn fixed_width_covers_range() {
        let mut out = Vec::new();
        fixed_width(&[1, 2], &[3, 4], 10, &mut out, &mut Vec::new());
        // 12-19, 20-29, 30-34
        assert_eq!(out, vec![vec![(1, 1), (2, 9)], vec![(2, 2), (0, 9)], vec![(3, 3), (0, 4)]]);
    }

    #[test]
    fn spell_letter() {
        assert_eq!(spell_str("n"), r#"("n" | "\\u006" [Ee])"#);
    }

    #[test]
    fn complement_skips_surrogates() {
        let c = complement(&[0x61]);
        assert_eq!(c, vec![(0, 0x60), (0x62, 0xD7FF), (0xE000, MAX_CP)]);
    }
}
