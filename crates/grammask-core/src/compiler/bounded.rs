//! The `lazy` and `max_chars` rule options on a rule's DFA (see [`crate::rule_options`]).
//!
//! Pipeline place: in [`Automata::build`](super::Automata::build), after a bounded rule's DFA is
//! determinized (with every rule it uses inlined, so it has byte edges only) and minimized; the
//! result is minimized again. Both options are a product of the DFA with a character counter:
//! `(state, c)`, `c` the characters read (UTF-8 lead bytes, saturating at `N`). A final state with
//! `c == N` keeps no edge: once `N` characters are read the rule ends at the first position it
//! can. `lazy` is the case `N = 0`: every final state ends the rule.
use super::dfa::{ByteEdgeLocal, Dfa};
use crate::error::{Error, Result};
use crate::limits;
use std::collections::HashMap;

/// `dfa` with at most `limit` characters before the rule must end at its first chance.
/// `budget` is the grammar's remaining automaton state budget.
pub(super) fn bound_dfa(dfa: &Dfa, limit: u32, budget: &mut usize) -> Result<Dfa> {
    let mut ids: HashMap<(u32, u32), u32> = HashMap::new();
    let mut order: Vec<(u32, u32)> = vec![(0, 0)];
    ids.insert((0, 0), 0);
    let mut out = Dfa::default();
    let mut i = 0;
    while i < order.len() {
        let (q, c) = order[i];
        i += 1;
        let is_final = dfa.finals[q as usize];
        let first = out.bytes.len();
        if !(is_final && c >= limit) {
            for e in dfa.bytes_of(q as usize) {
                // Split the range at the UTF-8 continuation bytes 0x80..=0xBF, which do not start
                // a character.
                for (lo, hi, cont) in split_continuation(e.lo, e.hi) {
                    let nc = if cont { c } else { (c + 1).min(limit) };
                    let key = (e.target, nc);
                    let t = match ids.get(&key) {
                        Some(&t) => t,
                        None => {
                            if *budget == 0 {
                                return Err(Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES));
                            }
                            *budget -= 1;
                            let t = order.len() as u32;
                            order.push(key);
                            ids.insert(key, t);
                            t
                        }
                    };
                    out.push_byte(first, ByteEdgeLocal { lo, hi, target: t });
                }
            }
        }
        out.end_state(is_final);
    }
    Ok(out)
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
    fn the_budget_bounds_the_product() {
        assert!(bound_dfa(&a_plus(), 100, &mut 10).is_err());
    }
}
