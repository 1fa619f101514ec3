//! Run indexes: where the runs of one character class lie anywhere in the token trie (leads,
//! break nodes, lead lists, subtree run sets).
//!
//! Pipeline place: built per vocabulary and class by the token index (at most 16 per
//! vocabulary), when a grammar whose states loop on the class is compiled (from the
//! vocabulary's run bases, [`RunIndex::of_class`]); used by kernel walks ([`crate::mask`]) at
//! every node whose place reads every run of the class.
use super::class::class_step;
use super::run_bases::RunBases;
use super::{Body, ClassSlice, FrontierNode};
use crate::bitset::Bitset;
use crate::trie::TokenTrie;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Subtrees with fewer tokens take their runs child by child.
pub(super) const SUBTREE_RUNS_MIN_TOKENS: usize = 1024;
/// Most subtree run sets kept per run index (16 KB each on a 128k vocabulary).
const MAX_SUBTREE_RUNS: usize = 64;

/// Where the runs of one character class lie anywhere in the trie, for a walk that reaches, at
/// some node, a place that reads every run of the class (see `KernelWalk::walk`): the tokens
/// below that node that continue with a run are accepted at once, and only the *break* nodes
/// (where a run from the node stops) are walked. [`ClassSlice`](super::ClassSlice) is the same at the root only.
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
    /// Bit `m` (a `u64` word per 64 nodes) is set iff node `m` is a break node.
    /// PERF: a bitset and [`BreakLeads`] rather than a list of (node, lead, byte): the list's three
    /// pushes per break per class, and the passes over it, were a fifth of a build.
    breaks: Vec<u64>,
    /// Each break node's parent lead, capped at 255.
    break_leads: BreakLeads,
    /// For each lead `L` below [`LEAD_LISTS`], the break nodes whose parent's lead is `L`, in
    /// trie order, with their bytes: a walk from depth `d` takes those of `L <= d` without
    /// stepping over the deeper ones.
    by_lead: [(Vec<u32>, Vec<u8>); LEAD_LISTS],
    /// The break nodes of lead 0 grouped by byte: a walk from the root skips a refused byte's
    /// breaks at once. Bytes in increasing order, each with its nodes in trie order.
    root_by_byte: Vec<(u8, Box<[u32]>)>,
}

/// A break in [`RunIndex::new`]'s step table.
const NO_STEP: u8 = u8::MAX;

/// Leads with a list of their own in [`RunIndex`] (runs from depths `0..LEAD_LISTS`).
pub const LEAD_LISTS: usize = 4;

/// The parent leads of a class's break nodes (capped at 255), kept per node or per break.
/// PERF: a UTF-8 class has a few thousand breaks among Llama 3's 274k nodes, so its leads are
/// kept per break (a few KB, and a 17 KB rank) rather than in a 274 KB array per node, zeroed per
/// build and kept with the index; llama.cpp's eight grammars, cold: 143.9 M -> 142.7 M
/// instructions. An ASCII class has breaks at most nodes: per break too, 145.3 M.
#[derive(Debug)]
enum BreakLeads {
    /// Per node: the lead of break node `m` at `m` (read at break nodes only).
    PerNode(Vec<u8>),
    /// Per break node, in trie order: break node `m`'s lead at `rank[m / 64]` plus the number of
    /// break nodes in `m`'s bitset word below `m`; `rank[w]` is the number of break nodes
    /// before node `64 * w`.
    PerBreak { rank: Vec<u32>, leads: Vec<u8> },
}

/// A class's breaks as a walk finds them, in trie order (the fields of [`RunIndex`] of the same
/// names; `nodes` is its `breaks`, `leads` its `break_leads` per node if `per_node`, else per
/// break).
struct Breaks {
    nodes: Vec<u64>,
    per_node: bool,
    leads: Vec<u8>,
    by_lead: [(Vec<u32>, Vec<u8>); LEAD_LISTS],
}

impl Breaks {
    /// The breaks of a class that reads UTF-8 (`utf8`: kept per break) or not.
    fn new(nodes: usize, utf8: bool) -> Breaks {
        let leads = if utf8 { Vec::new() } else { vec![0; nodes] };
        Breaks { nodes: vec![0; nodes.div_ceil(64)], per_node: !utf8, leads, by_lead: Default::default() }
    }

    /// Node `i` of byte `x` is a break, its parent's lead (capped) `lead`; `i` is past every
    /// break added before. `PER_BREAK` must be `!self.per_node`.
    /// PERF: `PER_BREAK` a constant: with a branch on `per_node` here the walks no longer inlined
    /// this (1.3 M instructions more on llama.cpp's grammars).
    #[inline]
    fn add<const PER_BREAK: bool>(&mut self, i: usize, lead: u8, x: u8) {
        debug_assert_eq!(PER_BREAK, !self.per_node);
        self.nodes[i / 64] |= 1 << (i % 64);
        if PER_BREAK {
            self.leads.push(lead);
        } else {
            self.leads[i] = lead;
        }
        if let Some((nodes, bytes)) = self.by_lead.get_mut(usize::from(lead)) {
            nodes.push(i as u32);
            bytes.push(x);
        }
    }
}

/// The nodes with at least [`SUBTREE_RUNS_MIN_TOKENS`] tokens in their subtree, in trie order.
/// (For tests: the subtree sets are built for the nodes walks ask for.)
/// PERF: found from the root down (a subtree holds no more tokens than its parent's), not by a
/// pass over every node (5 M instructions per ASCII class on Llama 3).
#[cfg(test)]
pub(super) fn large_subtrees(trie: &TokenTrie) -> Vec<usize> {
    let tokens = |i: usize| (trie.first_token[trie.nodes[i].subtree_end as usize] - trie.first_token[i]) as usize;
    let mut out = Vec::new();
    let mut todo: Vec<usize> = trie.root_children.iter().map(|&c| c as usize).collect();
    while let Some(i) = todo.pop() {
        if tokens(i) < SUBTREE_RUNS_MIN_TOKENS {
            continue;
        }
        out.push(i);
        // The children of a node are the nodes after it, each past the previous one's subtree.
        let (mut c, end) = (i + 1, trie.nodes[i].subtree_end as usize);
        while c < end {
            todo.push(c);
            c = trie.nodes[c].subtree_end as usize;
        }
    }
    out.sort_unstable();
    out
}

impl RunIndex {
    /// Bytes held (the subtree sets built so far included).
    pub fn memory_size(&self) -> usize {
        let subtrees: usize = self
            .subtrees
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(|b| b.memory_size() + 16)
            .sum();
        let leads = match &self.break_leads {
            BreakLeads::PerNode(l) => l.len(),
            BreakLeads::PerBreak { rank, leads } => 4 * rank.len() + leads.capacity(),
        };
        let by_lead: usize = self.by_lead.iter().map(|(nodes, bytes)| 4 * nodes.capacity() + bytes.capacity()).sum();
        let by_byte: usize = self.root_by_byte.iter().map(|(_, nodes)| 24 + 4 * nodes.len()).sum();
        std::mem::size_of::<Self>()
            + self.lead.len()
            + self.whole.memory_size()
            + subtrees
            + 8 * self.breaks.len()
            + leads
            + by_lead
            + by_byte
    }

    /// The run index of one class from a walk of the trie (the reference the derived indexes
    /// equal, and [`Self::of_class`]'s path for a UTF-8 class that refuses most nodes).
    ///
    /// A UTF-8 class's walk follows `U`, the class of every character, and the depth `e_C(p)` of
    /// the last byte of path `p` that the class `C` does not read at a character boundary (an
    /// ASCII byte outside `C`; for an ASCII-only class, any byte outside it; 0 if none). The
    /// class's automaton is `U`'s without those bytes, and such a byte leaves `U` at a character
    /// boundary, so for a UTF-8 class `lead_C(p) = max(lead_U(p), e_C(p))` and node `m` is a break
    /// iff its byte is outside `C` or it is a break of `U`; for an ASCII-only class
    /// `lead_C(p) = e_C(p)` and `m` is a break iff its byte is outside `C`.
    pub fn new(trie: &TokenTrie, vocab_size: usize, ascii: u128, utf8: bool) -> RunIndex {
        // `table[state][byte]`: `U`'s next state, or `NO_STEP` (a break).
        let mut table = [[NO_STEP; 256]; 9];
        for (b, row) in table.iter_mut().enumerate() {
            for (x, cell) in row.iter_mut().enumerate() {
                if let Body::To(n) = class_step(u128::MAX, b as u8, x as u8) {
                    *cell = n;
                }
            }
        }
        if utf8 {
            Self::build_one::<true>(trie, vocab_size, ascii, &table)
        } else {
            Self::build_one::<false>(trie, vocab_size, ascii, &table)
        }
    }

    /// The run index of one class: [`Self::from_bases`] unless more than a quarter of the trie's
    /// nodes have a byte the class refuses (`[0-9]`), then [`Self::from_inside`] for an
    /// ASCII-only class, else [`Self::new`].
    /// PERF: on Llama 3 [0-9] (218k of 275k nodes) took 3.3 ms from the bases, 1.5 ms walked;
    /// `[a-z0-9_]` (30k) 0.9 ms from the bases, 1.4 ms walked (thread CPU, loaded machine).
    pub fn of_class(trie: &TokenTrie, vocab_size: usize, bases: &RunBases, ascii: u128, utf8: bool) -> RunIndex {
        if bases.outside_nodes(ascii) <= trie.nodes.len() / 4 {
            Self::from_bases(trie, vocab_size, bases, ascii, utf8)
        } else if utf8 {
            Self::new(trie, vocab_size, ascii, utf8)
        } else {
            Self::from_inside(trie, vocab_size, bases, ascii)
        }
    }

    /// The run index of an ASCII-only class from the nodes of its bytes (`I`), for a class that
    /// refuses most nodes; equal to [`Self::new`]'s. With `e(n)` the depth of the last node on
    /// `n`'s path outside `I` (a token's lead, and the parent lead of `n`'s children),
    /// `e(n) = depth(n)` outside `I` and `e(n) = e(parent(n))` in it; every node outside `I` is a
    /// break, and a break's parent lead is `depth - 1` unless its parent is in `I`.
    /// PERF: [0-9] on Llama 3 (1k nodes of its bytes) without a walk of the 275k nodes: json.gbnf
    /// cold, 2.0 -> 0.9 ms thread CPU (`examples/gbnf_cold_compile.rs`).
    pub fn from_inside(trie: &TokenTrie, vocab_size: usize, bases: &RunBases, ascii: u128) -> RunIndex {
        let words = trie.nodes.len().div_ceil(64);
        let inside = bases.node_bits(ascii, words);
        // PERF: a copy of the bases' parent depths, not a pass over the nodes (arithmetic.gbnf
        // cold: 14.9 M -> 13.7 M instructions).
        let mut parent_lead = bases.parent_depth.clone();
        let mut lead = bases.token_depth.clone();
        let mut whole = Bitset::new(vocab_size);
        // Nodes whose parent is in `I` (their parent lead may be below `depth - 1`).
        let mut below_inside = vec![0u64; words];
        // In trie order, a node's parent comes first, so `parent_lead[m]` is final at `m`.
        for_each_bit(&inside, |m| {
            let n = trie.nodes[m];
            let e = parent_lead[m];
            let tokens = n.tok_start as usize..n.tok_end as usize;
            lead[tokens.clone()].fill(e);
            if e == 0 {
                for &t in &trie.tokens[tokens] {
                    whole.set(t as usize);
                }
            }
            let mut c = m + 1;
            while c < n.subtree_end as usize {
                parent_lead[c] = e;
                below_inside[c / 64] |= 1 << (c % 64);
                c = trie.nodes[c].subtree_end as usize;
            }
        });
        let mut breaks: Vec<u64> = inside.iter().map(|&w| !w).collect();
        if let Some(last) = breaks.last_mut() {
            if !trie.nodes.len().is_multiple_of(64) {
                *last &= (1u64 << (trie.nodes.len() % 64)) - 1;
            }
        }
        // A break of parent lead `L < LEAD_LISTS` is a node at depth `L + 1` whose parent and
        // itself are outside `I` (from the bases' shallow lists), or a node outside `I` below one
        // of `I` whose lead is `L`.
        // PERF: the lists copied around the few nodes of `I` or below it, rather than a push per
        // shallow break: json.gbnf cold, `from_inside` of `[ \t\n]` 3.30 M -> 1.33 M instructions.
        let mut below: [(Vec<u32>, Vec<u8>); LEAD_LISTS] = Default::default();
        for_each_bit(&below_inside, |m| {
            if inside[m / 64] >> (m % 64) & 1 == 0 {
                if let Some((nodes, bytes)) = below.get_mut(usize::from(parent_lead[m])) {
                    nodes.push(m as u32);
                    bytes.push(trie.nodes[m].byte);
                }
            }
        });
        // The shallow nodes of `I` or below it, per depth (few: the list is copied around them).
        let skip: Vec<u64> = inside.iter().zip(&below_inside).map(|(i, b)| i | b).collect();
        let mut dropped: [Vec<u32>; LEAD_LISTS] = Default::default();
        for_each_bit(&skip, |m| {
            if let Some(drop) = dropped.get_mut(trie.nodes[m].depth as usize - 1) {
                drop.push(m as u32);
            }
        });
        let by_lead: [(Vec<u32>, Vec<u8>); LEAD_LISTS] =
            std::array::from_fn(|l| merge_by_node(without_nodes(&bases.shallow[l], &dropped[l]), &below[l]));
        let b = Breaks { nodes: breaks, per_node: true, leads: parent_lead, by_lead };
        Self::assemble(vocab_size, (ascii, false), lead, whole, b)
    }

    /// The run index of one class from the shared [`RunBases`] of its vocabulary, equal to
    /// [`Self::new`]'s: the base's leads and breaks, raised below each node of an ASCII byte the
    /// class does not read (see `run_bases.rs`).
    ///
    /// PERF: no walk of the trie per class: the work is per node of those bytes (and vectorized
    /// over its subtree), rather than per node.
    pub fn from_bases(trie: &TokenTrie, vocab_size: usize, bases: &RunBases, ascii: u128, utf8: bool) -> RunIndex {
        Self::from_bases_less(trie, vocab_size, bases, ascii, utf8, &[])
    }

    /// [`Self::from_bases`] for a UTF-8 class that also refuses the multi-byte characters
    /// `refused` (each a well-formed character's bytes): the node that ends such a character is
    /// raised like a node of an ASCII byte outside the class. Such a character's first byte is a
    /// lead byte, so it starts a character wherever it is read, and the run after it starts at a
    /// boundary: `lead_C(p) = max(lead_U(p), e_C(p))` still holds with `e_C` also counting the
    /// depth of each refused character's last byte. Every proper prefix of a refused character
    /// must be read (some continuation is), as for any class run ending inside a character.
    pub fn from_bases_less(
        trie: &TokenTrie,
        vocab_size: usize,
        bases: &RunBases,
        ascii: u128,
        utf8: bool,
        refused: &[Box<[u8]>],
    ) -> RunIndex {
        debug_assert!(utf8 || refused.is_empty());
        let base = if utf8 { &bases.utf8 } else { &bases.ascii };
        let cap = |k: u32| k.min(255) as u8;
        // Bit m: node m's byte is ASCII and not read by the class, or ends a refused character
        // (the nodes of `O`).
        let mut outside = vec![0u64; base.breaks.len()];
        for x in (0..0x80u8).filter(|&x| ascii >> x & 1 == 0) {
            for &m in bases.nodes_of(x) {
                outside[m as usize / 64] |= 1 << (m % 64);
            }
        }
        for_each_ending(trie, refused, |m| outside[m / 64] |= 1 << (m % 64));
        let mut lead = base.lead.clone();
        let mut parent_lead = base.parent_lead.clone();
        let mut whole = base.whole.clone();
        // Every node below a node of `O` at depth `d` has `e_O >= d` (its tokens, and the parent
        // leads of the nodes strictly below it); a token below one has a lead above 0.
        let mut covered_end = 0;
        for_each_bit(&outside, |m| {
            let n = trie.nodes[m];
            let (d, end) = (cap(n.depth), n.subtree_end as usize);
            let tokens = trie.first_token[m] as usize..trie.first_token[end] as usize;
            raise(&mut lead[tokens.clone()], d);
            raise(&mut parent_lead[m + 1..end], d);
            if m >= covered_end {
                for &t in &trie.tokens[tokens] {
                    whole.unset(t as usize);
                }
                covered_end = end;
            }
        });
        let breaks: Vec<u64> = base.breaks.iter().zip(&outside).map(|(b, o)| b | o).collect();
        let mut by_lead: [(Vec<u32>, Vec<u8>); LEAD_LISTS] = Default::default();
        let low: Vec<u64> = base.low_breaks.iter().zip(&outside).map(|(b, o)| b | o).collect();
        for_each_bit(&low, |m| {
            if let Some((nodes, bytes)) = by_lead.get_mut(usize::from(parent_lead[m])) {
                nodes.push(m as u32);
                bytes.push(trie.nodes[m].byte);
            }
        });
        let leads = if utf8 {
            let mut per_break = Vec::new();
            for_each_bit(&breaks, |m| per_break.push(parent_lead[m]));
            per_break
        } else {
            parent_lead
        };
        let b = Breaks { nodes: breaks, per_node: !utf8, leads, by_lead };
        Self::assemble(vocab_size, (ascii, utf8), lead, whole, b)
    }

    /// [`Self::new`]: the class's leads, lead-0 tokens and breaks from one walk.
    fn build_one<const UTF8: bool>(
        trie: &TokenTrie,
        vocab_size: usize,
        ascii: u128,
        table: &[[u8; 256]; 9],
    ) -> RunIndex {
        let cap = |k: usize| k.min(255) as u8;
        // outside[x]: the class does not read byte x at a character boundary.
        let outside: [bool; 256] = std::array::from_fn(|x| if x < 0x80 { ascii >> x & 1 == 0 } else { !UTF8 });
        let mut breaks = Breaks::new(trie.nodes.len(), UTF8);
        let mut lead = vec![0u8; trie.tokens.len()];
        let mut whole = Bitset::new(vocab_size);
        // PERF: indexed by depth rather than pushed and truncated, `U`'s step a table lookup.
        // e[d] is `e_C` (capped) of the path to the node at depth d on the current path (e[0]:
        // the root), at[d] (`lead_U` capped, `U`'s state after the path from it); capping keeps
        // the maxima exact, as the leads are capped too.
        let depth = trie.max_depth as usize + 1;
        let mut e: Vec<u8> = vec![0; depth];
        let mut at: Vec<(u8, u8)> = vec![(0, 0); if UTF8 { depth } else { 0 }];
        for (i, n) in trie.nodes.iter().enumerate() {
            let (d, x) = (n.depth as usize, usize::from(n.byte));
            let above = e[d - 1];
            let here = if outside[x] { cap(d) } else { above };
            e[d] = here;
            let (mut plead, mut broken) = (above, outside[x]);
            if UTF8 {
                let (ulead, state) = at[d - 1];
                let next = table[usize::from(state)][x];
                at[d] = if next == NO_STEP {
                    broken = true;
                    // The longest suffix that `U` reads: `U` read the path from `ulead` up to
                    // the parent, so a suffix starting inside it starts at a character's first
                    // byte (valid UTF-8 resynchronizes nowhere else) and reaches the parent's
                    // state, which refuses `x`; what is left is `x` alone where it begins a
                    // character, else the empty suffix (rather than a search over the suffixes).
                    match table[0][x] {
                        NO_STEP => (cap(d), 0),
                        st => (cap(d - 1), st),
                    }
                } else {
                    (ulead, next)
                };
                plead = plead.max(ulead);
            }
            if broken {
                breaks.add::<UTF8>(i, plead, n.byte);
            }
            let token_lead = if UTF8 { here.max(at[d].0) } else { here };
            // Most nodes hold no token or one (a `fill` here was a `memset` call per node).
            // PERF: indexed rather than zipped slices (1.4 M instructions more on Llama 3).
            #[allow(clippy::needless_range_loop)]
            for t in n.tok_start as usize..n.tok_end as usize {
                lead[t] = token_lead;
                if token_lead == 0 {
                    whole.set(trie.tokens[t] as usize);
                }
            }
        }
        Self::assemble(vocab_size, (ascii, UTF8), lead, whole, breaks)
    }

    /// A class's index from its leads, lead-0 tokens and breaks: the breaks of lead 0 by byte.
    fn assemble(vocab_size: usize, (ascii, utf8): (u128, bool), lead: Vec<u8>, whole: Bitset, b: Breaks) -> RunIndex {
        let Breaks { nodes: breaks, per_node, leads, by_lead } = b;
        let break_leads = if per_node {
            BreakLeads::PerNode(leads)
        } else {
            let mut rank = Vec::with_capacity(breaks.len());
            let mut before = 0;
            for w in &breaks {
                rank.push(before);
                before += w.count_ones();
            }
            debug_assert_eq!(before as usize, leads.len());
            BreakLeads::PerBreak { rank, leads }
        };
        // A counting sort of the lead-0 list by byte.
        let mut byte_count = [0usize; 256];
        for &x in &by_lead[0].1 {
            byte_count[usize::from(x)] += 1;
        }
        let mut by_byte: Vec<Vec<u32>> = byte_count.iter().map(|&c| Vec::with_capacity(c)).collect();
        for (&m, &x) in by_lead[0].0.iter().zip(&by_lead[0].1) {
            by_byte[usize::from(x)].push(m);
        }
        let root_by_byte =
            by_byte.into_iter().enumerate().filter(|(_, v)| !v.is_empty()).map(|(b, v)| (b as u8, v.into())).collect();
        // The subtree sets are built by the walks that read them ([`Self::subtree_runs`]).
        // PERF: built here for the 64 shallowest large subtrees (deepest first, each the union of
        // its large children's), they were 2.2-2.8 M of the 4-17 M instructions of the cold
        // compile and first mask of `arithmetic`, `c`, `english` and `list` on Llama 3, most
        // never read.
        RunIndex {
            ascii,
            utf8,
            lead,
            whole: Arc::new(whole),
            subtrees: RwLock::new(HashMap::new()),
            vocab_size,
            breaks,
            break_leads,
            by_lead,
            root_by_byte,
        }
    }

    /// The class slice of this (UTF-8) class, without a trie walk of its own: the slice is the
    /// tokens of lead 0 ([`Self::whole`]) and the frontier the breaks of lead 0, which are exactly
    /// the nodes where a path from the root first leaves the class (every node below one has a
    /// deeper lead). Equal to [`ClassSlice::new`] for the same class.
    pub fn class_slice(&self, trie: &TokenTrie) -> ClassSlice {
        debug_assert!(self.utf8, "a class slice reads UTF-8 too");
        let frontier = self.by_lead[0]
            .0
            .iter()
            .map(|&m| FrontierNode { node: m, path: trie.bytes_above(m), dead: false })
            .collect();
        ClassSlice { ascii: self.ascii, slice: (*self.whole).clone(), frontier }
    }

    /// The lead of each token, in trie token order (for tests).
    #[cfg(test)]
    pub(super) fn leads(&self) -> &[u8] {
        &self.lead
    }

    /// How many parent leads are kept: one per break node for a UTF-8 class, one per node
    /// otherwise (for tests).
    #[cfg(test)]
    pub(super) fn break_leads_kept(&self) -> usize {
        match &self.break_leads {
            BreakLeads::PerNode(leads) | BreakLeads::PerBreak { leads, .. } => leads.len(),
        }
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
        let runs = Arc::new(self.runs_below(trie, i, &w));
        Some(w.entry(i as u32).or_insert(runs).clone())
    }

    /// The run tokens below node `i` of an ASCII class (see [`Self::subtree_runs`]), taking the
    /// sets in `built` of its children as they are.
    /// PERF: a union per large child rather than a pass over its tokens per ancestor (each token
    /// was checked once per large subtree above it): the subtree sets of llama.cpp's grammars on
    /// Llama 3 took 19.2 M instructions, then 15.6 M.
    fn runs_below(&self, trie: &TokenTrie, i: usize, built: &HashMap<u32, Arc<Bitset>>) -> Bitset {
        let n = trie.nodes[i];
        let d = n.depth as usize;
        let mut b = Bitset::new(self.vocab_size);
        let mut c = i + 1;
        while c < n.subtree_end as usize {
            // Below a child whose byte the class does not read every lead is deeper than `d`;
            // below one it reads, a lead is at most `d` iff it is at most `d + 1`. (A child's
            // set holds the tokens below it, not its own.)
            if self.reads_ascii(trie.nodes[c].byte) {
                match built.get(&(c as u32)) {
                    Some(runs) => {
                        b.or_assign(runs);
                        self.add_runs_range(trie, c, c + 1, d, &mut b);
                    }
                    None => self.add_runs(trie, c, d, &mut b),
                }
            }
            c = trie.nodes[c].subtree_end as usize;
        }
        b
    }

    /// The first break node in `start..end`, with its parent's lead and its byte.
    /// PERF: a word of the bitset skips 64 nodes.
    #[inline]
    pub fn next_break(&self, trie: &TokenTrie, start: usize, end: usize) -> Option<(usize, usize, u8)> {
        let mut w = start / 64;
        let mut bits = *self.breaks.get(w)? & (u64::MAX << (start % 64));
        while bits == 0 {
            w += 1;
            if w * 64 >= end {
                return None;
            }
            bits = self.breaks[w];
        }
        let m = w * 64 + bits.trailing_zeros() as usize;
        if m >= end {
            return None;
        }
        let lead = match &self.break_leads {
            BreakLeads::PerNode(leads) => leads[m],
            BreakLeads::PerBreak { rank, leads } => {
                let below = (self.breaks[w] & !(u64::MAX << (m % 64))).count_ones();
                leads[(rank[w] + below) as usize]
            }
        };
        Some((m, usize::from(lead), trie.nodes[m].byte))
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

    /// Whether the class reads ASCII byte `x` (for an ASCII-only class, whether `x` can be in a
    /// run at all).
    #[inline]
    pub fn reads_ascii(&self, x: u8) -> bool {
        x < 0x80 && self.ascii >> x & 1 == 1
    }
}

/// The nodes of `list` (in trie order, with their bytes) but those of `drop` (in trie order, each
/// in `list`).
fn without_nodes(list: &(Vec<u32>, Vec<u8>), drop: &[u32]) -> (Vec<u32>, Vec<u8>) {
    let len = list.0.len() - drop.len();
    let mut out = (Vec::with_capacity(len), Vec::with_capacity(len));
    let mut from = 0;
    for &m in drop {
        let at = from + list.0[from..].partition_point(|&k| k < m);
        debug_assert_eq!(list.0[at], m);
        out.0.extend_from_slice(&list.0[from..at]);
        out.1.extend_from_slice(&list.1[from..at]);
        from = at + 1;
    }
    out.0.extend_from_slice(&list.0[from..]);
    out.1.extend_from_slice(&list.1[from..]);
    out
}

/// The nodes of `a` and `b` (each in trie order, with their bytes, none in both) in trie order.
fn merge_by_node(a: (Vec<u32>, Vec<u8>), b: &(Vec<u32>, Vec<u8>)) -> (Vec<u32>, Vec<u8>) {
    if b.0.is_empty() {
        return a;
    }
    let len = a.0.len() + b.0.len();
    let mut out = (Vec::with_capacity(len), Vec::with_capacity(len));
    let mut from = 0;
    for (&m, &x) in b.0.iter().zip(&b.1) {
        let to = from + a.0[from..].partition_point(|&k| k < m);
        out.0.extend_from_slice(&a.0[from..to]);
        out.1.extend_from_slice(&a.1[from..to]);
        out.0.push(m);
        out.1.push(x);
        from = to;
    }
    out.0.extend_from_slice(&a.0[from..]);
    out.1.extend_from_slice(&a.1[from..]);
    out
}

/// Calls `f` with each set bit of `words`, in increasing order.
#[inline]
fn for_each_bit(words: &[u64], mut f: impl FnMut(usize)) {
    for (w, &word) in words.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            f(w * 64 + bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }
}

/// The step of `U` (every well-formed UTF-8 character, [`RunIndex::new`]) from its state `u`
/// (0: a character boundary) on byte `x`: the next state (0 once a character is complete), or
/// `None` where `U` refuses `x`.
pub fn utf8_step(u: u8, x: u8) -> Option<u8> {
    match class_step(u128::MAX, u, x) {
        Body::To(n) => Some(n),
        _ => None,
    }
}

/// Calls `f` with each node whose path ends with one of the byte strings `ends` (none empty).
fn for_each_ending(trie: &TokenTrie, ends: &[Box<[u8]>], mut f: impl FnMut(usize)) {
    if ends.is_empty() {
        return;
    }
    let mut last = [false; 256];
    for e in ends {
        last[usize::from(e[e.len() - 1])] = true;
    }
    for (m, n) in trie.nodes.iter().enumerate() {
        if !last[usize::from(n.byte)] {
            continue;
        }
        let ends_here = |e: &[u8]| {
            let mut i = m;
            for (k, &b) in e.iter().enumerate().rev() {
                let node = trie.nodes[i];
                if node.byte != b {
                    return false;
                }
                if k > 0 {
                    if node.parent == u32::MAX {
                        return false;
                    }
                    i = node.parent as usize;
                }
            }
            true
        };
        if ends.iter().any(|e| ends_here(e)) {
            f(m);
        }
    }
}

/// Raises every value of `xs` to at least `d`.
#[inline]
fn raise(xs: &mut [u8], d: u8) {
    for x in xs {
        *x = (*x).max(d);
    }
}
