//! UTF-8 byte-range sequences of Unicode scalar ranges.
//!
//! Pipeline place: used by the NFA construction (`nfa.rs`) to turn a character class into a
//! handful of byte-range paths, so a class of any size costs a few states.

/// One UTF-8 byte-range sequence: its first `len` ranges (at most 4, the longest encoding).
/// Ordered as the slice of its ranges (lexicographically, a prefix first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSeq {
    len: u8,
    ranges: [(u8, u8); 4],
}

impl ByteSeq {
    pub fn as_slice(&self) -> &[(u8, u8)] {
        &self.ranges[..usize::from(self.len)]
    }
}

impl Ord for ByteSeq {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl PartialOrd for ByteSeq {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Splits Unicode scalar ranges (surrogates excluded) into sequences of byte ranges whose
/// concatenations are exactly the UTF-8 encodings of the codepoints in the ranges.
pub fn utf8_sequences(ranges: &[(u32, u32)]) -> Vec<Vec<(u8, u8)>> {
    utf8_byte_seqs(ranges).iter().map(|s| s.as_slice().to_vec()).collect()
}

/// [`utf8_sequences`] without an allocation per sequence, in the same (sorted) order.
/// PERF: the NFA construction of a JSON Schema band compile called it ~200 times, ~2k
/// allocations; 4% of the compile's instructions.
pub fn utf8_byte_seqs(ranges: &[(u32, u32)]) -> Vec<ByteSeq> {
    let mut out = Vec::with_capacity(16);
    let mut work: Vec<(u32, u32)> = Vec::with_capacity(16);
    for &(lo, hi) in ranges {
        // Remove the surrogate block.
        if lo < 0xD800 {
            work.push((lo, hi.min(0xD7FF)));
        }
        if hi > 0xDFFF {
            work.push((lo.max(0xE000), hi));
        }
    }
    while let Some((lo, hi)) = work.pop() {
        if lo > hi {
            continue;
        }
        // Split at encoding-length boundaries.
        let mut split = false;
        for &b in &[0x7F, 0x7FF, 0xFFFF] {
            if lo <= b && hi > b {
                work.push((lo, b));
                work.push((b + 1, hi));
                split = true;
                break;
            }
        }
        if split {
            continue;
        }
        if hi <= 0x7F {
            out.push(ByteSeq { len: 1, ranges: [(lo as u8, hi as u8), (0, 0), (0, 0), (0, 0)] });
            continue;
        }
        // Split so that all but a prefix of continuation bytes span their full range.
        let n = if hi <= 0x7FF {
            2
        } else if hi <= 0xFFFF {
            3
        } else {
            4
        };
        let mut done = false;
        for i in 1..n {
            let m = (1u32 << (6 * i)) - 1;
            if lo & !m != hi & !m {
                if lo & m != 0 {
                    work.push((lo, lo | m));
                    work.push(((lo | m) + 1, hi));
                    done = true;
                    break;
                }
                if hi & m != m {
                    work.push((lo, (hi & !m) - 1));
                    work.push((hi & !m, hi));
                    done = true;
                    break;
                }
            }
        }
        if done {
            continue;
        }
        let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
        let a = encode_utf8(lo, &mut a);
        let b = encode_utf8(hi, &mut b);
        let mut seq = ByteSeq { len: a.len().min(b.len()) as u8, ranges: [(0, 0); 4] };
        for (r, (&x, &y)) in seq.ranges.iter_mut().zip(a.iter().zip(b.iter())) {
            *r = (x, y);
        }
        out.push(seq);
    }
    // Equal sequences are identical: the unstable order is the stable one.
    out.sort_unstable();
    out
}

/// The UTF-8 encoding of `c` in `buf` (empty for a non-scalar).
fn encode_utf8(c: u32, buf: &mut [u8; 4]) -> &[u8] {
    match char::from_u32(c) {
        Some(ch) => ch.encode_utf8(buf).as_bytes(),
        None => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(seqs: &[Vec<(u8, u8)>], bytes: &[u8]) -> bool {
        seqs.iter().any(|s| s.len() == bytes.len() && s.iter().zip(bytes).all(|(&(lo, hi), &b)| lo <= b && b <= hi))
    }

    #[test]
    fn utf8_sequences_are_exact() {
        let ranges = [(0x41, 0x5A), (0x7F, 0x800), (0xD000, 0xE100), (0xFFF0, 0x10_0010)];
        let seqs = utf8_sequences(&ranges);
        for c in (0..0x11_0000u32).step_by(7).chain([0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10_0010]) {
            let Some(ch) = char::from_u32(c) else { continue };
            let inside = ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
            assert_eq!(matches(&seqs, ch.to_string().as_bytes()), inside, "U+{c:04X}");
        }
        // Surrogate encodings (ED A0..BF xx) are never produced.
        assert!(!matches(&seqs, &[0xED, 0xA0, 0x80]));
    }
}
