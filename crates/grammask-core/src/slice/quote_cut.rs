//! Quote cuts: the inside of a plain string body, read once per vocabulary and body form, apart
//! from what follows its closing quote.
//!
//! Pipeline place: a kernel-classification shortcut ([`crate::mask::classify_quote_cut`]) for a
//! kernel state inside a string whose body is inlined into its rule as plain byte edges (a
//! `pattern` string: `"\"" [a-z] [0-9_a-z]* "\"" rest`). Its *region* is the set of states the
//! kernel state reaches by byte edges on bytes other than `"`; where every region state is
//! plain (no rule edges, not final), the kernel walk reads a token that holds no `"` as that
//! small automaton alone does, whatever follows the quote. [`QuoteCut`] holds those tokens and
//! the nodes where a path first reads a `"` the region has an edge on (the *exits*); a kernel
//! takes the tokens and walks the exits' subtrees for real (its own rest of rule after the quote).
//!
//! Invariants: the form ([`quote_form`]) lists the region exactly (states in discovery order,
//! each with its edges on bytes other than `"` by target number, and whether it reads `"`), so
//! equal forms read equal token texts without a `"` from their kernel states. A token is in
//! [`QuoteCut::inside`] iff it holds no `"` and the region reads all of it; a node is in
//! [`QuoteCut::exits`] iff its byte is `"`, its parent's path holds no `"` and the region reads
//! it to a state with a `"` edge. Any other token fails inside the region with no rule end on its
//! path (no region state is final): refused.
//!
//! PERF: MaskBench `JsonSchemaStore---meta` inlines `^[a-z][a-z0-9_]+$` (`namespace`,
//! `role_name`) into nine `if`/`then`/`else` object variants: each position in such a string
//! held nine kernels that differ only after the quote, each walked (17,582 tokens inside, ~2.9 M
//! instructions with the cross-grammar key that never matched), 2-3 ms of thread CPU at token 44.
use super::FrontierNode;
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::trie::TokenTrie;

/// Region states a quote form lists at most; past them a state is walked as before.
pub const QUOTE_CUT_MAX_STATES: usize = 64;

/// A form's word for "this state reads `"`" (after its edges; a target number is below it).
const READS_QUOTE: u32 = u32::MAX;
/// A form's word that ends a state's listing.
const END_STATE: u32 = u32::MAX - 1;

/// The quote form of kernel state `s`: its region's states (reached by byte edges on bytes other
/// than `"`) numbered in discovery order, each listed as its edges (`lo | hi << 8 | target << 16`,
/// `"` left out of each range), [`READS_QUOTE`] if it has an edge on `"`, then [`END_STATE`].
/// `None` when a region state has rule edges or is final, the region passes
/// [`QUOTE_CUT_MAX_STATES`] states, or no region state reads `"` (nothing to cut).
pub fn quote_form(a: &Automata, s: StateId) -> Option<Vec<u32>> {
    let mut order = vec![s];
    let mut form = Vec::new();
    let mut quote = false;
    let mut k = 0;
    while let Some(&q) = order.get(k) {
        k += 1;
        if !a.rule_edges(q).is_empty() || a.state(q).is_final {
            return None;
        }
        let mut reads_quote = false;
        for e in a.byte_edges(q) {
            reads_quote |= e.lo <= b'"' && b'"' <= e.hi;
            // The edge's bytes other than `"`, as one or two ranges; its target is in the region
            // only through them (the states after the quote are not listed).
            let parts = [(e.lo, e.hi.min(b'"' - 1)), (e.lo.max(b'"' + 1), e.hi)];
            let mut parts = parts.into_iter().filter(|(lo, hi)| lo <= hi).peekable();
            if parts.peek().is_none() {
                continue;
            }
            let t = match order.iter().position(|&x| x == e.target) {
                Some(t) => t,
                None if order.len() < QUOTE_CUT_MAX_STATES => {
                    order.push(e.target);
                    order.len() - 1
                }
                None => return None,
            };
            for (lo, hi) in parts {
                form.push(u32::from(lo) | u32::from(hi) << 8 | (t as u32) << 16);
            }
        }
        if reads_quote {
            form.push(READS_QUOTE);
            quote = true;
        }
        form.push(END_STATE);
    }
    quote.then_some(form)
}

/// The tokens a quote form's region reads without a `"`, and its exits (see the module doc).
#[derive(Debug)]
pub struct QuoteCut {
    pub inside: Bitset,
    /// In trie order, each with its parent's path (`dead` unused: false).
    pub exits: Vec<FrontierNode>,
}

impl QuoteCut {
    /// Walks the trie with the region of `form` ([`quote_form`]) from its state 0.
    pub fn new(trie: &TokenTrie, form: &[u32], vocab_size: usize) -> QuoteCut {
        // The region's step as a table: per state and byte, the target, `EXIT` (its `"`) or `DEAD`.
        const EXIT: u8 = u8::MAX - 1;
        const DEAD: u8 = u8::MAX;
        let mut table: Vec<[u8; 256]> = vec![[DEAD; 256]];
        for &w in form {
            let row = table.last_mut().expect("one row per listed state");
            match w {
                END_STATE => table.push([DEAD; 256]),
                READS_QUOTE => row[usize::from(b'"')] = EXIT,
                // Targets are below `QUOTE_CUT_MAX_STATES`.
                _ => row[usize::from(w as u8)..=usize::from((w >> 8) as u8)].fill((w >> 16) as u8),
            }
        }
        let mut inside = crate::token_set::zeroed_bitset(vocab_size);
        let mut exits = Vec::new();
        // `at[d - 1]`: the region state after the current path's first `d` bytes, `path[d - 1]` its
        // byte (set for the path down to the current node's parent).
        let depth = trie.max_depth as usize + 1;
        let (mut at, mut path) = (vec![0u8; depth], vec![0u8; depth]);
        let nodes = &trie.nodes;
        let mut i = 0;
        while i < nodes.len() {
            let n = &nodes[i];
            let d = n.depth as usize;
            let from = if d == 1 { 0 } else { at[d - 2] };
            match table[usize::from(from)][usize::from(n.byte)] {
                DEAD => i = n.subtree_end as usize,
                EXIT => {
                    exits.push(FrontierNode { node: i as u32, path: path[..d - 1].into(), dead: false });
                    i = n.subtree_end as usize;
                }
                t => {
                    for &tok in trie.node_tokens(n) {
                        inside.set(tok as usize);
                    }
                    at[d - 1] = t;
                    path[d - 1] = n.byte;
                    i += 1;
                }
            }
        }
        QuoteCut { inside, exits }
    }

    pub fn memory_size(&self) -> usize {
        self.inside.memory_size() + super::frontier_memory(&self.exits)
    }
}
