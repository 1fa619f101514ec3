//! Grammar IR to byte-level automata: the automata toolkit, one algorithm per file.
//!
//! Each rule body becomes a deterministic automaton whose edges are either byte ranges or
//! references to other rules ("regular right-part grammar"). The Earley parser in [`crate::earley`]
//! runs over these automata, so repetition, groups and character classes never create helper rules.
//!
//! Construction: Thompson NFA per rule (character classes become UTF-8 byte-range sequences), then
//! subset construction treating each referenced rule as one more input symbol (subsets are keyed
//! by their NFA states that have edges, interned in an arena table), then minimization by
//! partition refinement. Rules inlined everywhere they are used get no automaton of their own.
//! Afterwards rules that cannot derive any string are cut away, and so are states from which no
//! final state can be reached, so every live item of a parse can be completed (no dead ends,
//! given no lookahead).
//!
//! Invariants of [`Automata`]:
//! - the byte edges of a state are sorted, disjoint ranges; at most one target per byte;
//! - a state's rule edges name each rule at most once;
//! - every state can reach a final state of its rule (live), and every rule edge names a
//!   productive rule.
//!
//! Files, in pipeline order: `inline.rs` (which rules are copied into their callers), `tail.rs`
//! (tail groups), `equal_rules.rs` (equal rules share one automaton), `key_set_dfa.rs` (key-set
//! rules' automata written directly), `nfa.rs`
//! (Thompson construction; `utf8.rs` for character classes), `determinize.rs` (subset
//! construction into a `dfa.rs` DFA), `minimize.rs` (with `scc.rs`, component by component, and
//! `refine.rs`, worklist refinement), `build.rs` (the driver: threads, assembly, pruning),
//! `automata.rs` (the result, [`Automata`]) and `lookahead.rs` (obligation sets at run time).

mod automata;
mod bounded;
mod build;
mod char_budget;
mod determinize;
mod dfa;
mod equal_rules;
mod inline;
mod key_set_dfa;
mod lists;
mod lookahead;
mod memo;
mod minimize;
mod nfa;
mod refine;
mod scc;
mod tail;
#[cfg(test)]
mod tests;
mod token_budget;
mod token_edges;
mod utf8;

pub use automata::{Automata, BoundedKeys, ByteEdge, State, StateId};
pub use build::key_set_writes;
/// Test switches and counters of the key-set rules' direct writer (`key_set_dfa.rs`).
#[cfg(test)]
pub(crate) use build::{BUDGET_USED, DIRECT_WRITES, NO_DIRECT};
pub use char_budget::CharBudgets;
/// Which rules the automaton builder copies into their callers (tests of the converter's hints).
#[cfg(test)]
pub(crate) use inline::inline_plan;
pub use lookahead::LA_NONE;
pub use memo::RuleMemo;
pub use token_budget::{RecBudgets, RuleBudget, TokenBudgets};
pub use token_edges::{TokenRules, TokenSet};
pub use utf8::utf8_sequences;
