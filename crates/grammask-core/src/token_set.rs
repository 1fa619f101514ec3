//! Sets of token ids that are stored by size: the ids themselves when few, else a bitset.
//!
//! Pipeline place: the accepted tokens of a kernel classification ([`crate::mask::KernelMask`])
//! and the memoized masks of a compiled grammar ([`crate::compiled::CompiledGrammar`]); both are
//! kept for the grammar's life, one per parser state met, and most of a structural tag's states
//! (its fixed strings, keys, tool names) allow a handful of tokens.
//!
//! Invariant: [`TokenSet::Ids`] holds at most [`IDS_MAX`] ids, strictly ascending;
//! [`TokenSet::Bits`] holds any number of tokens (a set made by unions of large sets is kept as
//! bits without counting them). Equality and [`TokenSet::hash_into`] are those of the sets, the
//! same whichever way each is stored.
//!
//! PERF: each such set was a vocabulary-sized bitset (16 KB on Llama 3): newly allocated (fresh
//! heap pages), hashed, copied into the mask and scanned again for the memo, ~70 K instructions
//! of the ~95 K in the first mask at each position of a tag's fixed strings.

use crate::bitset::Bitset;

/// Sets of at most this many tokens are kept as ids.
pub const IDS_MAX: usize = 256;

/// Id lists up to this long (repeats counted) are sorted by [`TokenSet::from_ids`]; longer ones
/// are set as bits first. It covers a fill's merged lists (at most `4 * IDS_MAX`), where a
/// vocabulary-sized bitset would cost more than the sort.
const SORTED_IDS_MAX: usize = 4 * IDS_MAX;

#[derive(Clone, Debug)]
pub enum TokenSet {
    /// At most [`IDS_MAX`] ids, strictly ascending, each below `len`.
    Ids {
        ids: Box<[u32]>,
        len: usize,
    },
    Bits(Bitset),
}

impl PartialEq for TokenSet {
    fn eq(&self, other: &TokenSet) -> bool {
        match (self, other) {
            (TokenSet::Ids { ids: a, len: la }, TokenSet::Ids { ids: b, len: lb }) => la == lb && a == b,
            (TokenSet::Bits(a), TokenSet::Bits(b)) => a == b,
            (TokenSet::Ids { ids, len }, TokenSet::Bits(b)) | (TokenSet::Bits(b), TokenSet::Ids { ids, len }) => {
                *len == b.len() && ids_equal_words(ids, b.words())
            }
        }
    }
}

impl Eq for TokenSet {}

impl TokenSet {
    /// The empty set of a vocabulary of `len` tokens.
    pub fn empty(len: usize) -> TokenSet {
        TokenSet::Ids { ids: Box::default(), len }
    }

    /// The set of `bits`, stored as ids when it holds at most [`IDS_MAX`] tokens (`bits` is
    /// scanned), else taken over.
    pub fn from_bitset(bits: Bitset) -> TokenSet {
        match sparse_ids(bits.words()) {
            Some(ids) => TokenSet::Ids { ids: ids.into(), len: bits.len() },
            None => TokenSet::Bits(bits),
        }
    }

    /// [`TokenSet::from_bitset`] of a bitset from [`zeroed_bitset`]: stored as ids, the bitset
    /// is cleared (only the ids' words) and kept for the next [`zeroed_bitset`] of its size.
    pub fn from_spare_bitset(bits: Bitset) -> TokenSet {
        let Some(ids) = sparse_ids(bits.words()) else { return TokenSet::Bits(bits) };
        TokenSet::ids_of_spare(bits, ids)
    }

    /// The set `ids` (sorted, distinct: every set bit of `bits`) as ids; `bits` is cleared (only
    /// the ids' words) and given back for the next [`zeroed_bitset`] of its size.
    fn ids_of_spare(mut bits: Bitset, ids: Vec<u32>) -> TokenSet {
        let len = bits.len();
        let words = bits.words_mut();
        for &t in &ids {
            words[t as usize / 32] = 0;
        }
        give_back(bits);
        TokenSet::Ids { ids: ids.into(), len }
    }

    /// [`TokenSet::from_spare_bitset`] of a bitset whose set bits are all among `candidates`
    /// (lists of ids, repeats allowed): only the candidates' bits are read and cleared, not the
    /// whole bitset; the same set in the same form.
    ///
    /// PERF: a literal lead's walk (the ~60 Llama 3 tokens below `{`) scanned its 16 KB accepted
    /// bitset for ~7 ids, ~5 K instructions, more than a third of each of MaskBench o3626's ~270.
    pub fn from_spare_bitset_among(bits: Bitset, candidates: &[&[u32]]) -> TokenSet {
        let mut ids: Vec<u32> =
            candidates.iter().flat_map(|c| c.iter()).copied().filter(|&t| bits.get(t as usize)).collect();
        // Past `IDS_MAX` before the repeats go, the scan (rather than a long sort first).
        if ids.len() > IDS_MAX {
            return TokenSet::from_spare_bitset(bits);
        }
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > IDS_MAX {
            return TokenSet::from_spare_bitset(bits);
        }
        TokenSet::ids_of_spare(bits, ids)
    }

    /// [`TokenSet::from_bitset`], copying `bits`.
    pub fn of_bitset(bits: &Bitset) -> TokenSet {
        TokenSet::of_words(bits.words(), bits.len())
    }

    /// The set of the bits of `words`, a bitset of `len` bits (bits past `len` clear).
    pub fn of_words(words: &[u32], len: usize) -> TokenSet {
        match sparse_ids(words) {
            Some(ids) => TokenSet::Ids { ids: ids.into(), len },
            None => TokenSet::Bits(Bitset::from_words(words.to_vec(), len)),
        }
    }

    /// The set of `ids` (any order, repeats allowed, each below `len`).
    pub fn from_ids(mut ids: Vec<u32>, len: usize) -> TokenSet {
        // Past `SORTED_IDS_MAX` ids (repeats counted) they are set as bits unsorted, then stored
        // as ids only if few remain ([`TokenSet::from_bitset`]): the same set in the same form.
        // PERF: a byte-region kernel's accepted list (a string body's, thousands of ids in trie
        // order) was sorted before its bits were set: ~2.3% of the session-49 band driver.
        if ids.len() > SORTED_IDS_MAX {
            let mut bits = Bitset::new(len);
            for &t in &ids {
                bits.set(t as usize);
            }
            return TokenSet::from_bitset(bits);
        }
        ids.sort_unstable();
        ids.dedup();
        debug_assert!(ids.iter().all(|&t| (t as usize) < len));
        if ids.len() <= IDS_MAX {
            return TokenSet::Ids { ids: ids.into(), len };
        }
        let mut bits = Bitset::new(len);
        for &t in &ids {
            bits.set(t as usize);
        }
        TokenSet::Bits(bits)
    }

    /// The vocabulary size.
    pub fn len(&self) -> usize {
        match self {
            TokenSet::Ids { len, .. } => *len,
            TokenSet::Bits(b) => b.len(),
        }
    }

    /// The vocabulary is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids, when the set is stored as ids.
    pub fn ids(&self) -> Option<&[u32]> {
        match self {
            TokenSet::Ids { ids, .. } => Some(ids),
            TokenSet::Bits(_) => None,
        }
    }

    pub fn get(&self, t: usize) -> bool {
        match self {
            TokenSet::Ids { ids, .. } => u32::try_from(t).is_ok_and(|t| ids.binary_search(&t).is_ok()),
            TokenSet::Bits(b) => b.get(t),
        }
    }

    pub fn count_ones(&self) -> usize {
        match self {
            TokenSet::Ids { ids, .. } => ids.len(),
            TokenSet::Bits(b) => b.count_ones(),
        }
    }

    /// Every token of the vocabulary is in the set.
    pub fn is_full(&self) -> bool {
        match self {
            TokenSet::Ids { ids, len } => ids.len() == *len,
            TokenSet::Bits(b) => b.is_full(),
        }
    }

    /// Adds the set to `out` (of the same vocabulary size).
    pub fn or_into(&self, out: &mut Bitset) {
        debug_assert_eq!(out.len(), self.len());
        self.or_into_words(out.words_mut());
    }

    /// Adds the set to `words` (exactly the bitset's words).
    pub fn or_into_words(&self, words: &mut [u32]) {
        match self {
            TokenSet::Ids { ids, .. } => ids.iter().for_each(|&t| words[t as usize / 32] |= 1 << (t % 32)),
            TokenSet::Bits(b) => words.iter_mut().zip(b.words()).for_each(|(a, b)| *a |= *b),
        }
    }

    /// Writes the set into `words` (exactly the bitset's words), clearing every other bit.
    pub fn write_into(&self, words: &mut [u32]) {
        match self {
            TokenSet::Bits(b) => words.copy_from_slice(b.words()),
            TokenSet::Ids { ids, .. } => {
                words.fill(0);
                for &t in &**ids {
                    words[t as usize / 32] |= 1 << (t % 32);
                }
            }
        }
    }

    /// The set as a bitset.
    pub fn into_bitset(self) -> Bitset {
        match self {
            TokenSet::Bits(b) => b,
            TokenSet::Ids { ids, len } => {
                let mut b = Bitset::new(len);
                ids.iter().for_each(|&t| b.set(t as usize));
                b
            }
        }
    }

    pub fn iter_ones(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        match self {
            TokenSet::Ids { ids, .. } => Box::new(ids.iter().map(|&t| t as usize)),
            TokenSet::Bits(b) => Box::new(b.iter_ones()),
        }
    }

    /// Feeds the set to `h`: equal sets feed equal words, however each is stored.
    pub fn hash_into(&self, h: &mut impl std::hash::Hasher) {
        self.fold_words(1, h);
    }

    /// Feeds one block of [`SAMPLED_BLOCK`] words in [`SAMPLED_WORD_STRIDE`] to `h` (words `i`
    /// with `(i / SAMPLED_BLOCK) % SAMPLED_WORD_STRIDE == 0`, folded as [`Self::hash_into`]
    /// folds all): equal sets feed equal words, however each is stored; unequal sets may too (a
    /// key that equality checks).
    ///
    /// PERF: [`crate::mask::KernelMask::content_key`] folded all of a bitset's words (~10 K
    /// instructions on Llama 3, ~190 M of the band driver's 3.9 G over 17.9 K new kernels); then
    /// every 8th word (~3.7 K, ~115 M of session 49's 5.0 G); blocks fold in lanes (~2.2 K).
    pub fn sample_into(&self, h: &mut impl std::hash::Hasher) {
        self.fold_words(SAMPLED_WORD_STRIDE, h);
    }

    /// Feeds the words `i` with `(i / SAMPLED_BLOCK) % stride == 0` to `h`, as one fold of both
    /// forms alike: the sum of `w * (i | 1)` and the XOR of the words `w`.
    ///
    /// PERF: one pass over a bitset, ~a tenth of hashing each word; ids fold only their non-zero
    /// words.
    fn fold_words(&self, stride: usize, h: &mut impl std::hash::Hasher) {
        let (sum, xor) = match self {
            TokenSet::Ids { ids, .. } => {
                let (mut sum, mut xor) = (0u32, 0u32);
                for word in ids.chunk_by(|a, b| a / 32 == b / 32) {
                    let i = word[0] as usize / 32;
                    if (i / SAMPLED_BLOCK).is_multiple_of(stride) {
                        let w = word.iter().fold(0u32, |w, &t| w | 1 << (t % 32));
                        sum = sum.wrapping_add(w.wrapping_mul(i as u32 | 1));
                        xor ^= w;
                    }
                }
                (sum, xor)
            }
            TokenSet::Bits(b) => fold_blocks(b.words(), stride),
        };
        h.write_u64(u64::from(sum) << 32 | u64::from(xor));
    }

    pub fn memory_size(&self) -> usize {
        match self {
            TokenSet::Ids { ids, .. } => ids.len() * 4,
            TokenSet::Bits(b) => b.memory_size(),
        }
    }
}

/// Zeroed bitsets kept for reuse, at most [`SPARE_BITSETS`] per thread.
///
/// Invariant: every bitset held has no bit set.
///
/// PERF: each kernel walk allocates a vocabulary-sized accepted set (16 KB on Llama 3, zeroed by
/// `calloc`); MaskBench o3626's `not` fill walked ~440 literal leads of 7 tokens each, and zeroing
/// was ~15% of its instructions.
const SPARE_BITSETS: usize = 4;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Bitset>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A bitset of `len` bits, none set: one given back by [`TokenSet::from_spare_bitset`] where
/// this thread holds one of that size, else a new one.
pub fn zeroed_bitset(len: usize) -> Bitset {
    let spare = SPARE.with(|s| {
        let mut s = s.borrow_mut();
        let i = s.iter().position(|b| b.len() == len)?;
        Some(s.swap_remove(i))
    });
    match spare {
        Some(b) => {
            debug_assert!(b.words().iter().all(|&w| w == 0));
            b
        }
        None => Bitset::new(len),
    }
}

/// Keeps `bits` (no bit set) for [`zeroed_bitset`], unless this thread holds enough.
fn give_back(bits: Bitset) {
    debug_assert!(bits.words().iter().all(|&w| w == 0));
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_BITSETS {
            s.push(bits);
        }
    });
}

/// A union of token sets under construction: a list of ids while every part added is stored as
/// ids and the list (repeats counted) stays within [`SORTED_IDS_MAX`], a bitset from then on.
///
/// Invariant: the union is the set of `Ids`' entries (any order, repeats allowed) or `Bits`'s
/// bits; [`TokenUnion::into_set`] gives it as [`TokenSet::from_ids`] does from a list, as it is
/// from bits.
///
/// PERF: a composed kernel of a few literal leads (MaskBench o3626's `not`, ~600 compositions of
/// 7-token kernels in one fill) zeroed and OR-ed a 16 KB bitset per composition on Llama 3, then
/// hashed and compared it whole when cached.
pub(crate) enum TokenUnion {
    Ids { ids: Vec<u32>, len: usize },
    Bits(Bitset),
}

impl TokenUnion {
    /// The empty union of a vocabulary of `len` tokens.
    pub(crate) fn new(len: usize) -> TokenUnion {
        TokenUnion::Ids { ids: Vec::new(), len }
    }

    /// Adds the tokens of `set` (of the same vocabulary size).
    pub(crate) fn add_set(&mut self, set: &TokenSet) {
        if let (TokenUnion::Ids { ids, .. }, Some(more)) = (&mut *self, set.ids()) {
            if ids.len() + more.len() <= SORTED_IDS_MAX {
                ids.extend_from_slice(more);
                return;
            }
        }
        set.or_into(self.bits());
    }

    /// Adds token `t`.
    pub(crate) fn add(&mut self, t: u32) {
        match self {
            TokenUnion::Ids { ids, .. } if ids.len() < SORTED_IDS_MAX => ids.push(t),
            _ => self.bits().set(t as usize),
        }
    }

    /// The union as bits, converting a list of ids first.
    fn bits(&mut self) -> &mut Bitset {
        if let TokenUnion::Ids { ids, len } = self {
            let mut bits = Bitset::new(*len);
            for &t in &*ids {
                bits.set(t as usize);
            }
            *self = TokenUnion::Bits(bits);
        }
        match self {
            TokenUnion::Bits(b) => b,
            TokenUnion::Ids { .. } => unreachable!("converted above"),
        }
    }

    /// The union as a set.
    pub(crate) fn into_set(self) -> TokenSet {
        match self {
            TokenUnion::Ids { ids, len } => TokenSet::from_ids(ids, len),
            TokenUnion::Bits(b) => TokenSet::Bits(b),
        }
    }
}

/// `ids` (strictly ascending) are exactly the set bits of `words`: word by word, up to the
/// first that differs.
///
/// PERF: the check counted every bit of the bitset first (~50 K instructions on Llama 3 without
/// `popcnt`), ~54 M of session 49's 5.0 G band driver: kernels of a few tokens, one stored as
/// ids and one as bits, met under one sampled key in [`crate::compiled`]'s `cache_kernel`.
fn ids_equal_words(ids: &[u32], words: &[u32]) -> bool {
    let mut at = 0;
    for word in ids.chunk_by(|a, b| a / 32 == b / 32) {
        let i = word[0] as usize / 32;
        let bits = word.iter().fold(0u32, |w, &t| w | 1 << (t % 32));
        if i >= words.len() || words[at..i].iter().any(|&w| w != 0) || words[i] != bits {
            return false;
        }
        at = i + 1;
    }
    words[at..].iter().all(|&w| w == 0)
}

/// [`TokenSet::sample_into`] feeds one block of words in this many.
pub const SAMPLED_WORD_STRIDE: usize = 8;

/// Words sampled together by [`TokenSet::sample_into`], one fold lane each.
const SAMPLED_BLOCK: usize = 8;

/// [`TokenSet::fold_words`] of the words of a bitset: the first [`SAMPLED_BLOCK`] of every
/// `SAMPLED_BLOCK * stride`, each block's words summed and XOR-ed in their own lanes (the order
/// of a wrapping sum or an XOR does not change it).
fn fold_blocks(words: &[u32], stride: usize) -> (u32, u32) {
    let (mut sum, mut xor) = ([0u32; SAMPLED_BLOCK], [0u32; SAMPLED_BLOCK]);
    let mut blocks = words.chunks_exact(SAMPLED_BLOCK * stride);
    let mut base = 0u32;
    for block in &mut blocks {
        for j in 0..SAMPLED_BLOCK {
            sum[j] = sum[j].wrapping_add(block[j].wrapping_mul((base + j as u32) | 1));
            xor[j] ^= block[j];
        }
        base += (SAMPLED_BLOCK * stride) as u32;
    }
    let mut sum = sum.iter().fold(0u32, |a, &b| a.wrapping_add(b));
    let mut xor = xor.iter().fold(0u32, |a, &b| a ^ b);
    for (j, &w) in blocks.remainder().iter().take(SAMPLED_BLOCK).enumerate() {
        sum = sum.wrapping_add(w.wrapping_mul((base + j as u32) | 1));
        xor ^= w;
    }
    (sum, xor)
}

/// Words of a bitset scanned at once by [`sparse_ids`].
const SCAN_WORDS: usize = 16;

/// Words of a bitset skipped at once by [`sparse_ids`] when all are zero (a multiple of
/// [`SCAN_WORDS`]).
/// PERF: one block of 16 words at a time, a sparse 16 KB set took ~5 K instructions to scan on
/// Llama 3 (~20% of a literal-lead kernel of 7 tokens).
const SKIP_WORDS: usize = 128;

/// The ids of the bitset `words` in ascending order when there are at most [`IDS_MAX`]; `None` otherwise.
///
/// PERF: empty spans of [`SKIP_WORDS`] words, then blocks of [`SCAN_WORDS`], are skipped by one (vectorized) OR each, and the
/// scan stops after the block that passes [`IDS_MAX`]: a word at a time cost ~28 K instructions
/// per 16 KB bitset (Llama 3).
fn sparse_ids(words: &[u32]) -> Option<Vec<u32>> {
    // Room for every id up to the cap: a dense set pushed ~8 growths (~4 K instructions).
    let mut ids = Vec::with_capacity(IDS_MAX + SCAN_WORDS * 32);
    for (si, span) in words.chunks(SKIP_WORDS).enumerate() {
        if span.iter().fold(0, |acc, &w| acc | w) == 0 {
            continue;
        }
        for (bi, block) in span.chunks(SCAN_WORDS).enumerate() {
            if block.iter().fold(0, |acc, &w| acc | w) == 0 {
                continue;
            }
            let base = si * SKIP_WORDS + bi * SCAN_WORDS;
            for (i, &w) in block.iter().enumerate() {
                let mut w = w;
                while w != 0 {
                    ids.push(((base + i) * 32) as u32 + w.trailing_zeros());
                    w &= w - 1;
                }
            }
            if ids.len() > IDS_MAX {
                return None;
            }
        }
    }
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists longer than `SORTED_IDS_MAX` (set as bits first) give the sorted ids when their
    /// repeats leave at most `IDS_MAX` tokens, the bits otherwise: as the sorted path would.
    #[test]
    fn long_id_lists_keep_the_canonical_form() {
        let len = 9000;
        for (distinct, repeats) in [(IDS_MAX, 5), (IDS_MAX + 1, 5), (2 * SORTED_IDS_MAX, 1)] {
            let want: Vec<u32> = (0..distinct).map(|i| (i * 31 % len) as u32).collect();
            let mut ids: Vec<u32> = (0..repeats).flat_map(|_| want.iter().rev().copied()).collect();
            assert!(ids.len() > SORTED_IDS_MAX);
            ids.rotate_left(7);
            let s = TokenSet::from_ids(ids, len);
            let mut sorted = want.clone();
            sorted.sort_unstable();
            assert_eq!(s.ids().map(<[u32]>::to_vec), (distinct <= IDS_MAX).then(|| sorted.clone()), "{distinct}");
            assert!(s.iter_ones().map(|t| t as u32).eq(sorted), "{distinct}");
        }
    }

    /// A set of ids and a bitset compare as sets: equal with the same tokens, unequal with one
    /// token more in the bitset (before, between, beside or after the ids, in the last word) or
    /// one less, either way round.
    #[test]
    fn ids_and_bits_compare_as_sets() {
        let len = 9000;
        let lists: [Vec<u32>; 4] = [vec![], vec![5], vec![5, 40, 8999], (0..IDS_MAX as u32).map(|i| i * 31).collect()];
        for ids in lists {
            let set = TokenSet::from_ids(ids.clone(), len);
            assert!(set.ids().is_some());
            let bits = |ids: &[u32]| {
                let mut b = Bitset::new(len);
                for &t in ids {
                    b.set(t as usize);
                }
                TokenSet::Bits(b)
            };
            assert_eq!(set, bits(&ids), "{ids:?}");
            assert_eq!(bits(&ids), set, "{ids:?}");
            for extra in [0, 4, 6, 39, 41, 100, 8_000, 8_998, 8_999] {
                if ids.contains(&extra) {
                    continue;
                }
                let more = bits(&[ids.as_slice(), &[extra]].concat());
                assert_ne!(set, more, "{ids:?} + {extra}");
                assert_ne!(more, set, "{ids:?} + {extra}");
            }
            for i in 0..ids.len() {
                let less = bits(&[&ids[..i], &ids[i + 1..]].concat());
                assert_ne!(set, less, "{ids:?} - {}", ids[i]);
                assert_ne!(less, set, "{ids:?} - {}", ids[i]);
            }
        }
    }

    /// Around `IDS_MAX`, however it is built, a set gives back its tokens: as a bitset, written over a row holding other bits, by
    /// `get`, `or_into` and `iter_ones`; its hash and sampled hash are those of the bitset.
    #[test]
    fn sets_keep_their_tokens_in_canonical_form() {
        let len = 9000;
        for (n, step) in [(0, 1), (1, 1), (IDS_MAX, 31), (IDS_MAX + 1, 31), (1000, 7), (len, 1)] {
            let mut bits = Bitset::new(len);
            (0..n).for_each(|i| bits.set(i * step));
            // Reversed with repeats: `from_ids` sorts and dedups.
            let ids: Vec<u32> = (0..n).rev().flat_map(|i| [(i * step) as u32; 2]).collect();
            let sets = [
                TokenSet::from_bitset(bits.clone()),
                TokenSet::of_bitset(&bits),
                TokenSet::from_ids(ids, len),
                TokenSet::Bits(bits.clone()),
            ];
            let hash = |s: &TokenSet| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                s.hash_into(&mut h);
                s.sample_into(&mut h);
                std::hash::Hasher::finish(&h)
            };
            for (i, s) in sets.iter().enumerate() {
                // Equal sets, however stored, with equal hashes; ids exactly up to `IDS_MAX`
                // but where the bitset was kept as it is.
                assert_eq!(s, &sets[0], "{n}");
                assert_eq!(&sets[0], s, "{n}");
                assert_eq!(hash(s), hash(&sets[0]), "{n}");
                assert_eq!(s.ids().is_some(), n <= IDS_MAX && i < 3, "{n}");
                assert_eq!(s.clone().into_bitset(), bits, "{n}");
                let mut row = vec![u32::MAX; bits.words().len()];
                s.write_into(&mut row);
                assert_eq!(row, bits.words(), "{n}");
                let mut or = Bitset::new(len);
                or.set(1);
                s.or_into(&mut or);
                let mut want = bits.clone();
                want.set(1);
                assert_eq!(or, want, "{n}");
                assert!((0..=len).all(|t| s.get(t) == bits.get(t)), "{n}");
                assert!(s.iter_ones().eq(bits.iter_ones()), "{n}");
                assert_eq!((s.count_ones(), s.is_full(), s.len()), (n, n == len, len), "{n}");
            }
        }
        // Sets that differ by one token, or only in vocabulary size, are unequal however stored.
        let ids = |ids: &[u32], len| TokenSet::from_ids(ids.to_vec(), len);
        let bits = |s: TokenSet| TokenSet::Bits(s.into_bitset());
        for (x, y) in [
            (ids(&[1, 2], 64), ids(&[1, 3], 64)),
            (ids(&[1, 2], 64), ids(&[1, 2, 3], 64)),
            (ids(&[1], 64), ids(&[1], 65)),
        ] {
            for (x, y) in
                [(x.clone(), y.clone()), (bits(x.clone()), y.clone()), (x.clone(), bits(y.clone())), (bits(x), bits(y))]
            {
                assert_ne!(x, y);
                assert_ne!(y, x);
            }
        }
    }
}
