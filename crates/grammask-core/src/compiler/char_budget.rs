//! The `max_chars` rule option on a recursive rule (see [`crate::rule_options`]).
//!
//! Pipeline place: built in [`Automata::build`](super::Automata::build); read by
//! [`crate::earley`]. A recursive `max_chars` rule keeps its rule edges (no character counter in
//! its automaton, which could not count through them); instead each Earley item carries the
//! *occurrence* of the outermost such rule around it, a number naming `(rule, origin row)`
//! ([`CharBudgets::occurrence`]). Once an occurrence has read `max_chars` characters (UTF-8 lead
//! bytes) and can end, it ends: its items (and those of everything nested in it) read no more
//! bytes ("relax to the earliest valid end", as XGrammar). Occurrences nested in another one
//! are not bounded on their own, as in XGrammar 0.2.8.
//!
//! Invariant: occurrence numbers are `1 + origin * len + k` (`k` the rule's index in `rules`);
//! `0` means "outside every bounded occurrence".
use crate::grammar::RuleId;

/// The recursive `max_chars` rules of a grammar.
#[derive(Clone, Debug, Default)]
pub struct CharBudgets {
    /// `(rule, max_chars)`, in rule order.
    rules: Vec<(RuleId, u32)>,
    /// Per rule: its index in `rules` (`u32::MAX`: none).
    index: Vec<u32>,
}

impl CharBudgets {
    pub(super) fn new(num_rules: usize, rules: Vec<(RuleId, u32)>) -> CharBudgets {
        let mut index = vec![u32::MAX; num_rules];
        for (k, (r, _)) in rules.iter().enumerate() {
            index[r.index()] = k as u32;
        }
        CharBudgets { rules, index }
    }

    /// Number of recursive `max_chars` rules.
    #[inline]
    pub fn len(&self) -> u32 {
        self.rules.len() as u32
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The occurrence number of rule `r` started at row `origin`, if `r` is bounded (`None`
    /// also when the number would not fit in 32 bits).
    #[inline]
    pub fn start(&self, r: RuleId, origin: u32) -> Option<u32> {
        let k = *self.index.get(r.index())?;
        if k == u32::MAX {
            return None;
        }
        origin.checked_mul(self.len())?.checked_add(k + 1)
    }

    /// `(rule, origin row, max_chars)` of occurrence number `occ` (non-zero).
    #[inline]
    pub fn occurrence(&self, occ: u32) -> (RuleId, u32, u32) {
        let n = self.len();
        let (r, max) = self.rules[((occ - 1) % n) as usize];
        (r, (occ - 1) / n, max)
    }

    /// The origin row of occurrence number `occ` (non-zero) when rules are `len` many.
    #[inline]
    pub fn origin_of(occ: u32, len: u32) -> u32 {
        (occ - 1) / len
    }
}
