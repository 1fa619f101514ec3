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

/// The first exit marker of [`CharDfa::then_exit`]: above every Unicode scalar value, so no
/// text reads it; markers sort after every character in a state's transitions.
pub(crate) const EXIT_MARK: u32 = 0x11_0000;

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

    /// The language followed by the exit marker `EXIT_MARK + label` (a codepoint above every
    /// scalar value), ending in one final state. A union of such automata keeps each string's
    /// label as the marker its accepting state reads: [`super::emit::dfa_to_ebnf_with_exits`]
    /// prints marker `j` as the `j`-th exit text. Only that printer may read the result.
    #[must_use]
    pub fn then_exit(&self, label: u32) -> CharDfa {
        let sink = self.states.len() as u32;
        let mark = EXIT_MARK + label;
        let mut states: Vec<DState> = self
            .states
            .iter()
            .map(|st| {
                let mut trans = st.trans.clone();
                if st.accept {
                    trans.push(Trans { lo: mark, hi: mark, to: sink });
                }
                DState { accept: false, trans }
            })
            .collect();
        states.push(DState { accept: true, trans: Vec::new() });
        CharDfa::from_states(states, self.start)
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

    /// Whether every string is in the language: every state (all are reachable) accepts and
    /// reads every codepoint (its disjoint, surrogate-free ranges add up to all scalar values).
    #[must_use]
    pub fn accepts_every_string(&self) -> bool {
        let all: u64 = CharSet::full().ranges().iter().map(|&(lo, hi)| u64::from(hi - lo) + 1).sum();
        self.states
            .iter()
            .all(|st| st.accept && st.trans.iter().map(|t| u64::from(t.hi - t.lo) + 1).sum::<u64>() == all)
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

    /// The predecessors of every state among the states `keep` admits, as offsets into one
    /// list: those of `s` are `preds[off[s]..off[s + 1]]`, once per transition (PERF: one vector
    /// per state was a tenth of the automaton operations' allocations).
    fn predecessors(&self, keep: impl Fn(usize) -> bool) -> (Vec<u32>, Vec<u32>) {
        let n = self.states.len();
        let mut off = vec![0u32; n + 1];
        for (s, st) in self.states.iter().enumerate() {
            if keep(s) {
                for t in &st.trans {
                    off[t.to as usize + 1] += 1;
                }
            }
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut preds = vec![0u32; off[n] as usize];
        let mut fill = off.clone();
        for (s, st) in self.states.iter().enumerate() {
            if keep(s) {
                for t in &st.trans {
                    preds[fill[t.to as usize] as usize] = s as u32;
                    fill[t.to as usize] += 1;
                }
            }
        }
        (off, preds)
    }

    /// Removes unreachable and dead states; the empty language becomes [`CharDfa::empty`].
    fn trimmed(self) -> CharDfa {
        let n = self.states.len();
        let mut reach = vec![false; n];
        let mut queue = vec![self.start];
        reach[self.start as usize] = true;
        while let Some(s) = queue.pop() {
            for t in &self.states[s as usize].trans {
                if !reach[t.to as usize] {
                    reach[t.to as usize] = true;
                    queue.push(t.to);
                }
            }
        }
        // Predecessors among reachable states.
        let (rev_off, rev) = self.predecessors(|s| reach[s]);
        let mut live = vec![false; n];
        let mut queue: Vec<u32> =
            (0..n as u32).filter(|&s| reach[s as usize] && self.states[s as usize].accept).collect();
        for &s in &queue {
            live[s as usize] = true;
        }
        while let Some(s) = queue.pop() {
            for &p in &rev[rev_off[s as usize] as usize..rev_off[s as usize + 1] as usize] {
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
    fn renumbered(mut self, keep: impl Fn(u32) -> bool) -> CharDfa {
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
        // PERF: each state's transitions are renumbered and merged in place.
        let states = order
            .iter()
            .map(|&s| {
                let st = &mut self.states[s as usize];
                let mut trans = std::mem::take(&mut st.trans);
                let mut kept = 0usize;
                for i in 0..trans.len() {
                    let t = Trans { to: id[trans[i].to as usize], ..trans[i] };
                    if kept > 0 && trans[kept - 1].to == t.to && trans[kept - 1].hi + 1 == t.lo {
                        trans[kept - 1].hi = t.hi;
                    } else {
                        trans[kept] = t;
                        kept += 1;
                    }
                }
                trans.truncate(kept);
                DState { accept: st.accept, trans }
            })
            .collect();
        CharDfa { states, start: 0 }
    }

    /// Moore partition refinement (on a trimmed automaton); keeps the input when over budget.
    ///
    /// Round k+1 splits each class by its states' transitions to the classes of round k, as in
    /// Moore's algorithm (same partitions and rounds, so the same budget outcome: the budget still
    /// counts every transition once per round), but signs again only the states with a successor
    /// that changed class in round k. Invariant: every other state of a class has the signature
    /// recorded for the class (`class_sig`). Class numbers are arbitrary: the result is renumbered.
    /// PERF: signing every state each round was quadratic on length-bounded patterns (one round
    /// per length): 70% of the converter's time on its slowest MaskBench schemas.
    fn minimized(self) -> CharDfa {
        match self.moore() {
            Ok((d, _)) | Err(d) => d,
        }
    }

    /// [`CharDfa::minimized`]'s refinement: the minimal automaton and the number of rounds, or
    /// the input unchanged when over budget.
    fn moore(self) -> std::result::Result<(CharDfa, usize), CharDfa> {
        let n = self.states.len();
        let total_trans: usize = self.states.iter().map(|s| s.trans.len() + 1).sum();
        let both = self.states.iter().any(|s| s.accept) && self.states.iter().any(|s| !s.accept);
        let mut class: Vec<u32> = self.states.iter().map(|s| u32::from(both && s.accept)).collect();
        let mut num_classes = 1 + usize::from(both);
        let mut size = vec![0u32; num_classes];
        for &c in &class {
            size[c as usize] += 1;
        }
        let (pred_off, preds) = self.predecessors(|_| true);
        // A class's signature: its transitions to classes (merged), a range of `class_arena`;
        // `None` until the class is first signed.
        let mut class_sig: Vec<Option<(usize, usize)>> = vec![None; num_classes];
        let mut class_arena: Vec<Trans> = Vec::new();
        let hasher = crate::fasthash::FastState;
        // Per round: the distinct (class, signature) groups of the signed states; groups with hash
        // `h` form a chain (`group_map[h]`, then `chain[g]` until DEAD).
        let mut group_map: FastMap<u64, u32> = FastMap::default();
        let mut groups: Vec<(u32, usize, usize, u32)> = Vec::new(); // class, signature range, new class
        let (mut chain, mut arena, mut buf) = (Vec::<u32>::new(), Vec::<Trans>::new(), Vec::<Trans>::new());
        let mut group_of: Vec<u32> = Vec::new();
        let mut signed_in = vec![0u32; num_classes];
        let mut kept = vec![false; num_classes];
        let mut dirty: Vec<u32> = (0..n as u32).collect();
        let mut marked = vec![false; n];
        let mut moved: Vec<u32> = Vec::new();
        let mut work = 0usize;
        let mut rounds = 0usize;
        loop {
            work += total_trans;
            rounds += 1;
            if work > MINIMIZE_BUDGET {
                return Err(self);
            }
            group_map.clear();
            groups.clear();
            chain.clear();
            arena.clear();
            group_of.clear();
            for &s in &dirty {
                buf.clear();
                for t in &self.states[s as usize].trans {
                    let t = Trans { to: class[t.to as usize], ..*t };
                    match buf.last_mut() {
                        Some(l) if l.to == t.to && l.hi + 1 == t.lo => l.hi = t.hi,
                        _ => buf.push(t),
                    }
                }
                let c = class[s as usize];
                let key = (c, buf.as_slice());
                let h = hasher.hash_one(key);
                let mut g = group_map.get(&h).copied().unwrap_or(DEAD);
                while g != DEAD {
                    let (gc, lo, hi, _) = groups[g as usize];
                    if (gc, &arena[lo..hi]) == key {
                        break;
                    }
                    g = chain[g as usize];
                }
                if g == DEAD {
                    g = groups.len() as u32;
                    groups.push((c, arena.len(), arena.len() + buf.len(), DEAD));
                    arena.extend_from_slice(&buf);
                    chain.push(group_map.insert(h, g).unwrap_or(DEAD));
                }
                group_of.push(g);
                signed_in[c as usize] += 1;
            }
            // The group with the class's recorded signature keeps the class (its unsigned states
            // have that signature); when every state was signed and none has it, the first group.
            for g in &mut groups {
                let c = g.0 as usize;
                if class_sig[c].is_some_and(|(lo, hi)| class_arena[lo..hi] == arena[g.1..g.2]) {
                    g.3 = g.0;
                    kept[c] = true;
                }
            }
            let before = num_classes;
            for g in &mut groups {
                let c = g.0 as usize;
                if g.3 != DEAD {
                    continue;
                }
                if !kept[c] && signed_in[c] == size[c] {
                    kept[c] = true;
                    g.3 = g.0;
                } else {
                    g.3 = num_classes as u32;
                    num_classes += 1;
                    size.push(0);
                    signed_in.push(0);
                    kept.push(true);
                    class_sig.push(None);
                }
                let at = class_arena.len();
                class_arena.extend_from_slice(&arena[g.1..g.2]);
                class_sig[g.3 as usize] = Some((at, class_arena.len()));
            }
            moved.clear();
            for (&s, &g) in dirty.iter().zip(&group_of) {
                let (old, _, _, new) = groups[g as usize];
                signed_in[old as usize] = 0;
                kept[old as usize] = false;
                if new != old {
                    size[old as usize] -= 1;
                    size[new as usize] += 1;
                    class[s as usize] = new;
                    moved.push(s);
                }
            }
            for k in &mut kept[before..] {
                *k = false;
            }
            if num_classes == before {
                break;
            }
            // Next round signs the predecessors of the states that changed class.
            dirty.clear();
            for &s in &moved {
                for &p in &preds[pred_off[s as usize] as usize..pred_off[s as usize + 1] as usize] {
                    if !marked[p as usize] {
                        marked[p as usize] = true;
                        dirty.push(p);
                    }
                }
            }
            for &p in &dirty {
                marked[p as usize] = false;
            }
        }
        let states = class_representatives(&class, num_classes)
            .iter()
            .map(|&s| {
                let st = &self.states[s as usize];
                DState {
                    accept: st.accept,
                    trans: merge(st.trans.iter().map(|t| Trans { to: class[t.to as usize], ..*t })),
                }
            })
            .collect();
        Ok((CharDfa { states, start: class[self.start as usize] }.renumbered(|_| true), rounds))
    }

    /// The language minus the finite set `words`: `self.difference(&CharDfa::literals(words)?)`.
    ///
    /// That product is this automaton below the trie of `words` (a state per trie node reached)
    /// over this automaton's own states (once off the trie), so when this automaton is minimal it
    /// is minimized bottom-up over the trie: a node's state is the first state with its
    /// acceptance and transitions (to classes), this automaton's states first. The result is then
    /// the general path's whenever that path's Moore refinement stays within its budget, which
    /// holds when (rounds bound) x (transitions bound) does: otherwise, or when this automaton is
    /// not minimal, the general path runs. PERF: the general product and its minimization were
    /// ~12% of the converter's time on key-heavy schemas (additional keys = a key partition minus
    /// the listed keys).
    pub fn minus_words(&self, words: &[&str]) -> Result<CharDfa> {
        match self.minus_words_by_trie(words) {
            Some(d) => Ok(d),
            None => self.difference(&CharDfa::literals(words.iter().copied())?),
        }
    }

    /// [`CharDfa::minus_words`] over the trie; `None` when the general path must run.
    fn minus_words_by_trie(&self, words: &[&str]) -> Option<CharDfa> {
        if self.is_empty() {
            return Some(CharDfa::empty());
        }
        let np = self.states.len();
        // The trie: per node, whether a word ends there and its children (codepoint, node) by
        // codepoint; a child's index is above its parent's.
        let (mut ends, mut kids) = (vec![false], vec![Vec::<(u32, u32)>::new()]);
        let mut depth = 0usize;
        for w in words {
            let mut t = 0usize;
            for c in w.chars().map(|c| c as u32) {
                let i = kids[t].partition_point(|k| k.0 < c);
                t = if kids[t].get(i).is_some_and(|k| k.0 == c) {
                    kids[t][i].1 as usize
                } else {
                    kids[t].insert(i, (c, ends.len() as u32));
                    ends.push(false);
                    kids.push(Vec::new());
                    ends.len() - 1
                };
            }
            ends[t] = true;
            depth = depth.max(w.chars().count());
        }
        if ends.len() > MAX_DFA_STATES || np + ends.len() >= MAX_DFA_STATES * 4 {
            return None;
        }
        let p_rounds = match self.clone().moore() {
            Ok((m, r)) if m == *self => r,
            _ => return None,
        };
        // This automaton's state at each trie node (DEAD: not reached).
        let mut at = vec![DEAD; ends.len()];
        at[0] = self.start;
        for t in 0..ends.len() {
            if at[t] != DEAD {
                for &(c, k) in &kids[t] {
                    at[k as usize] = self.step(at[t], c).unwrap_or(DEAD);
                }
            }
        }
        // Classes: this automaton's states are their own; a trie node's is found by signature.
        let mut sigs: FastMap<(bool, Vec<Trans>), u32> = FastMap::default();
        for (p, st) in self.states.iter().enumerate() {
            sigs.insert((st.accept, st.trans.clone()), p as u32);
        }
        let mut states = self.states.clone();
        let mut class = vec![DEAD; ends.len()];
        let mut total_trans: usize = self.states.iter().map(|s| s.trans.len() + 1).sum();
        let mut sig: Vec<Trans> = Vec::new();
        for t in (0..ends.len()).rev() {
            let p = at[t];
            if p == DEAD {
                continue;
            }
            sig.clear();
            let push = |sig: &mut Vec<Trans>, lo: u32, hi: u32, to: u32| {
                if to == DEAD {
                    return;
                }
                match sig.last_mut() {
                    Some(l) if l.to == to && l.hi + 1 == lo => l.hi = hi,
                    _ => sig.push(Trans { lo, hi, to }),
                }
            };
            let mut pieces = 0usize;
            let mut ki = 0;
            for r in &self.states[p as usize].trans {
                let mut lo = r.lo;
                while ki < kids[t].len() && kids[t][ki].0 < r.lo {
                    ki += 1;
                }
                while ki < kids[t].len() && kids[t][ki].0 <= r.hi {
                    let (c, k) = kids[t][ki];
                    if lo < c {
                        push(&mut sig, lo, c - 1, r.to);
                        pieces += 1;
                    }
                    push(&mut sig, c, c, class[k as usize]);
                    pieces += 1;
                    lo = c + 1;
                    ki += 1;
                }
                if lo <= r.hi {
                    push(&mut sig, lo, r.hi, r.to);
                    pieces += 1;
                }
            }
            total_trans += pieces + 1;
            let accept = self.states[p as usize].accept && !ends[t];
            if !accept && sig.is_empty() {
                continue;
            }
            let key = (accept, sig.clone());
            class[t] = match sigs.get(&key) {
                Some(&c) => c,
                None => {
                    let c = states.len() as u32;
                    states.push(DState { accept, trans: key.1.clone() });
                    sigs.insert(key, c);
                    c
                }
            };
        }
        if class[0] == DEAD {
            return Some(CharDfa::empty());
        }
        let d = CharDfa { states, start: class[0] }.renumbered(|_| true);
        // The general path's refinement takes at most `depth + 1 + p_rounds` rounds (states
        // off the trie separate as in this automaton, within `p_rounds - 1` rounds; any other
        // pair reaches such states within `depth + 1` characters) and at most as many rounds
        // as classes; its trimmed product has at most `total_trans` transitions (plus one per
        // state).
        let rounds = (depth + 2 + p_rounds).min(d.states.len());
        (d.states.len() <= MAX_DFA_STATES && rounds.saturating_mul(total_trans) <= MINIMIZE_BUDGET).then_some(d)
    }
}

/// Merges adjacent transitions (sorted by `lo`) that go to the same state.
fn merge(trans: impl Iterator<Item = Trans>) -> Vec<Trans> {
    // PERF: sized once (growing from empty was ~6% of the converter's time).
    let mut out: Vec<Trans> = Vec::with_capacity(trans.size_hint().1.unwrap_or(0));
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
    let (mut bounds, mut trans) = (Vec::<u32>::new(), Vec::<Trans>::new());
    while let Some(i) = queue.pop_front() {
        let (p, q) = pairs[i];
        let ta = if p == DEAD { &none } else { &a.states[p as usize].trans };
        let tb = if q == DEAD { &none } else { &b.states[q as usize].trans };
        let acc_a = p != DEAD && a.states[p as usize].accept;
        let acc_b = q != DEAD && b.states[q as usize].accept;
        bounds.clear();
        bounds.extend(ta.iter().chain(tb.iter()).flat_map(|t| [t.lo, t.hi + 1]));
        bounds.sort_unstable();
        bounds.dedup();
        let (mut ia, mut ib) = (0, 0);
        trans.clear();
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
        states.push(DState { accept: accept(acc_a, acc_b), trans: merge(trans.iter().copied()) });
    }
    let dfa = CharDfa::from_states(states, 0);
    if dfa.states.len() > MAX_DFA_STATES {
        return Err(Error::limit("automaton states", MAX_DFA_STATES));
    }
    Ok(dfa)
}

/// The first state of each class (`class[s]` below `num_classes` for every state `s`).
fn class_representatives(class: &[u32], num_classes: usize) -> Vec<u32> {
    let mut rep = vec![DEAD; num_classes];
    for (s, &c) in class.iter().enumerate() {
        if rep[c as usize] == DEAD {
            rep[c as usize] = s as u32;
        }
    }
    rep
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::regex::{Anchoring, Regex, RegexFlags};

    /// `accepts_every_string` answers as the inclusion test does.
    #[test]
    fn accepts_every_string_is_inclusion_of_all_strings() {
        let cases = [
            ("([A-Z0-9]+)?", Anchoring::Search, true),
            ("x*", Anchoring::Search, true),
            ("[A-Z]+", Anchoring::Search, false),
            ("^.*$", Anchoring::Search, false),
            ("[\\s\\S]*", Anchoring::FullMatch, true),
            ("[^\\uFFFF]*", Anchoring::FullMatch, false),
            // ECMA-262 `.` refuses \r, U+2028 and U+2029 as well.
            ("(.|\\n)*", Anchoring::FullMatch, false),
            ("(.|\\n|\\r|\\u2028|\\u2029)*", Anchoring::FullMatch, true),
            ("[\\s\\S][\\s\\S]*|", Anchoring::FullMatch, true),
            ("[\\s\\S][\\s\\S]*", Anchoring::FullMatch, false),
        ];
        for (p, anchoring, want) in cases {
            let d = CharDfa::from_regex(&Regex::parse(p, RegexFlags::default()).unwrap(), anchoring).unwrap();
            assert_eq!(d.accepts_every_string(), want, "{p}");
            assert_eq!(CharDfa::any_string().is_subset_of(&d).unwrap(), want, "{p}");
        }
        assert!(CharDfa::any_string().accepts_every_string());
        assert!(!CharDfa::empty().accepts_every_string());
        assert!(!CharDfa::length_between(0, Some(3)).unwrap().accepts_every_string());
        assert!(CharDfa::length_between(0, None).unwrap().accepts_every_string());
    }

    /// Moore's algorithm as first written: every state signed again each round.
    fn moore_reference(d: CharDfa) -> CharDfa {
        let n = d.states.len();
        let mut class: Vec<u32> = d.states.iter().map(|s| u32::from(s.accept)).collect();
        let mut num_classes = class.iter().collect::<std::collections::HashSet<_>>().len();
        let total_trans: usize = d.states.iter().map(|s| s.trans.len() + 1).sum();
        let mut work = 0;
        loop {
            work += total_trans;
            if work > MINIMIZE_BUDGET {
                return d;
            }
            let mut ids: HashMap<(u32, Vec<Trans>), u32> = HashMap::new();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let sig = merge(d.states[s].trans.iter().map(|t| Trans { to: class[t.to as usize], ..*t }));
                    let k = ids.len() as u32;
                    *ids.entry((class[s], sig)).or_insert(k)
                })
                .collect();
            class = next;
            if ids.len() == num_classes {
                break;
            }
            num_classes = ids.len();
        }
        let states = class_representatives(&class, num_classes)
            .iter()
            .map(|&s| DState {
                accept: d.states[s as usize].accept,
                trans: merge(d.states[s as usize].trans.iter().map(|t| Trans { to: class[t.to as usize], ..*t })),
            })
            .collect();
        CharDfa { states, start: class[d.start as usize] }.renumbered(|_| true)
    }
    /// A random automaton of `2 * m` states: two copies of `m` random states whose transitions
    /// go to either copy (so many states are equivalent), on codepoints `a..=h`.
    fn random_dfa(seed: &mut u64, m: usize) -> CharDfa {
        let mut next = |k: usize| {
            *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((*seed >> 33) as usize) % k
        };
        // Per state: accepting, and transitions (lo, hi, target).
        type Shape = (bool, Vec<(u32, u32, usize)>);
        let shape: Vec<Shape> = (0..m)
            .map(|_| {
                let mut trans = Vec::new();
                let mut lo = u32::from('a');
                while lo <= u32::from('h') {
                    let hi = (lo + next(3) as u32).min(u32::from('h'));
                    if next(4) > 0 {
                        trans.push((lo, hi, next(m)));
                    }
                    lo = hi + 1;
                }
                (next(3) == 0, trans)
            })
            .collect();
        let states = (0..2 * m)
            .map(|i| DState {
                accept: shape[i % m].0,
                trans: shape[i % m]
                    .1
                    .iter()
                    .map(|&(lo, hi, to)| Trans { lo, hi, to: (to + m * next(2)) as u32 })
                    .collect(),
            })
            .collect();
        CharDfa { states, start: 0 }
    }

    #[test]
    fn minus_words_equals_the_general_difference() {
        let mut seed = 11u64;
        let mut next = |k: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % k
        };
        let mut by_trie = 0;
        for round in 0..400 {
            let mut dseed = next(1 << 30);
            let p = random_dfa(&mut dseed, 1 + round % 17).trimmed().minimized();
            // Words over `a..=i` (`i` is outside the automata's alphabet), some repeated or empty.
            let words: Vec<String> =
                (0..round % 13).map(|_| (0..next(7)).map(|_| char::from(b'a' + next(9) as u8)).collect()).collect();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let general = p.difference(&CharDfa::literals(words.iter().copied()).unwrap()).unwrap();
            by_trie += usize::from(p.minus_words_by_trie(&words).is_some());
            assert_eq!(p.minus_words(&words).unwrap(), general, "automaton {p:?} minus {words:?}");
        }
        assert!(by_trie > 350, "the trie path ran {by_trie} times of 400");
        // Keys with a shared stem under a pattern-like part (the converter's additional keys).
        let part = CharDfa::any_string().difference(&CharDfa::literals(["x_a", "x_b"]).unwrap()).unwrap();
        let keys = ["x_", "x_c", "x_ca", "y", ""];
        assert_eq!(part.minus_words(&keys).unwrap(), part.difference(&CharDfa::literals(keys).unwrap()).unwrap());
        // An automaton that is not minimal takes the general path.
        let mut dseed = 3;
        let d = (0..50).map(|_| random_dfa(&mut dseed, 6).trimmed()).find(|d| d.clone().minimized() != *d).unwrap();
        assert!(d.minus_words_by_trie(&["ab"]).is_none());
        assert_eq!(d.minus_words(&["ab"]).unwrap(), d.difference(&CharDfa::literal("ab")).unwrap());
    }

    #[test]
    fn minimization_matches_moore_rounds() {
        let mut seed = 7;
        for round in 0..400 {
            let d = random_dfa(&mut seed, 1 + round % 23).trimmed();
            assert_eq!(d.clone().minimized(), moore_reference(d.clone()), "automaton {d:?}");
        }
        // Length chains take one round per length: within the budget, and past it (kept as is).
        for max in [3, 40, 300] {
            let d = CharDfa::length_between(0, Some(max)).unwrap().intersect(&CharDfa::any_string()).unwrap();
            let wide = d
                .intersect(&CharDfa::star_of(&CharSet::from_ranges((0..400).map(|i| (0x100 + 4 * i, 0x101 + 4 * i)))))
                .unwrap();
            for d in [d, wide] {
                assert_eq!(d.clone().minimized(), moore_reference(d.clone()));
            }
        }
    }
}
