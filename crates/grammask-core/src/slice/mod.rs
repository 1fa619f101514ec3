//! Slices: per-vocabulary token sets that stand for most of a kernel walk.
//!
//! Pipeline place: built once per vocabulary (held by [`crate::token_index::TokenIndex`]) from the
//! token trie, and used by kernel classification ([`crate::mask::classify_kernel`]) when a kernel
//! state reads every token of a slice the same way. A *slice* is the set of tokens whose bytes a
//! small byte automaton (the slice automaton, stepped by a `step(state, byte) -> Body` function)
//! reads from its start without leaving it, plus the *frontier*: the trie nodes where a path first
//! leaves it, which are walked for real. Three kinds, one file each:
//! - `body.rs`: [`BodySlice`], JSON string-body text (with counted string bodies, [`body_level`]);
//! - `class.rs`: [`ClassSlice`], free text of one character class, at the trie root;
//! - `run_index.rs`: [`RunIndex`], runs of a character class from any trie node (leads and
//!   breaks, lead lists), derived from `run_bases.rs`'s [`RunBases`], built once per vocabulary;
//! - `walked.rs`: [`WalkedBody`], the body slice with a few ASCII characters walked (string
//!   bodies that refuse some body text);
//! - `quote_cut.rs`: [`QuoteCut`], the text a plain inlined string body (a `pattern`'s) reads
//!   before its closing quote, by the body's form, whatever follows the quote;
//! - `text.rs`: [`TextSlice`], unescaped string text but the line separators, for regex bodies
//!   the region DFA reads.
//!
//! `cover.rs` decides whether a kernel state reads a slice ([`BodySlice::covers`],
//! [`ClassSlice::covers`]) by a product search of its automaton with the slice automaton.

use crate::bitset::Bitset;
use crate::trie::TokenTrie;

mod body;
mod bounded;
mod class;
mod class_body;
mod cover;
mod quote_cut;
mod run_bases;
mod run_index;
#[cfg(test)]
mod tests;
mod text;
pub(crate) mod walked;

pub(crate) use body::body_table;
pub use body::{
    body_capacity, body_level, body_level_into_calls, branches_beside_calls, counted_calls, BodySlice, Counted, Cover,
    Level, QuotedCallees,
};
pub(crate) use bounded::note_short_bound;
pub use bounded::{
    bounded_cover, bounded_covers_served, bounded_search, bounded_searches_spared, bounded_short, bounded_within_found,
    Bounded,
};
pub use class::ClassSlice;
pub use class_body::{
    class_body_slices_from_body, class_body_slices_pruned, class_capacity, class_level, ends_served, ClassBodies,
    ClassBodySlice, ClassChain, ClassLevel, ClassTextIndex,
};
pub use cover::{
    characters_met_at_once, cover_pairs_taken, take_cover_pair, with_cover_budget, CoverMemo, Misread, MisreadAt,
    Refutation, MAX_STATE_COVER_PAIRS,
};
pub use quote_cut::{quote_form, QuoteCut, QUOTE_CUT_MAX_STATES};
pub use run_bases::RunBases;
pub use run_index::{utf8_step, RunIndex, LEAD_LISTS};
pub(crate) use text::text_step;
pub use text::{TextSlice, TEXT_STATES};
pub use walked::{
    inline_string_starts, no_walked_cover, search_string_starts, start_run_cover, walked_cover,
    walked_covers_ruled_out, walked_rounds_cut, FirstChars, StringIndex, Walked, WalkedBody, MAX_WALKED_CHARS,
};

/// Where a byte leads from a body state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Body {
    To(u8),
    /// `"` at a boundary or `u` after `\`: the walk must look (string end, `\u` escape).
    Walk,
    /// Never part of a JSON string at this point.
    Dead,
}

/// A frontier node: its trie index, the byte path of its parent, and whether its byte is dead
/// (never in a string here) rather than `"` or `\u`.
#[derive(Debug)]
pub struct FrontierNode {
    pub node: u32,
    pub path: Box<[u8]>,
    pub dead: bool,
}

/// Bytes held by a frontier (its nodes, as allocated, and their paths).
pub(super) fn frontier_memory(frontier: &Vec<FrontierNode>) -> usize {
    std::mem::size_of::<FrontierNode>() * frontier.capacity() + frontier.iter().map(|f| f.path.len()).sum::<usize>()
}

/// The tokens whose bytes `step` reads from state 0 without leaving its automaton (`To` all the
/// way), and the frontier: each node where a path first reads `Walk` or `Dead`.
pub(super) fn build_slice(
    trie: &TokenTrie,
    vocab_size: usize,
    step: impl Fn(u8, u8) -> Body,
) -> (Bitset, Vec<FrontierNode>) {
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

/// A pre-order walk of the trie under a byte automaton from `start`: `step(state, byte)` is the
/// next state, or `None` where the path leaves the automaton (its subtree is skipped). Calls
/// `token(k, t)` for each token the automaton reads to its end, `k` the characters it begins (a
/// character begins at each byte read from a state where `boundary` holds, so a token ending
/// inside a character counts it), and `leave(node, path, (state, k), byte)` at each node where a
/// path first leaves, `path` the bytes above that node, `state` the automaton's state and `k` the
/// characters begun there. `read(node, (state, k))` is called first at each node the automaton
/// reads, with the state after it and the characters begun up to it.
/// PERF: per node one `step` and a stack slot per depth, no allocation but the two stacks.
pub(super) fn walk_chars<S: Copy>(
    trie: &TokenTrie,
    start: S,
    step: impl Fn(S, u8) -> Option<S>,
    boundary: impl Fn(S) -> bool,
    mut read: impl FnMut(u32, (S, u32)),
    mut token: impl FnMut(u32, u32),
    mut leave: impl FnMut(u32, &[u8], (S, u32), u8),
) {
    // at[d]: (state, characters begun) after the node at depth d on the current path (at[0]: the
    // root); path[d - 1]: that node's byte.
    let depth = trie.max_depth as usize + 1;
    let mut at: Vec<(S, u32)> = vec![(start, 0); depth];
    let mut path: Vec<u8> = vec![0; depth];
    let nodes = &trie.nodes;
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        let d = n.depth as usize;
        let (q, k) = at[d - 1];
        match step(q, n.byte) {
            Some(next) => {
                let k = k + u32::from(boundary(q));
                read(i as u32, (next, k));
                at[d] = (next, k);
                path[d - 1] = n.byte;
                for &t in trie.node_tokens(&n) {
                    token(k, t);
                }
                i += 1;
            }
            None => {
                leave(i as u32, &path[..d - 1], (q, k), n.byte);
                i = n.subtree_end as usize;
            }
        }
    }
}

/// Slice tokens by the number of characters each begins (a character begins at each byte read
/// from a slice automaton's boundary state 0), for counted bodies: [`CharCounts::add_within`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CharCounts {
    /// `within[k]`: the tokens that begin at most `k` characters, for `k <= MAX_CUMULATIVE`.
    within: Vec<Bitset>,
    /// Tokens that begin more than `MAX_CUMULATIVE` characters: (characters, token), sorted.
    long: Vec<(u32, u32)>,
}

/// Counted-repetition capacities with a cumulative token set of their own (each is one bitset;
/// Llama 3 has a few hundred string-body tokens past 32 characters, set one by one).
const MAX_CUMULATIVE: usize = 32;

impl CharCounts {
    pub(super) fn new(vocab_size: usize) -> CharCounts {
        // Each set allocated zeroed, not cloned (a clone copies 16 KB per set on Llama 3).
        let within = (0..=MAX_CUMULATIVE).map(|_| Bitset::new(vocab_size)).collect();
        CharCounts { within, long: Vec::new() }
    }

    /// Notes token `t`, which begins `k` characters (before [`Self::finish`]).
    pub(super) fn insert(&mut self, k: u32, t: u32) {
        match self.within.get_mut(k as usize) {
            Some(w) => w.set(t as usize),
            None => self.long.push((k, t)),
        }
    }

    /// Makes each `within` set cumulative (the union of the one below it and its own tokens).
    pub(super) fn finish(&mut self) {
        for k in 1..self.within.len() {
            let (below, here) = self.within.split_at_mut(k);
            here[0].or_assign(&below[k - 1]);
        }
        self.long.sort_unstable();
    }

    /// Adds to `out` the tokens that begin at most `capacity` characters.
    pub(super) fn add_within(&self, capacity: u32, out: &mut Bitset) {
        out.or_assign(&self.within[(capacity as usize).min(MAX_CUMULATIVE)]);
        for &(k, t) in self.long.iter().take_while(|&&(k, _)| k <= capacity) {
            debug_assert!(k as usize > MAX_CUMULATIVE);
            out.set(t as usize);
        }
    }

    /// The counts less the tokens in `refused`.
    pub(super) fn without(&self, refused: &Bitset) -> CharCounts {
        let less = |w: &Bitset| {
            let words = w.words().iter().zip(refused.words()).map(|(a, r)| a & !r).collect();
            Bitset::from_words(words, w.len())
        };
        let within = self.within.iter().map(less).collect();
        let long = self.long.iter().copied().filter(|&(_, t)| !refused.get(t as usize)).collect();
        CharCounts { within, long }
    }

    pub(super) fn memory_size(&self) -> usize {
        self.within.iter().map(Bitset::memory_size).sum::<usize>() + self.long.len() * 8
    }
}
