//! A fast keyed hasher for the compiler's internal tables (DFA signatures, state pairs, rule
//! names), where std's `SipHash` took a fifth of a typical schema's compile time.
//! Each word is folded into the state with a 64x64->128-bit multiply; the per-process random seed
//! (taken from std's `RandomState`) keeps inputs from being tuned to collide.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0x5EED_u64) | 1)
}

#[derive(Clone, Copy)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        // The last 0..=7 bytes, little-endian, and their count in the top byte. PERF: a byte
        // loop; copying a variable-length tail into a buffer compiles to a memmove call.
        let rest = chunks.remainder();
        let w = rest.iter().rev().fold(0u64, |w, &b| w << 8 | u64::from(b));
        self.write_u64(w ^ (rest.len() as u64) << 56);
    }

    #[inline]
    fn write_u64(&mut self, w: u64) {
        self.0 = fold(self.0 ^ w, K);
    }

    #[inline]
    fn write_u32(&mut self, w: u32) {
        self.write_u64(u64::from(w));
    }

    #[inline]
    fn write_u8(&mut self, w: u8) {
        self.write_u64(u64::from(w));
    }

    #[inline]
    fn write_usize(&mut self, w: usize) {
        self.write_u64(w as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        fold(self.0, seed() ^ K)
    }
}

#[derive(Clone, Copy, Default)]
pub struct FastState;

impl BuildHasher for FastState {
    type Hasher = FastHasher;
    #[inline]
    fn build_hasher(&self) -> FastHasher {
        FastHasher(seed())
    }
}

pub type FastMap<K, V> = HashMap<K, V, FastState>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_alike_and_maps_work() {
        let mut m: FastMap<(u32, Vec<u32>), u32> = FastMap::default();
        for i in 0..1000u32 {
            m.insert((i % 7, vec![i, i * 3]), i);
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m[&(3, vec![10, 30])], 10);
        let h = |x: &[u8]| FastState.hash_one(x);
        assert_eq!(h(b"abcdefghij"), h(b"abcdefghij"));
        assert_ne!(h(b"abcdefgh"), h(b"abcdefgh\0"));
    }
}
