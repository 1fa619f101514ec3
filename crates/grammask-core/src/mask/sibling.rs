//! Sibling kernels: kernel states of one grammar that differ only in literal strings no token
//! can read to their end, classified once.
//!
//! Pipeline place: asked by [`crate::compiled::CompiledGrammar`] before a new kernel is
//! classified; takes the automata, the grammar's [`ExcludedWords`] and the vocabulary's
//! [`QuoteEnds`], and gives a key under which equal kernels are found ([`sibling_key`]).
//!
//! After each `,` of an open object with many optional properties, the row holds two items per
//! property still to come, each in a rule of its own: `ws "\"" ("key_k" "\"" ... | key_not_in
//! "\"" ... ws "," ws)`. The rules differ only in the literal `key_k"` beside the call of the
//! excluded-key rule `key_not_in`, which reads every key text but finitely many words.
//!
//! **Dropped edges.** A byte edge `q --l1--> ...` is *dropped* when it starts a tree of literal
//! states ([`literal_tree`]: single bytes, no rule edges, not final; one chain per key, or keys
//! sharing a prefix) whose every path reads some `l = l1..ln` up to the first `"` after `l1` (a
//! key and its closing quote) such that some callee of `q` reads `l1..l(n-1)` without its rule
//! ending ([`Inside::reads_text`]; for a key, the extra-key rule `"` `key_not_in`, whose
//! excluded-words rule reads any string text, as every string extends past its finitely many
//! words) and no token of the vocabulary contains `l`. Then removing the edge changes no kernel
//! classification: a token read through the tree cannot reach a path's end (it would contain
//! that `l`), so it ends inside a path, accepted (the tree's states are neither final nor call
//! anything: no rule end on the way); and the callee, predicted in the same row as `q`, reads the
//! same bytes and stays alive, so it accepts the token as well.
//!
//! **The key.** A kernel classification depends only on the automaton below the kernel state:
//! the states of its own rule (whose items have origin 0 in the kernel chart, the others only
//! through calls), the rules they call (the same states, within one grammar) and the rule's
//! FOLLOW set. [`sibling_key`] lists exactly that with the dropped edges left out: the own-rule
//! states reachable from the kernel state, numbered in discovery order, each with its finality,
//! its byte edges and its rule edges (rule, callee start, return state); plus FOLLOW where one of
//! them is final (FOLLOW filters rule ends only; the states after a dropped edge are not final
//! and no token passes the tree's `"`, so none ends the rule there). Equal keys
//! (compared in full, not by hash) mean automata equal up to dropped edges, hence equal
//! classifications.
//!
//! PERF: `Github_hard---o30633` (94 optional properties, open) took ~13 ms on Llama 3 after its
//! first `,`: 188 new kernels (~60-75 us each) that are two classifications.
use crate::compiler::{Automata, StateId};
use crate::fasthash::FastMap;
use crate::follow::ByteSet;
use crate::grammar::{ExcludedWords, RuleId};
use crate::vocab::Vocabulary;

/// Own-rule states a [`sibling_key`] lists at most; past them there is no key.
pub const SIBLING_KEY_STATES: usize = 64;

/// Every occurrence of `"` in the vocabulary's tokens, as the token text up to and including it,
/// sorted by that text read backwards: the tokens that contain a string ending in `"` are one
/// range.
#[derive(Debug)]
pub struct QuoteEnds {
    vocab: std::sync::Arc<Vocabulary>,
    /// (token, index of the `"`), by the reversed text `token[..=index]`.
    ends: Vec<(u32, u32)>,
}

impl QuoteEnds {
    pub fn new(vocab: &std::sync::Arc<Vocabulary>) -> QuoteEnds {
        let mut ends = Vec::new();
        for t in 0..vocab.vocab_size() as u32 {
            let b = vocab.token_bytes(t);
            ends.extend(b.iter().enumerate().filter(|(_, &c)| c == b'"').map(|(i, _)| (t, i as u32)));
        }
        let text = |&(t, i): &(u32, u32)| &vocab.token_bytes(t)[..=i as usize];
        ends.sort_unstable_by(|x, y| text(x).iter().rev().cmp(text(y).iter().rev()));
        QuoteEnds { vocab: vocab.clone(), ends }
    }

    fn text(&self, k: usize) -> &[u8] {
        let (t, i) = self.ends[k];
        &self.vocab.token_bytes(t)[..=i as usize]
    }

    /// Whether some token contains `l`, which ends in `"`.
    pub fn some_token_contains(&self, l: &[u8]) -> bool {
        debug_assert_eq!(l.last(), Some(&b'"'));
        let k = self.ends.partition_point(|&e| {
            let (t, i) = e;
            self.vocab.token_bytes(t)[..=i as usize].iter().rev().lt(l.iter().rev())
        });
        k < self.ends.len() && self.text(k).ends_with(l)
    }

    pub fn memory_size(&self) -> usize {
        self.ends.capacity() * 8
    }
}

/// The dropped edges of a grammar (see the module doc): per state, the bytes of its dropped
/// edges; and per rule, whether one of its states has one (only kernels of those rules take a
/// [`sibling_key`]).
#[derive(Debug, Default)]
pub struct SiblingEdges {
    dropped: FastMap<StateId, ByteSet>,
    rules: Vec<bool>,
}

impl SiblingEdges {
    /// The dropped edges of `a`, whose excluded-words rules are `excluded`. `contains(l)`: whether
    /// some token contains `l` (ending in `"`); it is asked only for chains no longer than
    /// `max_depth` bytes (the longest token), as no token reads a longer one.
    pub fn new(
        a: &Automata,
        excluded: &ExcludedWords,
        max_depth: u32,
        contains: &dyn Fn(&[u8]) -> bool,
    ) -> SiblingEdges {
        let is_excluded = |r: RuleId| r == excluded.any || excluded.rules.binary_search_by_key(&r, |e| e.0).is_ok();
        let mut edges = SiblingEdges { dropped: FastMap::default(), rules: vec![false; a.num_rules()] };
        for q in (0..a.states().len() as u32).map(StateId) {
            if a.rule_edges(q).is_empty() {
                continue;
            }
            let mut bytes = ByteSet::default();
            for e in a.byte_edges(q).iter().filter(|e| e.lo == e.hi) {
                let Some(paths) = literal_tree(a, e.lo, e.target, max_depth) else { continue };
                // Every path's text but its last byte, read by some callee of `q`; no path in a token.
                let dropped = paths.iter().all(|l| {
                    let mut budget = READS_ALIVE_BUDGET;
                    let before_end = &l[..l.len() - 1];
                    let shadowed = a.rule_edges(q).iter().any(|&(r, _)| {
                        let inside = Inside { a, is_excluded: &is_excluded };
                        inside.reads_text(r, a.callee_start(q, r), before_end, CALL_DEPTH, &mut budget)
                    });
                    shadowed && (l.len() > max_depth as usize || !contains(l))
                });
                if dropped {
                    bytes.insert_range(e.lo, e.lo);
                }
            }
            if bytes != ByteSet::default() {
                edges.dropped.insert(q, bytes);
                edges.rules[a.state(q).rule.index()] = true;
            }
        }
        edges
    }

    pub fn is_empty(&self) -> bool {
        self.dropped.is_empty()
    }

    /// Whether kernels of rule `r` take a [`sibling_key`].
    pub fn applies(&self, r: RuleId) -> bool {
        self.rules.get(r.index()).copied().unwrap_or(false)
    }

    /// The bytes of `q`'s byte edges but its dropped ones: a kernel chart of `q` reads the
    /// tokens whose first byte is dropped through a callee as well (see the module doc).
    pub fn kept_bytes(&self, a: &Automata, q: StateId) -> ByteSet {
        let dropped = self.dropped.get(&q).copied().unwrap_or_default();
        let mut kept = ByteSet::default();
        for e in a.byte_edges(q).iter().filter(|e| !(e.lo == e.hi && dropped.contains(e.lo))) {
            kept.insert_range(e.lo, e.hi);
        }
        kept
    }

    pub fn memory_size(&self) -> usize {
        self.dropped.len() * 48 + self.rules.len()
    }
}

/// Calls nested at most, and states stepped at most, by one [`Inside::reads_text`] search.
const CALL_DEPTH: u32 = 4;
const READS_ALIVE_BUDGET: u32 = 256;

/// Printable ASCII string text: no `"`, no `\`.
fn is_text(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'
}

/// Paths a [`literal_tree`] lists at most; past them the edge is kept.
const TREE_PATHS: usize = 256;

/// The texts that `first` and the literal states from `next` read, each up to and including its
/// first `"` after `first`, or cut after `max_depth + 1` bytes (no token reads that far): a
/// literal state here reads single bytes only (one or several: keys sharing a prefix), calls
/// nothing and is not final; `None` where another state comes first, or past [`TREE_PATHS`]
/// paths. A token read through the edge ends inside one of these texts or contains one.
fn literal_tree(a: &Automata, first: u8, next: StateId, max_depth: u32) -> Option<Vec<Vec<u8>>> {
    let (mut paths, mut todo) = (Vec::new(), vec![(vec![first], next)]);
    while let Some((l, s)) = todo.pop() {
        if l.len() > max_depth as usize {
            paths.push(l);
        } else {
            let edges = a.byte_edges(s);
            let literal = !edges.is_empty() && a.rule_edges(s).is_empty() && !a.state(s).is_final;
            if !literal || edges.iter().any(|e| e.lo != e.hi) {
                return None;
            }
            for e in edges {
                let mut l = l.clone();
                l.push(e.lo);
                match e.lo {
                    b'"' => paths.push(l),
                    _ => todo.push((l, e.target)),
                }
            }
        }
        if paths.len() + todo.len() > TREE_PATHS {
            return None;
        }
    }
    Some(paths)
}

/// Derivations inside a callee, for [`SiblingEdges::new`].
struct Inside<'a> {
    a: &'a Automata,
    is_excluded: &'a dyn Fn(RuleId) -> bool,
}

impl Inside<'_> {
    /// Whether an item at `s` (of rule `r`, called from the kernel's rule) can read all of
    /// `text` without its rule ending: stepping bytes, or calling a rule that reads the rest,
    /// at most `depth` calls deep; an excluded-words rule started at its start reads every run of
    /// string text ([`is_text`]), as every string extends past its finitely many words. False
    /// once `budget` steps are spent (the edge is then kept).
    fn reads_text(&self, r: RuleId, s: StateId, text: &[u8], depth: u32, budget: &mut u32) -> bool {
        let a = self.a;
        let Some(rest) = budget.checked_sub(1) else { return false };
        *budget = rest;
        if (self.is_excluded)(r) && s == a.rule_start(r) && text.iter().all(|&b| is_text(b)) {
            return true;
        }
        let Some((&b, tail)) = text.split_first() else { return true };
        if a.step(s, b).is_some_and(|t| self.reads_text(r, t, tail, depth, budget)) {
            return true;
        }
        depth > 0
            && a.rule_edges(s).iter().any(|&(c, _)| self.reads_text(c, a.callee_start(s, c), text, depth - 1, budget))
    }
}

/// The key of kernel `state` in `a` (see the module doc): the own-rule states reachable from it
/// without `edges`' dropped edges, numbered in discovery order, with their finality, byte edges
/// and rule edges, after the FOLLOW set `follow` of the rule. `None` past [`SIBLING_KEY_STATES`]
/// states, or when no dropped edge is among them.
pub fn sibling_key(a: &Automata, edges: &SiblingEdges, follow: &ByteSet, state: StateId) -> Option<Box<[u64]>> {
    let mut order = vec![state];
    let mut words: Vec<u64> = follow.words().to_vec();
    // A key without dropped edges would only find the state itself.
    let mut met_dropped = false;
    let number = |t: StateId, order: &mut Vec<StateId>| -> Option<u64> {
        let k = match order.iter().position(|&s| s == t) {
            Some(k) => k,
            None if order.len() < SIBLING_KEY_STATES => {
                order.push(t);
                order.len() - 1
            }
            None => return None,
        };
        Some(k as u64)
    };
    let mut k = 0;
    while k < order.len() {
        let s = order[k];
        let dropped = edges.dropped.get(&s).copied().unwrap_or_default();
        met_dropped |= dropped != ByteSet::default();
        words.push(u64::from(a.state(s).is_final));
        for e in a.byte_edges(s).iter().filter(|e| !(e.lo == e.hi && dropped.contains(e.lo))) {
            words.push(u64::from(e.lo) | u64::from(e.hi) << 8 | number(e.target, &mut order)? << 16);
        }
        words.push(u64::MAX);
        for &(r, t) in a.rule_edges(s) {
            words.push(u64::from(r.0) | u64::from(a.callee_start(s, r).0) << 32);
            words.push(number(t, &mut order)?);
        }
        words.push(u64::MAX - 1);
        k += 1;
    }
    // FOLLOW is read only where the kernel's rule ends (an own-rule item of origin 0 completes):
    // with no final state listed, no token ends it, so kernels of rules that differ in FOLLOW
    // alone are equal (an object's first key start in `root` and in `obj.N_0_0`).
    let nwords = follow.words().len();
    if !order.iter().any(|&s| a.state(s).is_final) {
        words[..nwords].fill(0);
    }
    met_dropped.then(|| words.into())
}
