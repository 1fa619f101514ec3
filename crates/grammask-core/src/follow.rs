//! FOLLOW sets over rule automata: the bytes that can come right after a rule ends, in any
//! context. Kernel classification ([`crate::mask::classify_kernel`]) uses them to drop rule ends
//! that no context can continue with the token's next byte (their suffixes would fail anyway).
//!
//! Over-approximation is sound (more suffixes are checked); the sets are least fixpoints of:
//! `nullable(s)` = s final, or a rule edge `(r, t)` with `nullable(r)` and `nullable(t)`;
//! `first(s)` = byte edges of s, plus for each rule edge `(r, t)`: `first(r)`, and `first(t)`
//! when r is nullable; `follow(r)` ⊇ `first(t)` for each edge `(r, t)` out of a state of rule q,
//! plus `follow(q)` when t is nullable.

use crate::compiler::{Automata, StateId};

/// A set of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    /// The ASCII part, as a 128-bit set (bit x = byte x).
    pub fn ascii(&self) -> u128 {
        u128::from(self.0[0]) | u128::from(self.0[1]) << 64
    }

    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1u64 << (b & 63)) != 0
    }

    /// The set as 4 words (bit x of word x / 64 = byte x), for exact keys.
    pub fn words(&self) -> [u64; 4] {
        self.0
    }

    /// A 128-bit mix of the set, for cache keys.
    pub fn hash128(&self) -> u128 {
        let mut h: u128 = 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C834;
        for w in self.0 {
            h = (h ^ u128::from(w)).wrapping_mul(0x0000_0001_0000_0000_0000_0000_0000_013B);
            h ^= h >> 67;
        }
        h
    }

    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        // One mask per 64-bit word the range touches.
        for w in usize::from(lo >> 6)..=usize::from(hi >> 6) {
            let (base, top) = (w as u32 * 64, w as u32 * 64 + 63);
            let (l, h) = (u32::from(lo).max(base) - base, u32::from(hi).min(top) - base);
            self.0[w] |= (u64::MAX >> (63 - h)) & (u64::MAX << l);
        }
    }

    /// Whether some byte is in both sets.
    pub fn intersects(&self, other: &ByteSet) -> bool {
        self.0.iter().zip(other.0).any(|(w, o)| w & o != 0)
    }

    /// The bytes of the set, ascending.
    pub fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros();
                    w &= w - 1;
                    (i as u32 * 64 + b) as u8
                })
            })
        })
    }

    /// Keeps only the bytes also in `other`.
    pub fn intersect(&mut self, other: &ByteSet) {
        for (w, o) in self.0.iter_mut().zip(other.0) {
            *w &= o;
        }
    }

    /// Adds `other`; whether anything was new.
    pub fn union(&mut self, other: &ByteSet) -> bool {
        let mut changed = false;
        for (w, o) in self.0.iter_mut().zip(other.0) {
            let n = *w | o;
            changed |= n != *w;
            *w = n;
        }
        changed
    }
}

/// `nullable[s]` for every state of `a`: the rest of its rule can match the empty string.
pub fn nullable_states(a: &Automata) -> Vec<bool> {
    let start = |r: crate::grammar::RuleId| a.rule_start(r).0 as usize;
    let mut nullable: Vec<bool> = a.states().iter().map(|st| st.is_final).collect();
    // Only rule edges make a non-final state nullable; the passes visit just those states.
    // PERF: a structural tag's 50 tools (14k states, mostly literal bytes) took ~0.2 ms here.
    let calling = calling_states(a);
    loop {
        let mut changed = false;
        for &sid in &calling {
            let s = sid.0 as usize;
            if !nullable[s] && a.rule_edges(sid).iter().any(|&(r, t)| nullable[start(r)] && nullable[t.0 as usize]) {
                nullable[s] = true;
                changed = true;
            }
        }
        if !changed {
            return nullable;
        }
    }
}

/// The states with rule edges.
fn calling_states(a: &Automata) -> Vec<StateId> {
    (0..a.states().len() as u32).map(StateId).filter(|&s| !a.rule_edges(s).is_empty()).collect()
}

/// `follow[r]` for every rule of `a` (see the module doc), given [`nullable_states`].
pub fn follow_sets(a: &Automata, nullable: &[bool]) -> Vec<ByteSet> {
    let n = a.states().len();
    let rules = a.num_rules();
    let start = |r: crate::grammar::RuleId| a.rule_start(r).0 as usize;
    // FIRST of states, then FOLLOW of rules, each to a fixpoint (loops over all states: the
    // automata are small and the passes converge in a few rounds).
    // Only states with rule edges change past their own bytes (see `nullable_states`), and only
    // they, rule starts and the states after rule edges are ever read: FIRST is built for those.
    // PERF: building it for every state (a structural tag's 50 tools: 14k states, mostly literal
    // bytes) was most of the ~0.7 ms this took in the first mask.
    let calling = calling_states(a);
    let mut first = vec![ByteSet::default(); n];
    let mut needed = vec![false; n];
    for &s in &calling {
        needed[s.0 as usize] = true;
        for &(r, t) in a.rule_edges(s) {
            needed[start(r)] = true;
            needed[t.0 as usize] = true;
        }
    }
    for (s, f) in first.iter_mut().enumerate().filter(|(s, _)| needed[*s]) {
        for e in a.byte_edges(StateId(s as u32)) {
            f.insert_range(e.lo, e.hi);
        }
    }
    loop {
        let mut changed = false;
        for &sid in &calling {
            let s = sid.0 as usize;
            let mut acc = first[s];
            for &(r, t) in a.rule_edges(sid) {
                acc.union(&first[start(r)]);
                if nullable[start(r)] {
                    acc.union(&first[t.0 as usize]);
                }
            }
            changed |= first[s].union(&acc);
        }
        if !changed {
            break;
        }
    }
    let mut follow = vec![ByteSet::default(); rules];
    loop {
        let mut changed = false;
        for &sid in &calling {
            let q = a.state(sid).rule.index();
            for &(r, t) in a.rule_edges(sid) {
                let mut add = first[t.0 as usize];
                if nullable[t.0 as usize] {
                    add.union(&follow[q]);
                }
                changed |= follow[r.index()].union(&add);
            }
        }
        if !changed {
            break;
        }
    }
    follow
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;

    #[test]
    fn bytes_and_intersects_agree_with_contains() {
        let ranges = [(0u8, 0u8), (0, 255), (3, 63), (63, 64), (60, 200), (128, 191), (255, 255), (64, 127), (9, 10)];
        let sets: Vec<ByteSet> = ranges
            .iter()
            .map(|&(lo, hi)| {
                let mut s = ByteSet::default();
                s.insert_range(lo, hi);
                s.insert_range(hi / 2, hi / 2);
                s
            })
            .chain([ByteSet::default()])
            .collect();
        for s in &sets {
            let listed: Vec<u8> = s.bytes().collect();
            assert_eq!(listed, (0..=255u8).filter(|&b| s.contains(b)).collect::<Vec<_>>());
            for o in &sets {
                assert_eq!(s.intersects(o), (0..=255u8).any(|b| s.contains(b) && o.contains(b)));
            }
        }
    }

    #[test]
    fn insert_range_sets_exactly_the_range() {
        for (lo, hi) in [(0u8, 0u8), (0, 255), (3, 63), (63, 64), (60, 200), (128, 191), (255, 255), (64, 127)] {
            let mut s = ByteSet::default();
            s.insert_range(lo, hi);
            for b in 0..=255u8 {
                assert_eq!(s.contains(b), (lo..=hi).contains(&b), "{lo}..={hi} byte {b}");
            }
        }
    }

    #[test]
    fn follow_through_nullable_tails() {
        // Shared rules with references and long bodies are not inlined, so each keeps its own
        // automaton and FOLLOW set.
        let src = "root ::= a b \"z\" | \"w\" a \"v\" | \"w\" b d\n\
                   a ::= \"x\" c \"0123456789012345678901234567890123456789\"\n\
                   b ::= c \"y\"? | c c \"0123456789012345678901234567890123456789\"\n\
                   c ::= \"k\" | \"m\" root\n\
                   d ::= \"e\"? \"f\"?";
        let g = parse_ebnf(src, "root").unwrap();
        let a = Automata::build(&g).unwrap();
        let f = follow_sets(&a, &nullable_states(&a));
        let rule =
            |name: &str| (0..a.num_rules()).find(|&r| a.rule_name(crate::grammar::RuleId(r as u32)) == name).unwrap();
        let set = |r: usize| -> Vec<u8> { (0..=255u8).filter(|&b| f[r].contains(b)).collect() };
        assert_eq!(set(rule("a")), b"kmv".to_vec());
        // After b: "z", d's first bytes, and (d nullable) whatever follows root: root ends
        // before "0123..." in c's callers (a and b), and before "y"/"z"/... via c inside b.
        let fb = set(rule("b"));
        assert!(fb.contains(&b'z') && fb.contains(&b'e') && fb.contains(&b'f'));
        assert!(!fb.contains(&b'x') && !fb.contains(&b'w'));
    }
}
