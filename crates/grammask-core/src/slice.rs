//! The JSON-string-body slice of a vocabulary: a shortcut for kernel classification
//! ([`crate::mask::classify_kernel`]) inside JSON strings.
//!
//! Inside a string (a value, or a key of an open object) nearly every token is allowed, and a
//! plain trie walk visits every node of the vocabulary. Instead, the tokens whose bytes are a run
//! of string-body text (unescaped characters >= U+0020 other than `"` and `\`, and the short
//! escapes `\" \\ \/ \b \f \n \r \t`, possibly ending inside a UTF-8 sequence or after `\`) are
//! found once per vocabulary ([`BodySlice::slice`]). A kernel state qualifies
//! ([`BodySlice::covers`]) when, from it, the automaton reads every body byte the body automaton
//! reads, staying in states without rule references, and rejects every byte the body automaton
//! rejects outright; then every slice token is accepted, and only the subtrees that start with
//! `"` (from a character boundary) or `\u` need a real walk ([`BodySlice::frontier`]), plus, when
//! the rule can end on the way (final states), those that start with a dead byte, whose tokens may
//! still be uncertain (the text after the rule's end is checked in the real context).
//!
//! Invariant: a node is in the frontier iff its path up to its parent is body text and its own
//! byte is not (`"` at a character boundary or `u` after `\`: walk; anything else: dead).

use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::trie::TokenTrie;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};


/// Where a byte leads from a body state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Body {
    To(u8),
    /// `"` at a boundary or `u` after `\`: the walk must look (string end, `\u` escape).
    Walk,
    /// Never part of a JSON string at this point.
    Dead,
}

/// The byte-level body automaton: 0 = character boundary, 1 = after `\`, 2..=8 = inside a
/// UTF-8 sequence.
fn body_step(b: u8, x: u8) -> Body {
    use Body::{Dead, To, Walk};
    let cont = |lo: u8, hi: u8, next: u8| if (lo..=hi).contains(&x) { To(next) } else { Dead };
    match b {
        0 => match x {
            b'"' => Walk,
            b'\\' => To(1),
            0x20..=0x7F => To(0),
            0xC2..=0xDF => To(2),
            0xE0 => To(4),
            0xE1..=0xEC | 0xEE..=0xEF => To(3),
            0xED => To(5),
            0xF0 => To(7),
            0xF1..=0xF3 => To(6),
            0xF4 => To(8),
            _ => Dead,
        },
        1 => match x {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => To(0),
            b'u' => Walk,
            _ => Dead,
        },
        2 => cont(0x80, 0xBF, 0),
        3 => cont(0x80, 0xBF, 2),
        4 => cont(0xA0, 0xBF, 2),
        5 => cont(0x80, 0x9F, 2),
        6 => cont(0x80, 0xBF, 3),
        7 => cont(0x90, 0xBF, 3),
        _ => cont(0x80, 0x8F, 3),
    }
}

/// A frontier node: its trie index, the byte path of its parent, and whether its byte is dead
/// (never in a string here) rather than `"` or `\u`.
#[derive(Debug)]
pub struct FrontierNode {
    pub node: u32,
    pub path: Box<[u8]>,
    pub dead: bool,
}

/// Per-vocabulary string-body data (see the module doc).
#[derive(Debug)]
pub struct BodySlice {
    pub slice: Bitset,
    pub frontier: Vec<FrontierNode>,
    /// `within[k]`: the slice tokens that begin at most `k` characters (see [`chars_begun`]), for
    /// `k <= MAX_CUMULATIVE`.
    within: Vec<Bitset>,
    /// Slice tokens that begin more than `MAX_CUMULATIVE` characters: (characters, token).
    long: Vec<(u32, u32)>,
}

/// Counted-repetition capacities with a cumulative token set of their own (each is one bitset;
/// Llama 3 has a few hundred slice tokens past 32 characters, set one by one).
const MAX_CUMULATIVE: usize = 32;

/// One character level of a counted string body (`json_char{0,n}`), see [`body_level`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Every character readable here leads to this state.
    Next(StateId),
    /// No character can begin here (the repetition is exhausted).
    Zero,
}

/// How a kernel state qualifies for the slice shortcut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cover {
    /// The kernel's rule may end inside body text.
    pub may_end: bool,
    /// Walk every dead frontier subtree, whatever FOLLOW says.
    pub walk_dead: bool,
}

/// Most (automaton state, body state) pairs [`BodySlice::covers`] explores.
const MAX_COVER_PAIRS: usize = 4096;

/// The tokens whose bytes `step` reads from state 0 without leaving its automaton (`To` all the
/// way), and the frontier: each node where a path first reads `Walk` or `Dead`.
fn build_slice(trie: &TokenTrie, vocab_size: usize, step: impl Fn(u8, u8) -> Body) -> (Bitset, Vec<FrontierNode>) {
    let mut slice = Bitset::new(vocab_size);
    let mut frontier = Vec::new();
    // states[d]: automaton state after d+1 bytes of the current path.
    let mut states: Vec<u8> = Vec::new();
    let mut path: Vec<u8> = Vec::new();
    let nodes = &trie.nodes;
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        let d = n.depth as usize;
        states.truncate(d - 1);
        path.truncate(d - 1);
        match step(states.last().copied().unwrap_or(0), n.byte) {
            Body::To(next) => {
                states.push(next);
                path.push(n.byte);
                for &t in trie.node_tokens(&n) {
                    slice.set(t as usize);
                }
                i += 1;
            }
            out => {
                frontier.push(FrontierNode { node: i as u32, path: path.clone().into(), dead: out == Body::Dead });
                i = n.subtree_end as usize;
            }
        }
    }
    (slice, frontier)
}

/// Whether every rule reference of `q` is a tail call: its target state is final and has no
/// edges, so the referenced rule's end is the end of `q`'s rule (a regex's `x* (y z)?` compiled as
/// `x* (y rest)?`, or a rule that calls itself last).
#[cfg(test)]
fn tail_calls_only(a: &Automata, q: StateId) -> bool {
    a.rule_edges(q).iter().all(|&(_, t)| a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty())
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
    ids: HashMap<(u32, StateId), u32>,
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
fn cover_search(a: &Automata, s: StateId, step: impl Fn(u8, u8) -> Body) -> Option<bool> {
    let mut stacks = Stacks { cells: vec![(0, s, 0)], ids: HashMap::new() };
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
                add((a.rule_start(r), callee_stack), set);
            }
            if set.len() > MAX_SET_CONFIGS {
                return None;
            }
        }
        set.sort_unstable();
        Some(())
    };
    let mut ids: HashMap<Vec<Config>, u32> = HashMap::new();
    let mut sets: Vec<Vec<Config>> = Vec::new();
    let mut seen: HashSet<(u32, u8)> = HashSet::new();
    let mut stack: Vec<(u32, u8)> = Vec::new();
    let mut has_final = false;
    let mut first = vec![(s, 0)];
    close(&mut first)?;
    ids.insert(first.clone(), 0);
    sets.push(first);
    seen.insert((0, 0));
    stack.push((0, 0));
    let mut next: Vec<Config> = Vec::new();
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
                    if seen.insert((nid, nb)) {
                        if seen.len() > MAX_COVER_PAIRS {
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

impl BodySlice {
    pub fn new(trie: &TokenTrie, vocab_size: usize) -> BodySlice {
        let (slice, frontier) = build_slice(trie, vocab_size, body_step);
        let mut within = vec![Bitset::new(vocab_size); MAX_CUMULATIVE + 1];
        let mut long = Vec::new();
        for (t, k) in chars_begun(trie) {
            if (k as usize) <= MAX_CUMULATIVE {
                for w in &mut within[k as usize..] {
                    w.set(t as usize);
                }
            } else {
                long.push((k, t));
            }
        }
        long.sort_unstable();
        BodySlice { slice, frontier, within, long }
    }

    /// Adds to `out` the slice tokens that begin at most `capacity` characters.
    pub fn add_within(&self, capacity: u32, out: &mut Bitset) {
        out.or_assign(&self.within[(capacity as usize).min(MAX_CUMULATIVE)]);
        for &(k, t) in self.long.iter().take_while(|&&(k, _)| k <= capacity) {
            debug_assert!(k as usize > MAX_CUMULATIVE);
            out.set(t as usize);
        }
    }

    /// Whether kernel state `s` qualifies for the shortcut (see the module doc): `None` if not.
    /// A state whose only way on is rule references qualifies when each referenced rule's start
    /// does (the token is read inside them); then every frontier node must be walked
    /// ([`Cover::walk_dead`]), since the text after such a rule ends belongs to the kernel's rule.
    pub fn covers(a: &Automata, s: StateId) -> Option<Cover> {
        if let Some(may_end) = cover_search(a, s, body_step) {
            return Some(Cover { may_end, walk_dead: false });
        }
        let edges = a.rule_edges(s);
        if edges.is_empty() || !a.byte_edges(s).is_empty() {
            return None;
        }
        for &(r, _) in edges {
            Self::covers_plain(a, a.rule_start(r))?;
        }
        Some(Cover { may_end: true, walk_dead: true })
    }

    /// [`Self::covers`] without the nested case: whether a final state is reachable on body text
    /// (the rule may end inside a token, so dead subtrees may hold uncertain tokens).
    fn covers_plain(a: &Automata, s: StateId) -> Option<bool> {
        cover_search(a, s, body_step)
    }
}

/// Every slice token with the number of characters it begins: a character begins at each byte
/// read from the body automaton's boundary state (an ASCII character, a UTF-8 lead byte, a backslash),
/// so a token ending inside a character counts it.
fn chars_begun(trie: &TokenTrie) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    // (body state, characters begun) after d+1 bytes of the current path.
    let mut stack: Vec<(u8, u32)> = Vec::new();
    let nodes = &trie.nodes;
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        stack.truncate(n.depth as usize - 1);
        let (b, k) = stack.last().copied().unwrap_or((0, 0));
        match body_step(b, n.byte) {
            Body::To(next) => {
                let k = k + u32::from(b == 0);
                stack.push((next, k));
                out.extend(trie.node_tokens(&n).iter().map(|&t| (t, k)));
                i += 1;
            }
            _ => i = n.subtree_end as usize,
        }
    }
    out
}

/// One character level of a counted string body at automaton state `r` (plain and not final):
/// `Next(s)` when every body character (ASCII, UTF-8 sequence, short escape) is read from `r`
/// through plain, non-final states and all of them end in the same state `s`, and every byte that
/// can never be in a string is refused on the way; `Zero` when no body character can even begin
/// at `r` (and dead bytes are refused); `None` otherwise. `"` at a boundary and `\u` escapes are
/// free (they are frontier bytes, walked for real).
///
/// A chain `r = s_c -> ... -> s_1 -> s_0` of `Next` levels ending in `Zero` reads exactly the
/// body text that begins at most `c` characters ([`BodySlice::add_within`]).
pub fn body_level(a: &Automata, r: StateId) -> Option<Level> {
    let ok = |t: StateId| a.rule_edges(t).is_empty() && !a.state(t).is_final;
    if !ok(r) {
        return None;
    }
    let (table, to_bytes) = body_table();
    let mut next: Option<StateId> = None;
    let mut stack: Vec<(StateId, u8)> = vec![(r, 0)];
    let mut seen: Vec<(StateId, u8)> = Vec::new();
    // PERF: only the bytes on `q`'s edges are looked at; the body bytes it cannot read are
    // counted, not searched (a chain of a few hundred levels is checked in well under 1 ms, and a
    // state that is no string body fails on its first edges).
    while let Some((q, b)) = stack.pop() {
        let mut read = 0usize;
        for e in a.byte_edges(q) {
            for x in e.lo..=e.hi {
                match table[usize::from(b)][usize::from(x)] {
                    Body::Dead => return None,
                    Body::Walk => {}
                    Body::To(nb) => {
                        read += 1;
                        let t = e.target;
                        if !ok(t) {
                            return None;
                        }
                        if nb == 0 {
                            if *next.get_or_insert(t) != t {
                                return None;
                            }
                        } else if !seen.contains(&(t, nb)) {
                            if seen.len() >= MAX_LEVEL_PAIRS {
                                return None;
                            }
                            seen.push((t, nb));
                            stack.push((t, nb));
                        }
                    }
                }
            }
        }
        if read < to_bytes[usize::from(b)] {
            // A body byte is refused: only allowed at the boundary, for all of them at once.
            return (q == r && b == 0 && read == 0).then_some(Level::Zero);
        }
    }
    next.map(Level::Next)
}

/// Most (state, body state) pairs inside one character of a [`body_level`] (a JSON string's
/// automaton has about a dozen).
const MAX_LEVEL_PAIRS: usize = 64;

/// [`body_step`] as a table, `[body state][byte]`, and the number of `To` bytes of each body state.
fn body_table() -> &'static ([[Body; 256]; 9], [usize; 9]) {
    static TABLE: std::sync::OnceLock<([[Body; 256]; 9], [usize; 9])> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [[Body::Dead; 256]; 9];
        let mut n = [0usize; 9];
        for (b, row) in t.iter_mut().enumerate() {
            for (x, cell) in row.iter_mut().enumerate() {
                *cell = body_step(b as u8, x as u8);
                n[b] += usize::from(matches!(cell, Body::To(_)));
            }
        }
        (t, n)
    })
}

/// The capacity of a counted string body at `s`: the `c` of a [`body_level`] chain from `s` to
/// `Zero`, or `max_chars` when the chain reads at least that many characters (loops included):
/// then no token can exceed it. `level` gives each state's level (memoized by the caller).
pub fn body_capacity(s: StateId, max_chars: u32, mut level: impl FnMut(StateId) -> Option<Level>) -> Option<u32> {
    let mut r = s;
    for c in 0..max_chars {
        match level(r)? {
            Level::Zero => return Some(c),
            Level::Next(t) => r = t,
        }
    }
    Some(max_chars)
}

/// A slice for free text of one character class: every character except some ASCII ones (the
/// shape of `[^\n|]+` or `[^"\n]*`). Its automaton reads ASCII bytes of the class and any valid
/// UTF-8 sequence; every other byte is frontier (walked for real, so no rejection condition is
/// needed). Used for kernel states that loop on the class ([`ClassSlice::loop_class`]).
#[derive(Debug)]
pub struct ClassSlice {
    /// The class's ASCII bytes (bit x = byte x).
    pub ascii: u128,
    pub slice: Bitset,
    pub frontier: Vec<FrontierNode>,
}

/// Subtrees with fewer tokens take their runs child by child.
const SUBTREE_RUNS_MIN_TOKENS: usize = 1024;
/// Most subtree run sets kept per run index (16 KB each on a 128k vocabulary).
const MAX_SUBTREE_RUNS: usize = 64;

/// Fewest ASCII bytes in a loop class for the shortcut to be worth it (a state that allows few
/// bytes prunes the trie early anyway).
const MIN_CLASS_BYTES: u32 = 32;

fn class_step(ascii: u128, b: u8, x: u8) -> Body {
    if b == 0 && x < 0x80 {
        return if ascii >> x & 1 == 1 { Body::To(0) } else { Body::Walk };
    }
    match body_step(b, x) {
        // The UTF-8 part of the body automaton; `\` and `"` are ASCII, handled above.
        Body::To(n) => Body::To(n),
        _ => Body::Walk,
    }
}

impl ClassSlice {
    pub fn new(trie: &TokenTrie, vocab_size: usize, ascii: u128) -> ClassSlice {
        let (slice, frontier) = build_slice(trie, vocab_size, |b, x| class_step(ascii, b, x));
        ClassSlice { ascii, slice, frontier }
    }

    /// The candidate class of `s`: the ASCII bytes on which it loops back to itself, or, when it
    /// has no such loop (the first character of `[^\n|]+`), the ASCII bytes it can read at all;
    /// `None` when there are too few. [`Self::covers`] then decides.
    pub fn loop_class(a: &Automata, s: StateId) -> Option<u128> {
        if !a.rule_edges(s).is_empty() {
            return None;
        }
        let (mut looping, mut stepping) = (0u128, 0u128);
        for e in a.byte_edges(s) {
            for x in e.lo..=e.hi.min(0x7F) {
                stepping |= 1 << x;
                if e.target == s {
                    looping |= 1 << x;
                }
            }
        }
        let class = if looping.count_ones() >= MIN_CLASS_BYTES { looping } else { stepping };
        (class.count_ones() >= MIN_CLASS_BYTES).then_some(class)
    }

    /// Whether, from `s`, every class byte sequence is read into states without rule references
    /// (then every slice token stays inside the rule, and everything else is frontier).
    pub fn covers(a: &Automata, s: StateId, ascii: u128) -> bool {
        cover_search(a, s, |b, x| class_step(ascii, b, x)).is_some()
    }
}

/// Where the runs of one character class lie anywhere in the trie, for a walk that reaches, at
/// some node, a place that reads every run of the class (see `KernelWalk::walk`): the tokens
/// below that node that continue with a run are accepted at once, and only the *break* nodes
/// (where a run from the node stops) are walked. [`ClassSlice`] is the same at the root only.
///
/// The class reads ASCII bytes of `ascii`, plus, when `utf8`, any valid UTF-8 character. For a
/// byte path `p`, `lead(p)` is the smallest `k` such that `p[k..]` is read from the class start
/// (possibly ending inside a UTF-8 sequence). A token continues with a run after depth `d` iff
/// `lead <= d` and its byte at `d` is not a UTF-8 continuation byte (then `d` is a character
/// boundary of the run).
///
/// Invariant: node `m` is a break node iff its path is not read from its parent's lead; the
/// break nodes below node `n` (depth `d`, at a character boundary) whose parent lead is `<= d`
/// are exactly the first nodes below `n` where a run from `d` stops, and every other break
/// node below `n` lies under one of them.
#[derive(Debug)]
pub struct RunIndex {
    pub ascii: u128,
    pub utf8: bool,
    /// `lead` of each token's bytes, in trie token order (`trie.tokens`), capped at 255.
    lead: Vec<u8>,
    /// The tokens whose lead is 0 (entirely runs): what a run from the root accepts.
    pub whole: Arc<Bitset>,
    /// For large subtrees of an ASCII class, the tokens below node `i` whose lead is at most its
    /// depth, built on first use (at most [`MAX_SUBTREE_RUNS`]).
    subtrees: RwLock<HashMap<u32, Arc<Bitset>>>,
    vocab_size: usize,
    /// Break nodes in trie order, with their parent's lead (capped at 255) and their byte.
    break_nodes: Vec<u32>,
    break_lead: Vec<u8>,
    break_byte: Vec<u8>,
    /// For each lead `L` below [`LEAD_LISTS`], the break nodes whose parent's lead is `L`, in
    /// trie order, with their bytes: a walk from depth `d` takes those of `L <= d` without
    /// stepping over the deeper ones.
    by_lead: [(Vec<u32>, Vec<u8>); LEAD_LISTS],
    /// The break nodes of lead 0 grouped by byte: a walk from the root skips a refused byte's
    /// breaks at once. Bytes in increasing order, each with its nodes in trie order.
    root_by_byte: Vec<(u8, Box<[u32]>)>,
}

/// Leads with a list of their own in [`RunIndex`] (runs from depths `0..LEAD_LISTS`).
pub const LEAD_LISTS: usize = 4;

impl RunIndex {
    pub fn new(trie: &TokenTrie, vocab_size: usize, ascii: u128, utf8: bool) -> RunIndex {
        let step = |b: u8, x: u8| -> Option<u8> {
            if !utf8 {
                return (x < 0x80 && ascii >> x & 1 == 1).then_some(0);
            }
            match class_step(ascii, b, x) {
                Body::To(n) => Some(n),
                _ => None,
            }
        };
        let cap = |k: usize| k.min(255) as u8;
        let mut lead = vec![u8::MAX; trie.tokens.len()];
        let (mut break_nodes, mut break_lead, mut break_byte) = (Vec::new(), Vec::new(), Vec::new());
        // Per depth on the current path: (lead, class state after the path from it).
        let mut stack: Vec<(usize, u8)> = Vec::new();
        let mut path: Vec<u8> = Vec::new();
        for (i, n) in trie.nodes.iter().enumerate() {
            let d = n.depth as usize;
            stack.truncate(d - 1);
            path.truncate(d - 1);
            path.push(n.byte);
            let (plead, pstate) = stack.last().copied().unwrap_or((0, 0));
            let here = match step(pstate, n.byte) {
                Some(st) => (plead, st),
                None => {
                    break_nodes.push(i as u32);
                    break_lead.push(cap(plead));
                    break_byte.push(n.byte);
                    // The shortest suffix after `plead` that the class reads (the empty one at
                    // worst).
                    (plead + 1..=d)
                        .find_map(|k| {
                            path[k..].iter().try_fold(0u8, |st, &x| step(st, x)).map(|st| (k, st))
                        })
                        .unwrap_or((d, 0))
                }
            };
            stack.push(here);
            for j in n.tok_start..n.tok_end {
                lead[j as usize] = cap(here.0);
            }
        }
        let mut whole = Bitset::new(vocab_size);
        for (j, &l) in lead.iter().enumerate() {
            if l == 0 {
                whole.set(trie.tokens[j] as usize);
            }
        }
        let (whole, subtrees) = (Arc::new(whole), RwLock::new(HashMap::new()));
        let mut by_lead: [(Vec<u32>, Vec<u8>); LEAD_LISTS] = Default::default();
        let mut by_byte: Vec<Vec<u32>> = vec![Vec::new(); 256];
        for (k, &l) in break_lead.iter().enumerate() {
            if let Some((nodes, bytes)) = by_lead.get_mut(usize::from(l)) {
                nodes.push(break_nodes[k]);
                bytes.push(break_byte[k]);
            }
            if l == 0 {
                by_byte[usize::from(break_byte[k])].push(break_nodes[k]);
            }
        }
        let root_by_byte =
            by_byte.into_iter().enumerate().filter(|(_, v)| !v.is_empty()).map(|(b, v)| (b as u8, v.into())).collect();
        let ri = RunIndex {
            ascii,
            utf8,
            lead,
            whole,
            subtrees,
            vocab_size,
            break_nodes,
            break_lead,
            break_byte,
            by_lead,
            root_by_byte,
        };
        // The subtree sets are built with the index (in the compile that needs it), shallowest
        // first, rather than in first masks.
        if !utf8 {
            let mut large: Vec<usize> = (0..trie.nodes.len())
                .filter(|&i| {
                    let n = trie.nodes[i];
                    (trie.first_token[n.subtree_end as usize] - trie.first_token[i]) as usize >= SUBTREE_RUNS_MIN_TOKENS
                })
                .collect();
            large.sort_by_key(|&i| trie.nodes[i].depth);
            for i in large.into_iter().take(MAX_SUBTREE_RUNS) {
                ri.subtree_runs(trie, i);
            }
        }
        ri
    }

    /// Sets in `out` the tokens below node `c` (a child of a node at depth `d`) that continue
    /// with a run after depth `d`; `c`'s byte must not be a UTF-8 continuation byte.
    pub fn add_runs(&self, trie: &TokenTrie, c: usize, d: usize, out: &mut Bitset) {
        let end = trie.nodes[c].subtree_end as usize;
        let (lo, hi) = (trie.first_token[c] as usize, trie.first_token[end] as usize);
        for (j, &l) in self.lead[lo..hi].iter().enumerate() {
            if usize::from(l) <= d {
                out.set(trie.tokens[lo + j] as usize);
            }
        }
    }

    /// The run tokens below node `i` (those whose lead is at most its depth) as a set, for an
    /// ASCII class and a subtree of at least [`SUBTREE_RUNS_MIN_TOKENS`] tokens; `None` otherwise
    /// (the caller takes them child by child with [`Self::add_runs`]).
    ///
    /// PERF: the states that begin an expression in SQL or arithmetic all take the same runs
    /// below `a`..`z`; each took ~40k token checks per first visit.
    pub fn subtree_runs(&self, trie: &TokenTrie, i: usize) -> Option<Arc<Bitset>> {
        let n = trie.nodes[i];
        let tokens = trie.first_token[n.subtree_end as usize] - trie.first_token[i];
        if self.utf8 || (tokens as usize) < SUBTREE_RUNS_MIN_TOKENS {
            return None;
        }
        if let Some(b) = self.subtrees.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&(i as u32)) {
            return Some(b.clone());
        }
        let mut w = self.subtrees.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.len() >= MAX_SUBTREE_RUNS {
            return None;
        }
        let b = w.entry(i as u32).or_insert_with(|| {
            let mut b = Bitset::new(self.vocab_size);
            let d = n.depth as usize;
            let mut c = i + 1;
            while c < n.subtree_end as usize {
                self.add_runs(trie, c, d, &mut b);
                c = trie.nodes[c].subtree_end as usize;
            }
            Arc::new(b)
        });
        Some(b.clone())
    }

    /// The first break node at or after node `start` (as an index into the break list), from
    /// list index `from` on.
    ///
    /// PERF: a galloping search; the target is usually a few entries on (a binary search over
    /// the whole list missed the cache at every step, a third of an SQL kernel's walk).
    pub fn first_break(&self, from: usize, start: usize) -> usize {
        let list = &self.break_nodes;
        let (mut lo, mut step) = (from, 1);
        while lo + step < list.len() && (list[lo + step] as usize) < start {
            lo += step;
            step *= 2;
        }
        let hi = (lo + step + 1).min(list.len());
        lo + list[lo..hi].partition_point(|&m| (m as usize) < start)
    }

    /// The break nodes of lead `l < LEAD_LISTS` in `lo..hi`, in trie order, with their bytes.
    pub fn breaks_of_lead(&self, l: usize, lo: usize, hi: usize) -> (&[u32], &[u8]) {
        let (nodes, bytes) = &self.by_lead[l];
        let a = nodes.partition_point(|&m| (m as usize) < lo);
        let z = a + nodes[a..].partition_point(|&m| (m as usize) < hi);
        (&nodes[a..z], &bytes[a..z])
    }

    /// [`Self::add_runs`] for all of nodes `lo..hi` (the children of a node at depth `d`); below a
    /// UTF-8 continuation byte every lead is deeper than `d`, so such children add nothing.
    pub fn add_runs_range(&self, trie: &TokenTrie, lo: usize, hi: usize, d: usize, out: &mut Bitset) {
        let (a, z) = (trie.first_token[lo] as usize, trie.first_token[hi] as usize);
        for (j, &l) in self.lead[a..z].iter().enumerate() {
            if usize::from(l) <= d {
                out.set(trie.tokens[a + j] as usize);
            }
        }
    }

    /// The breaks of lead 0 by byte (see `root_by_byte`).
    pub fn root_breaks_by_byte(&self) -> &[(u8, Box<[u32]>)] {
        &self.root_by_byte
    }

    /// Break `k`: its node, its parent's lead and its byte; `None` past the end.
    #[inline]
    pub fn break_at(&self, k: usize) -> Option<(usize, usize, u8)> {
        Some((*self.break_nodes.get(k)? as usize, usize::from(self.break_lead[k]), self.break_byte[k]))
    }

    /// Whether the class reads ASCII byte `x` (for an ASCII-only class, whether `x` can be in a
    /// run at all).
    #[inline]
    pub fn reads_ascii(&self, x: u8) -> bool {
        x < 0x80 && self.ascii >> x & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;
    use crate::mask::classify_kernel;
    use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};

    /// The shortcut classifies every kernel state exactly like the full walk, on tokens that
    /// probe each edge of the body automaton.
    #[test]
    fn shortcut_equals_full_walk() {
        let toks: Vec<&[u8]> = vec![
            b"a", b"ab", b"\"", b"a\"", b"\"}", b"a\"}", b"\\", b"\\\"", b"\\u", b"\\u00", b"\\u0041",
            b"\\ud83d", b"\\n", b"\\x", b"\n", b"a\n", b"\t", b" ", b"\x7f", "\u{e9}".as_bytes(), &[0xC3],
            &[0xA9], &[0xA9, b'a'], &[0xE2, 0x82], &[0x82, 0xAC], &[0xF0, 0x9F], &[0xED, 0xA0, 0x80], &[0xFF],
            b"}", b"{\"", b"x\"y", b"\\\\", b"0", b"00", b"a0", b"0a", b"000", b"0\"", b"0a0", b"\":", b"a\":1", b"0a\n", b"a\na", b"0a\n0", b"0\n",
        ];
        let encoded: Vec<Vec<u8>> = toks.iter().map(|t| t.to_vec()).collect();
        let n = encoded.len();
        let vocab = Vocabulary::new(encoded, VocabType::Raw, VocabularyOptions { stop_token_ids: Some(vec![]), vocab_size: Some(n), ..Default::default() }).unwrap();
        let trie = TokenTrie::new(&vocab);
        let body = BodySlice::new(&trie, n);
        // A flat rule too large to be inlined into its several callers (it is called, not
        // copied, so the cover search must follow a call that is not a tail call).
        let mut seed = 12345u32;
        let literals: Vec<String> = (0..150)
            .map(|_| {
                let w: String = (0..6)
                    .map(|_| {
                        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                        char::from(b'g' + (seed >> 16) as u8 % 20)
                    })
                    .collect();
                format!("\"{w}\"")
            })
            .collect();
        let flat = format!("c ::= [^\"\\\\0-9\\u0000-\\u001f] | \"\\\\\" [\"\\\\/bfnrt] | {}", literals.join(" | "));
        let jc = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\/bfnrt] | "\\u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}) | "\\u" [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}"#;
        let grammars = [
            format!("root ::= \"\\\"\" json_char* \"\\\"}}\"\n{jc}"),
            format!("root ::= \"\\\"\" (\"ab\" | [^\"a] json_char* | \"a\" ([^\"b] json_char*)?) \"\\\"\"\n{jc}"),
            // A shared rule that can end inside string text, followed by dead bytes or a quote.
            format!("root ::= \"\\\"\" body \"\\n\" | \"}}\" body \"\\\"}}\"\nbody ::= json_char* | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" json_char*\n{jc}"),
            // Regex-like rules that call themselves or another rule last (tail calls), long
            // enough not to be inlined.
            format!("root ::= \"{{\\\"\" k \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\"\nk ::= [^\"\\\\0-9\\u0000-\\u001f]* ([0-9] ([^\"\\\\0-9\\u0000-\\u001f] k | [0-9] ([^\"\\\\0-9\\u0000-\\u001f] k | [0-9] ([^\"\\\\0-9\\u0000-\\u001f] k | [0-9] rest))))\nm ::= [^\"\\\\a\\u0000-\\u001f] rest | \"a\" ([^\"\\\\b\\u0000-\\u001f] rest | \"b\" ([^\"\\\\c\\u0000-\\u001f] rest | \"c\" rest))\nrest ::= json_char*\n{jc}"),
            format!("root ::= \"{{\\\"\" k \"\\\":1}}\" | \"[\\\"\" k \"\\\"]\"\nk ::= c* (\"0\" (c k | \"0\" (c k | \"0\" rest)))?\n{flat}\nrest ::= json_char*\n{jc}"),
            // Calls two deep (`m` calls `e`, which calls the flat `c`, kept a rule by its second caller):
            // all body text stays inside.
            format!("root ::= \"{{\\\"\" m \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\" | \"<\" c \">\"\nm ::= e m | \"\"\ne ::= c | [0-9] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" e\n{flat}"),
            // The same, but `e` may read a dead byte after `c` returns (a final return state with
            // an edge is no tail call): not covered.
            format!("root ::= \"{{\\\"\" m \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\" | \"<\" c \">\"\nm ::= e m | \"\"\ne ::= c \"\\n\"? | [0-9] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" e\n{flat}"),
            // A dead byte read two returns up (after `c` returns into `e`, and `e` into `m`).
            format!("root ::= \"{{\\\"\" m \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\" | \"<\" c \">\"\nm ::= e \"\\n\"? m | \"\"\ne ::= c \"x\"? | [0-9] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" e\n{flat}"),
        ];
        let mut covered = 0;
        let mut covered_final = 0;
        let mut covered_nested = 0;
        let mut covered_tail = 0;
        let mut covered_call = 0;
        let mut covered_deep = 0;
        for src in &grammars {
            let g = parse_ebnf(src, "root").unwrap();
            let a = Automata::build(&g).unwrap();
            for s in 0..a.states().len() {
                let s = StateId(s as u32);
                covered += usize::from(BodySlice::covers(&a, s).is_some());
                covered_final += usize::from(BodySlice::covers(&a, s).is_some_and(|c| c.may_end));
                covered_nested += usize::from(BodySlice::covers(&a, s).is_some_and(|c| c.walk_dead));
                covered_tail += usize::from(BodySlice::covers(&a, s).is_some() && !a.rule_edges(s).is_empty() && tail_calls_only(&a, s));
                covered_call += usize::from(BodySlice::covers(&a, s).is_some_and(|c| !c.walk_dead) && !tail_calls_only(&a, s));
                let m = a.rule_name(a.state(s).rule) == "m" && !a.rule_edges(s).is_empty();
                covered_deep += usize::from(m && BodySlice::covers(&a, s).is_some());
                let full = classify_kernel(&a, &trie, n, s, None, None, None).unwrap();
                let fast = classify_kernel(&a, &trie, n, s, Some(&body), None, None).unwrap();
                assert_eq!(full.accepted, fast.accepted, "state {s:?} in {src}");
                let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
                    k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
                };
                assert_eq!(spell(&full), spell(&fast), "state {s:?}");
            }
        }
        assert!(covered >= 2, "the shortcut applied to no state");
        assert!(covered_final >= 1, "no covered state could end its rule");
        assert!(covered_nested >= 1, "no covered state reads its token inside a referenced rule");
        assert!(covered_tail >= 1, "the shortcut applied to {covered_tail} states with tail calls");
        assert!(covered_call >= 1, "the shortcut applied to {covered_call} states calling a flat rule");
        assert!(covered_deep >= 1, "the shortcut applied to {covered_deep} states with nested calls");
    }

    /// The counted-body shortcut (`json_char{m,n}` positions) classifies every kernel state it
    /// applies to exactly like the full walk, with the same FOLLOW sets.
    #[test]
    fn counted_shortcut_equals_full_walk() {
        use crate::follow::{follow_sets, nullable_states};
        use crate::mask::{classify_kernel_budget, Shortcuts};
        let toks: Vec<&[u8]> = vec![
            b"a", b"ab", b"abc", b"abcd", b"abcde", b"abcdef", b" ", b"  ", b"    ", b"\"", b"a\"", b"ab\"",
            b"abc\"", b"\",", b"\"}", b"a\"}", b"\\", b"a\\", b"\\n", b"a\\n", b"\\n\\t", b"\\u",
            b"a\\u00", b"\\u0041", b"\\u0041b", b"\\x", "\u{e9}".as_bytes(), "\u{e9}\u{e9}".as_bytes(),
            "a\u{e9}".as_bytes(), "\u{20ac}".as_bytes(), "ab\u{20ac}".as_bytes(), "\u{1F600}".as_bytes(), &[0xC3],
            &[b'a', 0xC3], &[b'a', b'b', 0xE2, 0x82], &[0xA9], &[0xFF], b"\n", b"a\n", b"}", b"xyz\",", b"1",
        ];
        let encoded: Vec<Vec<u8>> = toks.iter().map(|t| t.to_vec()).collect();
        let n = encoded.len();
        let vocab = Vocabulary::new(encoded, VocabType::Raw, VocabularyOptions { stop_token_ids: Some(vec![]), vocab_size: Some(n), ..Default::default() }).unwrap();
        let trie = TokenTrie::new(&vocab);
        let body = BodySlice::new(&trie, n);
        let jc = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\/bfnrt] | "\\u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}) | "\\u" [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}"#;
        let grammars = [
            format!("root ::= \"{{\" s \"}}\" | \"[\" s \",\" s \"]\"\ns ::= \"\\\"\" json_char{{0,3}} \"\\\"\"\n{jc}"),
            format!("root ::= \"\\\"\" json_char{{2,5}} \"\\\"\" | \"\\\"\" json_char{{0,1}} \"\\\"}}\"\n{jc}"),
            // Longer than any token: every position before the last few accepts the whole slice.
            format!("root ::= \"\\\"\" json_char{{0,12}} \"\\\"\"\n{jc}"),
            // The rule ends inside the string: not a counted body (its states are final).
            format!("root ::= \"\\\"\" t \"\\\"\"\nt ::= json_char{{0,3}}\n{jc}"),
        ];
        let mut counted = 0;
        let mut capacities = std::collections::BTreeSet::new();
        for src in &grammars {
            let g = parse_ebnf(src, "root").unwrap();
            let a = Automata::build(&g).unwrap();
            let follow = follow_sets(&a, &nullable_states(&a));
            for s in 0..a.states().len() {
                let s = StateId(s as u32);
                let f = follow[a.state(s).rule.index()];
                let Some(c) = body_capacity(s, trie.max_depth, |r| body_level(&a, r)) else { continue };
                counted += 1;
                capacities.insert(c);
                let mut never = || false;
                let full = Shortcuts { follow: Some(&f), ..Default::default() };
                let full = classify_kernel_budget(&a, &trie, n, s, full, usize::MAX, &mut never).unwrap().unwrap();
                let fast = Shortcuts { body: Some(&body), follow: Some(&f), capacity: Some(c), ..Default::default() };
                let fast = classify_kernel_budget(&a, &trie, n, s, fast, usize::MAX, &mut never).unwrap().unwrap();
                assert_eq!(full.accepted, fast.accepted, "state {s:?} capacity {c} in {src}");
                let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
                    k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
                };
                assert_eq!(spell(&full), spell(&fast), "state {s:?} capacity {c} in {src}");
            }
        }
        assert!(counted >= 12, "the counted shortcut applied to {counted} states");
        assert!(capacities.contains(&0) && capacities.contains(&1) && capacities.contains(&trie.max_depth), "{capacities:?}");
    }

    /// `add_within` returns exactly the slice tokens that begin at most `c` characters, past the
    /// cumulative sets too.
    #[test]
    fn tokens_within_capacity() {
        let mut toks: Vec<Vec<u8>> = vec![b"a".to_vec(), b"\\n".to_vec(), "\u{e9}x".as_bytes().to_vec(), vec![b'a', 0xE2]];
        toks.extend((30..45).map(|k| vec![b' '; k]));
        toks.push([b"x".repeat(40), b"\"".to_vec()].concat());
        let n = toks.len();
        let vocab = Vocabulary::new(toks.clone(), VocabType::Raw, VocabularyOptions { stop_token_ids: Some(vec![]), vocab_size: Some(n), ..Default::default() }).unwrap();
        let trie = TokenTrie::new(&vocab);
        let body = BodySlice::new(&trie, n);
        // Characters begun, counted directly on the bytes (None: not body text).
        let begun = |t: &[u8]| -> Option<u32> {
            let (mut b, mut k) = (0u8, 0u32);
            for &x in t {
                k += u32::from(b == 0);
                match body_step(b, x) {
                    Body::To(nb) => b = nb,
                    _ => return None,
                }
            }
            Some(k)
        };
        assert_eq!(begun(b"\\n"), Some(1));
        assert_eq!(begun(&[b'a', 0xE2]), Some(2));
        for c in 0..50u32 {
            let mut got = Bitset::new(n);
            body.add_within(c, &mut got);
            for (t, bytes) in toks.iter().enumerate() {
                assert_eq!(got.get(t), begun(bytes).is_some_and(|k| k <= c), "token {t} capacity {c}");
            }
        }
    }

    /// The free-text class shortcut classifies every kernel state like the full walk.
    #[test]
    fn class_shortcut_equals_full_walk() {
        let toks: Vec<&[u8]> = vec![
            b"a", b"ab", b"a b", b"|", b"a|", b"a|b", b"|x", b"\n", b"ab\n", b"\n2", b"x\n|", b"\t", b"\x00",
            "\u{e9}".as_bytes(), "a\u{e9}b".as_bytes(), &[0xC3], &[0xA9], &[0xA9, b'a'], &[0xE2, 0x82], &[0xFF],
            b"k=v", b" k=", b"=", b"\"", b"a\"", b"12", b"1-2",
        ];
        let encoded: Vec<Vec<u8>> = toks.iter().map(|t| t.to_vec()).collect();
        let n = encoded.len();
        let vocab = Vocabulary::new(encoded, VocabType::Raw, VocabularyOptions { stop_token_ids: Some(vec![]), vocab_size: Some(n), ..Default::default() }).unwrap();
        let trie = TokenTrie::new(&vocab);
        let grammars = [
            "root ::= line+\nline ::= [0-9]+ \" \" msg (\"|\" [a-z]+ \"=\" [^ \\n|]+)? \"\\n\"\nmsg ::= [^\\n|]+",
            "root ::= \"<\" [^\\n]* \"\\n\" | \"{\" text \"|\"\ntext ::= [^|\\u0000-\\u001f]* | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" [a-z]*",
        ];
        let mut covered = 0;
        for src in grammars {
            let g = parse_ebnf(src, "root").unwrap();
            let a = Automata::build(&g).unwrap();
            for s in 0..a.states().len() {
                let s = StateId(s as u32);
                let Some(ascii) = ClassSlice::loop_class(&a, s) else { continue };
                let cs = ClassSlice::new(&trie, n, ascii);
                covered += usize::from(ClassSlice::covers(&a, s, ascii));
                let full = classify_kernel(&a, &trie, n, s, None, None, None).unwrap();
                let fast = classify_kernel(&a, &trie, n, s, None, None, Some(&cs)).unwrap();
                assert_eq!(full.accepted, fast.accepted, "state {s:?} in {src}");
                let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
                    k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
                };
                assert_eq!(spell(&full), spell(&fast), "state {s:?} in {src}");
            }
        }
        assert!(covered >= 2, "the class shortcut applied to {covered} states");
    }
}
