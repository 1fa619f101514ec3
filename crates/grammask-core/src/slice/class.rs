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

#[inline]
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
    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.slice.memory_size() + super::frontier_memory(&self.frontier)
    }

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
        // PERF: whole ranges at once, up to the first non-ASCII edge (edges are sorted); byte by
        // byte this was ~3% of a large schema's compile (it runs on every state of the grammar,
        // `CompiledGrammar::new`).
        for e in a.byte_edges(s).iter().take_while(|e| e.lo < 0x80) {
            let range = crate::bitset::ascii_range(e.lo, e.hi.min(0x7F));
            stepping |= range;
            if e.target == s {
                looping |= range;
            }
        }
        let class = if looping.count_ones() >= MIN_CLASS_BYTES { looping } else { stepping };
        (class.count_ones() >= MIN_CLASS_BYTES).then_some(class)
    }

    /// Whether, from `s`, every class byte sequence is read into states without rule references
    /// (then every slice token stays inside the rule, and everything else is frontier).
    /// (Searches already decided in `memo`, the grammar's, are not redone.)
    pub fn covers(a: &Automata, s: StateId, ascii: u128, memo: &CoverMemo) -> bool {
        cover_search(a, s, SliceKey::Class(ascii), |b, x| class_step(ascii, b, x), memo).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;
    use crate::mask::{ascii_loop, class_covers, state_run_class, state_run_class_in, Loops, MIN_ROW_RUN_BYTES};

    /// [`ClassSlice::loop_class`] byte by byte, as first written.
    fn loop_class_bytewise(a: &Automata, s: StateId) -> Option<u128> {
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

    /// `state_run_class` with its first-character search as first written (every target
    /// tried once, in edge order, all tests together).
    fn state_run_class_plain(a: &Automata, s: StateId, memo: &CoverMemo) -> Option<(u128, bool)> {
        let first_char = || {
            let mut tried = Vec::new();
            for e in a.byte_edges(s) {
                let t = e.target;
                if t == s || tried.contains(&t) {
                    continue;
                }
                tried.push(t);
                let c = ascii_loop(a, t);
                if c.count_ones() >= MIN_ROW_RUN_BYTES
                    && ClassSlice::loop_class(a, t) == Some(c)
                    && class_covers(a, s, c, memo)
                {
                    return Some(c);
                }
            }
            None
        };
        match ClassSlice::loop_class(a, s).filter(|&c| class_covers(a, s, c, memo)).or_else(first_char) {
            Some(c) => Some((c, true)),
            None => Some(ascii_loop(a, s)).filter(|c| c.count_ones() >= MIN_ROW_RUN_BYTES).map(|c| (c, false)),
        }
    }

    /// Loop classes and run classes of every state equal their first definitions, on states
    /// that loop on ranges crossing 0x7F, step without looping, start free text beside a quoted
    /// alternative (the first-character search) and dispatch on many keys.
    #[test]
    fn run_classes_equal_plain_definitions() {
        let g = parse_ebnf(
            r#"root ::= "{" (key ":" value ("," key ":" value)*)? "}"
key ::= "\"" [a-z0-9_]+ "\"" | "alpha" | "beta" | "gamma" | "delta" | "omega" | "x" | "y" | "z"
value ::= [^ \n|"] [^ \n|"]* | "\"" [a-z]* "\"" | [0-9]+ | [\x00-\x7F]+ "." | [^\x00-\x40] [ -~]"#,
            "root",
        )
        .unwrap();
        let a = Automata::build(&g).unwrap();
        let (memo, plain_memo, table_memo) = (CoverMemo::default(), CoverMemo::default(), CoverMemo::default());
        let table = Loops::table(&a);
        let (mut loops, mut first_chars) = (0, 0);
        for s in (0..a.states().len() as u32).map(StateId) {
            let want = loop_class_bytewise(&a, s);
            assert_eq!(ClassSlice::loop_class(&a, s), want, "loop class of {s:?}");
            loops += usize::from(want.is_some());
            let run = state_run_class_plain(&a, s, &plain_memo);
            assert_eq!(state_run_class(&a, s, &memo), run, "run class of {s:?}");
            assert_eq!(state_run_class_in(&a, s, &table_memo, &table), run, "tabled run class of {s:?}");
            assert_eq!((table.ascii(s), table.class(s)), (ascii_loop(&a, s), want), "tabled loops of {s:?}");
            let own = want.filter(|&c| class_covers(&a, s, c, &plain_memo));
            first_chars += usize::from(own.is_none() && run.is_some_and(|r| r.1));
        }
        assert!(loops >= 4 && first_chars >= 1, "{loops} loop classes, {first_chars} first-character classes");
    }
}
