//! Earley recognition over the rule automata of [`crate::compiler::Automata`], one chart row per
//! input byte.
//!
//! An [`Item`] `(state, origin)` says: a rule was started at row `origin` and its automaton is now
//! in `state` after the input since then. Row `r` holds the items after `r` input bytes, closed
//! under prediction (entering referenced rules) and completion (a final state advances the items of
//! the origin row that wait on the rule). Nullable rules are advanced at prediction time, so a
//! completion never has to revisit its own row. Left recursion and ambiguity need no special care.
//!
//! Rows form a stack: pushing a byte appends a row, popping removes the newest one. Token trie
//! walks, rollback and speculative checks all use push/pop, never copies.
//!
//! Invariants:
//! - an item appears at most once per row;
//! - `origin <= row index`, and for a predicted item `origin == row index`;
//! - the chart always has at least one row (row 0, the closure of the root rule's start state).

use crate::compiler::{Automata, StateId};
use crate::error::{Error, Result};
use crate::grammar::RuleId;
use crate::limits;
use std::collections::HashSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub state: StateId,
    pub origin: u32,
}

/// A stack of Earley rows.
#[derive(Clone, Debug)]
pub struct Chart {
    items: Vec<Item>,
    /// `row_start[r]` = index in `items` where row `r` begins.
    row_start: Vec<u32>,
    /// Dedup set used only while closing a large row.
    scratch: HashSet<Item>,
}

/// Rows larger than this are deduplicated with a hash set rather than a linear scan.
const LINEAR_DEDUP_LIMIT: usize = 24;

impl Chart {
    /// A chart whose row 0 is the closure of the root rule's start state.
    pub fn new(a: &Automata) -> Chart {
        Chart::with_start(a, &[a.rule_start(a.root())])
    }

    /// A chart whose row 0 is the closure of the given states (each with origin 0).
    pub fn with_start(a: &Automata, states: &[StateId]) -> Chart {
        let mut c = Chart { items: Vec::with_capacity(64), row_start: vec![0], scratch: HashSet::new() };
        for &s in states {
            c.add(Item { state: s, origin: 0 });
        }
        // Row 0 closure cannot exceed the limit meaningfully; ignore the flag here.
        let _ = c.close(a, 0);
        c
    }

    /// A chart for walking tokens from one kernel state: row 0 is empty, row 1 is the closure of
    /// `(state, origin 0)`. Only descendants of the kernel item have origin 0, so an item with
    /// origin 0 in a final state means the kernel's rule has ended.
    pub fn with_kernel(a: &Automata, state: StateId) -> Chart {
        let mut c = Chart { items: Vec::with_capacity(64), row_start: vec![0, 0], scratch: HashSet::new() };
        c.add(Item { state, origin: 0 });
        let _ = c.close(a, 1);
        c
    }

    /// Number of rows (input bytes consumed + 1).
    #[inline]
    pub fn num_rows(&self) -> usize {
        self.row_start.len()
    }

    #[inline]
    pub fn row(&self, r: usize) -> &[Item] {
        let a = self.row_start[r] as usize;
        let b = self.row_start.get(r + 1).map_or(self.items.len(), |&x| x as usize);
        &self.items[a..b]
    }

    #[inline]
    pub fn last_row(&self) -> &[Item] {
        &self.items[*self.row_start.last().unwrap() as usize..]
    }

    #[inline]
    pub fn last_row_index(&self) -> usize {
        self.row_start.len() - 1
    }

    /// Appends the row reached by reading `byte`. Returns `Ok(false)` (and appends nothing) if no
    /// item can read it.
    pub fn push_byte(&mut self, a: &Automata, byte: u8) -> Result<bool> {
        let prev = *self.row_start.last().unwrap() as usize;
        let end = self.items.len();
        let new_row = self.row_start.len() as u32;
        self.row_start.push(end as u32);
        for i in prev..end {
            let it = self.items[i];
            if let Some(t) = a.step(it.state, byte) {
                // Scanned items are distinct unless two items share a target and origin.
                self.add(Item { state: t, origin: it.origin });
            }
        }
        if self.items.len() == end {
            self.row_start.pop();
            return Ok(false);
        }
        if let Err(e) = self.close(a, new_row as usize) {
            self.pop_row();
            return Err(e);
        }
        Ok(true)
    }

    /// Appends the row reached by completing `rule`, started at row `origin`, right now: the items
    /// of row `origin` that wait on `rule` advance. Used to resume a parent context after a
    /// cached sub-walk ended the rule. Returns `Ok(false)` if nothing waits on the rule.
    pub fn push_completion(&mut self, a: &Automata, origin: usize, rule: RuleId) -> Result<bool> {
        let end = self.items.len();
        let new_row = self.row_start.len();
        self.row_start.push(end as u32);
        let (o0, o1) = self.row_bounds(origin);
        for j in o0..o1 {
            let p = self.items[j];
            if let Some(&(_, t)) = a.rule_edges(p.state).iter().find(|(r, _)| *r == rule) {
                self.add(Item { state: t, origin: p.origin });
            }
        }
        if self.items.len() == end {
            self.row_start.pop();
            return Ok(false);
        }
        if let Err(e) = self.close(a, new_row) {
            self.pop_row();
            return Err(e);
        }
        Ok(true)
    }

    /// Removes the newest row. Row 0 is never removed.
    #[inline]
    pub fn pop_row(&mut self) {
        debug_assert!(self.row_start.len() > 1);
        let start = self.row_start.pop().unwrap() as usize;
        self.items.truncate(start);
    }

    /// Removes rows until `n` remain.
    pub fn truncate_rows(&mut self, n: usize) {
        debug_assert!(n >= 1 && n <= self.row_start.len());
        let start = self.row_start[n.max(1)..].first().copied();
        if let Some(s) = start {
            self.items.truncate(s as usize);
            self.row_start.truncate(n.max(1));
        }
    }

    fn row_bounds(&self, r: usize) -> (usize, usize) {
        let a = self.row_start[r] as usize;
        let b = self.row_start.get(r + 1).map_or(self.items.len(), |&x| x as usize);
        (a, b)
    }

    /// True if the root rule, started at row 0, can end at the last row.
    pub fn is_complete(&self, a: &Automata) -> bool {
        let root = a.root();
        self.last_row().iter().any(|it| it.origin == 0 && a.state(it.state).rule == root && a.state(it.state).is_final)
    }

    /// Adds `it` to the newest row unless it is already there.
    #[inline]
    fn add(&mut self, it: Item) {
        let start = *self.row_start.last().unwrap() as usize;
        let len = self.items.len() - start;
        if len < LINEAR_DEDUP_LIMIT {
            if self.items[start..].contains(&it) {
                return;
            }
            self.items.push(it);
            return;
        }
        if len == LINEAR_DEDUP_LIMIT && self.scratch.is_empty() {
            self.scratch.extend(self.items[start..].iter().copied());
        }
        if self.scratch.insert(it) {
            self.items.push(it);
        }
    }

    /// Closes the newest row (index `r`) under prediction and completion.
    fn close(&mut self, a: &Automata, r: usize) -> Result<()> {
        let start = self.row_start[r] as usize;
        let mut j = start;
        while j < self.items.len() {
            let it = self.items[j];
            j += 1;
            let st = a.state(it.state);
            if st.is_final && (it.origin as usize) < r {
                let rule = st.rule;
                let (o0, o1) = self.row_bounds(it.origin as usize);
                for k in o0..o1 {
                    let p = self.items[k];
                    for &(rr, t) in a.rule_edges(p.state) {
                        if rr == rule {
                            self.add(Item { state: t, origin: p.origin });
                        }
                    }
                }
            }
            for &(rr, t) in a.rule_edges(it.state) {
                self.add(Item { state: a.rule_start(rr), origin: r as u32 });
                if a.nullable(rr) {
                    self.add(Item { state: t, origin: it.origin });
                }
            }
            if self.items.len() - start > limits::MAX_ITEMS_PER_ROW {
                self.scratch.clear();
                return Err(Error::limit("Earley items in one row (grammar too ambiguous)", limits::MAX_ITEMS_PER_ROW));
            }
        }
        self.scratch.clear();
        Ok(())
    }
}
