//! The plain-text slice of a vocabulary: tokens of unescaped JSON string text other than the line
//! separators, for regex string bodies read by the region DFA.
//!
//! Pipeline place: built once per vocabulary (on the walked-index thread,
//! [`crate::token_index::TokenIndex::prepare_walked`]) and used by the region walk
//! ([`crate::mask`]'s `region.rs`): a kernel whose region DFA reads every plain text from its
//! start without dying takes the slice and walks only the frontier subtrees.
//!
//! *Plain text*: characters U+0020 and up, other than `"`, `\`, U+2028 and U+2029, unescaped
//! (what a `pattern` of `.` reads, and any JSON string body that reads `.`). A regex body whose
//! state loops over "any character but a few" that keep it alive (`.*`, `\S+(\s+(.+\S))?\s*$`
//! past its first word) reads all of it; escapes, quotes and the separators (which `.` refuses)
//! are walked.
//!
//! Invariants: a token is in [`TextSlice::slice`] iff its bytes are plain text (possibly ending
//! inside a UTF-8 sequence). A node is in [`TextSlice::frontier`] iff its parent's path is plain
//! text and its own byte is not (`"`, `\`, a control byte, a byte no UTF-8 text holds there, or
//! the last byte of U+2028 / U+2029); every node not in the slice's paths lies below one.
//!
//! PERF: MaskBench `Github_hard---o51168`'s `^.*$` key less its listed names (`key.re`) and
//! `Github_hard---o27348`'s `\S+(\s+(.+\S))?\s*$` tail walked the whole trie with the region DFA
//! at each new position (~14 M instructions, ~2 ms on Llama 3).
use super::body::body_step_of;
use super::{build_slice, Body, FrontierNode};
use crate::bitset::Bitset;
use crate::trie::TokenTrie;

/// Text-automaton state after `E2` at a boundary (the lead of U+2028 / U+2029).
const AFTER_E2: u8 = 9;
/// Text-automaton state after `E2 80`.
const AFTER_E2_80: u8 = 10;
/// States of the text automaton: 0 (a character boundary), the body automaton's UTF-8 states
/// 2..=8, [`AFTER_E2`] and [`AFTER_E2_80`].
pub const TEXT_STATES: usize = 11;

/// The text automaton's step: `To` within plain text, `Walk` where a path leaves it.
#[inline]
pub(crate) fn text_step(u: u8, x: u8) -> Body {
    TEXT_STEPS[usize::from(u)][usize::from(x)]
}

/// [`text_step`] for every state and byte, built at compile time by [`text_step_of`].
static TEXT_STEPS: [[Body; 256]; TEXT_STATES] = {
    let mut t = [[Body::Walk; 256]; TEXT_STATES];
    let mut u = 0;
    while u < TEXT_STATES {
        let mut x = 0;
        while x < 256 {
            t[u][x] = text_step_of(u as u8, x as u8);
            x += 1;
        }
        u += 1;
    }
    t
};

/// The text automaton by cases ([`text_step`] reads it as a table). State 1 (after `\`) is never
/// reached: `\` leaves plain text.
const fn text_step_of(u: u8, x: u8) -> Body {
    use Body::{To, Walk};
    let next = match u {
        0 => match x {
            b'"' | b'\\' => Walk,
            0xE2 => To(AFTER_E2),
            _ => body_step_of(0, x),
        },
        1 => Walk,
        AFTER_E2 => match x {
            0x80 => To(AFTER_E2_80),
            0x81..=0xBF => To(2),
            _ => Walk,
        },
        AFTER_E2_80 => match x {
            0xA8 | 0xA9 => Walk,
            0x80..=0xBF => To(0),
            _ => Walk,
        },
        _ => body_step_of(u, x),
    };
    match next {
        To(n) => To(n),
        _ => Walk,
    }
}

/// Trie nodes one byte may label for [`TextSlice::byte_nodes`] to list them: punctuation,
/// digits, most capitals, the space (Llama 3: 464 nodes) and UTF-8 leads (`D0`: 4,094), not the
/// common lowercase letters (`e`: 24,358 of 275,392 nodes).
pub const REFUSABLE_MAX_NODES: usize = 4096;

/// Plain-text tokens and the frontier where a path first leaves plain text (see the module doc).
#[derive(Debug)]
pub struct TextSlice {
    pub slice: Bitset,
    /// In trie order, each with its parent's path (`dead` unused: false).
    pub frontier: Vec<FrontierNode>,
    /// `byte_nodes[x]` for a byte `x` that begins plain text at a boundary (an ASCII character
    /// or a UTF-8 lead) labelling at most [`REFUSABLE_MAX_NODES`] trie nodes: those nodes (any
    /// path), in trie order; else `None`. A region walk whose state reads every plain text alive
    /// but the characters that begin with a few such bytes walks the first of them on each path
    /// ([`crate::mask`]'s `region.rs`, "refused bytes").
    pub byte_nodes: Vec<Option<Box<[u32]>>>,
}

impl TextSlice {
    pub fn new(trie: &TokenTrie, vocab_size: usize) -> TextSlice {
        let (slice, frontier) = build_slice(trie, vocab_size, text_step);
        TextSlice { slice, frontier, byte_nodes: byte_nodes(trie) }
    }

    /// The nodes [`Self::byte_nodes`] lists for byte `x`, if any.
    pub fn nodes_of(&self, x: u8) -> Option<&[u32]> {
        self.byte_nodes.get(usize::from(x)).and_then(|n| n.as_deref())
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        let lists: usize = self.byte_nodes.iter().flatten().map(|n| 4 * n.len()).sum();
        self.slice.memory_size() + super::frontier_memory(&self.frontier) + lists
    }
}

/// [`TextSlice::byte_nodes`]: one pass counting the nodes of each byte, one listing those of
/// the bytes under the cap.
fn byte_nodes(trie: &TokenTrie) -> Vec<Option<Box<[u32]>>> {
    let mut count = [0usize; 256];
    for n in &trie.nodes {
        count[usize::from(n.byte)] += 1;
    }
    let mut lists: Vec<Option<Vec<u32>>> = (0..=255u8)
        .map(|x| {
            let plain = matches!(text_step(0, x), Body::To(_));
            (plain && count[usize::from(x)] <= REFUSABLE_MAX_NODES).then(|| Vec::with_capacity(count[usize::from(x)]))
        })
        .collect();
    for (i, n) in trie.nodes.iter().enumerate() {
        if let Some(Some(list)) = lists.get_mut(usize::from(n.byte)) {
            list.push(i as u32);
        }
    }
    lists.into_iter().map(|l| l.map(Vec::into_boxed_slice)).collect()
}
