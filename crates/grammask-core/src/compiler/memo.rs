//! Rules whose NFAs are equal up to the rules they reference share one subset construction and
//! minimization.
//!
//! Pipeline place: in `build.rs`, between a rule's NFA (`nfa.rs`) and its DFA
//! (`determinize.rs`, `minimize.rs`). A JSON Schema's object rules repeat few shapes (the rule of
//! each subset of the properties read so far: `"" | ws "," ws (a next_a | b next_b)`), differing
//! only in the rules they name; each shape is determinized and minimized once per worker.
//!
//! Soundness: the DFA is a function of the NFA's edge lists, start and end. Subset construction
//! and minimization compare rule ids only by order (rule edges sorted by rule) and equality
//! (signatures), so renaming the referenced rules by a map that keeps their order renames the
//! DFA's rule edges by the same map and changes nothing else. The key therefore writes each
//! referenced rule as its rank among the rule's distinct referenced rules.
use super::determinize::SeqTable;
use super::dfa::Dfa;
use super::nfa::Nfa;
use crate::grammar::RuleId;

/// NFAs with more states than this are not memoized: large rule bodies rarely repeat, and their
/// keys would only cost memory.
const MEMO_MAX_NFA_STATES: usize = 2048;

/// Rule DFAs built by one worker, by their NFA's key.
#[derive(Default)]
pub(super) struct DfaMemo {
    keys: SeqTable,
    /// Per key: the worker's output index of the rule built from it, the states subset
    /// construction made (the budget a repeat is charged) and where its referenced rules lie in
    /// `ids`.
    built: Vec<(usize, usize, u32, u32)>,
    /// Referenced rules of each key's rule, sorted, back to back.
    ids: Vec<RuleId>,
    key: Vec<u32>,
    mine: Vec<RuleId>,
}

/// The result of [`DfaMemo::find`].
pub(super) enum Found {
    /// Not memoized (too large).
    Skip,
    /// New key (its id): build the DFA, then [`DfaMemo::store`] it.
    New(u32),
    /// Built before: the key's id, the worker's output index of the rule built from it and the
    /// states its subset construction made.
    Built(u32, usize, usize),
}

impl DfaMemo {
    /// Looks up the frozen or unfrozen `nfa` (its edge lists) with `start` and `end`.
    pub(super) fn find(&mut self, nfa: &Nfa, start: u32, end: u32) -> Found {
        // A rule that references none repeats another only where their bodies are equal, and
        // equal rules already share one automaton (`equal_rules.rs`): its key would only cost.
        if nfa.len() > MEMO_MAX_NFA_STATES || nfa.rule_edges.is_empty() {
            return Found::Skip;
        }
        self.mine.clear();
        self.mine.extend(nfa.rule_edges.iter().map(|e| e.1 .0));
        self.mine.sort_unstable();
        self.mine.dedup();
        let rank = |r: RuleId| self.mine.binary_search(&r).unwrap_or(0) as u32;
        let key = &mut self.key;
        key.clear();
        key.extend_from_slice(&[nfa.n, start, end, nfa.eps_edges.len() as u32]);
        for &(a, b) in &nfa.eps_edges {
            key.extend_from_slice(&[a, b]);
        }
        key.push(nfa.byte_edges.len() as u32);
        for &(s, (lo, hi, t)) in &nfa.byte_edges {
            key.extend_from_slice(&[s, u32::from(lo) | u32::from(hi) << 8, t]);
        }
        key.push(nfa.rule_edges.len() as u32);
        for &(s, (r, t)) in &nfa.rule_edges {
            key.extend_from_slice(&[s, rank(r), t]);
        }
        let (id, new) = self.keys.intern(key);
        if new {
            return Found::New(id);
        }
        let (at, states, _, _) = self.built[id as usize];
        Found::Built(id, at, states)
    }

    /// Records that key `id` (from [`Self::find`], the last call) was built into the worker's
    /// output at `at`, its subset construction making `states` states.
    pub(super) fn store(&mut self, id: u32, at: usize, states: usize) {
        debug_assert_eq!(id as usize, self.built.len(), "keys are stored in the order found");
        let first = self.ids.len() as u32;
        self.ids.extend_from_slice(&self.mine);
        self.built.push((at, states, first, self.ids.len() as u32));
    }

    /// The DFA of the last NFA found (`Found::Built` with key `id`) from `dfa`, the one built for
    /// that key: `dfa`'s rule edges renamed, rank for rank, to the rules the last NFA references.
    pub(super) fn renamed(&self, id: u32, dfa: &Dfa) -> Dfa {
        let (_, _, first, past) = self.built[id as usize];
        let theirs = &self.ids[first as usize..past as usize];
        let mut out = dfa.clone();
        for e in &mut out.rules {
            let rank = theirs.binary_search(&e.0).expect("a DFA's rule edges come from its NFA");
            e.0 = self.mine[rank];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a` then a reference to rule `r`, or `a` alone.
    fn nfa(r: Option<u32>) -> Nfa<'static> {
        let mut nfa = Nfa { n: 3, ..Nfa::default() };
        nfa.byte_edges.push((0, (b'a', b'a', 1)));
        nfa.eps_edges.push((1, 2));
        if let Some(r) = r {
            nfa.rule_edges.push((1, (RuleId(r), 2)));
        }
        nfa
    }

    #[test]
    fn only_nfas_with_rule_edges_are_keyed() {
        let mut memo = DfaMemo::default();
        assert!(matches!(memo.find(&nfa(None), 0, 2), Found::Skip));
        let Found::New(id) = memo.find(&nfa(Some(7)), 0, 2) else { panic!("a new key") };
        memo.store(id, 0, 3);
        // Another rule named in the same place: the same key.
        assert!(matches!(memo.find(&nfa(Some(9)), 0, 2), Found::Built(0, 0, 3)));
    }
}
