//! Lookahead assertions at run time: interned sets of pending obligations.
//!
//! Pipeline place: a rule `r ::= body (= L)` gets an automaton for `L` when the grammar is built
//! (`build.rs`); the Earley parser ([`crate::earley`]) carries, per item, an interned set of
//! lookahead automaton states still to be satisfied, and advances it with [`Automata::la_step`].
use super::{Automata, StateId};
use crate::grammar::RuleId;
use std::collections::HashMap;

/// The empty obligation set.
pub const LA_NONE: u32 = 0;

/// Interned sets of lookahead automaton states (pending obligations), with a transition cache.
/// Invariant: `sets[0]` is the empty set; sets are sorted and deduplicated.
#[derive(Debug)]
pub(super) struct LaTable {
    pub(super) sets: Vec<Box<[StateId]>>,
    pub(super) ids: HashMap<Box<[StateId]>, u32>,
    trans: HashMap<(u32, u8), u32>,
}

impl LaTable {
    pub(super) fn new() -> LaTable {
        let empty: Box<[StateId]> = Box::new([]);
        LaTable { sets: vec![empty.clone()], ids: [(empty, 0)].into_iter().collect(), trans: HashMap::new() }
    }

    pub(super) fn intern(&mut self, mut set: Vec<StateId>) -> u32 {
        set.sort_unstable();
        set.dedup();
        let key: Box<[StateId]> = set.into();
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(key.clone());
        self.ids.insert(key, id);
        id
    }
}

impl Automata {
    /// The obligation set `la` plus rule `r`'s lookahead, if any (`LA_NONE` is the empty set).
    pub fn la_add(&self, la: u32, r: RuleId) -> u32 {
        match self.lookahead_start[r.index()] {
            None => la,
            Some(start) => {
                let mut t = self.la.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut set: Vec<StateId> = t.sets[la as usize].to_vec();
                set.push(start);
                t.intern(set)
            }
        }
    }

    /// The obligations of `la` after one more input byte: `None` if one of them can no longer be
    /// satisfied; obligations that reach a final state are discharged.
    pub fn la_step(&self, la: u32, byte: u8) -> Option<u32> {
        if la == LA_NONE {
            return Some(LA_NONE);
        }
        if self.rec.is_some() && !self.any_lookahead {
            // No lookahead: `la` is a spend point (`crate::earley::Item`). With lookahead too,
            // `la` here is an obligation set (`Chart::step_obligations`).
            return Some(la);
        }
        let mut t = self.la.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&next) = t.trans.get(&(la, byte)) {
            return (next != u32::MAX).then_some(next);
        }
        let mut next: Vec<StateId> = Vec::new();
        let mut dead = false;
        for &q in &t.sets[la as usize] {
            match self.step(q, byte) {
                None => dead = true,
                Some(q2) if self.state(q2).is_final => {}
                Some(q2) => next.push(q2),
            }
        }
        let id = if dead { u32::MAX } else { t.intern(next) };
        t.trans.insert((la, byte), id);
        (id != u32::MAX).then_some(id)
    }
}
