//! [`CharDfa`]: deterministic automata over Unicode scalar values, with the Boolean operations,
//! length bounds, enumeration and inclusion tests the JSON Schema converter needs. Printing is in
//! [`super::emit`]; construction from a pattern is in [`super::nfa`].
use std::collections::VecDeque;
use std::hash::BuildHasher;

use super::charset::CharSet;
use super::MAX_DFA_STATES;
use crate::error::{Error, Result};
use crate::fasthash::FastMap;

/// A transition on the codepoints `lo..=hi` to state `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Trans {
    pub lo: u32,
    pub hi: u32,
    pub to: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DState {
    pub accept: bool,
    /// Sorted by `lo`, pairwise disjoint, never containing surrogates; a codepoint with no
    /// transition leads to rejection.
    pub trans: Vec<Trans>,
}

/// A deterministic finite automaton over Unicode scalar values; transitions on disjoint codepoint
/// ranges.
///
/// Invariant (after every public constructor and operation): the automaton is trimmed (every
/// state is reachable from `start` and reaches an accepting state), except that the empty
/// language is one non-accepting state without transitions; states are numbered in BFS order from
/// `start == 0`; and it has at most [`MAX_DFA_STATES`] states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CharDfa {
    pub(crate) states: Vec<DState>,
    pub(crate) start: u32,
}

/// Sentinel for "no state" in products (the implicit dead state).
const DEAD: u32 = u32::MAX;

/// Moore refinement is skipped past this much work (state transitions times rounds); the result is
/// then correct but not minimal.
const MINIMIZE_BUDGET: usize = 4_000_000;

impl CharDfa {
    /// Wraps raw states (any shape) and normalizes them (trim, minimize, renumber).
    pub(crate) fn from_states(states: Vec<DState>, start: u32) -> CharDfa {
        CharDfa { states, start }.trimmed().minimized()
    }

    /// The empty language.
    #[must_use]
    pub fn empty() -> CharDfa {
        CharDfa { states: vec![DState { accept: false, trans: Vec::new() }], start: 0 }
    }

    /// All strings.
    #[must_use]
    pub fn any_string() -> CharDfa {
        let trans = CharSet::full().ranges().iter().map(|&(lo, hi)| Trans { lo, hi, to: 0 }).collect();
        CharDfa { states: vec![DState { accept: true, trans }], start: 0 }
    }

    /// Exactly the string `s`.
    #[must_use]
    pub fn literal(s: &str) -> CharDfa {
        let mut states: Vec<DState> = s
            .chars()
            .enumerate()
            .map(|(i, c)| DState { accept: false, trans: vec![Trans { lo: c as u32, hi: c as u32, to: i as u32 + 1 }] })
            .collect();
        states.push(DState { accept: true, trans: Vec::new() });
        CharDfa { states, start: 0 }
    }

    /// Exactly the strings in `words` (a trie, then minimized): one construction instead of a
    /// union per word, which grows quadratically with the number of words.
    pub fn literals<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<CharDfa> {
        // Per state, children sorted by codepoint; the trie has no shared suffixes yet.
        let mut states: Vec<DState> = vec![DState { accept: false, trans: Vec::new() }];
        for w in words {
            let mut s = 0usize;
            for c in w.chars().map(|c| c as u32) {
                let trans = &states[s].trans;
                let i = trans.partition_point(|t| t.lo < c);
                s = if trans.get(i).is_some_and(|t| t.lo == c) {
                    trans[i].to as usize
                } else {
                    let to = states.len() as u32;
                    states[s].trans.insert(i, Trans { lo: c, hi: c, to });
                    states.push(DState { accept: false, trans: Vec::new() });
                    to as usize
                };
            }
            states[s].accept = true;
        }
        let dfa = CharDfa::from_states(states, 0);
        if dfa.states.len() > MAX_DFA_STATES {
            return Err(Error::limit("automaton states", MAX_DFA_STATES));
        }
        Ok(dfa)
    }

    /// Strings of the characters in `set` only (any length).
    #[must_use]
    pub fn star_of(set: &CharSet) -> CharDfa {
        let trans = set.ranges().iter().map(|&(lo, hi)| Trans { lo, hi, to: 0 }).collect();
        CharDfa { states: vec![DState { accept: true, trans }], start: 0 }
    }

    /// Strings whose length in codepoints is in `[min, max]` (`max == None`: unbounded).
    pub fn length_between(min: u64, max: Option<u64>) -> Result<CharDfa> {
        if max.is_some_and(|m| m < min) {
            return Ok(CharDfa::empty());
        }
        let last = max.unwrap_or(min);
        if last >= MAX_DFA_STATES as u64 {
            return Err(Error::limit("string length bound (automaton states)", MAX_DFA_STATES));
        }
        let full = CharSet::full();
        let mut states = Vec::with_capacity(last as usize + 1);
        for i in 0..=last {
            let to = if i < last {
                i as u32 + 1
            } else if max.is_none() {
                i as u32
            } else {
                DEAD
            };
            let trans = if to == DEAD {
                Vec::new()
            } else {
                full.ranges().iter().map(|&(lo, hi)| Trans { lo, hi, to }).collect()
            };
            states.push(DState { accept: i >= min, trans });
        }
        // Already trimmed, minimal and in BFS order.
        Ok(CharDfa { states, start: 0 })
    }

    #[must_use]
    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.states[self.start as usize].accept && self.states[self.start as usize].trans.is_empty()
    }

    fn step(&self, s: u32, c: u32) -> Option<u32> {
        let trans = &self.states[s as usize].trans;
        let i = trans.partition_point(|t| t.hi < c);
        trans.get(i).filter(|t| t.lo <= c).map(|t| t.to)
    }

    #[must_use]
    pub fn accepts(&self, s: &str) -> bool {
        let mut q = self.start;
        for c in s.chars() {
            match self.step(q, c as u32) {
                Some(n) => q = n,
                None => return false,
            }
        }
        self.states[q as usize].accept
    }

    /// Whether the empty string is in the language.
    #[must_use]
    pub fn accepts_empty(&self) -> bool {
        self.states[self.start as usize].accept
    }

    pub fn intersect(&self, other: &CharDfa) -> Result<CharDfa> {
        product(self, other, |a, b| a && b, |a, b| a && b)
    }

    pub fn union(&self, other: &CharDfa) -> Result<CharDfa> {
        product(self, other, |a, b| a || b, |a, b| a || b)
    }

    pub fn difference(&self, other: &CharDfa) -> Result<CharDfa> {
        product(self, other, |a, _| a, |a, b| a && !b)
    }

    /// All strings not in the language.
    #[must_use]
    pub fn complement(&self) -> CharDfa {
        let full = CharSet::full();
        let sink = self.states.len() as u32;
        let mut states: Vec<DState> = self
            .states
            .iter()
            .map(|st| {
                let covered = CharSet::from_ranges(st.trans.iter().map(|t| (t.lo, t.hi)));
                let mut trans = st.trans.clone();
                trans.extend(full.difference(&covered).ranges().iter().map(|&(lo, hi)| Trans { lo, hi, to: sink }));
                trans.sort_unstable_by_key(|t| t.lo);
                DState { accept: !st.accept, trans }
            })
            .collect();
        states.push(DState {
            accept: true,
            trans: full.ranges().iter().map(|&(lo, hi)| Trans { lo, hi, to: sink }).collect(),
        });
        CharDfa::from_states(states, self.start)
    }

    pub fn is_subset_of(&self, other: &CharDfa) -> Result<bool> {
        Ok(self.difference(other)?.is_empty())
    }

    /// Whether the language is infinite (the trimmed automaton has a cycle).
    #[must_use]
    pub fn is_infinite(&self) -> bool {
        self.topological_order().is_none()
    }

    /// States in an order where every transition goes forward, or `None` if there is a cycle.
    fn topological_order(&self) -> Option<Vec<u32>> {
        // Iterative DFS with colours: 0 new, 1 on stack, 2 done.
        let n = self.states.len();
        let mut colour = vec![0u8; n];
        let mut post: Vec<u32> = Vec::with_capacity(n);
        let mut stack: Vec<(u32, usize)> = vec![(self.start, 0)];
        colour[self.start as usize] = 1;
        while let Some(&mut (s, ref mut i)) = stack.last_mut() {
            let trans = &self.states[s as usize].trans;
            if *i < trans.len() {
                let t = trans[*i].to;
                *i += 1;
                match colour[t as usize] {
                    0 => {
                        colour[t as usize] = 1;
                        stack.push((t, 0));
                    }
                    1 => return None,
                    _ => {}
                }
            } else {
                colour[s as usize] = 2;
                post.push(s);
                stack.pop();
            }
        }
        post.reverse();
        Some(post)
    }

    /// All strings of the language if it is finite and has at most `limit` strings.
    #[must_use]
    pub fn finite_strings(&self, limit: usize) -> Option<Vec<String>> {
        let order = self.topological_order()?;
        let mut count = vec![0u128; self.states.len()];
        for &s in order.iter().rev() {
            let st = &self.states[s as usize];
            let mut c = u128::from(st.accept);
            for t in &st.trans {
                c = c.saturating_add(u128::from(t.hi - t.lo + 1).saturating_mul(count[t.to as usize]));
            }
            count[s as usize] = c;
        }
        if count[self.start as usize] > limit as u128 {
            return None;
        }
        let mut out = Vec::new();
        let mut stack: Vec<(u32, String)> = vec![(self.start, String::new())];
        while let Some((s, prefix)) = stack.pop() {
            let st = &self.states[s as usize];
            if st.accept {
                out.push(prefix.clone());
            }
            for t in st.trans.iter().rev() {
                // Transitions hold scalar values only, so `from_u32` never fails here.
                for ch in (t.lo..=t.hi).rev().filter_map(char::from_u32) {
                    let mut p = prefix.clone();
                    p.push(ch);
                    stack.push((t.to, p));
                }
            }
        }
        out.sort();
        Some(out)
    }

    /// Removes unreachable and dead states; the empty language becomes [`CharDfa::empty`].
    fn trimmed(self) -> CharDfa {
        let n = self.states.len();
        let mut reach = vec![false; n];
        let mut queue = vec![self.start];
        reach[self.start as usize] = true;
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
        while let Some(s) = queue.pop() {
            for t in &self.states[s as usize].trans {
                rev[t.to as usize].push(s);
                if !reach[t.to as usize] {
                    reach[t.to as usize] = true;
                    queue.push(t.to);
                }
            }
        }
        let mut live = vec![false; n];
        let mut queue: Vec<u32> =
            (0..n as u32).filter(|&s| reach[s as usize] && self.states[s as usize].accept).collect();
        for &s in &queue {
            live[s as usize] = true;
        }
        while let Some(s) = queue.pop() {
            for &p in &rev[s as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    queue.push(p);
                }
            }
        }
        if !live[self.start as usize] {
            return CharDfa::empty();
        }
        let states = self
            .states
            .into_iter()
            .map(|mut st| {
                st.trans.retain(|t| live[t.to as usize]);
                st
            })
            .collect();
        CharDfa { states, start: self.start }.renumbered(|s| live[s as usize])
    }

    /// Renumbers the states kept by `keep` in BFS order from the start, merging adjacent
    /// transitions to the same state.
    fn renumbered(self, keep: impl Fn(u32) -> bool) -> CharDfa {
        let mut id = vec![DEAD; self.states.len()];
        let mut order = vec![self.start];
        id[self.start as usize] = 0;
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            for t in &self.states[s as usize].trans {
                if keep(t.to) && id[t.to as usize] == DEAD {
                    id[t.to as usize] = order.len() as u32;
                    order.push(t.to);
                }
            }
        }
        let states = order
            .iter()
            .map(|&s| {
                let st = &self.states[s as usize];
                DState {
                    accept: st.accept,
                    trans: merge(st.trans.iter().map(|t| Trans { to: id[t.to as usize], ..*t })),
                }
            })
            .collect();
        CharDfa { states, start: 0 }
    }

    /// Moore partition refinement (on a trimmed automaton); keeps the input when over budget.
    fn minimized(self) -> CharDfa {
        let n = self.states.len();
        let mut class: Vec<u32> = self.states.iter().map(|s| u32::from(s.accept)).collect();
        let mut num_classes = class.iter().copied().collect::<std::collections::HashSet<_>>().len();
        let total_trans: usize = self.states.iter().map(|s| s.trans.len() + 1).sum();
        let mut work = 0usize;
        let hasher = crate::fasthash::FastState;
        let mut sigs: FastMap<u64, u32> = FastMap::default();
        let (mut arena, mut buf, mut sig_of) =
            (Vec::<Trans>::new(), Vec::<Trans>::new(), Vec::<(u32, usize, usize)>::new());
        let mut chain: Vec<u32> = Vec::new();
        loop {
            work += total_trans;
            if work > MINIMIZE_BUDGET {
                return self;
            }
            // Signature of a state: its class and its transitions to classes (merged). New
            // classes are numbered in order of first occurrence; signatures live in one arena.
            // PERF: a map keyed by owned signature vectors spent most of the time in malloc.
            sigs.clear();
            arena.clear();
            sig_of.clear();
            chain.clear();
            let mut next = vec![0u32; n];
            for s in 0..n {
                buf.clear();
                for t in &self.states[s].trans {
                    let t = Trans { to: class[t.to as usize], ..*t };
                    match buf.last_mut() {
                        Some(l) if l.to == t.to && l.hi + 1 == t.lo => l.hi = t.hi,
                        _ => buf.push(t),
                    }
                }
                let key = (class[s], buf.as_slice());
                let h = hasher.hash_one(key);
                // Classes with hash `h` form a chain: `sigs[h]`, then `chain[k]` until DEAD.
                let mut k = sigs.get(&h).copied().unwrap_or(DEAD);
                while k != DEAD {
                    let (c, lo, hi) = sig_of[k as usize];
                    if (c, &arena[lo..hi]) == key {
                        break;
                    }
                    k = chain[k as usize];
                }
                if k == DEAD {
                    k = sig_of.len() as u32;
                    sig_of.push((class[s], arena.len(), arena.len() + buf.len()));
                    arena.extend_from_slice(&buf);
                    chain.push(sigs.insert(h, k).unwrap_or(DEAD));
                }
                next[s] = k;
            }
            let count = sig_of.len();
            class = next;
            if count == num_classes {
                break;
            }
            num_classes = count;
        }
        let mut rep = vec![DEAD; num_classes];
        for s in 0..n {
            if rep[class[s] as usize] == DEAD {
                rep[class[s] as usize] = s as u32;
            }
        }
        let states = rep
            .iter()
            .map(|&s| {
                let st = &self.states[s as usize];
                DState {
                    accept: st.accept,
                    trans: merge(st.trans.iter().map(|t| Trans { to: class[t.to as usize], ..*t })),
                }
            })
            .collect();
        CharDfa { states, start: class[self.start as usize] }.renumbered(|_| true)
    }
}

/// Merges adjacent transitions (sorted by `lo`) that go to the same state.
fn merge(trans: impl Iterator<Item = Trans>) -> Vec<Trans> {
    let mut out: Vec<Trans> = Vec::new();
    for t in trans {
        match out.last_mut() {
            Some(l) if l.to == t.to && l.hi + 1 == t.lo => l.hi = t.hi,
            _ => out.push(t),
        }
    }
    out
}

/// The product automaton: a transition exists where `keep(a has one, b has one)`, a state accepts
/// where `accept(a accepts, b accepts)`.
fn product(
    a: &CharDfa,
    b: &CharDfa,
    keep: impl Fn(bool, bool) -> bool,
    accept: impl Fn(bool, bool) -> bool,
) -> Result<CharDfa> {
    let mut ids: FastMap<(u32, u32), u32> = FastMap::default();
    let mut pairs: Vec<(u32, u32)> = vec![(a.start, b.start)];
    ids.insert((a.start, b.start), 0);
    let mut states: Vec<DState> = Vec::new();
    let mut queue: VecDeque<usize> = VecDeque::from([0]);
    let none: Vec<Trans> = Vec::new();
    while let Some(i) = queue.pop_front() {
        let (p, q) = pairs[i];
        let ta = if p == DEAD { &none } else { &a.states[p as usize].trans };
        let tb = if q == DEAD { &none } else { &b.states[q as usize].trans };
        let acc_a = p != DEAD && a.states[p as usize].accept;
        let acc_b = q != DEAD && b.states[q as usize].accept;
        let mut bounds: Vec<u32> = ta.iter().chain(tb.iter()).flat_map(|t| [t.lo, t.hi + 1]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        let (mut ia, mut ib) = (0, 0);
        let mut trans = Vec::new();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1] - 1);
            while ia < ta.len() && ta[ia].hi < lo {
                ia += 1;
            }
            while ib < tb.len() && tb[ib].hi < lo {
                ib += 1;
            }
            let na = if ia < ta.len() && ta[ia].lo <= lo { ta[ia].to } else { DEAD };
            let nb = if ib < tb.len() && tb[ib].lo <= lo { tb[ib].to } else { DEAD };
            if (na == DEAD && nb == DEAD) || !keep(na != DEAD, nb != DEAD) {
                continue;
            }
            let to = if let Some(&id) = ids.get(&(na, nb)) {
                id
            } else {
                if pairs.len() >= MAX_DFA_STATES * 4 {
                    return Err(Error::limit("automaton states (product)", MAX_DFA_STATES * 4));
                }
                let id = pairs.len() as u32;
                ids.insert((na, nb), id);
                pairs.push((na, nb));
                queue.push_back(id as usize);
                id
            };
            trans.push(Trans { lo, hi, to });
        }
        // States are created in BFS order, so index i is the i-th pushed state.
        debug_assert_eq!(states.len(), i);
        states.push(DState { accept: accept(acc_a, acc_b), trans: merge(trans.into_iter()) });
    }
    let dfa = CharDfa::from_states(states, 0);
    if dfa.states.len() > MAX_DFA_STATES {
        return Err(Error::limit("automaton states", MAX_DFA_STATES));
    }
    Ok(dfa)
}
