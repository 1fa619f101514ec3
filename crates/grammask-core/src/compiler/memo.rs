//! Rules whose NFAs are equal up to the rules they reference share one subset construction and
//! minimization.
//!
//! Pipeline place: in `build.rs`, between a rule's NFA (`nfa.rs`) and its DFA
//! (`determinize.rs`, `minimize.rs`). A JSON Schema's object rules repeat few shapes (the rule of
//! each subset of the properties read so far: `"" | ws "," ws (a next_a | b next_b)`), differing
//! only in the rules they name; each shape is determinized and minimized once per worker.
//!
//! Soundness: the DFA is a function of the NFA's edge lists, start and end. Subset construction
//! discovers the targets of rule edges in the rules' first-use order (`nfa::RankTable`,
//! a function of the edge lists' structure, not of the rule ids) and stores each state's rule
//! edges sorted by rule; minimization compares rule ids only by equality (signatures) and, for
//! DFAs of at most [`MEMO_MAX_DFA_STATES`] states, finds the coarsest partition, which no naming
//! changes, numbering its classes by their first state. So renaming the referenced rules by any
//! one-to-one map renames the DFA's rule edges by the same map (each state's edges sorted again)
//! and changes nothing else. The key therefore writes each referenced rule as its first-use rank:
//! an object's key-set rules `"" | sep (e_1 R_1 | e_2 R_2 | ...)` share one key whatever order
//! the ids of their entries `e_i` and successors `R_i` come in.
use super::determinize::SeqTable;
use super::dfa::Dfa;
use super::nfa::{Nfa, RankTable};
use crate::fasthash::FastMap;
use crate::grammar::RuleId;
use std::sync::{Arc, Mutex};

/// NFAs with more states than this are not memoized: large rule bodies rarely repeat, and their
/// keys would only cost memory.
const MEMO_MAX_NFA_STATES: usize = 2048;

/// Subset constructions of more states than this are not memoized: above it `minimize` may stop
/// short of the coarsest partition (`REFINE_MAX_STATES`), and what it leaves unmerged could
/// depend on the order of the rule edges, which a renaming changes.
pub(super) const MEMO_MAX_DFA_STATES: usize = super::minimize::REFINE_MAX_STATES;

/// Rule DFAs built by one worker, by their NFA's key.
#[derive(Default)]
pub(super) struct DfaMemo {
    keys: SeqTable,
    /// Per key: the worker's output index of the rule built from it (`usize::MAX`: too many
    /// states to memoize), the states subset construction made (the budget a repeat is charged)
    /// and where its referenced rules lie in `ids`.
    built: Vec<(usize, usize, u32, u32)>,
    /// Referenced rules of each key's rule in first-use order, back to back.
    ids: Vec<RuleId>,
    key: Vec<u32>,
    /// The last NFA's referenced rules in first-use order (rank `k` is `mine[k]`).
    mine: Vec<RuleId>,
    /// The rank of each of the last NFA's referenced rules.
    ranks: RankTable,
    /// Scratch of [`Self::renamed`].
    theirs: RankTable,
}

/// The result of [`DfaMemo::find`].
pub(super) enum Found {
    /// Not memoized (too large).
    Skip,
    /// Keyed (see [`DfaMemo::key`]) but not kept by the worker: the NFA references no rule.
    Unkeyed,
    /// New key (its id): build the DFA, then [`DfaMemo::store`] it.
    New(u32),
    /// Built before: the key's id, the worker's output index of the rule built from it and the
    /// states its subset construction made.
    Built(u32, usize, usize),
}

impl DfaMemo {
    /// Looks up the frozen or unfrozen `nfa` (its edge lists) with `start` and `end`, leaving
    /// its key in [`Self::key`] (unless `Skip`). `shared`: the key will be asked of a
    /// [`RuleMemo`]; without it an NFA that references no rule is skipped unkeyed.
    pub(super) fn find(&mut self, nfa: &Nfa, start: u32, end: u32, shared: bool) -> Found {
        if (!shared && nfa.rule_edges.is_empty()) || !self.key_of(nfa, start, end) {
            return Found::Skip;
        }
        // A rule that references none repeats another of this grammar only where their bodies
        // are equal, and equal rules already share one automaton (`equal_rules.rs`): only the
        // shared memo may know it.
        if self.mine.is_empty() {
            return Found::Unkeyed;
        }
        let (id, new) = self.keys.intern(&self.key);
        if new {
            return Found::New(id);
        }
        let (at, states, _, _) = self.built[id as usize];
        if at == usize::MAX {
            return Found::Skip;
        }
        Found::Built(id, at, states)
    }

    /// Leaves the key of `nfa` with `start` and `end` in [`Self::key`] (its referenced rules in
    /// `mine`), interning nothing; `false` (no key) for an NFA too large to memoize.
    pub(super) fn key_of(&mut self, nfa: &Nfa, start: u32, end: u32) -> bool {
        if nfa.len() > MEMO_MAX_NFA_STATES {
            return false;
        }
        self.mine.clear();
        self.ranks.start();
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
        // First use is the order of this list: each rule new to it takes the next rank.
        for &(s, (r, t)) in &nfa.rule_edges {
            if self.ranks.rank_new(r, self.mine.len() as u32) {
                self.mine.push(r);
            }
            key.extend_from_slice(&[s, self.ranks.rank(r), t]);
        }
        true
    }

    /// The key of the last NFA found (its edges, referenced rules as first-use ranks).
    pub(super) fn key(&self) -> &[u32] {
        &self.key
    }

    /// `dfa` (built from the last NFA found) with its rule edges written as ranks among the
    /// rules that NFA references: the form [`RuleMemo`] stores.
    pub(super) fn ranked(&self, dfa: &Dfa) -> Dfa {
        let mut out = dfa.clone();
        for e in &mut out.rules {
            e.0 = RuleId(self.ranks.rank(e.0));
        }
        sort_rule_edges(&mut out);
        out
    }

    /// A [`RuleMemo`] entry's DFA with its rule edges renamed, rank for rank, to the rules the
    /// last NFA found references.
    pub(super) fn unranked(&self, dfa: &Dfa) -> Dfa {
        let mut out = dfa.clone();
        for e in &mut out.rules {
            e.0 = self.mine[e.0.index()];
        }
        sort_rule_edges(&mut out);
        out
    }

    /// Records that key `id` (from [`Self::find`], the last call) was built into the worker's
    /// output at `at`, its subset construction making `states` states (past
    /// [`MEMO_MAX_DFA_STATES`], later finds of the key build their own).
    pub(super) fn store(&mut self, id: u32, at: usize, states: usize) {
        debug_assert_eq!(id as usize, self.built.len(), "keys are stored in the order found");
        let at = if states > MEMO_MAX_DFA_STATES { usize::MAX } else { at };
        let first = self.ids.len() as u32;
        self.ids.extend_from_slice(&self.mine);
        self.built.push((at, states, first, self.ids.len() as u32));
    }

    /// The DFA of the last NFA found (`Found::Built` with key `id`) from `dfa`, the one built for
    /// that key: `dfa`'s rule edges renamed, rank for rank, to the rules the last NFA references.
    pub(super) fn renamed(&mut self, id: u32, dfa: &Dfa) -> Dfa {
        let (_, _, first, past) = self.built[id as usize];
        self.theirs.start();
        for (k, &r) in self.ids[first as usize..past as usize].iter().enumerate() {
            self.theirs.rank_new(r, k as u32);
        }
        let mut out = dfa.clone();
        for e in &mut out.rules {
            e.0 = self.mine[self.theirs.rank(e.0) as usize];
        }
        sort_rule_edges(&mut out);
        out
    }
}

/// Sorts each state's rule edges by rule (as subset construction leaves them), after a renaming.
fn sort_rule_edges(dfa: &mut Dfa) {
    let mut start = 0;
    for &end in &dfa.rule_end {
        dfa.rules[start..end as usize].sort_unstable();
        start = end as usize;
    }
}

/// Rule DFAs shared by the compiles of one vocabulary's grammars, by their NFA's key
/// ([`DfaMemo::key`]: referenced rules as ranks), least recently used dropped past a byte budget.
///
/// Pipeline place: consulted by `build.rs` where a rule's NFA is new to its worker's
/// [`DfaMemo`]. JSON Schema grammars repeat the same rules (any JSON value, whitespace, string
/// and number bodies) from schema to schema; each is determinized and minimized once.
///
/// Soundness: as [`DfaMemo`]'s (the DFA is a function of the key); an entry holds the DFA with
/// its rule edges as ranks, renamed to the rules the finding NFA references on a hit.
/// Invariant: `bytes` is the sum of the sizes of the entries present.
#[derive(Debug)]
pub struct RuleMemo {
    inner: Mutex<Shared>,
    limit_bytes: usize,
}

/// A [`RuleMemo`] entry: (DFA with rule edges as ranks, its subset construction's states, its
/// size in bytes, the tick it was last used at).
type Entry = (Arc<Dfa>, usize, usize, u64);

#[derive(Debug, Default)]
struct Shared {
    /// Per key: the DFA (rule edges as ranks), the states its subset construction made, its size
    /// in bytes and the tick it was last used at.
    map: FastMap<Box<[u32]>, Entry>,
    bytes: usize,
    clock: u64,
    /// Lookups that found an entry, and that did not.
    hits: u64,
    misses: u64,
}

/// Bytes a memo entry holds besides its key's words and its DFA's edges and states: the DFA's
/// own allocation (with the `Arc`'s counts) and the map's slot (twice: the table is at most
/// about half full after growing).
const ENTRY_BYTES: usize =
    std::mem::size_of::<Dfa>() + 16 + 2 * std::mem::size_of::<(Box<[u32]>, (Arc<Dfa>, usize, usize, u64))>();

impl RuleMemo {
    /// An empty memo holding at most `limit_bytes` (keys and DFAs).
    pub fn new(limit_bytes: usize) -> RuleMemo {
        RuleMemo { inner: Mutex::new(Shared::default()), limit_bytes }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The DFA stored under `key` (rule edges as ranks) and the states its subset construction
    /// made.
    pub(super) fn get(&self, key: &[u32]) -> Option<(Arc<Dfa>, usize)> {
        let mut g = self.lock();
        g.clock += 1;
        let now = g.clock;
        let Some(e) = g.map.get_mut(key) else {
            g.misses += 1;
            return None;
        };
        e.3 = now;
        let found = (e.0.clone(), e.1);
        g.hits += 1;
        Some(found)
    }

    /// Stores `ranked(dfa)` (rule edges as ranks) under `key`, its subset construction having made
    /// `states` states; past the budget, the least recently used entries are dropped down to
    /// three quarters of it.
    pub(super) fn insert(&self, key: &[u32], dfa: &Dfa, states: usize, ranked: impl FnOnce(&Dfa) -> Dfa) {
        let size = dfa_bytes(dfa) + 4 * key.len() + ENTRY_BYTES;
        if size > self.limit_bytes / 8 || states > MEMO_MAX_DFA_STATES {
            return; // one entry would crowd out many
        }
        let dfa = ranked(dfa);
        let mut g = self.lock();
        g.clock += 1;
        let now = g.clock;
        if g.map.contains_key(key) {
            return; // another compile stored it meanwhile
        }
        g.map.insert(key.into(), (Arc::new(dfa), states, size, now));
        g.bytes += size;
        if g.bytes > self.limit_bytes {
            g.evict_to(self.limit_bytes / 4 * 3);
        }
    }

    /// Bytes held (keys, DFAs and per-entry overhead).
    pub fn memory_size(&self) -> usize {
        self.lock().bytes
    }

    /// Lookups so far that found an entry, and that did not.
    pub fn lookups(&self) -> (u64, u64) {
        let g = self.lock();
        (g.hits, g.misses)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Shared {
    /// Drops the least recently used entries until at most `target` bytes are held.
    fn evict_to(&mut self, target: usize) {
        let mut by_age: Vec<(u64, usize)> = self.map.values().map(|e| (e.3, e.2)).collect();
        by_age.sort_unstable();
        let mut left = self.bytes;
        let mut cut = 0;
        for &(age, size) in &by_age {
            if left <= target {
                break;
            }
            left -= size;
            cut = age + 1;
        }
        self.map.retain(|_, e| e.3 >= cut);
        self.bytes = self.map.values().map(|e| e.2).sum();
    }
}

/// Heap bytes of a DFA.
fn dfa_bytes(d: &Dfa) -> usize {
    d.finals.len() + 4 * (d.byte_end.len() + d.rule_end.len()) + 8 * (d.bytes.len() + d.rules.len())
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
    fn only_nfas_with_rule_edges_are_kept_by_the_worker() {
        let mut memo = DfaMemo::default();
        assert!(matches!(memo.find(&nfa(None), 0, 2, true), Found::Unkeyed));
        // Without a shared memo to ask, such an NFA is not keyed at all.
        assert!(matches!(memo.find(&nfa(None), 0, 2, false), Found::Skip));
        let Found::New(id) = memo.find(&nfa(Some(7)), 0, 2, true) else { panic!("a new key") };
        memo.store(id, 0, 3);
        // Another rule named in the same place: the same key.
        assert!(matches!(memo.find(&nfa(Some(9)), 0, 2, true), Found::Built(0, 0, 3)));
    }

    /// A DFA of `n` states, a chain on `a`.
    fn chain(n: usize) -> Dfa {
        let mut d = Dfa::default();
        for i in 0..n {
            if i + 1 < n {
                d.bytes.push(super::super::dfa::ByteEdgeLocal { lo: b'a', hi: b'a', target: i as u32 + 1 });
            }
            d.end_state(i + 1 == n);
        }
        d
    }

    #[test]
    fn shared_memo_stays_within_its_budget_dropping_the_least_recently_used() {
        let size = dfa_bytes(&chain(10)) + 4 * 3 + ENTRY_BYTES;
        let memo = RuleMemo::new(10 * size);
        for k in 0..100u32 {
            memo.insert(&[k, 1, 2], &chain(10), 10, Dfa::clone);
            assert!(memo.memory_size() <= 10 * size, "{} bytes after {k} inserts", memo.memory_size());
            // Key 0 is used after every insert: never the least recently used.
            assert!(memo.get(&[0, 1, 2]).is_some(), "key 0 dropped after {k} inserts");
        }
        assert!(memo.len() >= 7, "eviction stops at three quarters of the budget: {} left", memo.len());
        assert_eq!(memo.memory_size(), memo.len() * size);
        assert!(memo.get(&[1, 1, 2]).is_none(), "an entry unused since the start is dropped");
        assert!(memo.get(&[99, 1, 2]).is_some(), "the last inserted is kept");
        // An entry of more than an eighth of the budget is not kept.
        memo.insert(&[1000], &chain(40), 40, Dfa::clone);
        assert!(memo.get(&[1000]).is_none());
    }
}
