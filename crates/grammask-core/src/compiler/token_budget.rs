//! The `max_tokens` rule option on a rule's DFA (see [`crate::rule_options`]).
//!
//! Pipeline place: in [`Automata::build`](super::Automata::build), after a budgeted rule's DFA
//! is built like a `max_chars` one (every rule it uses inlined, so it has byte edges only). The
//! rule keeps that DFA (its *open* states) and gets an *exhausted* twin: the same states, each
//! keeping only the byte edges along a shortest path (in bytes) to a final state, and a final
//! state keeping none. At run time an occurrence whose budget is spent has its items moved from
//! open states to their twins ([`crate::matcher`]), so it ends at its earliest valid end.
//!
//! Invariant: exhausted state `i` of a rule is the twin of open state `i`; its edges are a subset
//! of the open state's, with targets renamed to twins, and every path from it reaches a final
//! state in exactly `dist(i)` bytes.
use super::dfa::Dfa;
use super::StateId;
use crate::grammar::RuleId;

/// `dfa` restricted to shortest paths to a final state (see the module doc); state `i` of the
/// result is the twin of state `i` of `dfa`. `dfa` has no rule edges.
pub(super) fn exhausted_dfa(dfa: &Dfa) -> Dfa {
    let dist = dist_to_final(dfa);
    let mut out = Dfa::default();
    for s in 0..dfa.len() {
        let first = out.bytes.len();
        if !dfa.finals[s] && dist[s] != u32::MAX {
            for e in dfa.bytes_of(s) {
                if dist[e.target as usize].checked_add(1) == Some(dist[s]) {
                    out.push_byte(first, *e);
                }
            }
        }
        out.end_state(dfa.finals[s]);
    }
    out
}

/// Bytes from each state to the nearest final state (`u32::MAX`: none), by breadth-first
/// search backwards from the final states.
fn dist_to_final(dfa: &Dfa) -> Vec<u32> {
    let n = dfa.len();
    let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
    for s in 0..n {
        for e in dfa.bytes_of(s) {
            rev[e.target as usize].push(s as u32);
        }
    }
    let mut dist = vec![u32::MAX; n];
    let mut queue: std::collections::VecDeque<u32> = (0..n as u32).filter(|&s| dfa.finals[s as usize]).collect();
    for &s in &queue {
        dist[s as usize] = 0;
    }
    while let Some(s) = queue.pop_front() {
        for &p in &rev[s as usize] {
            if dist[p as usize] == u32::MAX {
                dist[p as usize] = dist[s as usize] + 1;
                queue.push_back(p);
            }
        }
    }
    dist
}

/// Where a budgeted rule's states are: `len` open states from `open`, their twins from
/// `exhausted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleBudget {
    pub max_tokens: u32,
    pub(super) open: u32,
    pub(super) len: u32,
    pub(super) exhausted: u32,
}

/// The rules with a dynamic `max_tokens` budget (`max_tokens=0` needs none: such a rule is
/// built exhausted). Empty when no rule has one.
#[derive(Clone, Debug, Default)]
pub struct TokenBudgets {
    /// Per rule index (empty: no budgeted rule).
    pub(super) of_rule: Vec<Option<RuleBudget>>,
}

impl TokenBudgets {
    pub(super) fn set(&mut self, rule: RuleId, rules: usize, b: RuleBudget) {
        if self.of_rule.is_empty() {
            self.of_rule = vec![None; rules];
        }
        self.of_rule[rule.index()] = Some(b);
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.of_rule.is_empty()
    }

    /// For an open state `s` of a budgeted rule: the budget and the exhausted twin.
    #[inline]
    pub fn open(&self, rule: RuleId, s: StateId) -> Option<(u32, StateId)> {
        let b = (*self.of_rule.get(rule.index())?)?;
        let i = s.0.checked_sub(b.open).filter(|&i| i < b.len)?;
        Some((b.max_tokens, StateId(b.exhausted + i)))
    }

    /// For an exhausted state `s` of a budgeted rule: its open twin.
    #[inline]
    pub fn exhausted(&self, rule: RuleId, s: StateId) -> Option<StateId> {
        let b = (*self.of_rule.get(rule.index())?)?;
        let i = s.0.checked_sub(b.exhausted).filter(|&i| i < b.len)?;
        Some(StateId(b.open + i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::dfa::ByteEdgeLocal;

    /// `"a"+ | "bb"`: 0 -a-> 1 (final, loops on a), 0 -b-> 2 -b-> 3 (final).
    fn sample() -> Dfa {
        let mut d = Dfa::default();
        d.push_byte(0, ByteEdgeLocal { lo: b'a', hi: b'a', target: 1 });
        d.push_byte(0, ByteEdgeLocal { lo: b'b', hi: b'b', target: 2 });
        d.end_state(false);
        let f = d.bytes.len();
        d.push_byte(f, ByteEdgeLocal { lo: b'a', hi: b'a', target: 1 });
        d.end_state(true);
        let f = d.bytes.len();
        d.push_byte(f, ByteEdgeLocal { lo: b'b', hi: b'b', target: 3 });
        d.end_state(false);
        d.end_state(true);
        d
    }

    #[test]
    fn exhausted_states_keep_only_shortest_paths() {
        let e = exhausted_dfa(&sample());
        assert_eq!(e.len(), 4);
        let edges = |s: usize| e.bytes_of(s).iter().map(|x| (x.lo, x.target)).collect::<Vec<_>>();
        assert_eq!(edges(0), vec![(b'a', 1)], "only the one-byte way out");
        assert!(edges(1).is_empty(), "a final state ends");
        assert_eq!(edges(2), vec![(b'b', 3)]);
        assert_eq!(e.finals, vec![false, true, false, true]);
    }
}
