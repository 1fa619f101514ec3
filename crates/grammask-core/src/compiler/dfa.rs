//! One rule's DFA between subset construction and assembly.
//!
//! Pipeline place: produced by `determinize.rs`, merged by `minimize.rs`, and concatenated with
//! the other rules' DFAs into the global [`Automata`](super::Automata) by `build.rs`. States are
//! local (`u32`, start 0); edges are compressed rows.
use crate::grammar::RuleId;

/// One rule's DFA before the rules are concatenated. The edges of state `s` are the ranges
/// ending at `byte_end[s]` and `rule_end[s]` (compressed rows, states in order).
#[derive(Clone, Debug, Default)]
pub(super) struct Dfa {
    pub(super) finals: Vec<bool>,
    pub(super) byte_end: Vec<u32>,
    pub(super) bytes: Vec<ByteEdgeLocal>,
    pub(super) rule_end: Vec<u32>,
    pub(super) rules: Vec<(RuleId, u32)>,
}

impl Dfa {
    /// An empty DFA with room for `states` states, `bytes` byte edges and `rules` rule edges.
    /// PERF: subset construction builds one per rule (~70 K rules in MaskBench's largest
    /// schemas); grown from empty, their vectors reallocated ~400 K times per build of o3626
    /// (callgrind: determinize 523 -> 466 M instructions per build with room reserved).
    pub(super) fn with_capacity(states: usize, bytes: usize, rules: usize) -> Dfa {
        Dfa {
            finals: Vec::with_capacity(states),
            byte_end: Vec::with_capacity(states),
            bytes: Vec::with_capacity(bytes),
            rule_end: Vec::with_capacity(states),
            rules: Vec::with_capacity(rules),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.finals.len()
    }

    pub(super) fn bytes_of(&self, s: usize) -> &[ByteEdgeLocal] {
        let start = if s == 0 { 0 } else { self.byte_end[s - 1] as usize };
        &self.bytes[start..self.byte_end[s] as usize]
    }

    pub(super) fn rules_of(&self, s: usize) -> &[(RuleId, u32)] {
        let start = if s == 0 { 0 } else { self.rule_end[s - 1] as usize };
        &self.rules[start..self.rule_end[s] as usize]
    }

    /// Appends a byte edge to the state being built, merging it into the previous edge when
    /// adjacent with the same target; `first` is where the state's edges begin.
    pub(super) fn push_byte(&mut self, first: usize, e: ByteEdgeLocal) {
        let mine = self.bytes.len() > first;
        match self.bytes.last_mut() {
            Some(last) if mine && last.target == e.target && u16::from(last.hi) + 1 == u16::from(e.lo) => {
                last.hi = e.hi;
            }
            _ => self.bytes.push(e),
        }
    }

    /// Closes the state being built: its edges are those pushed since the previous one.
    pub(super) fn end_state(&mut self, is_final: bool) {
        self.finals.push(is_final);
        self.byte_end.push(self.bytes.len() as u32);
        self.rule_end.push(self.rules.len() as u32);
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct ByteEdgeLocal {
    pub(super) lo: u8,
    pub(super) hi: u8,
    pub(super) target: u32,
}
