//! Printing languages as EBNF (`XGrammar`'s dialect, the subset grammask's parser reads): the
//! direct AST printer behind [`super::regex_to_ebnf`] and the automaton printer behind
//! [`super::CharDfa::to_ebnf`], in raw or JSON-string-body spelling.
//!
//! Emitted constructs: string literals with `\\ \" \n \r \t \uXXXX \UXXXXXXXX` escapes, classes
//! (`[^]` for any codepoint, `[^\u0000-\U0010FFFF]` for none), groups, `|`, `* + ? {m} {m,} {m,n}`
//! and references to rules named `prefix` or `prefix_N`.
use std::fmt::Write as _;

use super::ast::{Assertion, Node};
use super::charset::CharSet;
use super::dfa::{CharDfa, Trans, EXIT_MARK};
use super::TextMode;
use crate::fasthash::FastMap;

/// An expression that matches nothing (an empty class is not valid syntax).
pub const NOTHING: &str = "[^\\u0000-\\U0010FFFF]";
/// Inlined automaton states nest at most this deep before a state gets its own rule.
const MAX_INLINE_DEPTH: usize = 32;
/// JSON spellings longer than this get a rule of their own, shared by every use of the set.
const SHARED_SPELLING_CHARS: usize = 120;

fn push_escaped(out: &mut String, c: u32, in_class: bool) {
    match char::from_u32(c) {
        Some('\\') => out.push_str("\\\\"),
        Some('"') => out.push_str("\\\""),
        Some('\n') => out.push_str("\\n"),
        Some('\r') => out.push_str("\\r"),
        Some('\t') => out.push_str("\\t"),
        Some(ch @ (']' | '[' | '^' | '-')) if in_class => {
            out.push('\\');
            out.push(ch);
        }
        Some(ch) if (' '..='~').contains(&ch) => out.push(ch),
        _ if c <= 0xFFFF => {
            let _ = write!(out, "\\u{c:04X}");
        }
        _ => {
            let _ = write!(out, "\\U{c:08X}");
        }
    }
}

/// A string literal for `s` (a sequence of codepoints).
fn literal(s: &[u32]) -> String {
    let mut out = String::from("\"");
    for &c in s {
        push_escaped(&mut out, c, false);
    }
    out.push('"');
    out
}

/// A class for `set`, negated when that is shorter.
fn class(set: &CharSet) -> String {
    if set.is_empty() {
        return NOTHING.to_string();
    }
    let neg = set.negate();
    let (body, negated) = if neg.ranges().len() < set.ranges().len() { (neg, true) } else { (set.clone(), false) };
    let mut out = String::from(if negated { "[^" } else { "[" });
    for &(lo, hi) in body.ranges() {
        push_escaped(&mut out, lo, true);
        if hi > lo {
            if hi > lo + 1 {
                out.push('-');
            }
            push_escaped(&mut out, hi, true);
        }
    }
    out.push(']');
    out
}

/// A piece of a sequence: literal codepoints (merged with neighbours) or an atom.
#[derive(Clone, Debug)]
enum Item {
    Lit(Vec<u32>),
    Atom(String),
}

fn join(items: &[Item]) -> String {
    // PERF: atoms are borrowed and the result written once (cloning each part twice was a
    // tenth of the automaton printer's time).
    let mut parts: Vec<std::borrow::Cow<str>> = Vec::with_capacity(items.len());
    let mut lit: Vec<u32> = Vec::new();
    for it in items {
        match it {
            Item::Lit(l) => lit.extend_from_slice(l),
            Item::Atom(a) => {
                if !lit.is_empty() {
                    parts.push(literal(&lit).into());
                    lit.clear();
                }
                parts.push(a.as_str().into());
            }
        }
    }
    if !lit.is_empty() || parts.is_empty() {
        parts.push(literal(&lit).into());
    }
    // Runs of one atom become `x{n}` (`[0-9] [0-9] [0-9]` prints as `[0-9]{3}`); parts are
    // separated by one space.
    let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    let mut i = 0;
    while i < parts.len() {
        let run = parts[i..].iter().take_while(|p| **p == parts[i]).count();
        if i > 0 {
            out.push(' ');
        }
        if run >= 2 && is_atom(&parts[i]) {
            let _ = write!(out, "{}{{{run}}}", parts[i]);
        } else {
            for k in 0..run {
                if k > 0 {
                    out.push(' ');
                }
                out.push_str(&parts[i]);
            }
        }
        i += run;
    }
    out
}

/// Whether `s` (printed EBNF) is a single atom that a postfix operator may follow.
fn is_atom(s: &str) -> bool {
    let b = s.as_bytes();
    let closes = |open: u8, close: u8| {
        // The first opener must be closed by the last character, with nothing after.
        if b.first() != Some(&open) || b.last() != Some(&close) {
            return false;
        }
        let mut depth = 0i32;
        let mut in_str = false;
        let mut in_class = false;
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == b'\\' {
                i += 2;
                continue;
            }
            if in_str {
                in_str = c != b'"';
            } else if in_class {
                in_class = c != b']';
            } else {
                match c {
                    b'"' => in_str = true,
                    b'[' => in_class = true,
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 && i + 1 != b.len() {
                            return false;
                        }
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        true
    };
    if b.first() == Some(&b'"') {
        // One literal: the closing quote is the last byte and no unescaped quote comes before.
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return i + 1 == b.len(),
                _ => i += 1,
            }
        }
        return false;
    }
    if b.first() == Some(&b'[') {
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b']' if i > 1 || b.get(1) != Some(&b'^') => return i + 1 == b.len(),
                _ => i += 1,
            }
        }
        return false;
    }
    closes(b'(', b')') || s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

fn atom(s: String) -> String {
    if is_atom(&s) {
        s
    } else {
        format!("({s})")
    }
}

fn repeat_suffix(min: u32, max: Option<u32>) -> String {
    match (min, max) {
        (0, None) => "*".into(),
        (1, None) => "+".into(),
        (0, Some(1)) => "?".into(),
        (m, None) => format!("{{{m},}}"),
        (m, Some(n)) if m == n => format!("{{{m}}}"),
        (m, Some(n)) => format!("{{{m},{n}}}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Direct printing of a pattern's AST.

/// Whether `node` has an assertion that full-match printing cannot drop: everything except `^`
/// at a leading position and `$` at a trailing one (`front`/`back`: whether `node` itself is at
/// the start/end of every match).
pub fn has_inner_assertion(node: &Node, front: bool, back: bool) -> bool {
    match node {
        Node::Empty | Node::Set(_) => false,
        Node::Assert(Assertion::Start) => !front,
        Node::Assert(Assertion::End) => !back,
        Node::Assert(_) => true,
        Node::Alt(v) => {
            for n in v {
                if has_inner_assertion(n, front, back) {
                    return true;
                }
            }
            false
        }
        Node::Concat(v) => {
            let lead = v.iter().take_while(|n| **n == Node::Assert(Assertion::Start)).count();
            let trail = v.iter().rev().take_while(|n| **n == Node::Assert(Assertion::End)).count();
            for (i, n) in v.iter().enumerate() {
                let f = front && i <= lead;
                let b = back && i + 1 + trail >= v.len();
                if has_inner_assertion(n, f, b) {
                    return true;
                }
            }
            false
        }
        Node::Repeat { sub, .. } => has_inner_assertion(sub, false, false),
    }
}

/// Prints an AST as one EBNF expression; assertions print as `""`, so callers first check
/// [`has_inner_assertion`].
pub fn node_expr(node: &Node) -> String {
    let mut out = String::new();
    write_node(node, &mut out);
    out
}

/// Whether `node` prints as a single atom (a literal or a class) without parentheses.
fn prints_as_atom(node: &Node) -> bool {
    match node {
        Node::Set(_) | Node::Empty | Node::Assert(_) => true,
        Node::Concat(v) => v.iter().all(|n| matches!(n, Node::Set(s) if s.as_single().is_some())),
        _ => false,
    }
}

/// Appends the expression for `node`. Recursion depth is bounded by the AST depth; the body uses
/// plain loops so each level costs one small frame.
fn write_node(node: &Node, out: &mut String) {
    match node {
        Node::Empty | Node::Assert(_) => out.push_str("\"\""),
        Node::Set(s) => match s.as_single() {
            Some(c) => out.push_str(&literal(&[c])),
            None => out.push_str(&class(s)),
        },
        Node::Concat(v) => {
            let mut lit: Vec<u32> = Vec::new();
            let mut first = true;
            let sep = |out: &mut String, first: &mut bool| {
                if !*first {
                    out.push(' ');
                }
                *first = false;
            };
            for n in v {
                if let Node::Set(s) = n {
                    if let Some(c) = s.as_single() {
                        lit.push(c);
                        continue;
                    }
                }
                if matches!(n, Node::Empty | Node::Assert(_)) {
                    continue;
                }
                if !lit.is_empty() {
                    sep(out, &mut first);
                    out.push_str(&literal(&lit));
                    lit.clear();
                }
                sep(out, &mut first);
                if matches!(n, Node::Alt(_)) {
                    out.push('(');
                    write_node(n, out);
                    out.push(')');
                } else {
                    write_node(n, out);
                }
            }
            if !lit.is_empty() || first {
                sep(out, &mut first);
                out.push_str(&literal(&lit));
            }
        }
        Node::Alt(v) => {
            for (i, n) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                write_node(n, out);
            }
        }
        Node::Repeat { sub, min, max } => {
            if matches!(**sub, Node::Empty) || *max == Some(0) {
                out.push_str("\"\"");
                return;
            }
            let paren = !prints_as_atom(sub);
            if paren {
                out.push('(');
            }
            write_node(sub, out);
            if paren {
                out.push(')');
            }
            if !(*min == 1 && *max == Some(1)) {
                out.push_str(&repeat_suffix(*min, *max));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Automaton printing.

const JSON_SHORT: [(u32, &str); 8] = [
    (0x22, "\\\""),
    (0x5C, "\\\\"),
    (0x2F, "\\/"),
    (0x08, "\\b"),
    (0x0C, "\\f"),
    (0x0A, "\\n"),
    (0x0D, "\\r"),
    (0x09, "\\t"),
];

/// Splits `lo..=hi` (values of `digits` hex digits) into rectangles of per-digit ranges.
fn hex_split(lo: u32, hi: u32, digits: u32, prefix: &mut Vec<(u32, u32)>, out: &mut Vec<Vec<(u32, u32)>>) {
    if digits == 1 {
        prefix.push((lo, hi));
        out.push(prefix.clone());
        prefix.pop();
        return;
    }
    let unit = 16u32.pow(digits - 1);
    let (mut a, mut b) = (lo / unit, hi / unit);
    if a == b {
        prefix.push((a, a));
        hex_split(lo % unit, hi % unit, digits - 1, prefix, out);
        prefix.pop();
        return;
    }
    if !lo.is_multiple_of(unit) {
        prefix.push((a, a));
        hex_split(lo % unit, unit - 1, digits - 1, prefix, out);
        prefix.pop();
        a += 1;
    }
    let tail = hi % unit != unit - 1;
    if tail {
        b -= 1;
    }
    if a <= b {
        prefix.push((a, b));
        for _ in 1..digits {
            prefix.push((0, 15));
        }
        out.push(prefix.clone());
        prefix.truncate(prefix.len() - digits as usize);
    }
    if tail {
        prefix.push((b + 1, b + 1));
        hex_split(0, hi % unit, digits - 1, prefix, out);
        prefix.pop();
    }
}

#[cfg(test)]
pub(crate) fn hex_split_for_tests(lo: u32, hi: u32, out: &mut Vec<Vec<(u32, u32)>>) {
    hex_split(lo, hi, 4, &mut Vec::new(), out);
}

/// Items spelling one hex digit in `lo..=hi` (letters in either case).
fn hex_digit(lo: u32, hi: u32) -> Item {
    if lo == hi && lo < 10 {
        return Item::Lit(vec![0x30 + lo]);
    }
    let mut ranges = Vec::new();
    if lo <= 9 {
        ranges.push((0x30 + lo, 0x30 + hi.min(9)));
    }
    if hi >= 10 {
        let (a, b) = (lo.max(10) - 10, hi - 10);
        ranges.push((0x61 + a, 0x61 + b));
        ranges.push((0x41 + a, 0x41 + b));
    }
    Item::Atom(class(&CharSet::from_ranges(ranges)))
}

/// Alternatives spelling every 4-hex-digit value in `lo..=hi`.
fn hex_alts(lo: u32, hi: u32) -> Vec<String> {
    let mut rects = Vec::new();
    hex_split(lo, hi, 4, &mut Vec::new(), &mut rects);
    rects.iter().map(|r| join(&r.iter().map(|&(a, b)| hex_digit(a, b)).collect::<Vec<_>>())).collect()
}

/// Alternatives as one sequence element (parenthesized only when there are several).
fn alt_group(alts: &[String]) -> String {
    if alts.len() == 1 {
        alts[0].clone()
    } else {
        format!("({})", alts.join(" | "))
    }
}

/// Alternatives spelling one codepoint of `set` inside a JSON string literal.
fn json_spellings(set: &CharSet, canonical: bool) -> Vec<String> {
    let mut alts = Vec::new();
    let unescaped = CharSet::from_ranges([(0x20, 0x21), (0x23, 0x5B), (0x5D, super::charset::MAX_CHAR)]);
    let raw = set.intersect(&unescaped);
    if !raw.is_empty() {
        alts.push(match raw.as_single() {
            Some(c) => literal(&[c]),
            None => class(&raw),
        });
    }
    for (c, esc) in JSON_SHORT {
        // Canonical spelling (`crate::spelling`): `/` is written raw only.
        if set.contains(c) && !(canonical && c == 0x2F) {
            alts.push(literal(&esc.chars().map(|c| c as u32).collect::<Vec<_>>()));
        }
    }
    let u = literal(&[0x5C, 0x75]); // the two characters `\u`
                                    // Canonical spelling: `\u` only for control characters without a short escape and for
                                    // U+007F and above.
    let u_ok = if canonical {
        CharSet::from_ranges([(0, 0x07), (0x0B, 0x0B), (0x0E, 0x1F), (0x7F, 0xFFFF)])
    } else {
        CharSet::from_ranges([(0, 0xFFFF)])
    };
    let bmp = set.intersect(&u_ok);
    if !bmp.is_empty() {
        let hex: Vec<String> = bmp.ranges().iter().flat_map(|&(lo, hi)| hex_alts(lo, hi)).collect();
        alts.push(format!("{u} {}", alt_group(&hex)));
    }
    for &(lo, hi) in set.intersect(&CharSet::from_ranges([(0x10000, super::charset::MAX_CHAR)])).ranges() {
        // Rectangles of (high surrogate range) x (low surrogate range).
        let (hl, ll) = ((lo - 0x10000) >> 10, (lo - 0x10000) & 0x3FF);
        let (hh, lh) = ((hi - 0x10000) >> 10, (hi - 0x10000) & 0x3FF);
        let mut rects = Vec::new();
        if hl == hh {
            rects.push((hl, hl, ll, lh));
        } else {
            // A partial first row, full middle rows, a partial last row.
            let (mut a, mut b) = (hl, hh);
            if ll != 0 {
                rects.push((hl, hl, ll, 0x3FF));
                a += 1;
            }
            let tail = (lh != 0x3FF).then(|| {
                b -= 1;
                (hh, hh, 0, lh)
            });
            if a <= b {
                rects.push((a, b, 0, 0x3FF));
            }
            rects.extend(tail);
        }
        for (h0, h1, l0, l1) in rects {
            let high = hex_alts(0xD800 + h0, 0xD800 + h1);
            let low = hex_alts(0xDC00 + l0, 0xDC00 + l1);
            alts.push(format!("{u} {} {u} {}", alt_group(&high), alt_group(&low)));
        }
    }
    alts
}

struct Printer<'a> {
    dfa: &'a CharDfa,
    prefix: &'a str,
    mode: TextMode,
    /// The texts of the exit markers ([`CharDfa::then_exit`]): marker `j` prints as `exits[j]`.
    exits: &'a [String],
    /// Number of distinct predecessors of each state, not counting itself.
    indeg: Vec<usize>,
    names: Vec<Option<String>>,
    pending: Vec<u32>,
    next_id: usize,
    /// The atom spelling each set met: a class or group, or the name of a shared rule.
    spelled: FastMap<CharSet, String>,
    shared_rules: Vec<String>,
    /// States known to start no bounded chain (see `bounded_chain`).
    no_chain: Vec<bool>,
}

impl Printer<'_> {
    fn fresh(&mut self) -> String {
        self.next_id += 1;
        format!("{}_{}", self.prefix, self.next_id)
    }

    fn rule_ref(&mut self, s: u32) -> String {
        if let Some(n) = &self.names[s as usize] {
            return n.clone();
        }
        let n = self.fresh();
        self.names[s as usize] = Some(n.clone());
        self.pending.push(s);
        n
    }

    /// One codepoint of `set`, as an item. Spelled once per set (PERF: a JSON spelling took
    /// about a tenth of the converter's time on its slowest schemas, asked again per state).
    fn spell(&mut self, set: &CharSet) -> Item {
        if self.mode == TextMode::Raw {
            if let Some(c) = set.as_single() {
                return Item::Lit(vec![c]);
            }
        }
        if let Some(spelling) = self.spelled.get(set) {
            return Item::Atom(spelling.clone());
        }
        let spelling = match self.mode {
            TextMode::Raw => class(set),
            TextMode::JsonStringBody | TextMode::JsonStringBodyCanonical => {
                let alts = json_spellings(set, self.mode == TextMode::JsonStringBodyCanonical);
                let text = if alts.len() == 1 { atom(alts[0].clone()) } else { alt_group(&alts) };
                if text.len() > SHARED_SPELLING_CHARS {
                    let name = self.fresh();
                    self.shared_rules.push(format!("{name} ::= {}\n", alts.join(" | ")));
                    name
                } else {
                    text
                }
            }
        };
        self.spelled.insert(set.clone(), spelling.clone());
        Item::Atom(spelling)
    }

    /// The sequence of items for the language of state `s`.
    /// The only successor of `s` and the set leading to it, if `s` has no self-loop and one
    /// successor.
    /// The successor of `s` (not `s` itself) when all its transitions go there, with them.
    fn single_exit(&self, s: u32) -> Option<(u32, &[Trans])> {
        let trans = &self.dfa.states[s as usize].trans;
        let to = trans.first()?.to;
        if to == s || trans.iter().any(|t| t.to != to) {
            return None;
        }
        Some((to, trans))
    }

    /// `C{j,k}` when the language of `s` is a chain of `k` steps on one set `C` whose states
    /// accept from step `j` on and whose last state has no transitions (length bounds such as
    /// `maxLength` print compactly instead of as `k` nested optionals).
    fn bounded_chain(&mut self, s: u32) -> Option<Vec<Item>> {
        if self.no_chain[s as usize] {
            return None;
        }
        let (mut cur, set) = self.single_exit(s)?;
        let mut accepts = vec![self.dfa.states[s as usize].accept];
        // Transitions are merged per target, so equal ranges mean equal sets.
        let same =
            |a: &[Trans], b: &[Trans]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x.lo, x.hi) == (y.lo, y.hi));
        let mut walked = Vec::new();
        loop {
            let st = &self.dfa.states[cur as usize];
            // Every later state is reached only through the chain (never printed elsewhere),
            // except a final state, which prints as nothing.
            let shared = self.names[cur as usize].is_some() || self.indeg[cur as usize] != 1;
            if accepts.len() > self.dfa.states.len() {
                return None;
            }
            // A chain broken here is broken for every start walked before it (names are only
            // ever added, the rest is fixed): those are not walked again.
            let broken = (shared && !st.trans.is_empty())
                || !st.trans.is_empty() && self.single_exit(cur).is_none_or(|(_, t)| !same(t, set));
            if broken {
                for w in walked {
                    self.no_chain[w as usize] = true;
                }
                return None;
            }
            accepts.push(st.accept);
            if st.trans.is_empty() {
                break;
            }
            walked.push(cur);
            let (next, _) = self.single_exit(cur)?;
            cur = next;
        }
        let j = accepts.iter().position(|&a| a)?;
        let k = accepts.len() - 1;
        if k < 2 || !accepts[j..].iter().all(|&a| a) {
            return None;
        }
        let set = CharSet::from_ranges(set.iter().map(|t| (t.lo, t.hi)));
        let c = match self.spell(&set) {
            Item::Lit(l) => literal(&l),
            Item::Atom(a) => atom(a),
        };
        Some(vec![Item::Atom(format!("{c}{}", repeat_suffix(j as u32, Some(k as u32))))])
    }

    fn expr(&mut self, s: u32, depth: usize) -> Vec<Item> {
        if let Some(items) = self.bounded_chain(s) {
            return items;
        }
        let st = &self.dfa.states[s as usize];
        let accept = st.accept;
        let mut loops: Vec<(u32, u32)> = Vec::new();
        // Successors in order of their first transition; each one's set is read off `st.trans`.
        let mut exits: Vec<u32> = Vec::new();
        for t in &st.trans {
            if t.to == s {
                loops.push((t.lo, t.hi));
            } else if !exits.contains(&t.to) {
                exits.push(t.to);
            }
        }
        let mut items = Vec::new();
        if !loops.is_empty() {
            let it = self.spell(&CharSet::from_ranges(loops));
            let a = match it {
                Item::Lit(l) => literal(&l),
                Item::Atom(a) => atom(a),
            };
            items.push(Item::Atom(format!("{a}*")));
        }
        let mut alts: Vec<Vec<Item>> = Vec::new();
        for to in exits {
            let trans = &self.dfa.states[s as usize].trans;
            if trans.iter().any(|t| t.to == to && t.lo >= EXIT_MARK) {
                // The final state after the exit markers, reached by nothing else: the exits'
                // texts end the language.
                debug_assert!(trans.iter().all(|t| t.to != to || t.lo >= EXIT_MARK));
                let texts: Vec<String> = trans
                    .iter()
                    .filter(|t| t.to == to)
                    .flat_map(|t| t.lo..=t.hi)
                    .map(|m| self.exits[(m - EXIT_MARK) as usize].clone())
                    .collect();
                alts.push(vec![Item::Atom(alt_group(&texts))]);
                continue;
            }
            let set = CharSet::from_ranges(trans.iter().filter(|t| t.to == to).map(|t| (t.lo, t.hi)));
            let mut seq = vec![self.spell(&set)];
            let inline = self.names[to as usize].is_none() && self.indeg[to as usize] == 1 && depth < MAX_INLINE_DEPTH;
            let is_final = self.dfa.states[to as usize].trans.is_empty() && to != self.dfa.start;
            if is_final {
                // An accepting state without transitions: nothing follows.
            } else if inline {
                seq.extend(self.expr(to, depth + 1));
            } else {
                seq.push(Item::Atom(self.rule_ref(to)));
            }
            alts.push(seq);
        }
        match (alts.len(), accept) {
            (0, _) => {}
            (1, false) => items.extend(alts.pop().unwrap_or_default()),
            (1, true) => items.push(Item::Atom(format!("{}?", atom(join(&alts[0]))))),
            (_, _) => {
                let body = alts.iter().map(|a| join(a)).collect::<Vec<_>>().join(" | ");
                items.push(Item::Atom(if accept { format!("({body})?") } else { format!("({body})") }));
            }
        }
        items
    }
}

/// Prints `dfa` as EBNF rules; the entry rule is `prefix`.
pub fn dfa_to_ebnf(dfa: &CharDfa, prefix: &str, mode: TextMode) -> String {
    dfa_to_ebnf_with_exits(dfa, prefix, mode, &[])
}

/// [`dfa_to_ebnf`] for an automaton of [`CharDfa::then_exit`] languages: exit marker `j` prints
/// as the text `exits[j]` (an EBNF sequence), which then ends the string.
pub fn dfa_to_ebnf_with_exits(dfa: &CharDfa, prefix: &str, mode: TextMode, exits: &[String]) -> String {
    if dfa.is_empty() {
        return format!("{prefix} ::= {NOTHING}\n");
    }
    let n = dfa.states.len();
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (s, st) in dfa.states.iter().enumerate() {
        for t in &st.trans {
            let p = &mut preds[t.to as usize];
            if t.to != s as u32 && p.last() != Some(&(s as u32)) {
                p.push(s as u32);
            }
        }
    }
    let indeg = preds.iter().map(Vec::len).collect();
    let mut names = vec![None; n];
    names[dfa.start as usize] = Some(prefix.to_string());
    let mut pr = Printer {
        dfa,
        prefix,
        mode,
        exits,
        indeg,
        names,
        pending: vec![dfa.start],
        next_id: 0,
        spelled: FastMap::default(),
        shared_rules: Vec::new(),
        no_chain: vec![false; n],
    };
    let mut out = String::new();
    let mut i = 0;
    while i < pr.pending.len() {
        let s = pr.pending[i];
        i += 1;
        let items = pr.expr(s, 0);
        let name = pr.names[s as usize].clone().unwrap_or_default();
        let _ = writeln!(out, "{name} ::= {}", join(&items));
    }
    for r in &pr.shared_rules {
        out.push_str(r);
    }
    out
}
