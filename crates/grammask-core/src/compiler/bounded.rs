//! The `lazy` and `max_chars` rule options on a rule's DFA (see [`crate::rule_options`]).
//!
//! Pipeline place: in [`Automata::build`](super::Automata::build), after a bounded rule's DFA is
//! determinized (with every rule it uses inlined, so it has byte edges only) and minimized; the
//! result is minimized again. Both options are a product of the DFA with a character counter:
//! `(state, c)`, `c` the characters read (UTF-8 lead bytes, saturating at `N`; a token edge, from
//! `Token(...)`/`ExcludeToken(...)` inside the rule, counts one). A final state with
//! `c == N` keeps no edge: once `N` characters are read the rule ends at the first position it
//! can. `lazy` is the case `N = 0`: every final state ends the rule.
//!
//! `excludes` is a product with the automaton of the longest suffix read that is a prefix of an
//! excluded string (Aho-Corasick): an edge that would complete one is dropped.
use super::dfa::{ByteEdgeLocal, Dfa};
use crate::error::{Error, Result};
use crate::limits;
use std::collections::HashMap;

/// `dfa` with at most `limit` characters before the rule must end at its first chance.
/// `budget` is the grammar's remaining automaton state budget.
pub(super) fn bound_dfa(dfa: &Dfa, limit: u32, budget: &mut usize) -> Result<Dfa> {
    let mut states = ProductStates::new(budget);
    let mut out = Dfa::default();
    let mut i = 0;
    while let Some((q, c)) = states.get(i) {
        i += 1;
        let is_final = dfa.finals[q as usize];
        let first = out.bytes.len();
        if !(is_final && c >= limit) {
            for e in dfa.bytes_of(q as usize) {
                // Split the range at the UTF-8 continuation bytes 0x80..=0xBF, which do not start
                // a character.
                for (lo, hi, cont) in split_continuation(e.lo, e.hi) {
                    let nc = if cont { c } else { (c + 1).min(limit) };
                    let target = states.id((e.target, nc))?;
                    out.push_byte(first, ByteEdgeLocal { lo, hi, target });
                }
            }
            // Token edges (`Token(...)` inside the rule): one token counts as one character.
            for &(r, t) in dfa.rules_of(q as usize) {
                let target = states.id((t, (c + 1).min(limit)))?;
                out.rules.push((r, target));
            }
        }
        out.end_state(is_final);
    }
    Ok(out)
}

/// `dfa` without the strings that contain one of `excludes` (non-empty).
pub(super) fn exclude_dfa(dfa: &Dfa, excludes: &[String], budget: &mut usize) -> Result<Dfa> {
    let ac = SuffixAutomaton::new(excludes);
    let mut states = ProductStates::new(budget);
    let mut out = Dfa::default();
    let mut i = 0;
    while let Some((q, a)) = states.get(i) {
        i += 1;
        let first = out.bytes.len();
        for e in dfa.bytes_of(q as usize) {
            for b in e.lo..=e.hi {
                let Some(na) = ac.step(a, b) else { continue };
                let target = states.id((e.target, na))?;
                out.push_byte(first, ByteEdgeLocal { lo: b, hi: b, target });
            }
        }
        out.end_state(dfa.finals[q as usize]);
    }
    Ok(out)
}

/// The states of a product automaton, `(DFA state, counter state)` pairs numbered in order of
/// discovery from `(0, 0)`; each new one takes one unit of the grammar's state `budget`.
struct ProductStates<'a> {
    ids: HashMap<(u32, u32), u32>,
    order: Vec<(u32, u32)>,
    budget: &'a mut usize,
}

impl<'a> ProductStates<'a> {
    fn new(budget: &'a mut usize) -> Self {
        ProductStates { ids: HashMap::from([((0, 0), 0)]), order: vec![(0, 0)], budget }
    }

    fn get(&self, i: usize) -> Option<(u32, u32)> {
        self.order.get(i).copied()
    }

    /// The id of `key`, numbering it if new.
    fn id(&mut self, key: (u32, u32)) -> Result<u32> {
        if let Some(&t) = self.ids.get(&key) {
            return Ok(t);
        }
        if *self.budget == 0 {
            return Err(Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES));
        }
        *self.budget -= 1;
        let t = self.order.len() as u32;
        self.order.push(key);
        self.ids.insert(key, t);
        Ok(t)
    }
}

/// States: the distinct prefixes of the excluded strings (0 is the empty one). A step goes to the
/// longest suffix of the text read that is such a prefix, or nowhere when it completes an
/// excluded string.
struct SuffixAutomaton {
    prefixes: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, u32>,
    excludes: Vec<Vec<u8>>,
}

impl SuffixAutomaton {
    fn new(excludes: &[String]) -> SuffixAutomaton {
        let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
        let mut index = HashMap::new();
        index.insert(Vec::new(), 0);
        for e in excludes {
            for n in 1..e.len() {
                let p = e.as_bytes()[..n].to_vec();
                if !index.contains_key(&p) {
                    index.insert(p.clone(), prefixes.len() as u32);
                    prefixes.push(p);
                }
            }
        }
        SuffixAutomaton { prefixes, index, excludes: excludes.iter().map(|e| e.as_bytes().to_vec()).collect() }
    }

    fn step(&self, state: u32, b: u8) -> Option<u32> {
        let mut text = self.prefixes[state as usize].clone();
        text.push(b);
        if self.excludes.iter().any(|e| text.ends_with(e)) {
            return None;
        }
        (0..=text.len()).find_map(|k| self.index.get(&text[k..]).copied())
    }
}

/// `lo..=hi` cut into at most three ranges, each wholly continuation bytes (`true`) or not.
fn split_continuation(lo: u8, hi: u8) -> impl Iterator<Item = (u8, u8, bool)> {
    [(0x00, 0x7F, false), (0x80, 0xBF, true), (0xC0, 0xFF, false)].into_iter().filter_map(move |(a, b, cont)| {
        let (l, h) = (lo.max(a), hi.min(b));
        (l <= h).then_some((l, h, cont))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DFA over `a+` (state 0 -a-> 1, 1 -a-> 1, 1 final).
    fn a_plus() -> Dfa {
        let mut d = Dfa::default();
        d.push_byte(0, ByteEdgeLocal { lo: b'a', hi: b'a', target: 1 });
        d.end_state(false);
        let f = d.bytes.len();
        d.push_byte(f, ByteEdgeLocal { lo: b'a', hi: b'a', target: 1 });
        d.end_state(true);
        d
    }

    fn accepts(d: &Dfa, s: &[u8]) -> bool {
        let mut q = 0usize;
        for &b in s {
            match d.bytes_of(q).iter().find(|e| e.lo <= b && b <= e.hi) {
                Some(e) => q = e.target as usize,
                None => return false,
            }
        }
        d.finals[q]
    }

    #[test]
    fn lazy_ends_at_the_first_final_state() {
        let d = bound_dfa(&a_plus(), 0, &mut 1000).unwrap();
        assert!(accepts(&d, b"a"));
        assert!(!accepts(&d, b"aa"));
    }

    #[test]
    fn max_chars_bounds_and_counts_characters_not_bytes() {
        let d = bound_dfa(&a_plus(), 3, &mut 1000).unwrap();
        assert!(accepts(&d, b"aaa"));
        assert!(!accepts(&d, b"aaaa"));
        // A multi-byte range: [\xC3][\x80-\xBF] repeated ("é" is C3 A9).
        let mut u = Dfa::default();
        u.push_byte(0, ByteEdgeLocal { lo: 0xC3, hi: 0xC3, target: 1 });
        u.end_state(true);
        let f = u.bytes.len();
        u.push_byte(f, ByteEdgeLocal { lo: 0x80, hi: 0xBF, target: 0 });
        u.end_state(false);
        let d = bound_dfa(&u, 2, &mut 1000).unwrap();
        assert!(accepts(&d, "éé".as_bytes()));
        assert!(!accepts(&d, "ééé".as_bytes()));
    }

    #[test]
    fn excludes_drop_every_string_containing_one() {
        // [ab]* without "ab" or "bb": a* then at most one b at the end.
        let mut d = Dfa::default();
        d.push_byte(0, ByteEdgeLocal { lo: b'a', hi: b'b', target: 0 });
        d.end_state(true);
        let x = exclude_dfa(&d, &["ab".to_owned(), "bb".to_owned()], &mut 1000).unwrap();
        for (s, ok) in [(&b"aaa"[..], true), (b"b", true), (b"ab", false), (b"ba", true), (b"bab", false), (b"", true)]
        {
            assert_eq!(accepts(&x, s), ok, "{s:?}");
        }
        // Overlaps: "aab" excluded, "aaab" contains it.
        let x = exclude_dfa(&d, &["aab".to_owned()], &mut 1000).unwrap();
        assert!(!accepts(&x, b"aaab"));
        assert!(accepts(&x, b"abaab"[..3].as_ref()));
    }

    #[test]
    fn the_budget_bounds_the_product() {
        assert!(bound_dfa(&a_plus(), 100, &mut 10).is_err());
    }
}
