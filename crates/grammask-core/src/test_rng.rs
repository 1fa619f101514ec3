//! One deterministic pseudo-random source for unit tests (xorshift64, no external crates).

/// Xorshift64; the state must start non-zero (it then never becomes zero).
pub(crate) struct XorShift(pub u64);

impl XorShift {
    /// The next state: every value in 1..2^64 comes once per period.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (`n > 0`; a slight modulo bias is fine for tests).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// [`XorShift::below`] for lengths and indices.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}
