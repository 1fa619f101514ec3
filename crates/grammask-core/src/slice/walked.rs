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
use super::cover::{
    cover_search, cover_search_from, CoverMemo, Misread, SliceKey, HISTORY_CHARS, SLICE_STATES, WIDE_MISREAD,
};
use super::{Body, BodySlice, Cover, FrontierNode};
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::trie::{Node as TrieNode, TokenTrie};

/// Most characters one walked set holds (each search that adds one is a cover search).
pub const MAX_WALKED_CHARS: u32 = 4;

/// Most strings one walked-strings set holds (each search that adds one is a cover search).
pub const MAX_WALKED_STRINGS: usize = 6;

/// Longest walked string.
const MAX_STRING_LEN: usize = 3;

/// The first slice state past the body automaton's (0-8) of a walked-strings slice: state
/// `FIRST_PREFIX_STATE + i` is body state 0 after text ending with the `i`-th proper prefix of a
/// walked string (the longest such).
pub(crate) const FIRST_PREFIX_STATE: u8 = 9;

/// Most proper prefixes of one walked-strings set (the slice states past the body's), more than
/// [`MAX_WALKED_STRINGS`] strings of [`MAX_STRING_LEN`] characters have.
/// PERF: 7 (16 slice states) left the five `oneOf` words of MaskBench `Github_easy---o65510`
/// (9 prefixes) without a shared seed: each of its five string starts ran rounds of its own.
const MAX_PREFIXES: usize = SLICE_STATES - FIRST_PREFIX_STATE as usize;

/// What a string body walks: a few ASCII characters wherever they begin ([`WalkedBody::new`]), or
/// a few short ASCII strings (one to [`MAX_STRING_LEN`] characters, each packed low byte first,
/// sorted, 0 past the last) wherever a path first completes one ([`WalkedBody::with_strings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Walked {
    Chars(u128),
    Strings([u32; MAX_WALKED_STRINGS]),
    /// Strings walked as [`Walked::Strings`], and, from the token's start, a `stop` character
    /// right after a leading run of `run` characters (`inside`: the token starts inside the run,
    /// so a `stop` character first is walked too; [`start_run_cover`]).
    StartRun {
        strings: [u32; MAX_WALKED_STRINGS],
        run: u128,
        stop: u128,
        inside: bool,
    },
}

/// The slice step of walked strings `strings` as a table (see [`FIRST_PREFIX_STATE`]): at a
/// boundary, a body-text ASCII character that completes a walked string is `Walk`, else it leads
/// to the state of the longest suffix of the text that is a proper prefix of one (0: none); any
/// other byte steps as from body state 0. `None` past [`MAX_PREFIXES`].
fn strings_table(strings: &[u32]) -> Option<Box<[[Body; 256]; SLICE_STATES]>> {
    let prefixes: Vec<u32> = prefixes_of(strings);
    if prefixes.len() > MAX_PREFIXES {
        return None;
    }
    let strings: Vec<u32> = strings.iter().copied().filter(|&w| w != 0).collect();
    let mut t = Box::new([[Body::Dead; 256]; SLICE_STATES]);
    let (body, _) = body_table();
    for (b, row) in t.iter_mut().enumerate() {
        // The text's last characters (packed, first in the low byte) and how many.
        let (context, len) = match b {
            1..=8 => {
                *row = body[b];
                continue;
            }
            0 => (0u32, 0u32),
            _ => match prefixes.get(b - usize::from(FIRST_PREFIX_STATE)) {
                Some(&p) => (p, packed_len(p)),
                None => continue,
            },
        };
        *row = body[0];
        for x in (0..0x80u8).filter(|&x| body[0][usize::from(x)] == Body::To(0)) {
            let text = context | u32::from(x) << (8 * len);
            // Its suffixes, longest first: `text >> 8k` drops the first k characters.
            let suffixes = || (0..=len).map(|k| text >> (8 * k));
            row[usize::from(x)] = if suffixes().any(|u| strings.contains(&u)) {
                Body::Walk
            } else {
                suffixes()
                    .find_map(|u| prefixes.iter().position(|&p| p == u))
                    .map_or(Body::To(0), |i| Body::To(FIRST_PREFIX_STATE + i as u8))
            };
        }
    }
    Some(t)
}

/// [`strings_table`] with a token start (the state returned): there, a character of `run`
/// (ASCII body characters) begins a *leading run*, in which a character of `stop` (ASCII body
/// characters outside `run`) is `Walk`. A leading-run state tracks walked-string prefixes as
/// its strings-table state does; a byte outside `run` and `stop` leaves the run for that state's
/// step. `None` when the states do not fit.
fn start_table(
    strings: &[u32; MAX_WALKED_STRINGS],
    run: u128,
    stop: u128,
) -> Option<(Box<[[Body; 256]; SLICE_STATES]>, u8)> {
    let mut t = strings_table(strings)?;
    let p = prefixes_of(strings).len() as u8;
    // `start`: the token start; `start + 1 + q`: in the leading run, at strings-table state 0
    // (q = 0) or at prefix state `FIRST_PREFIX_STATE + q - 1`.
    let start = FIRST_PREFIX_STATE + p;
    if usize::from(start + 1 + p) >= SLICE_STATES {
        return None;
    }
    let into_run = |step: Body| match step {
        Body::To(0) => Body::To(start + 1),
        Body::To(b) => Body::To(start + 2 + (b - FIRST_PREFIX_STATE)),
        other => other,
    };
    for q in 0..=p {
        let from = if q == 0 { 0 } else { FIRST_PREFIX_STATE + q - 1 };
        let mut row = t[usize::from(from)];
        for x in 0..0x80u8 {
            if stop >> x & 1 == 1 {
                row[usize::from(x)] = Body::Walk;
            } else if run >> x & 1 == 1 {
                row[usize::from(x)] = into_run(row[usize::from(x)]);
            }
        }
        t[usize::from(start + 1 + q)] = row;
    }
    let mut row = t[0];
    for x in (0..0x80u8).filter(|&x| run >> x & 1 == 1) {
        row[usize::from(x)] = into_run(row[usize::from(x)]);
    }
    t[usize::from(start)] = row;
    Some((t, start))
}

/// The ASCII characters the body automaton reads at a boundary and returns to state 0.
fn ascii_body_chars() -> u128 {
    (0..0x80u8).filter(|&x| matches!(body_step(0, x), Body::To(0))).fold(0u128, |m, x| m | 1 << x)
}

/// A walked body ([`Walked::StartRun`]) that kernel state `s` (no rule edges) covers from the
/// token start, where `run` (ASCII body characters `s` steps on) begins a leading run and `stop`
/// is what every state one run character from `s` refuses: a key that must not match
/// `net_[a-z]+[0-9]+`, after `net_`, refuses a digit after the token's leading letters, which no
/// walked string (all after the token start) captures (MaskBench `Github_medium---o83286`). The
/// strings are the grammar's seed ([`CoverMemo::strings_seed`]), then none. `None` when no stop
/// character is found or no search covers.
pub fn start_run_cover(a: &Automata, s: StateId, run: u128, memo: &CoverMemo) -> Option<(Walked, Cover)> {
    let body = ascii_body_chars();
    let run = run & body;
    if run == 0 || !a.rule_edges(s).is_empty() {
        return None;
    }
    let mut targets: Vec<StateId> = (0..0x80u8).filter(|&x| run >> x & 1 == 1).filter_map(|x| a.step(s, x)).collect();
    targets.sort_unstable();
    targets.dedup();
    // The characters every run target refuses.
    let stop = body & !run & !targets.iter().fold(0u128, |m, &t| m | ascii_read(a, t));
    if targets.is_empty() {
        return None;
    }
    let seed = *memo.strings_seed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if stop == 0 {
        // Nothing refused after the run: the seed's strings alone, as a string start takes them.
        let strings = seed?;
        let table = strings_table(&strings)?;
        let slice_step = move |b: u8, x: u8| table[usize::from(b)][usize::from(x)];
        let ends = cover_search(a, s, SliceKey::BodyStrings(strings), slice_step, memo).ok()?;
        return Some((Walked::Strings(strings), Cover { may_end: ends.may_end, walk_dead: false }));
    }
    // A state that refuses `stop` itself is inside a run already (`net_abc`): the search starts
    // in the run.
    let inside = ascii_read(a, s) & stop == 0;
    let mut tried: Vec<[u32; MAX_WALKED_STRINGS]> = Vec::new();
    for strings in seed.into_iter().chain([[0; MAX_WALKED_STRINGS]]) {
        if tried.contains(&strings) {
            continue;
        }
        tried.push(strings);
        let Some((table, start)) = start_table(&strings, run, stop) else { continue };
        let slice_step = move |b: u8, x: u8| table[usize::from(b)][usize::from(x)];
        let key = SliceKey::BodyStart { strings, run, stop, inside };
        if let Ok(ends) = cover_search_from(a, s, key, start + u8::from(inside), slice_step, memo) {
            let cover = Cover { may_end: ends.may_end, walk_dead: false };
            return Some((Walked::StartRun { strings, run, stop, inside }, cover));
        }
    }
    None
}

/// A superset of the ASCII bytes the kernel chart of `s` reads: those some item of its row has
/// an edge on (lookaheads could only refuse more).
fn ascii_read(a: &Automata, s: StateId) -> u128 {
    let chart = crate::earley::Chart::with_kernel(a, s);
    let edges = chart.last_row().iter().flat_map(|it| a.byte_edges(it.state)).filter(|e| e.lo < 0x80);
    edges.fold(0u128, |m, e| m | (u128::MAX >> (127 - e.hi.min(0x7F))) & (u128::MAX << e.lo))
}

/// Characters in a packed walked string.
fn packed_len(w: u32) -> u32 {
    (32 - w.leading_zeros()).div_ceil(8)
}

/// Per vocabulary, every body-text trie node whose byte is an ASCII character at a character
/// boundary right after another (no escape or non-ASCII character between), by those two
/// characters, with the one before them (0: none): where a path reads a walked string of two or
/// three characters ([`WalkedBody::with_strings`]).
#[derive(Debug)]
pub struct StringIndex {
    /// Per pair of characters (`first << 7 | second`), where its nodes start in `nodes`.
    start: Vec<u32>,
    /// The nodes, by pair, in trie order.
    nodes: Vec<u32>,
    /// Per node of `nodes`, the character before the pair (0: none).
    before: Vec<u8>,
}

impl StringIndex {
    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        4 * self.start.capacity() + 4 * self.nodes.capacity() + self.before.capacity()
    }

    /// PERF: one pass over the body-text part of the trie, then a counting sort by pair (once per
    /// vocabulary; a comparison sort of the ~480k entries of Llama 3 cost 130 M instructions).
    pub fn new(trie: &TokenTrie) -> StringIndex {
        // (pair, character before, node), in trie order.
        let mut found: Vec<(u16, u8, u32)> = Vec::new();
        // Per node: the last two ASCII characters at a boundary, packed, last in the low byte.
        for_body_text_nodes(trie, 0u16, |i, n, b, next, seen: u16| {
            if b == 0 && next == 0 && n.byte < 0x80 {
                let (p1, p2) = (seen & 0xFF, (seen >> 8) as u8);
                if p1 != 0 {
                    found.push((p1 << 7 | u16::from(n.byte), p2, i as u32));
                }
                seen << 8 | u16::from(n.byte)
            } else {
                0
            }
        });
        let mut start = vec![0u32; (1 << 14) + 1];
        for &(k, _, _) in &found {
            start[usize::from(k) + 1] += 1;
        }
        for k in 0..1 << 14 {
            start[k + 1] += start[k];
        }
        let mut fill = start.clone();
        let (mut nodes, mut before) = (vec![0u32; found.len()], vec![0u8; found.len()]);
        for &(k, c, n) in &found {
            let at = &mut fill[usize::from(k)];
            (nodes[*at as usize], before[*at as usize]) = (n, c);
            *at += 1;
        }
        StringIndex { start, nodes, before }
    }

    /// The nodes that read packed string `w` (two or three ASCII characters), in trie order.
    fn nodes(&self, w: u32) -> impl Iterator<Item = u32> + '_ {
        let (c, pair) = if packed_len(w) == 3 { ((w & 0x7F) as u8, w >> 8) } else { (0, w) };
        let k = ((pair & 0x7F) << 7 | (pair >> 8 & 0x7F)) as usize;
        let range = self.start[k] as usize..self.start[k + 1] as usize;
        range.filter(move |&j| c == 0 || self.before[j] == c).map(|j| self.nodes[j])
    }
}

/// Visits the body-text part of `trie` in trie order (a node whose byte is not body text after
/// its path is skipped with its subtree): `f(index, node, body state before, body state after,
/// value of the parent)` returns the node's value, `root` being the root's.
fn for_body_text_nodes<V: Copy>(trie: &TokenTrie, root: V, mut f: impl FnMut(usize, &TrieNode, u8, u8, V) -> V) {
    let (table, _) = body_table();
    // at[d]: (body state, value) after d bytes of the path.
    let mut at: Vec<(u8, V)> = vec![(0, root); trie.max_depth as usize + 1];
    let mut i = 0;
    while i < trie.nodes.len() {
        let n = trie.nodes[i];
        let d = n.depth as usize;
        let (b, v) = at[d - 1];
        let Body::To(next) = table[usize::from(b)][usize::from(n.byte)] else {
            i = n.subtree_end as usize;
            continue;
        };
        at[d] = (next, f(i, &n, b, next, v));
        i += 1;
    }
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
        let mut nodes: Vec<Option<Vec<u32>>> = vec![Some(Vec::new()); 128];
        // Per node: the ASCII characters read at a boundary on its path.
        for_body_text_nodes(trie, 0u128, |i, n, b, _, seen: u128| {
            if b != 0 || n.byte >= 0x80 {
                return seen;
            }
            if seen >> n.byte & 1 == 0 {
                let list = &mut nodes[usize::from(n.byte)];
                if list.as_ref().is_some_and(|l| l.len() >= MAX_FIRST_NODES) {
                    *list = None;
                }
                if let Some(l) = list {
                    l.push(i as u32);
                }
            }
            seen | 1 << n.byte
        });
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
        Some(WalkedBody::from_outer(trie, body, &outermost(trie, first)))
    }

    /// The body slice less the subtrees of `outer` (disjoint, in trie order, each body text up
    /// to its parent), whose nodes join the frontier.
    fn from_outer(trie: &TokenTrie, body: &BodySlice, outer: &[u32]) -> WalkedBody {
        let mut slice = body.slice.clone();
        for &o in outer {
            for &t in trie.subtree_tokens(o) {
                slice.unset(t as usize);
            }
        }
        let inside = |n: u32| {
            let k = outer.partition_point(|&o| o <= n);
            k > 0 && n < trie.nodes[outer[k - 1] as usize].subtree_end
        };
        // Both lists are in trie order: merged, not sorted.
        // PERF: sorting the ~40k frontier nodes of Llama 3 was half of a build.
        debug_assert!(body.frontier.is_sorted_by_key(|f| f.node));
        let mut frontier: Vec<FrontierNode> = Vec::with_capacity(body.frontier.len() + outer.len());
        let mut rest = outer.iter().peekable();
        for f in body.frontier.iter().filter(|f| !inside(f.node)) {
            while let Some(&o) = rest.next_if(|&&o| o < f.node) {
                frontier.push(FrontierNode { node: o, path: trie.bytes_above(o), dead: false });
            }
            frontier.push(FrontierNode { node: f.node, path: f.path.clone(), dead: f.dead });
        }
        frontier.extend(rest.map(|&o| FrontierNode { node: o, path: trie.bytes_above(o), dead: false }));
        WalkedBody { slice, frontier }
    }
}

/// The nodes of `nodes` in no other's subtree, in trie order.
fn outermost(trie: &TokenTrie, mut nodes: Vec<u32>) -> Vec<u32> {
    nodes.sort_unstable();
    let mut outer: Vec<u32> = Vec::new();
    for n in nodes {
        if outer.last().is_none_or(|&o| n >= trie.nodes[o as usize].subtree_end) {
            outer.push(n);
        }
    }
    outer
}

impl WalkedBody {
    /// The body slice with the strings of `strings` walked ([`Walked::Strings`]): one walk of the
    /// body-text trie under [`strings_table`]'s step. `None` when the table does not fit or the
    /// walked subtrees hold more than a quarter of the body slice (a walk would cost as much).
    /// PERF: from the body slice and the string index, not a trie walk (as [`Self::new`]).
    pub fn with_strings<'a>(
        trie: &TokenTrie,
        body: &BodySlice,
        firsts: impl Fn() -> &'a FirstChars,
        index: &StringIndex,
        strings: [u32; MAX_WALKED_STRINGS],
    ) -> Option<WalkedBody> {
        let mut first: Vec<u32> = Vec::new();
        for w in strings.into_iter().filter(|&w| w != 0) {
            match packed_len(w) {
                1 => first.extend(firsts().nodes.get(w as usize)?.as_ref()?),
                _ => first.extend(index.nodes(w)),
            }
        }
        let outer = outermost(trie, first);
        let lost: usize = outer.iter().map(|&o| trie.subtree_tokens(o).len()).sum();
        (lost <= body.slice.count_ones() / 4).then(|| WalkedBody::from_outer(trie, body, &outer))
    }
}

impl WalkedBody {
    /// [`Self::with_strings`] with a leading run ([`Walked::StartRun`], [`start_table`]): the
    /// nodes where a path from the root reads `run` characters (at least one unless `inside`)
    /// and then a `stop` one are walked too. `None` as for [`Self::with_strings`].
    #[allow(clippy::too_many_arguments)]
    pub fn with_start_run<'a>(
        trie: &TokenTrie,
        body: &BodySlice,
        firsts: impl Fn() -> &'a FirstChars,
        index: &StringIndex,
        strings: [u32; MAX_WALKED_STRINGS],
        run: u128,
        stop: u128,
        inside: bool,
    ) -> Option<WalkedBody> {
        let ascii_in = |set: u128, x: u8| x < 0x80 && set >> x & 1 == 1;
        let mut first: Vec<u32> = Vec::new();
        for w in strings.into_iter().filter(|&w| w != 0) {
            match packed_len(w) {
                1 => first.extend(firsts().nodes.get(w as usize)?.as_ref()?),
                _ => first.extend(index.nodes(w)),
            }
        }
        if inside {
            first.extend(trie.root_children.iter().filter(|&&c| ascii_in(stop, trie.nodes[c as usize].byte)));
        }
        for &c in trie.root_children.iter().filter(|&&c| ascii_in(run, trie.nodes[c as usize].byte)) {
            let end = trie.nodes[c as usize].subtree_end as usize;
            let mut i = c as usize + 1;
            while i < end {
                let n = &trie.nodes[i];
                if ascii_in(run, n.byte) {
                    i += 1;
                    continue;
                }
                if ascii_in(stop, n.byte) {
                    first.push(i as u32);
                }
                i = n.subtree_end as usize;
            }
        }
        let outer = outermost(trie, first);
        let lost: usize = outer.iter().map(|&o| trie.subtree_tokens(o).len()).sum();
        (lost <= body.slice.count_ones() / 4).then(|| WalkedBody::from_outer(trie, body, &outer))
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
/// be used; `unwalkable` (characters known not to be walkable, without building anything) ends
/// the characters' rounds at the first misread of one (a set holding it is never taken).
pub fn walked_cover(
    a: &Automata,
    s: StateId,
    misread: Option<Misread>,
    walkable: impl Fn(u8) -> bool,
    unwalkable: impl Fn(u8) -> bool,
    memo: &CoverMemo,
) -> Option<(Walked, Cover)> {
    let known = |m: &CoverMemo| m.walked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&s).copied();
    if let Some(found) = known(memo) {
        return found;
    }
    // None where the body reads only text of bounded length (see [`no_walked_cover`]).
    let found = if no_walked_cover(a, s) {
        None
    } else {
        walked_search(a, s, misread, &unwalkable, memo)
            .filter(|&(walked, _)| (0..128u8).filter(|&x| walked >> x & 1 == 1).all(&walkable))
            .map(|(walked, cover)| (Walked::Chars(walked), cover))
            .or_else(|| strings_search(a, s, misread, memo))
    };
    memo.walked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(s, found);
    found
}

/// The states a byte edge reading only `"` leads to that read their string's text inline (no
/// rule edges) and refuse at most [`MAX_WALKED_CHARS`] ASCII body characters at its start
/// ([`refused_at_root`]): the string starts that may cover the body slice, or a walked body
/// ([`walked_cover`]), for [`search_string_starts`]. A literal (an enum word, a key) refuses
/// most characters and is left out.
pub fn inline_string_starts(a: &Automata) -> Vec<StateId> {
    let mut starts: Vec<StateId> = (0..a.states().len() as u32)
        .flat_map(|q| a.byte_edges(StateId(q)))
        .filter(|e| e.lo == b'"' && e.hi == b'"')
        .map(|e| e.target)
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts.retain(|&s| {
        a.rule_edges(s).is_empty() && refused_at_root(a, s).is_some_and(|r| r.count_ones() <= MAX_WALKED_CHARS)
    });
    starts
}

/// Runs, off the fill path (the class-body thread; [`super::cover::after_fills`]), what a fill
/// classifying each of `starts` ([`inline_string_starts`]) searches: the body slice's cover
/// search and, when it misreads, [`walked_cover`] (with `walkable` and `unwalkable` as a fill
/// has them). Each state under a fill's budget ([`super::MAX_STATE_COVER_PAIRS`], so that it
/// memoizes what a fill would); none begins once less than that is left of `most_pairs` for
/// them all. The walked body itself is left to the fill (the vocabulary keeps few: one built
/// here for a start no fill reaches would take another's place).
/// PERF: MaskBench `Github_medium---o23177` t110 (`"type": "` of a `urls` item, a pattern of
/// five words and its complement under `oneOf`): the fill searched both starts, 2,355 pairs
/// (~16 M of its 20.4 M instructions).
pub fn search_string_starts(
    a: &Automata,
    starts: &[StateId],
    memo: &CoverMemo,
    most_pairs: usize,
    walkable: impl Fn(u8) -> bool,
    unwalkable: impl Fn(u8) -> bool,
) {
    let taken = super::cover_pairs_taken();
    for &s in starts {
        if super::cover_pairs_taken() - taken + super::MAX_STATE_COVER_PAIRS > most_pairs {
            return;
        }
        super::cover::after_fills(|| {
            super::with_cover_budget(super::MAX_STATE_COVER_PAIRS, || {
                let Err(misread @ Some(_)) = BodySlice::covers_or_misread(a, s, memo) else { return };
                walked_cover(a, s, misread, &walkable, &unwalkable, memo);
            });
        });
    }
}

/// [`walked_cover`] before the walkable check and the memo; `None` at a misread character
/// `unwalkable` holds.
fn walked_search(
    a: &Automata,
    s: StateId,
    misread: Option<Misread>,
    unwalkable: impl Fn(u8) -> bool,
    memo: &CoverMemo,
) -> Option<(u128, Cover)> {
    let mut misread = misread.map(|(b, x, _)| (b, x));
    // Every boundary character no configuration at the root reads is a misread unless walked.
    if refused_at_root(a, s).is_some_and(|r| r.count_ones() > MAX_WALKED_CHARS) {
        return None;
    }
    let mut walked = 0u128;
    loop {
        match misread {
            // A boundary character the body reads that some reachable set refuses.
            // PERF: a set holding a character that is not walkable is never taken: a string
            // that must not hold `swagger`, `signup`, `console`, ... (MaskBench o23177 t110) ran
            // three rounds (~700 pairs, 5.9 M instructions) to a set of `e`, `p` and `r`.
            Some((0, x)) if unwalkable(x) => {
                WALKED_ROUNDS_CUT.set(WALKED_ROUNDS_CUT.get() + 1);
                return None;
            }
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

test_counter! {
    /// How many walked characters' searches on this thread ended at an unwalkable misread (see
    /// [`walked_cover`]), for tests.
    pub fn walked_rounds_cut => WALKED_ROUNDS_CUT
}

/// A set of walked strings with which kernel state `s` covers the body slice, found one misread
/// at a time from `misread` (at most [`MAX_WALKED_STRINGS`]): each misread character is walked
/// after the characters a path to it read (its prefix state's, or the misread's history), as
/// many as fit, up to [`MAX_STRING_LEN`] in all: a string pattern that refuses text holding two of
/// its words (`oneOf` patterns `"maker"`, `"admin"`: MaskBench `Github_easy---o65510`) refuses
/// only past `ker` or `min`, which few tokens hold, where no character of them could be walked
/// (`r`, `n` begin most of the trie). A character refused with a class (`[a-z]` after `netdrv_`
/// in a key that must not match `netdrv_([a-z]+)`, `[0-9]` after `net_` and letters for
/// `net_[a-z]+[0-9]+`: MaskBench `Github_medium---o83286`) is cut before instead: the literal
/// characters the path read before the class characters (`rv_`, `et_`) are walked, as one
/// string per class character would never cover.
fn strings_search(a: &Automata, s: StateId, misread: Option<Misread>, memo: &CoverMemo) -> Option<(Walked, Cover)> {
    if refused_at_root(a, s).is_some_and(|r| r.count_ones() > MAX_WALKED_CHARS) {
        return None;
    }
    let seed = |m: &CoverMemo| *m.strings_seed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // The strings other states found first: the states of one pattern's string, or of several
    // patterns over the same words, refuse alike (five `key_N.re` of `Github_medium---o83286`,
    // five `oneOf` strings of `Github_easy---o65510`), and their searches share one slice's
    // verdicts.
    if let Some((seeded, table)) = seed(memo).and_then(|w| Some((w, strings_table(&w)?))) {
        let step = move |b: u8, x: u8| table[usize::from(b)][usize::from(x)];
        if let Ok(ends) = cover_search(a, s, SliceKey::BodyStrings(seeded), step, memo) {
            return Some((Walked::Strings(seeded), Cover { may_end: ends.may_end, walk_dead: false }));
        }
    }
    let found = strings_rounds(a, s, misread, memo)?;
    // Only sets of MAX_STRING_LEN-character strings seed (few tokens hold one; a shorter string,
    // found inside a word, may hold too many for a walked body, and the seeded state would walk
    // the trie where its own search would not have).
    let seeds = match found.0 {
        Walked::Strings(w) if w.iter().all(|&v| v == 0 || packed_len(v) as usize == MAX_STRING_LEN) => Some(w),
        _ => None,
    };
    if let Some(w) = seeds {
        // Merged with the seed while they fit, else the seed.
        let mut merged: Vec<u32> = seed(memo).unwrap_or_default().into_iter().chain(w).filter(|&v| v != 0).collect();
        merged.sort_unstable();
        merged.dedup();
        let fits = merged.len() <= MAX_WALKED_STRINGS && prefixes_of(&merged).len() <= MAX_PREFIXES;
        let mut next = w;
        if fits {
            next = [0; MAX_WALKED_STRINGS];
            next[..merged.len()].copy_from_slice(&merged);
        }
        *memo.strings_seed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(next);
    }
    Some(found)
}

/// [`strings_search`]'s rounds, one misread at a time from `misread`.
fn strings_rounds(a: &Automata, s: StateId, mut misread: Option<Misread>, memo: &CoverMemo) -> Option<(Walked, Cover)> {
    let mut strings = [0u32; MAX_WALKED_STRINGS];
    // Per round, the misread's text (its path's characters and the misread one) and the string
    // added for it.
    let mut sources: Vec<(Vec<u8>, u32)> = Vec::new();
    let mut n = 0;
    loop {
        let (b, x, seen) = misread?;
        if n == MAX_WALKED_STRINGS || x >= 0x80 || body_step(0, x) != Body::To(0) {
            return None;
        }
        // The characters before `x` on a path that misreads it, nearest last, bit 7 set on those
        // read as one of a class (the history, or the prefix state's text where the history
        // does not end with it).
        let hist: Vec<u8> = (seen & HISTORY_CHARS).to_be_bytes().into_iter().filter(|&c| c != 0).collect();
        let before: Vec<u8> = if b >= FIRST_PREFIX_STATE {
            let p = *prefixes_of(&strings).get(usize::from(b - FIRST_PREFIX_STATE))?;
            let p = &p.to_le_bytes()[..packed_len(p) as usize];
            let chars: Vec<u8> = hist.iter().map(|&c| c & 0x7F).collect();
            if chars.ends_with(p) {
                hist
            } else {
                p.to_vec()
            }
        } else if b == 0 {
            hist
        } else {
            return None;
        };
        // Candidates, preferred first: for a class misread, the literal characters read right
        // before the path's last class characters (longest first); then `x` after as many of the
        // characters before it as fit.
        let cut: &[u8] = match before.iter().rposition(|&c| c < 0x80) {
            Some(end) if seen & WIDE_MISREAD != 0 => {
                let start = before[..end].iter().rposition(|&c| c >= 0x80).map_or(0, |i| i + 1);
                &before[start.max((end + 1).saturating_sub(MAX_STRING_LEN))..=end]
            }
            _ => &[],
        };
        let cuts = (0..cut.len()).map(|k| cut[k..].to_vec());
        // First of all: the last characters (up to MAX_STRING_LEN) of the longest text of at least
        // MAX_STRING_LEN characters this misread's path shares with an earlier one's, whose
        // strings then need not be walked (`ir_` for `netdir_work` and `netdir_share`, each
        // refused at its last character; `et_` for `net_r0` and `net_t0` where `r` and `t` lead to
        // sets of their own).
        let text: Vec<u8> = before.iter().map(|&c| c & 0x7F).chain([x]).collect();
        let shared = sources
            .iter()
            .filter_map(|(t, _)| longest_shared(&text, t))
            .max_by_key(Vec::len)
            .map(|c| c[c.len() - MAX_STRING_LEN..].to_vec());
        let ends_at_x = (0..=before.len().min(MAX_STRING_LEN - 1)).rev().map(|k| {
            let mut w: Vec<u8> = before[before.len() - k..].iter().map(|&c| c & 0x7F).collect();
            w.push(x);
            w
        });
        let fits = shared.into_iter().chain(cuts).chain(ends_at_x).find_map(|w| {
            let mut next = strings;
            let new = w.iter().rev().fold(0u32, |p, &c| p << 8 | u32::from(c));
            if next.contains(&new) {
                return None;
            }
            // The strings added for earlier misreads whose path the new one cuts.
            for (t, added) in &sources {
                if t.windows(w.len()).any(|u| u == w.as_slice()) {
                    next.iter_mut().filter(|v| **v == *added).for_each(|v| *v = 0);
                }
            }
            // Each round adds one string and fills a slot at most: `n` rounds leave a free one.
            let n = next.iter().position(|&v| v == 0)?;
            next[n] = new;
            // A walked string that ends with the new one is walked by it.
            for v in &mut next[..n] {
                if packed_len(*v) > packed_len(new) && *v >> (8 * (packed_len(*v) - packed_len(new))) == new {
                    *v = 0;
                }
            }
            next.sort_unstable_by_key(|&v| (v == 0, v));
            // What [`strings_table`] needs to fit (it is built once the strings are chosen).
            (prefixes_of(&next).len() <= MAX_PREFIXES).then_some((next, new))
        })?;
        strings = fits.0;
        sources.push((text, fits.1));
        n += 1;
        let table = strings_table(&strings)?;
        let step = move |b: u8, x: u8| table[usize::from(b)][usize::from(x)];
        match cover_search(a, s, SliceKey::BodyStrings(strings), step, memo) {
            Ok(ends) => return Some((Walked::Strings(strings), Cover { may_end: ends.may_end, walk_dead: false })),
            Err(m) => misread = m,
        }
    }
}

/// The longest text of at least [`MAX_STRING_LEN`] characters in both `u` and `v` (the first
/// found in `u`), if any.
fn longest_shared(u: &[u8], v: &[u8]) -> Option<Vec<u8>> {
    let mut best: &[u8] = &[];
    for i in 0..u.len() {
        for j in i + MAX_STRING_LEN.max(best.len() + 1)..=u.len() {
            if v.windows(j - i).any(|w| w == &u[i..j]) {
                best = &u[i..j];
            }
        }
    }
    (!best.is_empty()).then(|| best.to_vec())
}

/// The proper prefixes of walked strings (packed), in [`strings_table`]'s state order.
fn prefixes_of(strings: &[u32]) -> Vec<u32> {
    let mut prefixes: Vec<u32> = strings
        .iter()
        .filter(|&&w| w != 0)
        .flat_map(|&w| (1..packed_len(w)).map(move |k| w & ((1 << (8 * k)) - 1)))
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

/// Most states [`no_walked_cover`] visits before it answers `false` (unsure).
const MAX_BOUNDED_TEXT_STATES: usize = 2048;

/// Kernel states whose walked searches [`no_walked_cover`] ruled out, for tests.
static NO_WALKED_COVER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many kernel states [`no_walked_cover`] ruled out so far (all grammars), for tests.
#[doc(hidden)]
pub fn walked_covers_ruled_out() -> usize {
    NO_WALKED_COVER.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether kernel state `s` reads only body text of bounded length inside its rule, so that it
/// has no walked cover ([`walked_cover`]): some plain ASCII character `c` is in none of the at
/// most [`MAX_WALKED_CHARS`] walked characters and [`MAX_WALKED_STRINGS`] strings of
/// [`MAX_STRING_LEN`], and `c` repeated past the bound is slice text the rule does not read.
/// Decided as: no cycle among the states reachable from `s` over byte edges that read a body
/// byte, callee starts and return states (a superset of the runs inside the rule, as in
/// [`refused_at_root`]). An edge reading only `"` or control bytes is left out: no body text
/// reads them but inside a `\"` escape, so a loop of escaped quotes can only make the answer a
/// wrong `true`, which costs a walked body, never a mask. `false` past
/// [`MAX_BOUNDED_TEXT_STATES`].
/// PERF: a string of exactly 12 characters, one of them hex (`[0-9a-fA-F]+`, unanchored,
/// MaskBench o10009 / o10013), failed its walked searches at its start: 4.0 M instructions.
pub fn no_walked_cover(a: &Automata, s: StateId) -> bool {
    // The `k`-th successor of `q`: its byte edges' targets, then each rule edge's callee start
    // and return state (`None` for an edge left out, or past the last).
    let succ = |q: StateId, k: usize| -> Option<Option<StateId>> {
        let edges = a.byte_edges(q);
        if let Some(e) = edges.get(k) {
            return Some((!(e.lo..=e.hi).all(|x| x < 0x20 || x == b'"')).then_some(e.target));
        }
        let &(r, ret) = a.rule_edges(q).get((k - edges.len()) / 2)?;
        Some(Some(if (k - edges.len()).is_multiple_of(2) { a.callee_start(q, r) } else { ret }))
    };
    // Depth-first, marks in a per-thread array by state (reset after through `visited`):
    // `ON_PATH` while a state is on the path (a cycle when met again), `DONE` once done.
    // PERF: a hash map of the marks was ~60% of a search that reaches the cap (MaskBench
    // o21456's counted e-mail pattern: ~61 k instructions at each of ~18 kernel states a fill).
    thread_local! {
        static MARKS: std::cell::RefCell<(Vec<u8>, Vec<StateId>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    MARKS.with(|m| {
        let (marks, visited) = &mut *m.borrow_mut();
        if marks.len() < a.states().len() {
            marks.resize(a.states().len(), UNSEEN);
        }
        let bounded = bounded_text(s, &succ, marks, visited);
        for q in visited.drain(..) {
            marks[q.0 as usize] = UNSEEN;
        }
        if bounded {
            NO_WALKED_COVER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        bounded
    })
}

/// The marks of [`no_walked_cover`]'s search: not reached, on the path, done.
const UNSEEN: u8 = 0;
const ON_PATH: u8 = 1;
const DONE: u8 = 2;

/// [`no_walked_cover`]'s search from `s` over `succ`, with `marks` all [`UNSEEN`] on entry (the
/// states marked are pushed to `visited`).
fn bounded_text(
    s: StateId,
    succ: &impl Fn(StateId, usize) -> Option<Option<StateId>>,
    marks: &mut [u8],
    visited: &mut Vec<StateId>,
) -> bool {
    let mut stack = vec![(s, 0usize)];
    marks[s.0 as usize] = ON_PATH;
    visited.push(s);
    while let Some(top) = stack.last_mut() {
        let (q, k) = *top;
        top.1 += 1;
        let Some(t) = succ(q, k) else {
            marks[q.0 as usize] = DONE;
            stack.pop();
            continue;
        };
        let Some(t) = t else { continue };
        match marks[t.0 as usize] {
            DONE => {}
            UNSEEN if visited.len() < MAX_BOUNDED_TEXT_STATES => {
                marks[t.0 as usize] = ON_PATH;
                visited.push(t);
                stack.push((t, 0));
            }
            // On the path (a cycle), or past the cap.
            _ => return false,
        }
    }
    true
}
