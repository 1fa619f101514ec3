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

/// Plain rounds over all calling states before a worklist takes over: most grammars settle in
/// one or two, and then the readers' index is never built.
const PLAIN_ROUNDS: usize = 2;

/// For each state, the calling states whose rule edges read it (as a callee's start or as an
/// edge's target): the states to evaluate again when its nullability or FIRST grows.
struct Readers {
    /// `readers[offsets[s]..offsets[s + 1]]` read state `s` (a state may be listed twice).
    offsets: Vec<u32>,
    readers: Vec<StateId>,
}

impl Readers {
    fn of(a: &Automata, calling: &[StateId]) -> Readers {
        let start = |r: crate::grammar::RuleId| a.rule_start(r).0 as usize;
        let mut offsets = vec![0u32; a.states().len() + 1];
        for &s in calling {
            for &(r, t) in a.rule_edges(s) {
                offsets[start(r) + 1] += 1;
                offsets[t.0 as usize + 1] += 1;
            }
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let mut next = offsets.clone();
        let mut readers = vec![StateId(0); *offsets.last().unwrap_or(&0) as usize];
        for &s in calling {
            for &(r, t) in a.rule_edges(s) {
                for read in [start(r), t.0 as usize] {
                    readers[next[read] as usize] = s;
                    next[read] += 1;
                }
            }
        }
        Readers { offsets, readers }
    }

    fn of_state(&self, s: usize) -> &[StateId] {
        &self.readers[self.offsets[s] as usize..self.offsets[s + 1] as usize]
    }
}

/// `nullable[s]` for every state of `a`: the rest of its rule can match the empty string.
pub fn nullable_states(a: &Automata) -> Vec<bool> {
    Passes::new(a).nullable()
}

/// `follow[r]` for every rule of `a` (see the module doc), given [`nullable_states`].
pub fn follow_sets(a: &Automata, nullable: &[bool]) -> Vec<ByteSet> {
    Passes::new(a).follow(nullable)
}

/// [`nullable_states`] and [`follow_sets`] at once, sharing their indexes.
pub fn nullable_and_follow(a: &Automata) -> (Vec<bool>, Vec<ByteSet>) {
    let mut passes = Passes::new(a);
    let nullable = passes.nullable();
    let follow = passes.follow(&nullable);
    (nullable, follow)
}

/// The fixpoints' shared inputs. Only rule edges make a non-final state nullable or give it
/// bytes past its own, so the passes visit just the states with rule edges (`calling`).
/// PERF: a structural tag's 50 tools (14k states, mostly literal bytes) took ~0.2 ms in
/// nullability when every state was visited.
struct Passes<'a> {
    a: &'a Automata,
    calling: Vec<StateId>,
    /// Built when a fixpoint needs more than `PLAIN_ROUNDS`.
    readers: Option<Readers>,
}

impl<'a> Passes<'a> {
    fn new(a: &'a Automata) -> Self {
        let calling = (0..a.states().len() as u32).map(StateId).filter(|&s| !a.rule_edges(s).is_empty()).collect();
        Passes { a, calling, readers: None }
    }

    fn readers(&mut self) -> &Readers {
        let (a, calling) = (self.a, &self.calling);
        self.readers.get_or_insert_with(|| Readers::of(a, calling))
    }

    fn nullable(&mut self) -> Vec<bool> {
        let a = self.a;
        let start = |r: crate::grammar::RuleId| a.rule_start(r).0 as usize;
        let mut nullable: Vec<bool> = a.states().iter().map(|st| st.is_final).collect();
        let becomes_nullable = |nullable: &[bool], s: StateId| {
            a.rule_edges(s).iter().any(|&(r, t)| nullable[start(r)] && nullable[t.0 as usize])
        };
        let mut changed = Vec::new();
        for _ in 0..PLAIN_ROUNDS {
            changed.clear();
            for &sid in &self.calling {
                if !nullable[sid.0 as usize] && becomes_nullable(&nullable, sid) {
                    nullable[sid.0 as usize] = true;
                    changed.push(sid);
                }
            }
            if changed.is_empty() {
                return nullable;
            }
        }
        // Invariant: only readers of a state set in the last round (or later) can still
        // change; a state evaluated before its input changed in that round reads that input.
        let readers = self.readers.take().unwrap_or_else(|| Readers::of(a, &self.calling));
        while let Some(x) = changed.pop() {
            for &sid in readers.of_state(x.0 as usize) {
                if !nullable[sid.0 as usize] && becomes_nullable(&nullable, sid) {
                    nullable[sid.0 as usize] = true;
                    changed.push(sid);
                }
            }
        }
        self.readers = Some(readers);
        nullable
    }

    /// FIRST of the states FOLLOW reads: calling states, rule starts and the targets of rule
    /// edges (0 elsewhere).
    /// PERF: building it for every state (a structural tag's 50 tools: 14k states, mostly
    /// literal bytes) was most of the ~0.7 ms this took in the first mask.
    fn first(&mut self, nullable: &[bool]) -> Vec<ByteSet> {
        let a = self.a;
        let start = |r: crate::grammar::RuleId| a.rule_start(r).0 as usize;
        let mut first = vec![ByteSet::default(); a.states().len()];
        let mut needed = vec![false; a.states().len()];
        for &s in &self.calling {
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
        // Whether `s` grew from its rule edges.
        let grow = |first: &mut [ByteSet], s: StateId| {
            let mut acc = first[s.0 as usize];
            for &(r, t) in a.rule_edges(s) {
                acc.union(&first[start(r)]);
                if nullable[start(r)] {
                    acc.union(&first[t.0 as usize]);
                }
            }
            first[s.0 as usize].union(&acc)
        };
        let mut changed = Vec::new();
        for _ in 0..PLAIN_ROUNDS {
            changed.clear();
            for &sid in &self.calling {
                if grow(&mut first, sid) {
                    changed.push(sid);
                }
            }
            if changed.is_empty() {
                return first;
            }
        }
        // Invariant as in `nullable`: only readers of a state grown in the last round (or
        // later) can still grow.
        let readers = self.readers();
        while let Some(x) = changed.pop() {
            for &sid in readers.of_state(x.0 as usize) {
                if grow(&mut first, sid) {
                    changed.push(sid);
                }
            }
        }
        first
    }

    /// FOLLOW: each rule edge `(r, t)` out of a state of rule q adds `first(t)` to `follow(r)`
    /// once and, when t is nullable, makes `follow(r)` grow with `follow(q)`: a flow q -> r.
    fn follow(&mut self, nullable: &[bool]) -> Vec<ByteSet> {
        let first = self.first(nullable);
        let a = self.a;
        let rules = a.num_rules();
        let mut follow = vec![ByteSet::default(); rules];
        // Flows by source rule (counting sort); a flow may be listed more than once.
        let mut offsets = vec![0u32; rules + 1];
        let flows_of = |sid: StateId| {
            let q = a.state(sid).rule;
            a.rule_edges(sid).iter().filter(move |&&(r, t)| nullable[t.0 as usize] && r != q).map(move |&(r, _)| (q, r))
        };
        for &sid in &self.calling {
            for &(r, t) in a.rule_edges(sid) {
                follow[r.index()].union(&first[t.0 as usize]);
            }
            for (q, _) in flows_of(sid) {
                offsets[q.index() + 1] += 1;
            }
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let mut next = offsets.clone();
        let mut to = vec![0u32; *offsets.last().unwrap_or(&0) as usize];
        for &sid in &self.calling {
            for (q, r) in flows_of(sid) {
                to[next[q.index()] as usize] = r.0;
                next[q.index()] += 1;
            }
        }
        // Invariant: a rule off the worklist has passed its current set along all its flows.
        let mut work: Vec<u32> = (0..rules as u32).filter(|&q| follow[q as usize] != ByteSet::default()).collect();
        while let Some(q) = work.pop() {
            let from = follow[q as usize];
            for &r in &to[offsets[q as usize] as usize..offsets[q as usize + 1] as usize] {
                if follow[r as usize].union(&from) {
                    work.push(r);
                }
            }
        }
        follow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;
    use std::fmt::Write;

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
    /// The fixpoints by plain rounds over every calling state until nothing changes (the
    /// definitions of the module doc), and how many rounds nullability and FIRST took.
    fn plain_fixpoints(a: &Automata) -> (Vec<bool>, Vec<ByteSet>, usize, usize) {
        let start = |r: crate::grammar::RuleId| a.rule_start(r).0 as usize;
        let states = (0..a.states().len() as u32).map(StateId);
        let mut nullable: Vec<bool> = a.states().iter().map(|st| st.is_final).collect();
        let mut null_rounds = 0;
        loop {
            null_rounds += 1;
            let mut changed = false;
            for s in states.clone() {
                if !nullable[s.0 as usize]
                    && a.rule_edges(s).iter().any(|&(r, t)| nullable[start(r)] && nullable[t.0 as usize])
                {
                    nullable[s.0 as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut first = vec![ByteSet::default(); a.states().len()];
        for s in states.clone() {
            for e in a.byte_edges(s) {
                first[s.0 as usize].insert_range(e.lo, e.hi);
            }
        }
        let mut first_rounds = 0;
        loop {
            first_rounds += 1;
            let mut changed = false;
            for s in states.clone() {
                let mut acc = first[s.0 as usize];
                for &(r, t) in a.rule_edges(s) {
                    acc.union(&first[start(r)]);
                    if nullable[start(r)] {
                        acc.union(&first[t.0 as usize]);
                    }
                }
                changed |= first[s.0 as usize].union(&acc);
            }
            if !changed {
                break;
            }
        }
        let mut follow = vec![ByteSet::default(); a.num_rules()];
        loop {
            let mut changed = false;
            for s in states.clone() {
                let q = a.state(s).rule.index();
                for &(r, t) in a.rule_edges(s) {
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
        (nullable, follow, null_rounds, first_rounds)
    }

    #[test]
    fn worklists_reach_the_fixpoints_of_plain_rounds() {
        // A chain of shared, non-inlined rules, each nullable only through the next and
        // defined after its caller: state order makes plain rounds move one link per round,
        // so the worklists carry nullability and FIRST past `PLAIN_ROUNDS`.
        let links = 12;
        let mut src = String::from("root ::= r0 \"z\" r0 \"w\"\n");
        for k in 0..links {
            let next = if k + 1 < links { format!("r{}", k + 1) } else { "\"y\"?".to_string() };
            writeln!(src, "r{k} ::= {next} {next} \"{k}\"? | \"{k}0123456789012345678901234567890123456789\"").unwrap();
        }
        let mut grammars = vec![src];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/gbnf");
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        grammars.extend(
            files
                .iter()
                .filter(|p| p.extension().is_some_and(|x| x == "gbnf"))
                .map(|p| std::fs::read_to_string(p).unwrap()),
        );
        assert!(grammars.len() > 4, "testdata/gbnf holds the llama.cpp grammars");
        for (i, src) in grammars.iter().enumerate() {
            let g = parse_ebnf(src, "root").unwrap();
            let a = Automata::build(&g).unwrap();
            let (nullable, follow, null_rounds, first_rounds) = plain_fixpoints(&a);
            if i == 0 {
                assert!(
                    null_rounds > PLAIN_ROUNDS + 2 && first_rounds > PLAIN_ROUNDS + 2,
                    "{null_rounds} {first_rounds}"
                );
            }
            assert_eq!(nullable_states(&a), nullable, "grammar {i}");
            assert_eq!(follow_sets(&a, &nullable), follow, "grammar {i}");
        }
    }
}
