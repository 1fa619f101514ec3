//! JSON string spelling: turns sets of Unicode codepoints (and finite sets of strings) into EBNF that
//! matches *every* JSON spelling of them inside a string literal: the raw character where JSON allows
//! it, the short escapes (`\n`, `\"`, `\/`, ...), and `\uXXXX` in any hex case, with codepoints above
//! U+FFFF as surrogate pairs. Lone surrogates are never produced (a string value is a sequence of
//! Unicode scalar values), which keeps character counts (minLength/maxLength) exact.

use super::emit::{self, Ebnf};
use crate::error::Result;
use crate::grammar::{Expr, ExprId, GrammarBuilder, RuleId};
use crate::spelling::{self, Spelling};
use std::fmt::Write;

/// Body of the shared rule matching one JSON string character (any scalar value).
pub const CHAR_ANY_BODY: &str = "[^\"\\\\\\u0000-\\u001f] | \"\\\\\" [\"\\\\/bfnrt] | \"\\\\u\" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}) | \"\\\\u\" [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}";

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

/// EBNF matching every JSON spelling of the string body `s` (without the quotes): grammask's
/// `JsonStringIn(...)`, whose automaton the compiler builds straight from the characters.
/// PERF: spelling each character as EBNF (`("n" | "\\u006" [Ee])`) made keys and string `enum`
/// values the longest part of a schema's text, and about 17 NFA states per character.
pub fn spell_str(s: &str) -> String {
    format!("JsonStringIn({})", emit::lit(s))
}

/// Defines a rule matching the body of any JSON string whose value is not in `keys`, and returns
/// its name. Every spelling of a character counts (escapes included), so `"\u0061"` is `"a"`.
/// The body is grammask's `JsonStringExcept(...)`, whose automaton the compiler builds straight
/// from the trie of the keys (see `crate::json_except`).
/// PERF: the former body spelled the trie and every deviation from it as EBNF: about 12 NFA
/// states per state of the minimal automaton, and 40% of the build of a lax schema.
pub fn not_in(e: &mut Ebnf, keys: &[&str]) -> Result<String> {
    let mut keys = keys.to_vec();
    keys.sort_unstable();
    keys.dedup();
    let args: Vec<String> = keys.iter().map(|k| emit::lit(k)).collect();
    let name = e.fresh("key_not_in");
    e.define(&name, &format!("JsonStringExcept({})", args.join(", ")))?;
    Ok(name)
}

/// The string-body expression for the value `s` under `spelling`: [`spell_str`] or
/// [`spell_str_canonical`].
pub fn spell_str_in(spelling: Spelling, s: &str) -> String {
    match spelling {
        Spelling::Any => spell_str(s),
        Spelling::Canonical => spell_str_canonical(s),
    }
}

/// [`not_in`] or [`not_in_canonical`] by `spelling`.
/// Each key set is written once per buffer (a converter has one spelling); later calls name
/// the same rule.
/// PERF: an object type reached under many `oneOf` exclusions (MaskBench o3626) wrote its key
/// trie once per variant: 33k of its 72k rules.
pub fn not_in_for(spelling: Spelling, e: &mut Ebnf, keys: &[&str]) -> Result<String> {
    let mut set: Vec<String> = keys.iter().map(|&k| k.to_string()).collect();
    set.sort_unstable();
    set.dedup();
    if let Some(name) = e.not_in.get(&set) {
        return Ok(name.clone());
    }
    let name = match spelling {
        Spelling::Any => not_in(e, keys),
        Spelling::Canonical => not_in_canonical(e, keys),
    }?;
    e.not_in.insert(set, name.clone());
    Ok(name)
}

/// How the regex printer spells string bodies under `spelling`.
pub fn text_mode(spelling: Spelling) -> crate::regex::TextMode {
    match spelling {
        Spelling::Any => crate::regex::TextMode::JsonStringBody,
        Spelling::Canonical => crate::regex::TextMode::JsonStringBodyCanonical,
    }
}

/// The shared rule of what follows `\u` in a string character under the spelling, that counted
/// string positions call ([`counted_char`]).
pub const U_ESCAPE_RULE: &str = "json_char.u";
/// Body of [`U_ESCAPE_RULE`] under `spelling="any"`: the `\u` alternatives of [`CHAR_ANY_BODY`]
/// without their `\u`.
const U_ESCAPE_ANY_BODY: &str = "[0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}";
/// Body of [`U_ESCAPE_RULE`] under canonical spelling: the `\u` alternatives of
/// [`spelling::CHAR_CANONICAL_BODY`] without their `\u`.
const U_ESCAPE_CANONICAL_BODY: &str = concat!(
    "\"00\" (\"0\" [0-7bBeEfF] | \"1\" [0-9a-fA-F]) | \"007\" [fF] | \"00\" [89a-fA-F] [0-9a-fA-F]",
    " | \"0\" [1-9a-fA-F] [0-9a-fA-F]{2} | [1-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}",
    " | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}"
);

/// Body of [`U_ESCAPE_RULE`] under `spelling`.
pub fn u_escape_body(spelling: Spelling) -> &'static str {
    match spelling {
        Spelling::Any => U_ESCAPE_ANY_BODY,
        Spelling::Canonical => U_ESCAPE_CANONICAL_BODY,
    }
}

/// One character of a counted string (`json_char`'s language under `spelling`): printable ASCII,
/// the short escapes and raw multi-byte characters read in place, what follows `\u` through a
/// call of [`U_ESCAPE_RULE`], which the grammar keeps as a rule
/// ([`crate::grammar::Grammar::kept`]). A parenthesized expression.
/// PERF: `json_char` inlined is ~24 automaton states (7 of multi-byte UTF-8, the rest `\u`
/// escapes), and a counted string unrolls one copy per position: MaskBench sp_334's
/// `{0,1000}` strings were 24k states each. This form is ~10 states a position (the position,
/// after `\`, after `\u`, 7 inside UTF-8 sequences). Every state a body-text path reaches
/// stays plain (no rule edges): `\u` is walked by the string-body slice anyway
/// ([`crate::slice::body_level`]), and a position calling a rule for multi-byte characters too
/// (3 states) made the kernel walks replay their frontier paths through chart rows (session 42).
pub fn counted_char(spelling: Spelling) -> &'static str {
    match spelling {
        Spelling::Any => concat!(
            "([\\u0020\\u0021\\u0023-\\u005b\\u005d-\\u007f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" json_char.u)",
            " | [^\\u0000-\\u007f])"
        ),
        Spelling::Canonical => concat!(
            "([\\u0020\\u0021\\u0023-\\u005b\\u005d-\\u007f] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" json_char.u)",
            " | [^\\u0000-\\u007f])"
        ),
    }
}

/// Body of the shared one-character rule (`json_char`) under `spelling`.
pub fn char_body(spelling: Spelling) -> &'static str {
    match spelling {
        Spelling::Any => CHAR_ANY_BODY,
        Spelling::Canonical => spelling::CHAR_CANONICAL_BODY,
    }
}

/// EBNF matching the canonical spellings (see [`crate::spelling`]) of the string body `s`: printable
/// ASCII as itself, `"` and `\` and the short-escape controls as their short escape, other controls
/// as `\u00XX`, and U+007F and above raw or as `\uXXXX` (surrogate pairs above U+FFFF), hex
/// digits in either case. Keys made of printable ASCII have exactly one spelling: a literal.
pub fn spell_str_canonical(s: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut lit = String::new();
    for c in s.chars() {
        if spelling::raw_only(c) {
            lit.push(c);
        } else if let Some(&(_, l)) = spelling::CANONICAL_SHORT_ESCAPES.iter().find(|(x, _)| *x == c) {
            lit.push('\\');
            lit.push(l);
        } else if (c as u32) < 0x20 {
            u_escape(c as u32, &mut lit, &mut parts);
        } else {
            if !lit.is_empty() {
                parts.push(emit::lit(&lit));
                lit.clear();
            }
            let mut esc = Vec::new();
            let mut elit = String::new();
            let v = c as u32;
            if v > 0xFFFF {
                let w = v - 0x1_0000;
                u_escape(0xD800 + (w >> 10), &mut elit, &mut esc);
                u_escape(0xDC00 + (w & 0x3FF), &mut elit, &mut esc);
            } else {
                u_escape(v, &mut elit, &mut esc);
            }
            if !elit.is_empty() {
                esc.push(emit::lit(&elit));
            }
            parts.push(format!("({} | {})", emit::lit(&c.to_string()), esc.join(" ")));
        }
    }
    if !lit.is_empty() || parts.is_empty() {
        parts.push(emit::lit(&lit));
    }
    parts.join(" ")
}

/// Appends `\uXXXX` for the BMP value `v` (hex letters in either case) to the pending literal
/// `lit` and the items `parts`.
fn u_escape(v: u32, lit: &mut String, parts: &mut Vec<String>) {
    lit.push_str("\\u");
    for i in (0..4).rev() {
        let d = (v >> (4 * i)) & 0xF;
        if d < 10 {
            lit.push(char::from(b'0' + d as u8));
        } else {
            if !lit.is_empty() {
                parts.push(emit::lit(lit));
                lit.clear();
            }
            let (up, low) = (char::from(b'A' + (d - 10) as u8), char::from(b'a' + (d - 10) as u8));
            parts.push(format!("[{up}{low}]"));
        }
    }
}

/// [`not_in_canonical`] for keys of printable ASCII other than `"` and `\\` (each such character has
/// one canonical spelling, itself): a trie of the keys whose node bodies are `""` where the prefix
/// is not a key, each child character followed by its child's body, and any other character (a raw
/// class without the children, or an escape) followed by `json_char*`. Returns the root's rule.
/// Only the root and the nodes at depths that are multiples of [`TRIE_RULE_DEPTH`] are rules
/// (`NAME` and `NAME.i`); every other node's body is written in its parent's, in parentheses.
/// PERF: the automaton printed from the character DFA spells every "other" class with its `\\u`
/// ranges at every node: open objects of large schemas passed the automaton-size limit.
/// The continuations after a deviation are two rules shared by the whole grammar
/// ([`KEY_OTHER_RULE`] after a raw character, [`KEY_ESCAPE_RULE`] after a backslash): a node
/// costs its raw class and two references. PERF: the escape alternatives copied into every
/// node (about 40 automaton states each) made the key tries of open objects under canonical
/// spelling pass the automaton-size limit where the `spelling="any"` grammar did not.
/// PERF: one rule per node (3,921 of kb_684's ~11k rules, nearly all inlined into their
/// parents anyway) cost every pass over the rules (names, inlining plan, equal rules, FOLLOW
/// sets, one empty automaton each).
fn not_in_ascii_trie(e: &mut Ebnf, keys: &[&str]) -> Result<String> {
    // Trie nodes: (children (char, node), is a key).
    let mut nodes: Vec<(Vec<(u8, usize)>, bool)> = vec![(Vec::new(), false)];
    // Whether each node is a rule of its own (the root, and every TRIE_RULE_DEPTH-th level).
    let mut heads = vec![true];
    for k in keys {
        let mut n = 0;
        for (d, &b) in k.as_bytes().iter().enumerate() {
            n = match nodes[n].0.iter().find(|c| c.0 == b) {
                Some(&(_, m)) => m,
                None => {
                    nodes.push((Vec::new(), false));
                    heads.push((d + 1) % TRIE_RULE_DEPTH == 0);
                    let m = nodes.len() - 1;
                    nodes[n].0.push((b, m));
                    m
                }
            };
        }
        nodes[n].1 = true;
    }
    let base = e.fresh("key_not_in");
    e.define_once_fixed(KEY_OTHER_RULE, "json_char*")?;
    e.define_once_fixed(KEY_ESCAPE_RULE, KEY_ESCAPE_BODY)?;
    e.define_once_fixed(KEY_NON_ASCII_RULE, "[\\u0080-\\U0010FFFF] json_char*")?;
    let name = |i: usize| if i == 0 { base.clone() } else { format!("{base}.{i}") };
    // Each rule matches every string body but the rests of the keys through its node.
    let mut words: Vec<Vec<Box<[u8]>>> = vec![Vec::new(); nodes.len()];
    for k in keys {
        let mut n = 0;
        for (i, &b) in k.as_bytes().iter().enumerate() {
            if heads[n] {
                words[n].push(k.as_bytes()[i..].into());
            }
            n = nodes[n].0.iter().find(|c| c.0 == b).map_or(0, |c| c.1);
        }
        if heads[n] {
            words[n].push(Box::default());
        }
    }
    e.any_body = Some(KEY_OTHER_RULE.to_string());
    e.excluded.extend(words.into_iter().enumerate().filter(|&(i, _)| heads[i]).map(|(i, w)| (name(i), w)));
    let trie = KeyTrie { base: base.clone(), nodes, heads };
    if e.direct_tries {
        // Kept out of the text (`KeyTrie`); its bytes counted as if written.
        let mut len = ByteCount(0);
        write_trie(&mut len, &trie);
        #[cfg(test)]
        TRIE_BYTES.with(|v| v.borrow_mut().push(len.0));
        e.defer_raw(len.0)?;
        e.key_tries.push(trie);
        return Ok(base);
    }
    let mut text = String::new();
    write_trie(&mut text, &trie);
    #[cfg(test)]
    TRIE_BYTES.with(|v| v.borrow_mut().push(text.len()));
    e.raw(&text)?;
    Ok(base)
}

/// Trie levels per key-trie rule ([`not_in_ascii_trie`]): bounds the nesting of the written
/// bodies (and of the NFA built from them) for long keys.
const TRIE_RULE_DEPTH: usize = 32;

#[cfg(test)]
thread_local! {
    /// The text length of each key trie on this thread: as written, or as counted without
    /// writing it (IR mode).
    pub(super) static TRIE_BYTES: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Key-trie nodes [`build_tries`] built on this thread.
    pub(super) static TRIES_BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Writes the rules of `t` (see [`not_in_ascii_trie`]), one line each, in node order.
fn write_trie<W: Write>(out: &mut W, t: &KeyTrie) {
    for i in (0..t.nodes.len()).filter(|&i| t.heads[i]) {
        t.push_name(out, i);
        let _ = out.write_str(" ::= ");
        write_trie_body(out, t, i);
        let _ = out.write_char('\n');
    }
}

/// Writes the body of node `i` of `t`:
/// `["" | ]"c" CHILD | ... | [^"\\\x00-\x1f\u0080-\U0010FFFF\xCC...] OTHER | "\\" ESCAPE | NON_ASCII`,
/// `CHILD` the child's rule name where it is a rule, else its body in parentheses. The
/// children's characters are `raw_only` (no escape in a literal).
/// PERF: written in place (it was a `format!` per child): a band compile wrote ~450 children.
fn write_trie_body<W: Write>(out: &mut W, t: &KeyTrie, i: usize) {
    let (children, is_key) = &t.nodes[i];
    if !is_key {
        let _ = out.write_str("\"\" | ");
    }
    for &(b, m) in children {
        debug_assert!(spelling::raw_only(char::from(b)), "a literal character needs no escape");
        let _ = out.write_char('"');
        let _ = out.write_char(char::from(b));
        let _ = out.write_str("\" ");
        if t.heads[m] {
            t.push_name(out, m);
        } else {
            let _ = out.write_char('(');
            write_trie_body(out, t, m);
            let _ = out.write_char(')');
        }
        let _ = out.write_str(" | ");
    }
    let _ = out.write_str("[^\"\\\\\\x00-\\x1f\\u0080-\\U0010FFFF");
    for &(b, _) in children {
        let hex = |d: u8| char::from(b"0123456789abcdef"[usize::from(d)]);
        let _ = out.write_str("\\x");
        let _ = out.write_char(hex(b >> 4));
        let _ = out.write_char(hex(b & 15));
    }
    let _ = out.write_str("] ");
    let _ = out.write_str(KEY_OTHER_RULE);
    let _ = out.write_str(" | \"\\\\\" ");
    let _ = out.write_str(KEY_ESCAPE_RULE);
    let _ = out.write_str(" | ");
    let _ = out.write_str(KEY_NON_ASCII_RULE);
}

/// Writes `.{i}`, a trie node's name suffix. PERF: without the formatting machinery (two
/// writes per node in IR mode, ~120 instructions each through `write!`).
fn push_node_suffix<W: Write>(out: &mut W, mut i: usize) {
    let mut digits = [0u8; 21];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    at -= 1;
    digits[at] = b'.';
    let _ = out.write_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

/// Counts the bytes written to it.
struct ByteCount(usize);

impl Write for ByteCount {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// A key trie of [`not_in_ascii_trie`]: its root rule's name, its nodes (children (byte, node),
/// is a key) and which nodes are rules of their own.
pub struct KeyTrie {
    base: String,
    nodes: Vec<(Vec<(u8, usize)>, bool)>,
    heads: Vec<bool>,
}

impl KeyTrie {
    /// Writes the rule name of node `i` (a head).
    fn push_name<W: Write>(&self, out: &mut W, i: usize) {
        let _ = out.write_str(&self.base);
        if i != 0 {
            push_node_suffix(out, i);
        }
    }
}

/// Defines the rules of `tries` in `b`, each the expression the parser makes of the text
/// [`write_trie`] writes for it (same node kinds, children and order); returns their ids.
/// PERF: the key tries were ~70% of the text parsed for a typical MaskBench schema (the band of
/// docs/benchmarks.md, session 36).
pub(crate) fn build_tries(tries: &[KeyTrie], b: &mut GrammarBuilder) -> Result<Vec<RuleId>> {
    if tries.is_empty() {
        return Ok(Vec::new()); // declares no rule (a declared rule must be defined)
    }
    let mut defined = Vec::with_capacity(tries.iter().map(|t| t.heads.iter().filter(|&&h| h).count()).sum());
    #[cfg(test)]
    TRIES_BUILT.with(|n| n.set(n.get() + tries.iter().map(|t| t.nodes.len()).sum::<usize>()));
    let conts = [b.rule_id(KEY_OTHER_RULE), b.rule_id(KEY_ESCAPE_RULE), b.rule_id(KEY_NON_ASCII_RULE)];
    let mut name = String::new();
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for t in tries {
        // The rule id of each head node.
        let mut ids: Vec<Option<RuleId>> = vec![None; t.nodes.len()];
        for (i, id) in ids.iter_mut().enumerate().filter(|&(i, _)| t.heads[i]) {
            name.clear();
            t.push_name(&mut name, i);
            *id = Some(b.rule_id(&name));
        }
        for i in (0..t.nodes.len()).filter(|&i| t.heads[i]) {
            let body = trie_body(t, i, &ids, conts, &mut ranges, b);
            name.clear();
            t.push_name(&mut name, i);
            defined.push(b.define(&name, body, None)?);
        }
    }
    Ok(defined)
}

/// The expression of node `i`'s body (see [`write_trie_body`]); `ids` the head nodes' rules,
/// `conts` the other, escape and non-ASCII continuations.
fn trie_body(
    t: &KeyTrie,
    i: usize,
    ids: &[Option<RuleId>],
    conts: [RuleId; 3],
    ranges: &mut Vec<(u32, u32)>,
    b: &mut GrammarBuilder,
) -> ExprId {
    let (children, is_key) = &t.nodes[i];
    let mut alts: Vec<ExprId> = Vec::with_capacity(children.len() + 4);
    if !is_key {
        alts.push(b.empty());
    }
    for &(c, m) in children {
        let lit = b.bytes(&[c]);
        let next = match ids[m] {
            Some(id) => b.rule_ref(id),
            None => trie_body(t, m, ids, conts, ranges, b),
        };
        alts.push(b.add(Expr::Seq([lit, next].into())));
    }
    deviation_ranges(children, ranges);
    let class = b.char_class(ranges, false);
    let rest = b.rule_ref(conts[0]);
    alts.push(b.add(Expr::Seq([class, rest].into())));
    let backslash = b.bytes(b"\\");
    let rest = b.rule_ref(conts[1]);
    alts.push(b.add(Expr::Seq([backslash, rest].into())));
    alts.push(b.rule_ref(conts[2]));
    b.add(Expr::Choice(alts.into()))
}

/// The class a key-trie node's raw-character deviation is written with,
/// `[^"\\\x00-\x1f\u0080-\U0010FFFF\xCC...]` (the children's bytes last), as normalized ranges
/// in `out`: the maximal runs of printable ASCII bytes other than `"`, `\` and the children
/// (PERF: sorting, merging and complementing the written ranges took ~1,500 instructions per
/// node, 29.8 M of kb_1161's conversion).
fn deviation_ranges(children: &[(u8, usize)], out: &mut Vec<(u32, u32)>) {
    // Bit i set iff byte i is in the class; bytes from 0x80 are excluded already.
    let mut allowed: u128 = (!0u128 << 0x20) & !(1u128 << b'"') & !(1u128 << b'\\');
    for &(c, _) in children {
        if c < 0x80 {
            allowed &= !(1u128 << c);
        }
    }
    out.clear();
    while allowed != 0 {
        let lo = allowed.trailing_zeros();
        let len = (!(allowed >> lo)).trailing_zeros();
        out.push((lo, lo + len - 1));
        allowed &= !(((1u128 << len) - 1) << lo);
    }
}

/// What follows the backslash of a canonical escape: the escape alternatives of
/// [`spelling::CHAR_CANONICAL_BODY`] without their backslash, factored by prefix (same language,
/// checked by a test).
macro_rules! canonical_escape_tail {
    () => {
        concat!(
            "[\"\\\\bfnrt] | \"u\" (\"0\" (\"0\" (\"0\" [0-7bBeEfF] | \"1\" [0-9a-fA-F] | \"7\" [fF]",
            " | [89a-fA-F] [0-9a-fA-F]) | [1-9a-fA-F] [0-9a-fA-F]{2}) | [1-9a-cA-CeEfF] [0-9a-fA-F]{3}",
            " | [dD] ([0-7] [0-9a-fA-F]{2} | [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}))"
        )
    };
}
/// Body of [`KEY_ESCAPE_RULE`].
const KEY_ESCAPE_BODY: &str = concat!("(", canonical_escape_tail!(), ") json_char*");

/// Shared continuation of a key-trie deviation by a raw character: the rest of the string.
const KEY_OTHER_RULE: &str = "json_char.key_other";
/// Shared deviation from a key trie by a non-ASCII character (no key here has one), with the rest
/// of the string.
/// PERF: spelled in each node's class, the UTF-8 sequences of U+0080.. gave each trie node ~10
/// automaton states of subset construction that minimization merged again (band schemas: the
/// key tries were over half the states determinized).
const KEY_NON_ASCII_RULE: &str = "json_char.key_non_ascii";
/// Shared continuation of a key-trie deviation by a backslash: the rest of a canonical escape,
/// then the rest of the string.
const KEY_ESCAPE_RULE: &str = "json_char.key_escape";

/// [`not_in`] under canonical spelling: the body of any canonically spelled JSON string whose value
/// is not in `keys`, as an automaton over characters printed in canonical spelling. Returns the
/// name of the entry rule.
pub fn not_in_canonical(e: &mut Ebnf, keys: &[&str]) -> Result<String> {
    use crate::regex::{CharDfa, TextMode};
    let mut keys = keys.to_vec();
    keys.sort_unstable();
    keys.dedup();
    if keys.iter().all(|k| k.chars().all(spelling::raw_only)) {
        return not_in_ascii_trie(e, &keys);
    }
    let listed = CharDfa::literals(keys.iter().copied())?;
    let lang = CharDfa::any_string().difference(&listed)?;
    let prefix = format!("{}.re", e.fresh("key_not_in"));
    let text = lang.to_ebnf(&prefix, TextMode::JsonStringBodyCanonical);
    e.raw(&text)?;
    Ok(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{complement_ranges, normalize_ranges};
    use std::collections::BTreeMap;

    /// The runs equal the class as written, normalized and complemented.
    #[test]
    fn deviation_ranges_equal_the_written_class() {
        let sets: Vec<Vec<u8>> = vec![
            vec![],
            b"a".to_vec(),
            b"abcz".to_vec(),
            b" ~".to_vec(),
            b"\"\\!#[]".to_vec(),
            vec![0x0A, 0x1F, 0x7F, 0xC3, 0xFF],
            (0x20..0x80).collect(),
        ];
        for set in sets {
            let children: Vec<(u8, usize)> = set.iter().map(|&c| (c, 0)).collect();
            let mut written = vec![(0x22, 0x22), (0x5C, 0x5C), (0x00, 0x1F), (0x80, 0x10_FFFF)];
            written.extend(set.iter().map(|&c| (u32::from(c), u32::from(c))));
            let mut runs = vec![(1, 1)];
            deviation_ranges(&children, &mut runs);
            assert_eq!(runs, complement_ranges(&normalize_ranges(&written)), "{set:?}");
        }
    }

    /// Node suffixes as `format!` writes them.
    #[test]
    fn node_suffixes_are_formatted_indices() {
        for i in (0..20_000).chain([99_999, 100_000, 1 << 32, usize::MAX]) {
            let mut s = String::from("key_not_in");
            push_node_suffix(&mut s, i);
            assert_eq!(s, format!("key_not_in.{i}"));
        }
    }

    // The former spelling of characters and character sets as EBNF: the reference for the
    // languages of `not_in` and `spell_str`.

    const MAX_CP: u32 = 0x10_FFFF;

    /// The short escapes: (codepoint, letter after the backslash).
    const SHORT_ESCAPES: [(u32, char); 8] =
        [(0x22, '"'), (0x5C, '\\'), (0x2F, '/'), (0x08, 'b'), (0x0C, 'f'), (0x0A, 'n'), (0x0D, 'r'), (0x09, 't')];

    /// Codepoints that may appear unescaped inside a JSON string.
    const RAW_OK: [(u32, u32); 4] = [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, MAX_CP)];

    fn hex_digits(v: u32, width: usize) -> Vec<u8> {
        (0..width).rev().map(|i| ((v >> (4 * i)) & 0xF) as u8).collect()
    }

    fn surrogates(cp: u32) -> (u32, u32) {
        let v = cp - 0x1_0000;
        (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
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
                pieces.push(class(&[(upper, upper), (lower, lower)]));
            }
        }
    }

    /// EBNF matching every JSON spelling of the scalar value `c`: the same language as
    /// `spell_set(&[(c, c)])`, with each escape written as one literal where its hex digits are
    /// decimal (`"\\u0064"` rather than `"\\u" "0" "0" "6" "4"`).
    /// PERF: a third of the automaton states of a key, and of the text, for every key character.
    fn spell_char(c: u32) -> String {
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

    /// Escapes one codepoint for use inside an EBNF `[...]` class.
    fn push_class_cp(out: &mut String, cp: u32) {
        match char::from_u32(cp) {
            Some(
                c @ ('^' | '$' | '\\' | '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '/' | '-'
                | '"'),
            ) => {
                out.push('\\');
                out.push(c);
            }
            Some(c) if cp >= 0x20 && cp != 0x7f && !(0x80..0xa0).contains(&cp) => out.push(c),
            _ => {
                if cp <= 0xffff {
                    let _ = write!(out, "\\u{cp:04x}");
                } else {
                    let _ = write!(out, "\\U{cp:08x}");
                }
            }
        }
    }

    /// An EBNF class matching the codepoints in `ranges` (inclusive, sorted, non-empty, disjoint).
    fn class(ranges: &[(u32, u32)]) -> String {
        debug_assert!(!ranges.is_empty());
        let mut out = String::from("[");
        for &(a, b) in ranges {
            push_class_cp(&mut out, a);
            if b > a {
                if b > a + 1 {
                    out.push('-');
                }
                push_class_cp(&mut out, b);
            }
        }
        out.push(']');
        out
    }

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
    fn complement(points: &[u32]) -> Vec<(u32, u32)> {
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
        class(&ranges)
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
    fn spell_set(set: &[(u32, u32)]) -> Option<String> {
        if set.is_empty() {
            return None;
        }
        let mut alts = Vec::new();
        let raw = intersect(set, &RAW_OK);
        if !raw.is_empty() {
            alts.push(class(&raw));
        }
        let shorts: Vec<u32> = SHORT_ESCAPES
            .iter()
            .filter(|(cp, _)| set.iter().any(|&(a, b)| a <= *cp && *cp <= b))
            .map(|&(_, c)| c as u32)
            .collect();
        if !shorts.is_empty() {
            let mut cls: Vec<(u32, u32)> = shorts.iter().map(|&c| (c, c)).collect();
            cls.sort_unstable();
            alts.push(format!("\"\\\\\" {}", class(&cls)));
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

    /// A trie over codepoints; node 0 is the root. Children are created after their parent, so
    /// they have larger ids.
    struct Trie {
        children: Vec<BTreeMap<u32, usize>>,
        terminal: Vec<bool>,
    }

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
        let x = if reference { not_in_reference(&mut e, keys, "json_char") } else { not_in(&mut e, keys) };
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
        let start = (
            close(a, Configs::from([vec![a.rule_start(a.root())]])),
            close(b, Configs::from([vec![b.rule_start(b.root())]])),
        );
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
        let alphabet = [
            'a', 'b', 'u', '"', '\\', '/', '\n', '\u{0}', '\u{7f}', 'é', '\u{d7ff}', '\u{e000}', '\u{ffff}', '😀', '0',
        ];
        let mut rng = crate::test_rng::XorShift(0x2545_F491_4F6C_DD1D);
        let mut next = |n: usize| rng.index(n);
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
    fn not_in_long_keys_match_reference() {
        // Long keys (the former EBNF split them into rules to bound nesting), sharing a stem.
        let stem = "k".repeat(60);
        let keys = [format!("{stem}a"), format!("{stem}b"), "k".repeat(150), format!("{stem}a/")];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let (new, old) = (key_automaton(&keys, false), key_automaton(&keys, true));
        assert!(same_language(&new, &old), "keys {keys:?}");
    }

    /// The automaton of `root ::= "\"" <expr> "\""`.
    fn expr_automaton(expr: &str) -> crate::compiler::Automata {
        let g = crate::ebnf::parse_ebnf(&format!("root ::= \"\\\"\" {expr} \"\\\"\""), "root").unwrap();
        crate::compiler::Automata::build(&g).unwrap()
    }

    #[test]
    fn spell_str_matches_spell_set() {
        let chars = [
            'a',
            'n',
            'D',
            '0',
            '"',
            '\\',
            '/',
            '\n',
            '\u{8}',
            '\u{0}',
            '\u{1f}',
            '\u{7f}',
            '\u{ad}',
            'é',
            '\u{d7ff}',
            '\u{e000}',
            '\u{fffd}',
            '\u{ffff}',
            '😀',
            '\u{10ffff}',
        ];
        for ch in chars {
            let c = ch as u32;
            let reference = expr_automaton(&spell_set(&[(c, c)]).unwrap());
            assert!(same_language(&expr_automaton(&spell_char(c)), &reference), "U+{c:04X}: {}", spell_char(c));
            assert!(same_language(&expr_automaton(&spell_str(&ch.to_string())), &reference), "U+{c:04X}");
        }
        // Strings: the native spelling against the reference's characters in a row.
        for s in ["", "base", "a\"é😀/\n", "\u{0}\u{ffff}"] {
            let parts: Vec<String> = s.chars().map(|c| spell_set(&[(c as u32, c as u32)]).unwrap()).collect();
            let reference = if parts.is_empty() { "\"\"".to_owned() } else { parts.join(" ") };
            assert!(same_language(&expr_automaton(&spell_str(s)), &expr_automaton(&reference)), "{s:?}");
        }
    }

    #[test]
    fn counted_char_matches_char_rule() {
        // Under either spelling, a counted position (with its shared rule kept as calls) reads
        // `json_char`'s language.
        let automaton = |spelling: Spelling, body: &str, broken: Option<(&str, &str)>| {
            let mut u = u_escape_body(spelling).to_string();
            if let Some((from, to)) = broken {
                u = u.replacen(from, to, 1);
            }
            let text = format!(
                "root ::= \"\\\"\" {body} \"\\\"\"\njson_char ::= {}\n{U_ESCAPE_RULE} ::= {u}\n",
                char_body(spelling)
            );
            let g = crate::ebnf::parse_ebnf(&text, "root").unwrap();
            let kept = g.rule_by_name(U_ESCAPE_RULE).into_iter().collect();
            crate::compiler::Automata::build(&g.with_kept(kept)).unwrap()
        };
        for spelling in [Spelling::Canonical, Spelling::Any] {
            let c = counted_char(spelling);
            let new = automaton(spelling, &format!("{c}{{0,2}}"), None);
            let old = automaton(spelling, "json_char{0,2}", None);
            let calls =
                (0..new.states().len() as u32).filter(|&s| !new.rule_edges(crate::compiler::StateId(s)).is_empty());
            assert_eq!(calls.count(), 2, "one call of the kept rule a position");
            assert!(same_language(&new, &old), "{spelling:?}");
            // The test can fail: one escape less, or a long one spelled twice.
            let broken = automaton(spelling, &format!("{c}{{0,2}}"), Some(("[dD] [0-7]", "[dD] [0-6]")));
            assert!(!same_language(&broken, &old), "{spelling:?}");
        }
        // The spellings differ (`\\/`, `\\u0041`).
        let any = automaton(Spelling::Any, counted_char(Spelling::Any), None);
        assert!(!same_language(&any, &automaton(Spelling::Canonical, counted_char(Spelling::Canonical), None)));
    }

    #[test]
    fn canonical_escape_tail_matches_char_rule() {
        // `"\\" CANONICAL_ESCAPE_TAIL` is exactly the escape part of the canonical character rule.
        let escapes = spelling::CHAR_CANONICAL_BODY.split_once(" | ").unwrap().1;
        let factored = format!("\"\\\\\" ({})", canonical_escape_tail!());
        assert!(same_language(&expr_automaton(&format!("({escapes})")), &expr_automaton(&factored)));
        // The test can fail: dropping one escape letter changes the language.
        let short = factored.replacen("bfnrt", "bfnr", 1);
        assert!(!same_language(&expr_automaton(&format!("({escapes})")), &expr_automaton(&short)));
    }

    #[test]
    fn canonical_key_trie_matches_general_path() {
        // The ASCII trie with shared continuations against the character-DFA path of
        // `not_in_canonical` (used for non-ASCII keys), on ASCII key sets.
        use crate::regex::{CharDfa, TextMode};
        let sets: [&[&str]; 5] =
            [&[], &["a"], &["", "a", "ab"], &["base", "height", "length"], &["i", "id", "ids", "in", "x_y"]];
        let char_rule = spelling::CHAR_CANONICAL_BODY;
        for keys in sets {
            let mut e = Ebnf::default();
            let _ = e.named("json_char");
            let trie = not_in_ascii_trie(&mut e, keys).unwrap();
            let mut text = e.into_text();
            let _ = writeln!(text, "json_char ::= {char_rule}\nroot ::= \"\\\"\" {trie} \"\\\"\"");
            let new = crate::compiler::Automata::build(&crate::ebnf::parse_ebnf(&text, "root").unwrap()).unwrap();
            let mut listed = CharDfa::empty();
            for k in keys {
                listed = listed.union(&CharDfa::literal(k)).unwrap();
            }
            let lang = CharDfa::any_string().difference(&listed).unwrap();
            let mut text = lang.to_ebnf("x.re", TextMode::JsonStringBodyCanonical);
            let _ = writeln!(text, "json_char ::= {char_rule}\nroot ::= \"\\\"\" x.re \"\\\"\"");
            let old = crate::compiler::Automata::build(&crate::ebnf::parse_ebnf(&text, "root").unwrap()).unwrap();
            assert!(same_language(&new, &old), "keys {keys:?}");
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
    fn class_escapes() {
        assert_eq!(class(&[(0x30, 0x39), (0x2d, 0x2d)]), "[0-9\\-]");
    }

    #[test]
    fn complement_skips_surrogates() {
        let c = complement(&[0x61]);
        assert_eq!(c, vec![(0, 0x60), (0x62, 0xD7FF), (0xE000, MAX_CP)]);
    }
}
