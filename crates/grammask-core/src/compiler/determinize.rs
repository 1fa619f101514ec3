//! Subset construction: a rule's Thompson NFA to a DFA.
//!
//! Pipeline place: takes an [`Nfa`] (`nfa.rs`) and produces a [`Dfa`] (`dfa.rs`) for
//! minimization. A referenced rule is one more input symbol; subsets are keyed by their NFA
//! states that have edges (the important states) and interned in an arena table ([`SeqTable`]).
use super::dfa::{ByteEdgeLocal, Dfa};
use super::nfa::Nfa;
use crate::error::{Error, Result};
use crate::grammar::RuleId;
use crate::limits;

/// Interned sequences of `u32` (NFA state sets) or `u64` (`equal_rules.rs`'s expression keys),
/// stored back to back in one arena, with an open-addressing index keyed by a fast
/// multiplicative hash.
/// PERF: replaces `HashMap<Vec<u32>, u32>` (`SipHash`, one allocation per key) in the hot loop
/// of subset construction.
pub(super) struct SeqTable<T = u32> {
    data: Vec<T>,
    /// `ends[i]`: end of sequence `i` in `data` (it starts at `ends[i - 1]`, or 0).
    pub(super) ends: Vec<u32>,
    pub(super) hashes: Vec<u64>,
    /// Sequence id + 1 per slot, 0 when free; the length is a power of two, at most half full.
    pub(super) slots: Vec<u32>,
}

impl<T> Default for SeqTable<T> {
    fn default() -> SeqTable<T> {
        SeqTable { data: Vec::new(), ends: Vec::new(), hashes: Vec::new(), slots: vec![0; 64] }
    }
}

impl<T: Copy + Eq + Into<u64>> SeqTable<T> {
    /// Empties the table (a big index is dropped rather than cleared; a sparse one clears only
    /// its occupied slots).
    /// PERF: most rules intern a handful of sequences into an index a larger rule grew to 4,096
    /// slots; filling it per rule was most of `determinize`'s `memset` (band schemas).
    pub(super) fn reset(&mut self) {
        if self.slots.len() > 4096 {
            self.slots = vec![0; 64];
        } else if self.hashes.len() * 8 < self.slots.len() {
            self.clear_occupied();
        } else {
            self.slots.fill(0);
        }
        self.data.clear();
        self.ends.clear();
        self.hashes.clear();
    }

    /// Zeroes every occupied slot, probing from each entry's home slot. Nothing is ever removed,
    /// so the slots from an entry's home to its own are occupied; a probe zeroes a whole run of
    /// occupied slots, so a later probe that stops at a slot zeroed before finds its run zeroed.
    fn clear_occupied(&mut self) {
        let mask = self.slots.len() - 1;
        for &h in &self.hashes {
            let mut i = (h as usize) & mask;
            while self.slots[i] != 0 {
                self.slots[i] = 0;
                i = (i + 1) & mask;
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn get(&self, id: u32) -> &[T] {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.data[start..self.ends[i] as usize]
    }

    pub(super) fn hash(seq: &[T]) -> u64 {
        let mut h = seq.len() as u64;
        for &w in seq {
            h = (h.rotate_left(5) ^ w.into()).wrapping_mul(0x517C_C1B7_2722_0A95);
        }
        h ^ (h >> 29)
    }

    /// The id of `seq`, and whether it was inserted now.
    pub(super) fn intern(&mut self, seq: &[T]) -> (u32, bool) {
        let h = Self::hash(seq);
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            match self.slots[i] {
                0 => break,
                v => {
                    let id = v - 1;
                    if self.hashes[id as usize] == h && self.get(id) == seq {
                        return (id, false);
                    }
                }
            }
            i = (i + 1) & mask;
        }
        let id = self.ends.len() as u32;
        self.data.extend_from_slice(seq);
        self.ends.push(self.data.len() as u32);
        self.hashes.push(h);
        self.slots[i] = id + 1;
        if self.ends.len() * 2 > self.slots.len() {
            self.grow();
        }
        (id, true)
    }

    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        self.slots.clear();
        self.slots.resize(size, 0);
        let mask = size - 1;
        for (id, &h) in self.hashes.iter().enumerate() {
            let mut i = (h as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = id as u32 + 1;
        }
    }
}

/// Scratch state of the subset construction.
#[derive(Default)]
struct Closure {
    /// `mark[s] == stamp`: NFA state `s` was visited by the current closure.
    pub(super) mark: Vec<u32>,
    pub(super) stamp: u32,
    pub(super) stack: Vec<u32>,
    /// NFA states with a byte or rule edge, or the end state: the rest only lead elsewhere by
    /// epsilon edges, so two closures with the same important states behave the same.
    important: Vec<bool>,
}

impl Closure {
    /// The important states of the epsilon closure of `seeds`, sorted, into `out`.
    pub(super) fn run(&mut self, nfa: &Nfa, seeds: &[u32], out: &mut Vec<u32>) {
        out.clear();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.mark.fill(0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        self.stack.clear();
        self.stack.extend_from_slice(seeds);
        while let Some(s) = self.stack.pop() {
            if self.mark[s as usize] == stamp {
                continue;
            }
            self.mark[s as usize] = stamp;
            if self.important[s as usize] {
                out.push(s);
            }
            for &t in nfa.eps_of(s) {
                if self.mark[t as usize] != stamp {
                    self.stack.push(t);
                }
            }
        }
        out.sort_unstable();
    }
}

/// Subset construction. DFA states are identified by the important NFA states of their closure
/// (see [`Closure::important`]), numbered in discovery order with the start state 0.
pub(super) fn determinize(nfa: &Nfa, start: u32, end: u32, budget: &mut usize, sc: &mut Scratch) -> Result<Dfa> {
    let n = nfa.len();
    // PERF: the buffers are borrowed field by field, not taken (a taken `SeqTable` left a fresh
    // default, one allocation per rule).
    let Scratch { closure: cl, table, set, targets, closed, triples, bounds, active, by_rule, single, single_set } = sc;
    cl.important.clear();
    cl.important.extend(
        (0..n).map(|s| s == end as usize || !nfa.bytes_of(s as u32).is_empty() || !nfa.rules_of(s as u32).is_empty()),
    );
    // Marks left by earlier rules are older than any new stamp.
    if cl.mark.len() < n {
        cl.mark.resize(n, 0);
    }
    table.reset();
    // Room for as many states and edges as the NFA's important states have (most rules' DFA
    // has about as many).
    let (mut states, mut bytes, mut rules) = (0, 0, 0);
    for s in (0..n as u32).filter(|&s| cl.important[s as usize]) {
        states += 1;
        bytes += nfa.bytes_of(s).len();
        rules += nfa.rules_of(s).len();
    }
    let mut dfa = Dfa::with_capacity(states, bytes, rules);
    // single[t]: the DFA state of the closure of NFA state t alone, once known.
    // PERF: most edges lead to one NFA state; this skips their closure and interning.
    // PERF: only the entries the last rule set are reset (`single_set`), not all `n` per rule.
    for &t in single_set.iter() {
        single[t as usize] = u32::MAX;
    }
    single_set.clear();
    if single.len() < n {
        single.resize(n, u32::MAX);
    }
    let mut step = |targets: &[u32], table: &mut SeqTable, closed: &mut Vec<u32>, budget: &mut usize| -> Result<u32> {
        if let [t] = *targets {
            if single[t as usize] != u32::MAX {
                return Ok(single[t as usize]);
            }
        }
        cl.run(nfa, targets, closed);
        let id = intern_set(table, closed, budget)?;
        if let [t] = *targets {
            single[t as usize] = id;
            single_set.push(t);
        }
        Ok(id)
    };
    step(&[start], table, closed, budget)?;
    let mut next = 0;
    while next < table.len() {
        set.clear();
        set.extend_from_slice(table.get(next as u32));
        next += 1;
        let first = dfa.bytes.len();
        // Byte edges: sweep the interval bounds, keeping the NFA edges that cover the current
        // interval in `active`; each interval's targets form one DFA state.
        triples.clear();
        for &s in set.iter() {
            triples.extend_from_slice(nfa.bytes_of(s));
        }
        // PERF: one NFA state whose byte edges are disjoint and in order (a literal, a class,
        // most of a JSON string's body): each edge is one interval with one target.
        if let [s] = set[..] {
            if disjoint_in_order(triples) {
                let edges = nfa.bytes_of(s);
                for &(lo, hi, t) in edges {
                    let id = step(&[t], table, closed, budget)?;
                    dfa.push_byte(first, ByteEdgeLocal { lo, hi, target: id });
                }
                triples.clear();
            }
        }
        if !triples.is_empty() {
            triples.sort_unstable_by_key(|t| t.0);
            bounds.clear();
            for &(lo, hi, _) in triples.iter() {
                bounds.push(u16::from(lo));
                bounds.push(u16::from(hi) + 1);
            }
            bounds.sort_unstable();
            bounds.dedup();
            active.clear();
            let mut i = 0;
            for w in bounds.windows(2) {
                let (lo, hi) = (w[0], w[1] - 1);
                active.retain(|&(h, _)| h >= lo);
                while i < triples.len() && u16::from(triples[i].0) <= lo {
                    active.push((u16::from(triples[i].1), triples[i].2));
                    i += 1;
                }
                if active.is_empty() {
                    continue;
                }
                targets.clear();
                targets.extend(active.iter().map(|&(_, t)| t));
                let id = step(targets, table, closed, budget)?;
                dfa.push_byte(first, ByteEdgeLocal { lo: lo as u8, hi: hi as u8, target: id });
            }
        }
        // Rule edges: one per referenced rule. Their targets are discovered in the rules'
        // first-use order (`Nfa::rule_ranks_of`), so the DFA's numbering does not depend on the
        // rules' ids (the memo's soundness, `memo.rs`); the edges are stored sorted by rule.
        by_rule.clear();
        for &s in set.iter() {
            by_rule.extend(nfa.rules_of(s).iter().zip(nfa.rule_ranks_of(s)).map(|(&(r, t), &k)| (k, r, t)));
        }
        by_rule.sort_unstable();
        let first_rule = dfa.rules.len();
        let mut i = 0;
        while i < by_rule.len() {
            let (k, r) = (by_rule[i].0, by_rule[i].1);
            targets.clear();
            while i < by_rule.len() && by_rule[i].0 == k {
                targets.push(by_rule[i].2);
                i += 1;
            }
            let id = step(targets, table, closed, budget)?;
            dfa.rules.push((r, id));
        }
        dfa.rules[first_rule..].sort_unstable();
        dfa.end_state(set.binary_search(&end).is_ok());
    }
    Ok(dfa)
}

/// Whether byte ranges are disjoint and sorted by their low end.
fn disjoint_in_order(edges: &[(u8, u8, u32)]) -> bool {
    edges.windows(2).all(|w| w[0].1 < w[1].0)
}

/// Buffers of [`determinize`], kept from one rule to the next (none of their contents is
/// reused, only the allocations).
#[derive(Default)]
pub(super) struct Scratch {
    closure: Closure,
    pub(super) table: SeqTable,
    pub(super) set: Vec<u32>,
    pub(super) targets: Vec<u32>,
    closed: Vec<u32>,
    triples: Vec<(u8, u8, u32)>,
    pub(super) bounds: Vec<u16>,
    active: Vec<(u16, u32)>,
    /// (first-use rank, rule, target) of the rule edges of the set being expanded.
    by_rule: Vec<(u32, RuleId, u32)>,
    /// `u32::MAX` except at the entries in `single_set` (set by the last rule).
    pub(super) single: Vec<u32>,
    single_set: Vec<u32>,
}

/// The DFA state of the NFA state set `set`, counting a new one against `budget`.
fn intern_set(table: &mut SeqTable, set: &[u32], budget: &mut usize) -> Result<u32> {
    let (id, new) = table.intern(set);
    if new {
        if *budget == 0 {
            return Err(Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES));
        }
        *budget -= 1;
    }
    Ok(id)
}
