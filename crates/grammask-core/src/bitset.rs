//! Fixed-size bitsets in the token-bitmask layout: 32-bit words, least significant bit first,
//! bit `i` of word `i / 32` is token `i`. A set bit means "allowed".

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bitset {
    words: Vec<u32>,
    len: usize,
}

impl Bitset {
    pub fn new(len: usize) -> Bitset {
        Bitset { words: vec![0; len.div_ceil(32)], len }
    }

    /// The bitset of `len` bits held in `words` (`len.div_ceil(32)` of them, bits past `len` clear).
    pub fn from_words(words: Vec<u32>, len: usize) -> Bitset {
        debug_assert_eq!(words.len(), len.div_ceil(32));
        Bitset { words, len }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn set(&mut self, i: usize) {
        debug_assert!(i < self.len);
        self.words[i >> 5] |= 1 << (i & 31);
    }

    #[inline]
    pub fn unset(&mut self, i: usize) {
        debug_assert!(i < self.len);
        self.words[i >> 5] &= !(1 << (i & 31));
    }

    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i >> 5] >> (i & 31) & 1 == 1
    }

    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    pub fn copy_from(&mut self, other: &Bitset) {
        debug_assert_eq!(self.len, other.len);
        self.words.copy_from_slice(&other.words);
    }

    pub fn or_assign(&mut self, other: &Bitset) {
        debug_assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// Clears every bit set in `other`.
    pub fn and_not_assign(&mut self, other: &Bitset) {
        debug_assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !*b;
        }
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The words, writable (bits past `len` must stay clear).
    pub fn words_mut(&mut self) -> &mut [u32] {
        &mut self.words
    }

    /// Every bit below `len` is set. PERF: stops at the first word with a clear bit (word 0 for
    /// almost every grammar mask), where `count_ones` scans the whole row.
    pub fn is_full(&self) -> bool {
        words_full(&self.words, self.len)
    }

    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 32 + b)
            })
        })
    }

    pub fn memory_size(&self) -> usize {
        self.words.len() * 4
    }
}

/// The bits `lo..=hi` of a 128-bit set of ASCII bytes (`hi <= 0x7F`; empty when `lo > hi`).
pub fn ascii_range(lo: u8, hi: u8) -> u128 {
    if lo > hi {
        return 0;
    }
    (u128::MAX >> (127 - (hi - lo))) << lo
}

/// Every bit below `len` of `words` (at least `len.div_ceil(32)` words) is set, stopping at the
/// first word with a clear bit.
pub fn words_full(words: &[u32], len: usize) -> bool {
    let (full, rest) = (len / 32, len % 32);
    words[..full].iter().all(|&w| w == u32::MAX) && (rest == 0 || words[full] | !((1u32 << rest) - 1) == u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_or_iter() {
        let mut a = Bitset::new(70);
        a.set(0);
        a.set(33);
        a.set(69);
        let mut b = Bitset::new(70);
        b.set(5);
        a.or_assign(&b);
        assert_eq!(a.iter_ones().collect::<Vec<_>>(), vec![0, 5, 33, 69]);
        assert!(a.get(69) && !a.get(68) && !a.get(70));
        assert_eq!(a.count_ones(), 4);
        assert!(!a.is_full());
        for len in [1, 31, 32, 33, 64, 100] {
            let mut b = Bitset::new(len);
            (0..len).for_each(|i| b.set(i));
            assert!(b.is_full(), "{len}");
            let mut c = Bitset::new(len);
            (1..len).for_each(|i| c.set(i));
            assert!(!c.is_full(), "{len}");
        }
        assert_eq!(a.words().len(), 3);
    }
}
