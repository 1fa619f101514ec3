//! String bodies that read almost every body text: the body slice with a few ASCII characters
//! *walked* instead of read.
//!
//! Pipeline place: a kernel-classification shortcut ([`crate::mask::classify_kernel`]) for a
//! string-body state that does not cover the body slice ([`super::BodySlice::covers`]) because
//! it refuses some body text made of a few ASCII characters: a key pattern `^(/[^/]+)+$` refuses
//! `//`, so each new position walked the whole trie (~122k tokens, 3.4 ms on Llama 3). With a
//! set `W` of such characters walked ([`walked_cover`]), the state reads the body text without
//! them; the kernel then takes that text's tokens ([`WalkedBody::slice`]: the body slice less the
//! tokens with a `W` character) and walks the frontier ([`WalkedBody::frontier`]: the body
//! slice's frontier outside the `W` subtrees, plus the nodes where a path first reads a `W`
//! character), so its cost follows what it may refuse, not the vocabulary.
//!
//! Invariant: a node is in a [`WalkedBody`]'s frontier iff its parent's path is body text with no
//! `W` character at a character boundary and its own byte is not body text there (a body frontier
//! node) or is a `W` character at a character boundary.
use super::body::{body_step, body_table};
use super::cover::{cover_search, CoverMemo, SliceKey};
use super::{Body, BodySlice, Cover, FrontierNode};
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::trie::TokenTrie;

/// Most characters one walked set holds (each search that adds one is a cover search).
pub const MAX_WALKED_CHARS: u32 = 4;

/// Most first-occurrence nodes a character may have to be walked: a common character (a space, a
/// letter) would walk most of the trie, which the plain walk does as well.
const MAX_FIRST_NODES: usize = 8192;

/// Per vocabulary, for each ASCII body character, the trie nodes where a path of body text first
/// reads it at a character boundary (in trie order); `None` past [`MAX_FIRST_NODES`].
#[derive(Debug)]
pub struct FirstChars {
    nodes: Vec<Option<Vec<u32>>>,
}

impl FirstChars {
    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.nodes.iter().map(|n| 24 + n.as_ref().map_or(0, |l| 4 * l.capacity())).sum()
    }

    /// PERF: one pass over the body-text part of the trie (what [`BodySlice::new`] walks).
    pub fn new(trie: &TokenTrie) -> FirstChars {
        let (table, _) = body_table();
        let mut nodes: Vec<Option<Vec<u32>>> = vec![Some(Vec::new()); 128];
        // at[d]: (body state, ASCII characters read at a boundary) after d bytes of the path.
        let mut at: Vec<(u8, u128)> = vec![(0, 0); trie.max_depth as usize + 1];
        let mut i = 0;
        while i < trie.nodes.len() {
            let n = trie.nodes[i];
            let d = n.depth as usize;
            let (b, seen) = at[d - 1];
            let Body::To(next) = table[usize::from(b)][usize::from(n.byte)] else {
                i = n.subtree_end as usize;
                continue;
            };
            let mut seen_here = seen;
            if b == 0 && n.byte < 0x80 {
                seen_here |= 1 << n.byte;
                if seen >> n.byte & 1 == 0 {
                    let list = &mut nodes[usize::from(n.byte)];
                    if list.as_ref().is_some_and(|l| l.len() >= MAX_FIRST_NODES) {
                        *list = None;
                    }
                    if let Some(l) = list {
                        l.push(i as u32);
                    }
                }
            }
            at[d] = (next, seen_here);
            i += 1;
        }
        FirstChars { nodes }
    }

    /// Whether ASCII byte `x` may be walked (it is body text with few enough first nodes).
    pub fn walkable(&self, x: u8) -> bool {
        self.nodes.get(usize::from(x)).is_some_and(Option::is_some)
    }
}

/// The body slice with the ASCII characters of `walked` walked (see the module doc).
#[derive(Debug)]
pub struct WalkedBody {
    pub slice: Bitset,
    /// In trie order, so that successive replays share their prefixes.
    pub frontier: Vec<FrontierNode>,
}

impl WalkedBody {
    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        self.slice.memory_size() + super::frontier_memory(&self.frontier)
    }

    /// `None` when a character of `walked` is not [`FirstChars::walkable`].
    /// PERF: from the body slice, not a trie walk: one token bitset copy, one bit cleared per
    /// token below the walked characters' first nodes (~2k for `/` on Llama 3).
    pub fn new(trie: &TokenTrie, body: &BodySlice, firsts: &FirstChars, walked: u128) -> Option<WalkedBody> {
        let mut first: Vec<u32> = Vec::new();
        for x in (0..128u8).filter(|&x| walked >> x & 1 == 1) {
            first.extend(firsts.nodes.get(usize::from(x))?.as_ref()?);
        }
        first.sort_unstable();
        // The outermost first nodes: the others lie in their subtrees.
        let mut outer: Vec<u32> = Vec::new();
        for n in first {
            if outer.last().is_none_or(|&o| n >= trie.nodes[o as usize].subtree_end) {
                outer.push(n);
            }
        }
        let mut slice = body.slice.clone();
        for &o in &outer {
            for &t in trie.subtree_tokens(o) {
                slice.unset(t as usize);
            }
        }
        let inside = |n: u32| {
            let k = outer.partition_point(|&o| o <= n);
            k > 0 && n < trie.nodes[outer[k - 1] as usize].subtree_end
        };
        let mut frontier: Vec<FrontierNode> = body
            .frontier
            .iter()
            .filter(|f| !inside(f.node))
            .map(|f| FrontierNode { node: f.node, path: f.path.clone(), dead: f.dead })
            .chain(outer.iter().map(|&o| FrontierNode { node: o, path: trie.bytes_above(o), dead: false }))
            .collect();
        frontier.sort_unstable_by_key(|f| f.node);
        Some(WalkedBody { slice, frontier })
    }
}

/// The body automaton with the ASCII characters of `walked` walked at a character boundary.
fn walked_step(walked: u128) -> impl Fn(u8, u8) -> Body {
    move |b, x| if b == 0 && x < 0x80 && walked >> x & 1 == 1 { Body::Walk } else { body_step(b, x) }
}

/// A set of walkable ASCII characters ([`FirstChars::walkable`]; found one misread at a time, at
/// most [`MAX_WALKED_CHARS`]) with which kernel state `s` covers the body slice, given what the
/// body slice's own search from `s` misread (`misread`, from [`BodySlice::covers_or_misread`]);
/// `None` when no such set is found. Memoized per state in `memo`; `walkable` is asked only of a
/// set that covers, so that a vocabulary builds [`FirstChars`] only once one may be used.
pub fn walked_cover(
    a: &Automata,
    s: StateId,
    misread: Option<(u8, u8)>,
    walkable: impl Fn(u8) -> bool,
    memo: &CoverMemo,
) -> Option<(u128, Cover)> {
    let known = |m: &CoverMemo| m.walked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&s).copied();
    if let Some(found) = known(memo) {
        return found;
    }
    let found = walked_search(a, s, misread, memo)
        .filter(|&(walked, _)| (0..128u8).filter(|&x| walked >> x & 1 == 1).all(&walkable));
    memo.walked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(s, found);
    found
}

/// [`walked_cover`] before the walkable check and the memo.
fn walked_search(a: &Automata, s: StateId, mut misread: Option<(u8, u8)>, memo: &CoverMemo) -> Option<(u128, Cover)> {
    // Every boundary character no configuration at the root reads is a misread unless walked.
    if refused_at_root(a, s).is_some_and(|r| r.count_ones() > MAX_WALKED_CHARS) {
        return None;
    }
    let mut walked = 0u128;
    loop {
        match misread {
            // A boundary character the body reads that some reachable set refuses.
            Some((0, x)) if matches!(body_step(0, x), Body::To(0)) && walked.count_ones() < MAX_WALKED_CHARS => {
                walked |= 1 << x;
            }
            _ => return None,
        }
        match cover_search(a, s, SliceKey::BodyWalking(walked), walked_step(walked), memo) {
            Ok(ends) => return Some((walked, Cover { may_end: ends.may_end, walk_dead: false })),
            Err(m) => misread = m,
        }
    }
}

/// The ASCII body characters (at a character boundary) that no configuration of kernel state
/// `s`'s closure reads, from a superset of that closure (`s` and every state its rule edges
/// reach as callee starts or return states); `None` past 256 states.
/// PERF: spares the walked searches of a state that refuses many characters (a name pattern
/// `^[a-z]+$`), each a cover search from scratch.
fn refused_at_root(a: &Automata, s: StateId) -> Option<u128> {
    let mut seen = vec![s];
    let mut read = 0u128;
    let mut i = 0;
    while let Some(&q) = seen.get(i) {
        i += 1;
        for e in a.byte_edges(q).iter().filter(|e| e.lo < 0x80) {
            let hi = e.hi.min(0x7F);
            read |= (u128::MAX >> (127 - hi)) & (u128::MAX << e.lo);
        }
        for &(r, ret) in a.rule_edges(q) {
            for t in [a.callee_start(q, r), ret] {
                if !seen.contains(&t) {
                    if seen.len() >= 256 {
                        return None;
                    }
                    seen.push(t);
                }
            }
        }
    }
    let body = (0..0x80u8).filter(|&x| matches!(body_step(0, x), Body::To(0))).fold(0u128, |m, x| m | 1 << x);
    Some(body & !read)
}
