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
//!   breaks, lead lists).
//!
//! `cover.rs` decides whether a kernel state reads a slice ([`BodySlice::covers`],
//! [`ClassSlice::covers`]) by a product search of its automaton with the slice automaton.

use crate::bitset::Bitset;
use crate::trie::TokenTrie;

mod body;
mod class;
mod cover;
mod run_index;
#[cfg(test)]
mod tests;

pub use body::{body_capacity, body_level, counted_calls, BodySlice, Counted, Cover, Level};
pub use class::ClassSlice;
pub use cover::CoverMemo;
pub use run_index::{RunIndex, LEAD_LISTS};

/// Where a byte leads from a body state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Body {
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
