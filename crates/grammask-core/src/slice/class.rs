//! Free-text class slices: the slice idea for text of one character class that admits every
//! non-ASCII character (`[^\n|]+`, `[^"\n]*`), at the trie root.
//!
//! Pipeline place: built per vocabulary and ASCII class by the token index, on the first grammar
//! with a state that loops on the class; used by kernel classification at such states.
use super::body::body_step;
use super::cover::{cover_search, CoverMemo, SliceKey};
use super::{build_slice, Body, FrontierNode};
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::trie::TokenTrie;

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

/// Fewest ASCII bytes in a loop class for the shortcut to be worth it (a state that allows few
/// bytes prunes the trie early anyway).
const MIN_CLASS_BYTES: u32 = 32;

pub(super) fn class_step(ascii: u128, b: u8, x: u8) -> Body {
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
    /// (Searches already decided in `memo`, the grammar's, are not redone.)
    pub fn covers(a: &Automata, s: StateId, ascii: u128, memo: &CoverMemo) -> bool {
        cover_search(a, s, SliceKey::Class(ascii), |b, x| class_step(ascii, b, x), memo).is_some()
    }
}
