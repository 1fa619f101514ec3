//! The token trie: every text token of a vocabulary, laid out in depth-first order so a walk can
//! skip a whole subtree (all tokens sharing a rejected prefix) by jumping to `subtree_end`.
//!
//! Invariants: nodes are in DFS preorder; node `i`'s descendants are exactly `i+1..subtree_end`;
//! `depth` is the length of the node's byte path (the root is implicit, depth 0); the tokens whose
//! bytes equal a node's path are `tokens[tok_start..tok_end]`; the tokens of node `i`'s subtree are
//! `tokens[first_token[i]..first_token[subtree_end]]`.

use crate::bitset::Bitset;
use crate::fasthash::FastMap;
use crate::vocab::Vocabulary;

#[derive(Clone, Copy, Debug)]
pub struct Node {
    pub byte: u8,
    /// The parent node (`u32::MAX` for a child of the root).
    pub parent: u32,
    pub depth: u32,
    pub subtree_end: u32,
    pub tok_start: u32,
    pub tok_end: u32,
}

#[derive(Clone, Debug, Default)]
pub struct TokenTrie {
    pub nodes: Vec<Node>,
    pub tokens: Vec<u32>,
    /// `first_token[i]`: the number of tokens on nodes before `i` (one entry per node, plus the
    /// total).
    pub first_token: Vec<u32>,
    /// The longest token, in bytes: no walk goes deeper.
    pub max_depth: u32,
    /// `deepest_below[i]`: the depth of the deepest node in node `i`'s subtree (`i` included).
    pub deepest_below: Vec<u32>,
    /// The nodes at depth 1, in byte order.
    pub root_children: Box<[u32]>,
    /// The children of every node with at least [`WIDE_MIN_CHILDREN`], in byte order: a walk
    /// whose parser state reads a few bytes there visits only those children.
    wide: FastMap<u32, Box<[u32]>>,
    /// Per byte with at least [`FIRST_BYTE_SET_MIN_TOKENS`] tokens starting with it, those tokens
    /// as a token bitset ([`Self::first_byte_tokens`]).
    by_first_byte: FastMap<u8, Bitset>,
}

/// A first byte with this many tokens gets a token bitset ([`TokenTrie::first_byte_tokens`]):
/// dropping them from a mask by id costs more than one pass over a mask's words. On Llama 3
/// about 20 bytes qualify (~16 KB each).
pub const FIRST_BYTE_SET_MIN_TOKENS: usize = 2048;

/// Nodes with this many children get a child list ([`TokenTrie::wide_children`]).
pub const WIDE_MIN_CHILDREN: usize = 16;

impl TokenTrie {
    pub fn new(vocab: &Vocabulary) -> TokenTrie {
        let sorted = vocab.sorted_text_tokens();
        // PERF: sized exactly first (each token adds its bytes past the common prefix with the
        // previous one): growing `nodes` by doubling copied ~13 MB on Llama 3 (12 M instructions).
        let mut lcps: Vec<u32> = Vec::with_capacity(sorted.len());
        let mut prev: &[u8] = &[];
        let mut node_count = 0;
        for &id in sorted {
            let bytes = vocab.token_bytes(id);
            let lcp = common_prefix(prev, bytes);
            lcps.push(lcp as u32);
            node_count += bytes.len() - lcp;
            prev = bytes;
        }
        let mut t = TokenTrie {
            nodes: Vec::with_capacity(node_count),
            tokens: Vec::with_capacity(sorted.len()),
            first_token: Vec::with_capacity(node_count + 1),
            ..TokenTrie::default()
        };
        // open[d] = index of the open node at depth d+1 on the current path.
        let mut open: Vec<u32> = Vec::new();
        for (&id, &lcp) in sorted.iter().zip(&lcps) {
            let bytes = vocab.token_bytes(id);
            let lcp = lcp as usize;
            while open.len() > lcp {
                let n = open.pop().unwrap();
                t.nodes[n as usize].subtree_end = t.nodes.len() as u32;
            }
            for &b in &bytes[lcp..] {
                let parent = open.last().copied().unwrap_or(u32::MAX);
                open.push(t.nodes.len() as u32);
                t.first_token.push(t.tokens.len() as u32);
                t.nodes.push(Node {
                    byte: b,
                    parent,
                    depth: open.len() as u32,
                    subtree_end: 0,
                    tok_start: 0,
                    tok_end: 0,
                });
            }
            // Sorted order puts equal byte strings next to each other, so a node's tokens are
            // contiguous in `tokens`.
            let n = *open.last().unwrap() as usize;
            if t.nodes[n].tok_end == 0 {
                t.nodes[n].tok_start = t.tokens.len() as u32;
            }
            t.tokens.push(id);
            t.nodes[n].tok_end = t.tokens.len() as u32;
        }
        while let Some(n) = open.pop() {
            t.nodes[n as usize].subtree_end = t.nodes.len() as u32;
        }
        t.first_token.push(t.tokens.len() as u32);
        t.max_depth = t.nodes.iter().map(|n| n.depth).max().unwrap_or(0);
        // Preorder: a node's descendants follow it, so a reverse pass has them done first.
        t.deepest_below = t.nodes.iter().map(|n| n.depth).collect();
        for i in (0..t.nodes.len()).rev() {
            let p = t.nodes[i].parent;
            if p != u32::MAX {
                t.deepest_below[p as usize] = t.deepest_below[p as usize].max(t.deepest_below[i]);
            }
        }
        t.root_children = t.children(None).collect();
        t.by_first_byte = t.first_byte_sets(vocab.vocab_size(), FIRST_BYTE_SET_MIN_TOKENS);
        let mut count = vec![0u32; t.nodes.len()];
        for n in &t.nodes {
            if n.parent != u32::MAX {
                count[n.parent as usize] += 1;
            }
        }
        // PERF: children found by skipping subtrees, not by a map lookup per node (14 M
        // instructions on Llama 3).
        t.wide = (0..t.nodes.len())
            .filter(|&i| count[i] as usize >= WIDE_MIN_CHILDREN)
            .map(|i| (i as u32, t.children(Some(i)).collect()))
            .collect();
        t
    }

    /// The tokens of each root child with at least `min_tokens` tokens in its subtree, as token
    /// bitsets of `len` bits (the vocabulary size), by the child's byte.
    fn first_byte_sets(&self, len: usize, min_tokens: usize) -> FastMap<u8, Bitset> {
        let mut sets = FastMap::default();
        for &c in &self.root_children {
            let tokens = self.subtree_tokens(c);
            if tokens.len() >= min_tokens {
                let mut s = Bitset::new(len);
                for &t in tokens {
                    s.set(t as usize);
                }
                sets.insert(self.nodes[c as usize].byte, s);
            }
        }
        sets
    }

    /// The bytes of the path from the root to node `i`'s parent (node `i`'s own byte left out).
    pub fn bytes_above(&self, i: u32) -> Box<[u8]> {
        let mut bytes = Vec::with_capacity(self.nodes[i as usize].depth.saturating_sub(1) as usize);
        let mut p = self.nodes[i as usize].parent;
        while p != u32::MAX {
            bytes.push(self.nodes[p as usize].byte);
            p = self.nodes[p as usize].parent;
        }
        bytes.reverse();
        bytes.into_boxed_slice()
    }

    /// The tokens in node `i`'s subtree, its own included (ids, in trie order).
    pub fn subtree_tokens(&self, i: u32) -> &[u32] {
        let end = self.nodes[i as usize].subtree_end as usize;
        &self.tokens[self.first_token[i as usize] as usize..self.first_token[end] as usize]
    }

    /// The tokens starting with root child `c`'s byte as a token bitset, when that byte has at
    /// least [`FIRST_BYTE_SET_MIN_TOKENS`] tokens (else `None`: take [`Self::subtree_tokens`]).
    ///
    /// PERF: a shifted kernel drops the tokens of a few first bytes from its reference; setting
    /// them one by one cost ~1 M instructions for `' '` on Llama 3 (about 80,000 tokens).
    pub fn first_byte_tokens(&self, c: u32) -> Option<&Bitset> {
        self.by_first_byte.get(&self.nodes[c as usize].byte)
    }

    /// The children of node `i` (of the root for `None`), in byte order.
    pub fn children(&self, i: Option<usize>) -> impl Iterator<Item = u32> + '_ {
        let (mut c, end) = match i {
            Some(i) => (i + 1, self.nodes[i].subtree_end as usize),
            None => (0, self.nodes.len()),
        };
        std::iter::from_fn(move || {
            (c < end).then(|| {
                let here = c;
                c = self.nodes[c].subtree_end as usize;
                here as u32
            })
        })
    }

    /// The children of node `i` when it has many ([`WIDE_MIN_CHILDREN`]), in byte order.
    #[inline]
    pub fn wide_children(&self, i: usize) -> Option<&[u32]> {
        self.wide.get(&(i as u32)).map(|c| &c[..])
    }

    /// The child of node `i` whose byte is `byte`, if any.
    pub fn child(&self, i: usize, byte: u8) -> Option<usize> {
        if let Some(cs) = self.wide_children(i) {
            return cs.binary_search_by_key(&byte, |&x| self.nodes[x as usize].byte).ok().map(|k| cs[k] as usize);
        }
        let (mut x, end) = (i + 1, self.nodes[i].subtree_end as usize);
        while x < end && self.nodes[x].byte != byte {
            x = self.nodes[x].subtree_end as usize;
        }
        (x < end).then_some(x)
    }

    /// The root child whose byte is `byte`, if any.
    pub fn root_child(&self, byte: u8) -> Option<usize> {
        let k = self.root_children.binary_search_by_key(&byte, |&c| self.nodes[c as usize].byte).ok()?;
        Some(self.root_children[k] as usize)
    }

    #[inline]
    pub fn node_tokens(&self, n: &Node) -> &[u32] {
        &self.tokens[n.tok_start as usize..n.tok_end as usize]
    }

    pub fn memory_size(&self) -> usize {
        let wide: usize = self.wide.values().map(|c| c.len() * 4 + 24).sum();
        self.nodes.len() * std::mem::size_of::<Node>()
            + self.tokens.len() * 4
            + self.first_token.len() * 4
            + self.deepest_below.len() * 4
            + self.root_children.len() * 4
            + wide
            + self.by_first_byte.values().map(|s| s.memory_size() + 8).sum::<usize>()
    }
}

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{VocabType, VocabularyOptions};

    /// `deepest_below` is the deepest depth over each node's subtree (`i..subtree_end`).
    #[test]
    fn deepest_below_is_the_subtree_max_depth() {
        let toks: Vec<&[u8]> = vec![b"a", b"abcd", b"abx", b"b", b"ba", b"c", b"cde", b"cdefg", b"cz"];
        let toks: Vec<Vec<u8>> = toks.into_iter().map(<[u8]>::to_vec).collect();
        let v = Vocabulary::new(toks, VocabType::Raw, VocabularyOptions::default()).unwrap();
        let trie = TokenTrie::new(&v);
        for (i, n) in trie.nodes.iter().enumerate() {
            let want = trie.nodes[i..n.subtree_end as usize].iter().map(|m| m.depth).max().unwrap();
            assert_eq!(trie.deepest_below[i], want, "node {i} (byte {}, depth {})", n.byte, n.depth);
        }
        assert_eq!(trie.deepest_below[trie.root_children[2] as usize], 5);
    }

    /// Each root child's token set holds exactly the tokens whose bytes start with its byte, and
    /// only bytes with enough tokens get one.
    #[test]
    fn first_byte_tokens_are_the_tokens_starting_with_the_byte() {
        let toks: Vec<&[u8]> = vec![b"a", b"ab", b"b", b"abc", b"ba", b"c", b"\xc3\xa9", b"a", b"zz"];
        let toks: Vec<Vec<u8>> = toks.into_iter().map(<[u8]>::to_vec).collect();
        // Id 7 is a second `a`; id 9 is padding (no bytes).
        let opts = VocabularyOptions { vocab_size: Some(10), ..Default::default() };
        let v = Vocabulary::new(toks, VocabType::Raw, opts).unwrap();
        let mut trie = TokenTrie::new(&v);
        assert!(trie.by_first_byte.is_empty(), "no byte has {FIRST_BYTE_SET_MIN_TOKENS} tokens");
        let n = v.vocab_size();
        trie.by_first_byte = trie.first_byte_sets(n, 2);
        let mut with_set = Vec::new();
        for &c in &trie.root_children {
            let b = trie.nodes[c as usize].byte;
            let want: Vec<usize> = (0..n).filter(|&t| v.token_bytes(t as u32).first() == Some(&b)).collect();
            let mut got: Vec<usize> = trie.subtree_tokens(c).iter().map(|&t| t as usize).collect();
            got.sort_unstable();
            assert_eq!(got, want, "subtree of byte {b}");
            if let Some(set) = trie.first_byte_tokens(c) {
                assert_eq!(set.iter_ones().collect::<Vec<_>>(), want, "set of byte {b}");
                with_set.push(b);
            }
        }
        assert_eq!(with_set, b"ab");
    }
}
