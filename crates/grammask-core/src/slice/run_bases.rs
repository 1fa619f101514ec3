//! Run bases: the part of every run index that depends only on the vocabulary, built once per
//! vocabulary and shared by all its classes.
//!
//! Pipeline place: built by the token index on the first run index it needs
//! ([`crate::token_index::TokenIndex`]), from the token trie; read by
//! [`RunIndex::from_bases`](super::RunIndex::from_bases), which derives a class's index from the
//! base of its kind and the nodes of the ASCII bytes the class does not read.
//!
//! A class `C` (ASCII bytes `A`, UTF-8 too or not) is its *base* `B` without the ASCII bytes
//! `O = ASCII \ A`: `B` is `U` (every character) for a UTF-8 class, every ASCII byte for an
//! ASCII-only one. A byte of `O` leaves `B` at a character boundary wherever it lies, so with
//! `e_O(p)` the depth of the last byte of path `p` in `O` (0 if none),
//! `lead_C(p) = max(lead_B(p), e_O(p))`, and node `m` is a break of `C` iff its byte is in `O`
//! or it is a break of `B` (see [`RunIndex::new`](super::RunIndex::new)).
use super::class::class_step;
use super::Body;
use crate::bitset::Bitset;
use crate::trie::TokenTrie;

/// One base class's runs (see the module doc), leads capped at 255.
#[derive(Debug)]
pub(super) struct RunBase {
    /// `lead_B` of each token's path, in trie token order.
    pub lead: Vec<u8>,
    /// `lead_B` of each node's parent's path (0 under the root), per node.
    pub parent_lead: Vec<u8>,
    /// Bit `m` is set iff node `m` is a break of `B`.
    pub breaks: Vec<u64>,
    /// Bit `m` is set iff node `m` is a break of `B` with parent lead below
    /// [`LEAD_LISTS`](super::LEAD_LISTS): a class's parent leads are at least its base's, so its
    /// breaks of a low lead are among these and the nodes of `O`.
    pub low_breaks: Vec<u64>,
    /// The tokens whose `lead_B` is 0.
    pub whole: Bitset,
}

/// The two bases of a vocabulary's run indexes, and its trie nodes by ASCII byte.
#[derive(Debug)]
pub struct RunBases {
    /// `U`: every character (UTF-8 classes).
    pub(super) utf8: RunBase,
    /// Every ASCII byte and nothing else (ASCII-only classes).
    pub(super) ascii: RunBase,
    /// The depth of each token's node (capped), in trie token order.
    pub(super) token_depth: Vec<u8>,
    /// The depth of each node's parent (capped; 0 under the root), per node: the parent lead of
    /// every node whose parent is a break of an ASCII-only class.
    pub(super) parent_depth: Vec<u8>,
    /// `shallow[k]`: the nodes at depth `k + 1` (`k <` [`LEAD_LISTS`](super::LEAD_LISTS)) in
    /// trie order, with their bytes; the breaks of parent lead `k` of an ASCII-only class are
    /// those outside the class whose parent is outside it too, and some below its nodes.
    pub(super) shallow: [(Vec<u32>, Vec<u8>); super::LEAD_LISTS],
    /// The nodes of ASCII byte `x` are `ascii_nodes[starts[x]..starts[x + 1]]`, in trie order.
    ascii_nodes: Vec<u32>,
    starts: [u32; 129],
}

impl RunBases {
    /// Both bases from one walk of the trie (~ the cost of one class's walk).
    pub fn new(trie: &TokenTrie, vocab_size: usize) -> RunBases {
        let nodes = trie.nodes.len();
        let words = nodes.div_ceil(64);
        let cap = |k: usize| k.min(255) as u8;
        // `table[state][byte]`: `U`'s next state, or `u8::MAX` (a break); 256 rows, so that a
        // state indexes it unchecked.
        let mut table = vec![[u8::MAX; 256]; 256].into_boxed_slice();
        for (b, row) in table.iter_mut().take(9).enumerate() {
            for (x, cell) in row.iter_mut().enumerate() {
                if let Body::To(n) = class_step(u128::MAX, b as u8, x as u8) {
                    *cell = n;
                }
            }
        }
        let table: Box<[[u8; 256]; 256]> = table.try_into().expect("256 rows");
        let empty = || RunBase {
            lead: vec![0; trie.tokens.len()],
            parent_lead: vec![0; nodes],
            breaks: vec![0; words],
            low_breaks: vec![0; words],
            whole: Bitset::new(vocab_size),
        };
        let (mut utf8, mut ascii) = (empty(), empty());
        let mut starts = [0u32; 129];
        let mut token_depth = vec![0u8; trie.tokens.len()];
        let mut parent_depth = vec![0u8; nodes];
        let mut shallow: [(Vec<u32>, Vec<u8>); super::LEAD_LISTS] = Default::default();
        // Along the current path, per depth (0: the root): `U`'s lead and state after the node
        // there, and the depth of the path's last non-ASCII byte (capped).
        let mut at: Vec<(u8, u8, u8)> = vec![(0, 0, 0); trie.max_depth as usize + 1];
        for (i, n) in trie.nodes.iter().enumerate() {
            let (d, x) = (n.depth as usize, usize::from(n.byte));
            let bit = 1u64 << (i % 64);
            let (ulead, state, above) = at[d - 1];
            utf8.parent_lead[i] = ulead;
            parent_depth[i] = cap(d - 1);
            ascii.parent_lead[i] = above;
            let (ulead_here, state_here) = match table[usize::from(state)][x] {
                u8::MAX => {
                    utf8.breaks[i / 64] |= bit;
                    if usize::from(ulead) < super::LEAD_LISTS {
                        utf8.low_breaks[i / 64] |= bit;
                    }
                    // As in `RunIndex::new`: the longest suffix `U` reads is `x` alone where it
                    // begins a character, else the empty one.
                    match table[0][x] {
                        u8::MAX => (cap(d), 0),
                        st => (cap(d - 1), st),
                    }
                }
                next => (ulead, next),
            };
            let here = if x < 0x80 {
                starts[x + 1] += 1;
                above
            } else {
                ascii.breaks[i / 64] |= bit;
                if usize::from(above) < super::LEAD_LISTS {
                    ascii.low_breaks[i / 64] |= bit;
                }
                cap(d)
            };
            at[d] = (ulead_here, state_here, here);
            // Most nodes hold no token or one (a `fill` is a `memset` call); three arrays alike.
            #[allow(clippy::needless_range_loop)]
            for p in n.tok_start as usize..n.tok_end as usize {
                utf8.lead[p] = ulead_here;
                ascii.lead[p] = here;
                token_depth[p] = cap(d);
            }
            if let Some((nodes, bytes)) = shallow.get_mut(d - 1) {
                nodes.push(i as u32);
                bytes.push(n.byte);
            }
        }
        // Lead 0 is the rule for `U` and common for ASCII: both sets taken in one pass.
        for ((&t, &u), &a) in trie.tokens.iter().zip(&utf8.lead).zip(&ascii.lead) {
            if u == 0 {
                utf8.whole.set(t as usize);
            }
            if a == 0 {
                ascii.whole.set(t as usize);
            }
        }
        for x in 0..128 {
            starts[x + 1] += starts[x];
        }
        let mut next = starts;
        let mut ascii_nodes = vec![0u32; starts[128] as usize];
        for (i, n) in trie.nodes.iter().enumerate() {
            if n.byte < 0x80 {
                let slot = &mut next[usize::from(n.byte)];
                ascii_nodes[*slot as usize] = i as u32;
                *slot += 1;
            }
        }
        RunBases { utf8, ascii, token_depth, parent_depth, shallow, ascii_nodes, starts }
    }

    /// The nodes whose byte is ASCII byte `x`, in trie order.
    pub(super) fn nodes_of(&self, x: u8) -> &[u32] {
        let x = usize::from(x);
        &self.ascii_nodes[self.starts[x] as usize..self.starts[x + 1] as usize]
    }

    /// Bit `m` is set iff node `m`'s byte is an ASCII byte of `ascii`.
    pub(super) fn node_bits(&self, ascii: u128, words: usize) -> Vec<u64> {
        let mut bits = vec![0u64; words];
        for x in (0..0x80u8).filter(|&x| ascii >> x & 1 == 1) {
            for &m in self.nodes_of(x) {
                bits[m as usize / 64] |= 1 << (m % 64);
            }
        }
        bits
    }

    /// How many nodes have an ASCII byte outside `ascii`.
    pub fn outside_nodes(&self, ascii: u128) -> usize {
        (0..0x80u8).filter(|&x| ascii >> x & 1 == 0).map(|x| self.nodes_of(x).len()).sum()
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        let base = |b: &RunBase| {
            b.lead.len() + b.parent_lead.len() + 8 * (b.breaks.len() + b.low_breaks.len()) + b.whole.memory_size()
        };
        base(&self.utf8)
            + base(&self.ascii)
            + self.token_depth.len()
            + self.parent_depth.len()
            + self.shallow.iter().map(|(nodes, bytes)| 4 * nodes.capacity() + bytes.capacity()).sum::<usize>()
            + 4 * self.ascii_nodes.len()
            + std::mem::size_of::<Self>()
    }
}
