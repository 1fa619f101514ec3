//! Kernels inside an open object's key: a state whose rest of the rule matches every string body
//! but finitely many words W is the string body's kernel `K` less the uncertain tokens that end
//! the rule after a word of W (see `CompiledGrammar::excluded_kernel_in` for why).
//!
//! Pipeline place: called by [`crate::compiled::CompiledGrammar`] before any other
//! classification of such a state; `K` is classified once per grammar.
use super::*;
use crate::vocab::Vocabulary;

/// The string body's kernel with its uncertain tokens ordered by the length and first byte of the
/// text each reads before the rule ends (`u`, the token less its suffix), so that a position finds
/// the tokens ending after a word by a binary search and a few comparisons instead of a pass over
/// every uncertain token.
///
/// PERF: the pass hashed each uncertain token's `u` (888 of them on Llama 3) at every key
/// position, and the kernel it built (equal to `K` at nearly every position: no token reads a
/// whole remaining key and its closing `"`) was hashed and compared in full to be shared:
/// ~0.1-0.2 ms a position. Sorting by `u` itself cost more than two such passes.
#[derive(Debug)]
pub struct BodyEnds {
    pub base: Arc<KernelMask>,
    /// ([`text_key`] of `u`, index into `base.uncertain`), sorted.
    by_text: Vec<(u32, u32)>,
}

impl BodyEnds {
    pub fn new(base: Arc<KernelMask>, vocab: &Vocabulary) -> BodyEnds {
        // One `u64` per token (key, then index): sorting the pairs took 161 K of 234 K instructions
        // on Llama 3, this takes ~80 K less in all.
        let mut packed: Vec<u64> = (0..base.uncertain.len() as u32)
            .map(|i| u64::from(text_key(text(&base, vocab, i))) << 32 | u64::from(i))
            .collect();
        packed.sort_unstable();
        let by_text = packed.iter().map(|&p| ((p >> 32) as u32, p as u32)).collect();
        BodyEnds { base, by_text }
    }

    pub fn memory_size(&self) -> usize {
        self.base.memory_size() + self.by_text.len() * 8
    }

    /// The kernel of a position whose rest of the rule matches every string body but `words`:
    /// `base` itself when no uncertain token ends the rule after one of them.
    pub fn without(&self, vocab: &Vocabulary, words: &[Box<[u8]>]) -> Arc<KernelMask> {
        let mut dropped: Vec<u32> = Vec::new();
        for w in words {
            let key = text_key(w);
            let first = self.by_text.partition_point(|e| e.0 < key);
            let same_key = self.by_text[first..].iter().take_while(|e| e.0 == key);
            dropped.extend(same_key.map(|e| e.1).filter(|&i| text(&self.base, vocab, i) == &**w));
        }
        if dropped.is_empty() {
            return self.base.clone();
        }
        dropped.sort_unstable();
        let base = &self.base;
        let kept = base.uncertain.iter().enumerate().filter(|(i, _)| dropped.binary_search(&(*i as u32)).is_err());
        // The suffixes stay as they are (unused ones included): their verdicts are memoized by
        // their hash.
        Arc::new(KernelMask {
            accepted: base.accepted.clone(),
            uncertain: kept.map(|(_, &e)| e).collect(),
            suffixes: base.suffixes.clone(),
            suffix_walk: base.suffix_walk.clone(),
            suffix_hash: base.suffix_hash,
            beyond: None,
        })
    }
}

/// The length of `u` and its first byte, as one sort key (`u` below 2^24 bytes).
fn text_key(u: &[u8]) -> u32 {
    (u.len() as u32) << 8 | u32::from(u.first().copied().unwrap_or(0))
}

/// The text uncertain token `i` of `km` reads before its rule ends.
fn text<'a>(km: &KernelMask, vocab: &'a Vocabulary, i: u32) -> &'a [u8] {
    let (t, s) = km.uncertain[i as usize];
    let b = vocab.token_bytes(t);
    &b[..b.len() - km.suffixes[s as usize].len()]
}
