//! Cover search: whether a kernel state reads a slice, by a product search of its rule automata
//! (a bounded pushdown simulation) with the slice automaton.
//!
//! Pipeline place: called when a kernel is classified ([`super::BodySlice::covers`],
//! [`super::ClassSlice::covers`]); a state that covers a slice takes the slice plus walks of its
//! frontier instead of a full trie walk.
use super::Body;
use crate::compiler::{Automata, StateId};
use crate::fasthash::{FastMap, FastState};
use std::collections::HashMap;

/// Most (automaton state, body state) pairs [`BodySlice::covers`] explores.
const MAX_COVER_PAIRS: usize = 4096;

/// Whether every rule reference of `q` is a tail call: its target state is final and has no
/// edges, so the referenced rule's end is the end of `q`'s rule (a regex's `x* (y z)?` compiled as
/// `x* (y rest)?`, or a rule that calls itself last).
#[cfg(test)]
pub(super) fn tail_calls_only(a: &Automata, q: StateId) -> bool {
    a.rule_edges(q)
        .iter()
        .all(|&(_, t)| a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty())
}

/// Deepest stack of pending calls [`cover_search`] follows.
const MAX_CALL_DEPTH: u32 = 4;

/// Most configurations in one set of [`cover_search`] (a string body's row holds a handful; a
/// state that predicts much more is no string body, and gives up early).
const MAX_SET_CONFIGS: usize = 256;

/// A configuration of [`cover_search`]: an automaton state, and the stack of states its callers
/// resume in (an id into [`Stacks`]; 0: empty, the state's rule ending ends the kernel's rule).
type Config = (StateId, u32);

/// Interned stacks of return states, as linked cells: `cells[id] = (below, top, depth)`.
struct Stacks {
    cells: Vec<(u32, StateId, u32)>,
    ids: FastMap<(u32, StateId), u32>,
}

impl Stacks {
    fn push(&mut self, below: u32, top: StateId) -> Option<u32> {
        let depth = self.cells[below as usize].2 + 1;
        if depth > MAX_CALL_DEPTH {
            return None;
        }
        let next = self.cells.len() as u32;
        let id = *self.ids.entry((below, top)).or_insert(next);
        if id == next {
            self.cells.push((below, top, depth));
        }
        Some(id)
    }
}

/// Product search of the grammar automaton from `s` with the slice automaton `step` from its
/// state 0, over the sets of configurations a chart row can hold: a pushdown simulation of the
/// rule automata with item origins dropped, exact while the stacks of pending calls stay within
/// [`MAX_CALL_DEPTH`]. A tail call (target state final and without edges: the callee's end is the
/// caller's end) pushes nothing. Every `To` byte must be read by some configuration and every
/// `Dead` byte by none (`Walk` bytes are free). `None` if not (or past [`MAX_COVER_PAIRS`] sets or
/// the depth), else whether the kernel's rule can end (a final state with an empty stack is
/// reachable).
pub(super) fn cover_search(a: &Automata, s: StateId, step: impl Fn(u8, u8) -> Body) -> Option<bool> {
    let mut stacks = Stacks { cells: vec![(0, s, 0)], ids: HashMap::with_hasher(FastState) };
    // The closure of `set` under calls and returns, sorted; `None` past the depth.
    let mut close = |set: &mut Vec<Config>| -> Option<()> {
        let mut i = 0;
        while i < set.len() {
            let (q, st) = set[i];
            i += 1;
            let add = |c: Config, set: &mut Vec<Config>| {
                if !set.contains(&c) {
                    set.push(c);
                }
            };
            if a.state(q).is_final && st != 0 {
                let (below, top, _) = stacks.cells[st as usize];
                add((top, below), set);
            }
            for &(r, t) in a.rule_edges(q) {
                let tail = a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty();
                let callee_stack = if tail { st } else { stacks.push(st, t)? };
                add((a.callee_start(q, r), callee_stack), set);
            }
            if set.len() > MAX_SET_CONFIGS {
                return None;
            }
        }
        set.sort_unstable();
        Some(())
    };
    // PERF: std's SipHash on the set keys and a hash set of pairs took half of a search (a
    // regex-bodied string with `minLength`: ~4,000 pairs, 10-30 ms per new position); the pairs
    // seen are one bit per body state of each set instead.
    let mut ids: FastMap<Vec<Config>, u32> = HashMap::with_hasher(FastState);
    let mut sets: Vec<Vec<Config>> = Vec::new();
    let mut seen: Vec<u16> = Vec::new();
    let mut pairs = 0usize;
    let mark = |seen: &mut Vec<u16>, pairs: &mut usize, id: u32, b: u8| -> bool {
        let i = id as usize;
        if i >= seen.len() {
            seen.resize(i + 1, 0);
        }
        debug_assert!(b < 16, "slice automaton state {b}");
        let bit = 1u16 << b;
        let fresh = seen[i] & bit == 0;
        seen[i] |= bit;
        *pairs += usize::from(fresh);
        fresh
    };
    let mut stack: Vec<(u32, u8)> = Vec::new();
    let mut has_final = false;
    let mut first = vec![(s, 0)];
    close(&mut first)?;
    ids.insert(first.clone(), 0);
    sets.push(first);
    mark(&mut seen, &mut pairs, 0, 0);
    stack.push((0, 0));
    let mut next: Vec<Config> = Vec::new();
    // The last stepped (unclosed) configurations and the set they closed to.
    let mut last_raw: Vec<Config> = Vec::new();
    let mut last: Option<u32> = None;
    while let Some((id, b)) = stack.pop() {
        has_final |= sets[id as usize].iter().any(|&(q, st)| st == 0 && a.state(q).is_final);
        for x in 0..=255u8 {
            next.clear();
            next.extend(sets[id as usize].iter().filter_map(|&(q, st)| a.step(q, x).map(|t| (t, st))));
            match step(b, x) {
                Body::To(nb) => {
                    if next.is_empty() {
                        return None;
                    }
                    next.sort_unstable();
                    next.dedup();
                    // The closed set depends only on the stepped configurations, which are the
                    // same for runs of bytes (a class of characters): close and intern once per run.
                    let nid = match last {
                        Some(nid) if last_raw == next => nid,
                        _ => {
                            last_raw.clone_from(&next);
                            close(&mut next)?;
                            next.dedup();
                            let nid = match ids.get(next.as_slice()) {
                                Some(&i) => i,
                                None => {
                                    let i = sets.len() as u32;
                                    ids.insert(next.clone(), i);
                                    sets.push(next.clone());
                                    i
                                }
                            };
                            last = Some(nid);
                            nid
                        }
                    };
                    if mark(&mut seen, &mut pairs, nid, nb) {
                        if pairs > MAX_COVER_PAIRS {
                            return None;
                        }
                        stack.push((nid, nb));
                    }
                }
                Body::Dead if !next.is_empty() => return None,
                Body::Dead | Body::Walk => {}
            }
        }
    }
    Some(has_final)
}
