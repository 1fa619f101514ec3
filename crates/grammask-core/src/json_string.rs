//! The byte automata of [`crate::grammar::Expr::JsonStringIn`] and
//! [`crate::grammar::Expr::JsonStringExcept`]: the text between the quotes of a JSON string whose
//! decoded value is one of a set of strings (keys, `enum` and `const` strings), or none of them
//! (an open object's other keys).
//!
//! Built straight from the trie of the strings rather than from an expression of every spelling:
//! a trie node `n` (decoded prefix `p`) is a state at a character boundary, accepting iff `p` is
//! (is not) one of the strings. From `n`, every spelling of a child character (raw UTF-8, short
//! escape, `\uXXXX` in either hex case, surrogate pair) is a path to that child. Any other
//! character fails (`In`), or leads to the "other" loop, which reads any JSON characters
//! (`Except`): the loop is `G`, the automaton of one character's spelling, with its end folded
//! into its start, and a spelling path leaves for the loop's copy of the `G` state it is in at the
//! first byte that no child character's spelling takes.

use crate::error::{Error, Result};
use crate::fasthash::FastMap;
use crate::limits;

/// States of [`G`], the automaton of one JSON string character (`json_char`): `S` is the start
/// and [`END`] the end.
const S: u8 = 0;
const C1: u8 = 1; // one UTF-8 continuation byte left
const C2: u8 = 2;
const C3: u8 = 3;
const E0: u8 = 4; // after 0xE0: A0..BF
const ED: u8 = 5; // after 0xED: 80..9F (no surrogates)
const F0: u8 = 6; // after 0xF0: 90..BF
const F4: u8 = 7; // after 0xF4: 80..8F
const B: u8 = 8; // after `\`
const U: u8 = 9; // after `\u`
const UD: u8 = 10; // after `\uD`
const H3: u8 = 11; // three hex digits left
const H2: u8 = 12;
const H1: u8 = 13;
const S2: u8 = 14; // high surrogate, two hex digits left
const S1: u8 = 15;
const S0: u8 = 16; // high surrogate read: `\uDC00`..`\uDFFF` must follow
const P1: u8 = 17;
const P2: u8 = 18;
const P3: u8 = 19;
const G_STATES: usize = 20;
const END: u8 = u8::MAX;

const HEX: &[(u8, u8)] = &[(b'0', b'9'), (b'A', b'F'), (b'a', b'f')];

/// The edges of `G` state `g`: (lo, hi, target). Case-symmetric in hex letters (both cases of a
/// digit always go to the same state), which [`Sym::Hex`] relies on.
fn g_edges(g: u8) -> Vec<(u8, u8, u8)> {
    let on = |ranges: &[(u8, u8)], t: u8| ranges.iter().map(move |&(lo, hi)| (lo, hi, t)).collect::<Vec<_>>();
    match g {
        S => vec![
            (0x20, 0x21, END),
            (0x23, 0x5B, END),
            (b'\\', b'\\', B),
            (0x5D, 0x7F, END),
            (0xC2, 0xDF, C1),
            (0xE0, 0xE0, E0),
            (0xE1, 0xEC, C2),
            (0xED, 0xED, ED),
            (0xEE, 0xEF, C2),
            (0xF0, 0xF0, F0),
            (0xF1, 0xF3, C3),
            (0xF4, 0xF4, F4),
        ],
        C1 => vec![(0x80, 0xBF, END)],
        C2 => vec![(0x80, 0xBF, C1)],
        C3 => vec![(0x80, 0xBF, C2)],
        E0 => vec![(0xA0, 0xBF, C1)],
        ED => vec![(0x80, 0x9F, C1)],
        F0 => vec![(0x90, 0xBF, C2)],
        F4 => vec![(0x80, 0x8F, C2)],
        B => {
            let mut v =
                on(&[(b'"', b'"'), (b'/', b'/'), (b'\\', b'\\'), (b'b', b'b'), (b'f', b'f'), (b'n', b'n')], END);
            v.extend([(b'r', b'r', END), (b't', b't', END), (b'u', b'u', U)]);
            v.sort_unstable();
            v
        }
        U => {
            let mut v = on(&[(b'0', b'9'), (b'A', b'C'), (b'E', b'F'), (b'a', b'c'), (b'e', b'f')], H3);
            v.extend([(b'D', b'D', UD), (b'd', b'd', UD)]);
            v.sort_unstable();
            v
        }
        UD => {
            let mut v = on(&[(b'0', b'7')], H2);
            v.extend(on(&[(b'8', b'9'), (b'A', b'B'), (b'a', b'b')], S2));
            v.sort_unstable();
            v
        }
        H3 => on(HEX, H2),
        H2 => on(HEX, H1),
        H1 => on(HEX, END),
        S2 => on(HEX, S1),
        S1 => on(HEX, S0),
        S0 => vec![(b'\\', b'\\', P1)],
        P1 => vec![(b'u', b'u', P2)],
        P2 => vec![(b'D', b'D', P3), (b'd', b'd', P3)],
        P3 => on(&[(b'C', b'F'), (b'c', b'f')], H2),
        _ => unreachable!("G has {G_STATES} states"),
    }
}

/// One symbol of a spelling: a byte, or a hex digit's value (either case of a letter).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Sym {
    Byte(u8),
    Hex(u8),
}

impl Sym {
    fn bytes(self) -> impl Iterator<Item = u8> {
        let (a, b) = match self {
            Sym::Byte(x) => (x, None),
            Sym::Hex(v) if v < 10 => (b'0' + v, None),
            Sym::Hex(v) => (b'a' + v - 10, Some(b'A' + v - 10)),
        };
        std::iter::once(a).chain(b)
    }
}

/// Every JSON spelling of the character `c` (at most 3, of at most 12 symbols), back to back in
/// `out`, each ending where `ends` says.
fn spellings(c: char, out: &mut Vec<Sym>, ends: &mut Vec<usize>) {
    out.clear();
    ends.clear();
    let cp = c as u32;
    if cp >= 0x20 && c != '"' && c != '\\' {
        let mut buf = [0u8; 4];
        out.extend(c.encode_utf8(&mut buf).bytes().map(Sym::Byte));
        ends.push(out.len());
    }
    let short = match c {
        '"' => Some(b'"'),
        '\\' => Some(b'\\'),
        '/' => Some(b'/'),
        '\u{8}' => Some(b'b'),
        '\u{c}' => Some(b'f'),
        '\n' => Some(b'n'),
        '\r' => Some(b'r'),
        '\t' => Some(b't'),
        _ => None,
    };
    if let Some(x) = short {
        out.extend([Sym::Byte(b'\\'), Sym::Byte(x)]);
        ends.push(out.len());
    }
    let u4 = |v: u32, s: &mut Vec<Sym>| {
        s.extend([Sym::Byte(b'\\'), Sym::Byte(b'u')]);
        s.extend((0..4).rev().map(|i| Sym::Hex((v >> (4 * i) & 0xF) as u8)));
    };
    if cp < 0x1_0000 {
        u4(cp, out);
    } else {
        let v = cp - 0x1_0000;
        u4(0xD800 + (v >> 10), out);
        u4(0xDC00 + (v & 0x3FF), out);
    }
    ends.push(out.len());
}

/// A deterministic byte automaton; with `except`, state 0 is the "other" loop's start (accepting).
pub struct StringDfa {
    /// Per state: accepting (the string may end here), and its edges (lo, hi, target), sorted.
    pub states: Vec<(bool, Vec<(u8, u8, u32)>)>,
    pub start: u32,
}

/// Where a spelling-trie edge leads: another spelling-trie state, or (last symbol) a DFA state.
#[derive(Clone, Copy)]
enum To {
    Local(u32),
    State(u32),
}

/// The minimal automaton of JSON string contents whose decoded value is one of `keys` (sorted and
/// distinct), or with `except` none of them. Errors with the automaton-size limit when the keys
/// have more than `max_states` bytes in all, or the automaton more than `max_states` states.
///
/// States are interned bottom-up (trie nodes deepest first, each node's spelling trie leaves
/// first) by (accepting, edges): equal signatures are equivalent states, and the parts that
/// differ stay apart (every state outside the loop reaches some key, where it alone accepts or
/// alone refuses), so the result is minimal.
pub fn string_dfa(keys: &[Box<str>], except: bool, max_states: usize) -> Result<StringDfa> {
    let too_big = || Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES);
    if keys.iter().map(|k| k.len()).sum::<usize>() > max_states {
        return Err(too_big());
    }
    // The trie of the keys: per node, whether a key ends there, and its children by character.
    // Children get larger ids than their parent.
    let mut kids: Vec<Vec<(char, u32)>> = vec![Vec::new()];
    let mut terminal = vec![false];
    // Keys come sorted (an IR invariant), so a node's children arrive in order and a key only
    // ever continues its node's last child: O(1) per character whatever the fan-out.
    debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys are sorted and distinct");
    for k in keys {
        let mut n = 0usize;
        for c in k.chars() {
            n = match kids[n].last() {
                Some(&(x, m)) if x == c => m as usize,
                _ => {
                    let m = kids.len();
                    kids[n].push((c, m as u32));
                    kids.push(Vec::new());
                    terminal.push(false);
                    m
                }
            };
        }
        terminal[n] = true;
    }
    // States 0..G_STATES are the loop (G with its end folded into 0).
    let loop_id = |g: u8| u32::from(if g == END { S } else { g });
    static G_TABLE: std::sync::OnceLock<Vec<Vec<(u8, u8, u8)>>> = std::sync::OnceLock::new();
    let g_table = G_TABLE.get_or_init(|| (0..G_STATES as u8).map(g_edges).collect());
    let mut states: Vec<(bool, Vec<(u8, u8, u32)>)> = Vec::new();
    if except {
        let edges = |g: u8| g_table[g as usize].iter().map(|&(lo, hi, t)| (lo, hi, loop_id(t))).collect();
        states.extend((0..G_STATES as u8).map(|g| (g == S, edges(g))));
    }
    if keys.is_empty() {
        // All strings (the loop), or none (a state without edges).
        if !except {
            states.push((false, Vec::new()));
        }
        return Ok(StringDfa { states, start: 0 });
    }
    // Interned states by a hash of (accepting, edges); equal hashes are told apart by comparing
    // with `states` (the next slot is probed).
    let mut interned: FastMap<u64, u32> = FastMap::default();
    let mut node_state = vec![0u32; kids.len()];
    // A node's spelling trie: per state (0 is the node itself), its G state and its children
    // (symbol, spelling-trie state or, for a last symbol, DFA state).
    let mut local_g: Vec<u8> = Vec::new();
    let mut local_kids: Vec<Vec<(Sym, To)>> = Vec::new();
    let mut local_state: Vec<u32> = Vec::new();
    let (mut spelled, mut ends) = (Vec::new(), Vec::new());
    let mut edges: Vec<(u8, u8, u32)> = Vec::new();
    let mut out_bytes: Vec<(u8, u32)> = Vec::new();
    for n in (0..kids.len()).rev() {
        local_g.clear();
        local_g.push(S);
        local_kids.iter_mut().for_each(Vec::clear);
        for &(c, child) in &kids[n] {
            let target = node_state[child as usize];
            spellings(c, &mut spelled, &mut ends);
            for (k, &end) in ends.iter().enumerate() {
                let sp = &spelled[if k == 0 { 0 } else { ends[k - 1] }..end];
                let mut at = 0usize;
                for (i, &sym) in sp.iter().enumerate() {
                    if local_kids.len() < local_g.len() {
                        local_kids.resize_with(local_g.len(), Vec::new);
                    }
                    if i + 1 == sp.len() {
                        local_kids[at].push((sym, To::State(target)));
                        break;
                    }
                    let found = local_kids[at].iter().find(|&&(x, _)| x == sym).map(|&(_, to)| to);
                    at = match found {
                        Some(To::Local(l)) => l as usize,
                        _ => {
                            let byte = sym.bytes().next().expect("a symbol has a byte");
                            let next_g = g_table[local_g[at] as usize]
                                .iter()
                                .find(|&&(lo, hi, _)| (lo..=hi).contains(&byte))
                                .map(|e| e.2)
                                .expect("a spelling follows G");
                            let l = local_g.len();
                            local_g.push(next_g);
                            local_kids[at].push((sym, To::Local(l as u32)));
                            l
                        }
                    };
                }
            }
        }
        // Deepest first: a spelling-trie state is created after the one it leaves from.
        local_state.clear();
        local_state.resize(local_g.len(), 0);
        for l in (0..local_g.len()).rev() {
            out_bytes.clear();
            for &(sym, to) in local_kids.get(l).map_or(&[][..], Vec::as_slice) {
                let t = match to {
                    To::Local(x) => local_state[x as usize],
                    To::State(t) => t,
                };
                out_bytes.extend(sym.bytes().map(|b| (b, t)));
            }
            out_bytes.sort_unstable();
            let defaults = except.then(|| g_table[local_g[l] as usize].as_slice());
            merge_defaults(defaults, &out_bytes, loop_id, &mut edges);
            let accepting = l == 0 && terminal[n] != except;
            let mut h = edges.iter().fold(u64::from(accepting), |h, &(lo, hi, t)| {
                (h ^ (u64::from(lo) | u64::from(hi) << 8 | u64::from(t) << 16)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            });
            let id = loop {
                match interned.get(&h) {
                    Some(&id) if states[id as usize].0 == accepting && states[id as usize].1 == edges => break id,
                    Some(_) => h = h.wrapping_add(1),
                    None => {
                        if states.len() >= max_states {
                            return Err(too_big());
                        }
                        let id = states.len() as u32;
                        states.push((accepting, edges.clone()));
                        interned.insert(h, id);
                        break id;
                    }
                }
            };
            local_state[l] = id;
        }
        node_state[n] = local_state[0];
    }
    Ok(StringDfa { states, start: node_state[0] })
}

/// The edges of a spelling-trie state: the bytes of `taken` (sorted, each with its target) go
/// there; with `g` (the edges of its G state), any other byte G allows goes to the loop's copy of
/// its G target. Adjacent bytes with one target form one range.
fn merge_defaults(
    g: Option<&[(u8, u8, u8)]>,
    taken: &[(u8, u32)],
    loop_id: impl Fn(u8) -> u32,
    out: &mut Vec<(u8, u8, u32)>,
) {
    out.clear();
    let mut push = |lo: u8, hi: u8, t: u32| match out.last_mut() {
        Some(last) if last.2 == t && u16::from(last.1) + 1 == u16::from(lo) => last.1 = hi,
        _ => out.push((lo, hi, t)),
    };
    let Some(g) = g else {
        taken.iter().for_each(|&(b, t)| push(b, b, t));
        return;
    };
    let mut k = 0;
    for &(lo, hi, gt) in g {
        let d = loop_id(gt);
        let mut from = u16::from(lo);
        while k < taken.len() && taken[k].0 <= hi {
            let (b, t) = taken[k];
            if u16::from(b) > from {
                push(from as u8, b - 1, d);
            }
            push(b, b, t);
            from = u16::from(b) + 1;
            k += 1;
        }
        if from <= u16::from(hi) {
            push(from as u8, hi, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the automaton over `text`; true if it ends in an accepting state.
    fn accepts(d: &StringDfa, text: &[u8]) -> bool {
        let mut s = d.start;
        for &b in text {
            let Some(&(_, _, t)) = d.states[s as usize].1.iter().find(|&&(lo, hi, _)| lo <= b && b <= hi) else {
                return false;
            };
            s = t;
        }
        d.states[s as usize].0
    }

    fn keys(ks: &[&str]) -> Vec<Box<str>> {
        let mut v: Vec<Box<str>> = ks.iter().map(|&k| k.into()).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn excluded_keys_are_refused_in_every_spelling() {
        let d = string_dfa(&keys(&["ab", "a/", "é", "😀", ""]), true, 1 << 20).unwrap();
        for text in [
            "",
            "ab",
            "\\u0061b",
            "\\u0061\\u0062",
            "a\\/",
            "a/",
            "\\u00E9",
            "\\u00e9",
            "é",
            "\\uD83D\\uDE00",
            "\\ud83d\\ude00",
            "😀",
        ] {
            assert!(!accepts(&d, text.as_bytes()), "{text:?}");
        }
        for text in ["a", "abc", "b", "\\u0062", "a\\n", "\\\"", "ê", "😁", "\\uD83D\\uDE01", "x\\u00e9", "ab\\u0000"]
        {
            assert!(accepts(&d, text.as_bytes()), "{text:?}");
        }
        for text in ["\"", "\\", "\\x", "\\uD800", "\\uDC00", "\u{1}", "\\u12"] {
            assert!(!accepts(&d, text.as_bytes()), "not JSON: {text:?}");
        }
        // The same strings, taken in rather than out.
        let d = string_dfa(&keys(&["ab", "a/", "é", "😀", ""]), false, 1 << 20).unwrap();
        for text in ["", "ab", "\\u0061b", "a\\/", "\\u00E9", "\\ud83d\\ude00", "😀"] {
            assert!(accepts(&d, text.as_bytes()), "{text:?}");
        }
        for text in ["a", "abc", "\\u0062", "ê", "😁", "\\"] {
            assert!(!accepts(&d, text.as_bytes()), "{text:?}");
        }
    }

    /// The number of classes of Moore's coarsest partition (states reachable or not).
    fn minimal_size(d: &StringDfa) -> usize {
        let mut class: Vec<usize> = d.states.iter().map(|s| usize::from(s.0)).collect();
        loop {
            let mut ids = std::collections::HashMap::new();
            let next: Vec<usize> = (0..d.states.len())
                .map(|s| {
                    let mut sig = vec![class[s]];
                    for b in 0..=255u8 {
                        let t = d.states[s].1.iter().find(|&&(lo, hi, _)| lo <= b && b <= hi);
                        sig.push(t.map_or(usize::MAX, |e| class[e.2 as usize]));
                    }
                    let n = ids.len();
                    *ids.entry(sig).or_insert(n)
                })
                .collect();
            if ids.len() == class.iter().collect::<std::collections::HashSet<_>>().len() {
                return ids.len();
            }
            class = next;
        }
    }

    #[test]
    fn automaton_is_minimal() {
        for ks in [
            &["a"][..],
            &["check_in_date", "check_out_date", "guests", "location"],
            &["", "a", "ab", "b"],
            &["x/", "\n", "é", "😀a"],
            &[],
        ] {
            for except in [true, false] {
                let d = string_dfa(&keys(ks), except, 1 << 20).unwrap();
                assert_eq!(minimal_size(&d), d.states.len(), "{ks:?}");
            }
        }
    }

    #[test]
    fn wide_fan_out_builds() {
        // 60,000 one-character keys: one trie node with 60,000 children.
        let ks: Vec<Box<str>> = (0x100..0xD000u32).filter_map(char::from_u32).map(|c| c.to_string().into()).collect();
        for except in [true, false] {
            let d = string_dfa(&ks, except, 1 << 21).unwrap();
            assert!(accepts(&d, "\\u0100".as_bytes()) != except);
            assert!(accepts(&d, "a".as_bytes()) == except);
        }
    }

    #[test]
    fn size_is_bounded() {
        let long: Box<str> = "x".repeat(10_000).into();
        assert!(string_dfa(&[long], true, 1_000).is_err());
    }
}
