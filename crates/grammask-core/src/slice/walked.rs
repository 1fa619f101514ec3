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
use super::cover::{cover_search, CoverMemo, Misread, SliceKey};
use super::{build_slice, Body, BodySlice, Cover, FrontierNode};
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::trie::TokenTrie;

/// Most characters one walked set holds (each search that adds one is a cover search).
pub const MAX_WALKED_CHARS: u32 = 4;

/// Most strings one walked-strings set holds (each search that adds one is a cover search).
pub const MAX_WALKED_STRINGS: usize = 6;

/// Longest walked string.
const MAX_STRING_LEN: usize = 3;

/// The first slice state past the body automaton's (0-8) of a walked-strings slice: state
/// `FIRST_PREFIX_STATE + i` is body state 0 after text ending with the `i`-th proper prefix of a
/// walked string (the longest such), so at most 16 - 9 = 7 prefixes.
pub(crate) const FIRST_PREFIX_STATE: u8 = 9;

/// What a string body walks: a few ASCII characters wherever they begin ([`WalkedBody::new`]), or
/// a few short ASCII strings (one to [`MAX_STRING_LEN`] characters, each packed low byte first,
/// sorted, 0 past the last) wherever a path first completes one ([`WalkedBody::with_strings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Walked {
    Chars(u128),
    Strings([u32; MAX_WALKED_STRINGS]),
}

/// The bytes of a packed walked string.
fn unpack(w: u32) -> Vec<u8> {
    w.to_le_bytes().into_iter().take_while(|&x| x != 0).collect()
}

/// The slice step of walked strings `strings` as a table (see [`FIRST_PREFIX_STATE`]): at a
/// boundary, a body-text ASCII character that completes a walked string is `Walk`, else it leads
/// to the state of the longest suffix of the text that is a proper prefix of one (0: none); any
/// other byte steps as from body state 0. `None` past 7 prefixes.
fn strings_table(strings: &[u32]) -> Option<Box<[[Body; 256]; 16]>> {
    let prefixes = prefixes_of(strings);
    let strings: Vec<Vec<u8>> = strings.iter().filter(|&&w| w != 0).map(|&w| unpack(w)).collect();
    if prefixes.len() > usize::from(16 - FIRST_PREFIX_STATE) {
        return None;
    }
    let mut t = Box::new([[Body::Dead; 256]; 16]);
    for (b, row) in t.iter_mut().enumerate() {
        let context: &[u8] = match b {
            1..=8 => {
                for (x, cell) in row.iter_mut().enumerate() {
                    *cell = body_step(b as u8, x as u8);
                }
                continue;
            }
            0 => &[],
            _ => match prefixes.get(b - usize::from(FIRST_PREFIX_STATE)) {
                Some(p) => p,
                None => continue,
            },
        };
        for (x, cell) in row.iter_mut().enumerate() {
            let x = x as u8;
            *cell = body_step(0, x);
            if x >= 0x80 || *cell != Body::To(0) {
                continue;
            }
            let mut text = context.to_vec();
            text.push(x);
            if strings.iter().any(|w| text.ends_with(w)) {
                *cell = Body::Walk;
            } else if let Some(i) = (0..text.len()).find_map(|k| prefixes.iter().position(|p| *p == text[k..])) {
                *cell = Body::To(FIRST_PREFIX_STATE + i as u8);
            }
        }
    }
    Some(t)
}

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

impl WalkedBody {
    /// The body slice with the strings of `strings` walked ([`Walked::Strings`]): one walk of the
    /// body-text trie under [`strings_table`]'s step. `None` when the table does not fit or the
    /// walked subtrees hold more than a quarter of the body slice (a walk would cost as much).
    pub fn with_strings(trie: &TokenTrie, body: &BodySlice, strings: [u32; MAX_WALKED_STRINGS]) -> Option<WalkedBody> {
        let table = strings_table(&strings)?;
        let (slice, frontier) = build_slice(trie, body.slice.len(), |b, x| table[usize::from(b)][usize::from(x)]);
        let lost = body.slice.count_ones() - slice.count_ones();
        if std::env::var_os("DBG_WALKED").is_some() {
            eprintln!("with_strings {strings:x?} lost {lost} frontier {}", frontier.len());
        }
        (lost <= body.slice.count_ones() / 4).then_some(WalkedBody { slice, frontier })
    }
}

/// The body automaton with the ASCII characters of `walked` walked at a character boundary.
fn walked_step(walked: u128) -> impl Fn(u8, u8) -> Body {
    move |b, x| if b == 0 && x < 0x80 && walked >> x & 1 == 1 { Body::Walk } else { body_step(b, x) }
}

/// A set of walkable ASCII characters ([`FirstChars::walkable`]; found one misread at a time, at
/// most [`MAX_WALKED_CHARS`]) with which kernel state `s` covers the body slice, given what the
/// body slice's own search from `s` misread (`misread`, from [`BodySlice::covers_or_misread`]);
/// `None` when no such set is found; failing that, a set of walked strings
/// ([`Walked::Strings`], see [`strings_search`]). Memoized per state in `memo`; `walkable` is
/// asked only of a set that covers, so that a vocabulary builds [`FirstChars`] only once one may
/// be used.
pub fn walked_cover(
    a: &Automata,
    s: StateId,
    misread: Option<Misread>,
    walkable: impl Fn(u8) -> bool,
    memo: &CoverMemo,
) -> Option<(Walked, Cover)> {
    let known = |m: &CoverMemo| m.walked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&s).copied();
    if let Some(found) = known(memo) {
        return found;
    }
    let found = walked_search(a, s, misread, memo)
        .filter(|&(walked, _)| (0..128u8).filter(|&x| walked >> x & 1 == 1).all(&walkable))
        .map(|(walked, cover)| (Walked::Chars(walked), cover))
        .or_else(|| strings_search(a, s, misread, memo));
    if std::env::var_os("DBG_WALKED").is_some() {
        eprintln!("walked_cover state {} misread {misread:?} -> {found:?}", s.0);
    }
    memo.walked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(s, found);
    found
}

/// [`walked_cover`] before the walkable check and the memo.
fn walked_search(a: &Automata, s: StateId, misread: Option<Misread>, memo: &CoverMemo) -> Option<(u128, Cover)> {
    let mut misread = misread.map(|(b, x, _)| (b, x));
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
            Err(m) => misread = m.map(|(b, x, _)| (b, x)),
        }
    }
}

/// A set of walked strings with which kernel state `s` covers the body slice, found one misread
/// at a time from `misread` (at most [`MAX_WALKED_STRINGS`]): each misread character is walked
/// after the characters a path to it read (its prefix state's, or the misread's history), as
/// many as fit, up to [`MAX_STRING_LEN`] in all: a string pattern that refuses text holding two of
/// its words (`oneOf` patterns `"maker"`, `"admin"`: MaskBench `Github_easy---o65510`) refuses
/// only past `ker` or `min`, which few tokens hold, where no character of them could be walked
/// (`r`, `n` begin most of the trie).
fn strings_search(a: &Automata, s: StateId, mut misread: Option<Misread>, memo: &CoverMemo) -> Option<(Walked, Cover)> {
    if refused_at_root(a, s).is_some_and(|r| r.count_ones() > MAX_WALKED_CHARS) {
        return None;
    }
    let mut strings = [0u32; MAX_WALKED_STRINGS];
    let mut n = 0;
    loop {
        let (b, x, seen) = misread?;
        if n == MAX_WALKED_STRINGS || x >= 0x80 || body_step(0, x) != Body::To(0) {
            return None;
        }
        // The characters before `x` on a path that misreads it, nearest last.
        let before: Vec<u8> = if b >= FIRST_PREFIX_STATE {
            prefixes_of(&strings).get(usize::from(b - FIRST_PREFIX_STATE))?.clone()
        } else if b == 0 {
            seen.to_be_bytes().into_iter().filter(|&c| c != 0).collect()
        } else {
            return None;
        };
        let fits = (0..=before.len().min(MAX_STRING_LEN - 1)).rev().find_map(|k| {
            let mut w = before[before.len() - k..].to_vec();
            w.push(x);
            let mut next = strings;
            next[n] = w.iter().rev().fold(0u32, |p, &c| p << 8 | u32::from(c));
            next[..=n].sort_unstable();
            strings_table(&next).map(|_| next)
        })?;
        strings = fits;
        if std::env::var_os("DBG_WALKED").is_some() {
            eprintln!("  misread {:?} -> {strings:x?}", (b, x as char, seen));
        }
        n += 1;
        let table = strings_table(&strings)?;
        let step = move |b: u8, x: u8| table[usize::from(b)][usize::from(x)];
        match cover_search(a, s, SliceKey::BodyStrings(strings), step, memo) {
            Ok(ends) => return Some((Walked::Strings(strings), Cover { may_end: ends.may_end, walk_dead: false })),
            Err(m) => misread = m,
        }
    }
}

/// The proper prefixes of walked strings, in [`strings_table`]'s state order.
fn prefixes_of(strings: &[u32]) -> Vec<Vec<u8>> {
    let mut prefixes: Vec<Vec<u8>> = strings
        .iter()
        .filter(|&&w| w != 0)
        .map(|&w| unpack(w))
        .flat_map(|w| (1..w.len()).map(move |k| w[..k].to_vec()))
        .collect();
    prefixes.sort_unstable();
    prefixes.dedup();
    prefixes
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
