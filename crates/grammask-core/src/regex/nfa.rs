//! AST to a Thompson NFA with zero-width assertions, and the subset construction that turns it
//! into a [`CharDfa`].
//!
//! Assertions are exact. A closure item is an NFA state paired with a mask of what may come next:
//! a word character (`W`), a non-word character (`N`) or the end of input (`E`). `^` is followed
//! only in the closure of the initial state, `$` restricts the mask to `E`, and `\b`/`\B` restrict
//! it to `W` or `N|E` depending on the character just read. A DFA state is the set of (state,
//! mask) items of consuming and final NFA states, so it never needs to remember the previous
//! character itself.
use crate::fasthash::FastMap;

use super::ast::{Assertion, Node};
use super::charset::{self, CharSet};
use super::dfa::{CharDfa, DState, Trans};
use super::MAX_DFA_STATES;
use crate::error::{Error, Result};

/// Most NFA states built for one pattern (repetitions are expanded, so `(a{1000}){1000}` is big).
pub const MAX_NFA_STATES: usize = 500_000;

const W: u8 = 1;
const N: u8 = 2;
const E: u8 = 4;
const ALL: u8 = W | N | E;

#[derive(Clone, Debug)]
enum NState {
    Char { class: u32, next: u32 },
    Split(Vec<u32>),
    Assert { kind: Assertion, next: u32 },
    Match,
}

struct Nfa {
    states: Vec<NState>,
    classes: Vec<CharSet>,
    /// Interned classes, keyed by the address of the AST set they came from (stable while built).
    class_ids: FastMap<usize, u32>,
    start: u32,
}

fn estimate(node: &Node) -> u64 {
    match node {
        Node::Empty => 0,
        Node::Set(_) | Node::Assert(_) => 1,
        Node::Concat(v) | Node::Alt(v) => {
            let mut total = 1u64;
            for n in v {
                total = total.saturating_add(estimate(n));
            }
            total
        }
        Node::Repeat { sub, min, max } => {
            let copies = match max {
                Some(m) => u64::from(*m),
                None => u64::from(*min).max(1),
            };
            estimate(sub).saturating_add(1).saturating_mul(copies).saturating_add(1)
        }
    }
}

impl Nfa {
    fn push(&mut self, s: NState) -> u32 {
        self.states.push(s);
        (self.states.len() - 1) as u32
    }

    fn class(&mut self, set: &CharSet) -> u32 {
        let key = std::ptr::from_ref(set) as usize;
        if let Some(&id) = self.class_ids.get(&key) {
            return id;
        }
        self.classes.push(set.clone());
        let id = (self.classes.len() - 1) as u32;
        self.class_ids.insert(key, id);
        id
    }

    /// Compiles `node` so that it continues at `next`; returns its entry state. Recursion depth
    /// is bounded by the AST depth (see `ast`).
    fn compile(&mut self, node: &Node, next: u32) -> u32 {
        match node {
            Node::Empty => next,
            Node::Set(set) => {
                let class = self.class(set);
                self.push(NState::Char { class, next })
            }
            Node::Assert(kind) => self.push(NState::Assert { kind: *kind, next }),
            Node::Concat(v) => {
                let mut cur = next;
                for n in v.iter().rev() {
                    cur = self.compile(n, cur);
                }
                cur
            }
            Node::Alt(v) => {
                let mut entries = Vec::with_capacity(v.len());
                for n in v {
                    entries.push(self.compile(n, next));
                }
                self.push(NState::Split(entries))
            }
            Node::Repeat { sub, min, max } => {
                let mut copies = *min;
                let mut cur = match max {
                    None if *min >= 1 => {
                        // x{m,}: m-1 copies, then one copy that loops back to itself.
                        let s = self.push(NState::Split(Vec::new()));
                        let e = self.compile(sub, s);
                        self.states[s as usize] = NState::Split(vec![e, next]);
                        copies -= 1;
                        e
                    }
                    None => {
                        let s = self.push(NState::Split(Vec::new()));
                        let e = self.compile(sub, s);
                        self.states[s as usize] = NState::Split(vec![e, next]);
                        s
                    }
                    Some(max) => {
                        // Nested optional copies: (x(x(x)?)?)?
                        let mut cur = next;
                        for _ in *min..*max {
                            let e = self.compile(sub, cur);
                            cur = self.push(NState::Split(vec![e, next]));
                        }
                        cur
                    }
                };
                for _ in 0..copies {
                    cur = self.compile(sub, cur);
                }
                cur
            }
        }
    }
}

/// Which character was read last, as far as assertions care.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    Start,
    Word,
    NonWord,
}

/// Scratch space for closures: `mask[s]` is the mask reached for NFA state `s` (0 = not reached).
struct Closure {
    mask: Vec<u8>,
    touched: Vec<u32>,
    work: Vec<(u32, u8)>,
}

impl Closure {
    fn add(&mut self, s: u32, m: u8) {
        if m == 0 {
            return;
        }
        let old = self.mask[s as usize];
        let new = old | m;
        if new != old {
            if old == 0 {
                self.touched.push(s);
            }
            self.mask[s as usize] = new;
            self.work.push((s, new));
        }
    }

    /// The closure of `seeds` (each with the full mask) after reading a character of kind `prev`:
    /// the sorted (state, mask) items of `Char` and `Match` states.
    fn run(&mut self, nfa: &Nfa, seeds: &[u32], prev: Prev) -> Vec<(u32, u8)> {
        for &s in seeds {
            self.add(s, ALL);
        }
        while let Some((s, m)) = self.work.pop() {
            match &nfa.states[s as usize] {
                NState::Split(v) => {
                    for &t in v {
                        self.add(t, m);
                    }
                }
                NState::Assert { kind, next } => {
                    let allowed = match (kind, prev) {
                        (Assertion::Start, Prev::Start) => ALL,
                        (Assertion::Start, _) => 0,
                        (Assertion::End, _) => E,
                        (Assertion::WordBoundary, Prev::Word)
                        | (Assertion::NotWordBoundary, Prev::Start | Prev::NonWord) => N | E,
                        (Assertion::WordBoundary, _) | (Assertion::NotWordBoundary, Prev::Word) => W,
                    };
                    self.add(*next, m & allowed);
                }
                NState::Char { .. } | NState::Match => {}
            }
        }
        let mut items: Vec<(u32, u8)> = Vec::new();
        for &s in &self.touched {
            if matches!(nfa.states[s as usize], NState::Char { .. } | NState::Match) {
                items.push((s, self.mask[s as usize]));
            }
            self.mask[s as usize] = 0;
        }
        self.touched.clear();
        items.sort_unstable();
        items
    }
}

/// Builds the DFA of `node`; `search` wraps it in `[^]* ... [^]*` (assertions keep their meaning).
pub fn determinize(node: &Node, search: bool) -> Result<CharDfa> {
    if estimate(node).saturating_add(8) > MAX_NFA_STATES as u64 {
        return Err(Error::limit("regex automaton size (NFA states after expanding repetitions)", MAX_NFA_STATES));
    }
    let mut nfa = Nfa { states: Vec::new(), classes: Vec::new(), class_ids: FastMap::default(), start: 0 };
    let full = CharSet::full();
    let mut end = nfa.push(NState::Match);
    if search {
        let s = nfa.push(NState::Split(Vec::new()));
        let class = nfa.class(&full);
        let c = nfa.push(NState::Char { class, next: s });
        nfa.states[s as usize] = NState::Split(vec![c, end]);
        end = s;
    }
    let mut start = nfa.compile(node, end);
    if search {
        let s = nfa.push(NState::Split(Vec::new()));
        let class = nfa.class(&full);
        let c = nfa.push(NState::Char { class, next: s });
        nfa.states[s as usize] = NState::Split(vec![c, start]);
        start = s;
    }
    nfa.start = start;
    let has_wb = node.has_assertion(&|a| matches!(a, Assertion::WordBoundary | Assertion::NotWordBoundary));
    subset(&nfa, has_wb)
}

/// A consuming closure item: its class ranges, its successor and its mask.
type CharItem<'a> = (&'a [(u32, u32)], u32, u8);

fn subset(nfa: &Nfa, has_wb: bool) -> Result<CharDfa> {
    let word = charset::word();
    let mut cl = Closure { mask: vec![0; nfa.states.len()], touched: Vec::new(), work: Vec::new() };
    let mut ids: FastMap<Vec<(u32, u8)>, u32> = FastMap::default();
    let mut keys: Vec<Vec<(u32, u8)>> = Vec::new();
    let mut states: Vec<DState> = Vec::new();

    let init = cl.run(nfa, &[nfa.start], Prev::Start);
    ids.insert(init.clone(), 0);
    keys.push(init);
    let mut next_state = 0usize;
    // Per-state buffers, reused (PERF: allocating them per state was ~a fifth of determinizing).
    let (mut chars, mut bounds, mut ptr) = (Vec::<CharItem>::new(), Vec::<u32>::new(), Vec::<usize>::new());
    let mut local: FastMap<(Vec<u32>, bool), u32> = FastMap::default();
    while next_state < keys.len() {
        // A state's items are read once, here (`ids` keeps its own copy).
        let items = std::mem::take(&mut keys[next_state]);
        next_state += 1;
        let accept = items.iter().any(|&(s, m)| matches!(nfa.states[s as usize], NState::Match) && m & E != 0);
        // Consuming items: (ranges, next, mask).
        chars.clear();
        chars.extend(items.iter().filter_map(|&(s, m)| match nfa.states[s as usize] {
            NState::Char { class, next } if m & (W | N) != 0 => Some((nfa.classes[class as usize].ranges(), next, m)),
            _ => None,
        }));
        bounds.clear();
        for (ranges, _, _) in &chars {
            for &(lo, hi) in *ranges {
                bounds.push(lo);
                bounds.push(hi + 1);
            }
        }
        if has_wb && !chars.is_empty() {
            for &(lo, hi) in word.ranges() {
                bounds.push(lo);
                bounds.push(hi + 1);
            }
        }
        bounds.sort_unstable();
        bounds.dedup();
        ptr.clear();
        ptr.resize(chars.len(), 0);
        local.clear();
        let mut trans: Vec<Trans> = Vec::new();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1] - 1);
            let is_word = has_wb && word.contains(lo);
            let kind = if is_word { W } else { N };
            let mut seeds: Vec<u32> = Vec::new();
            for (k, (ranges, next, m)) in chars.iter().enumerate() {
                while ptr[k] < ranges.len() && ranges[ptr[k]].1 < lo {
                    ptr[k] += 1;
                }
                if m & kind != 0 && ptr[k] < ranges.len() && ranges[ptr[k]].0 <= lo {
                    seeds.push(*next);
                }
            }
            if seeds.is_empty() {
                continue;
            }
            seeds.sort_unstable();
            seeds.dedup();
            let key = (seeds, is_word);
            let to = if let Some(&to) = local.get(&key) {
                to
            } else {
                let prev = if is_word { Prev::Word } else { Prev::NonWord };
                let target = cl.run(nfa, &key.0, prev);
                let to = if let Some(&id) = ids.get(&target) {
                    id
                } else {
                    if keys.len() >= MAX_DFA_STATES {
                        return Err(Error::limit("regex automaton states", MAX_DFA_STATES));
                    }
                    let id = keys.len() as u32;
                    ids.insert(target.clone(), id);
                    keys.push(target);
                    id
                };
                local.insert(key, to);
                to
            };
            match trans.last_mut() {
                Some(t) if t.to == to && t.hi + 1 == lo => t.hi = hi,
                _ => trans.push(Trans { lo, hi, to }),
            }
        }
        states.push(DState { accept, trans });
    }
    Ok(CharDfa::from_states(states, 0))
}
