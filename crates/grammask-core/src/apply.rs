//! Applying a token bitmask to a row of logits: the last step of a decode loop, after the mask is
//! filled. Takes one row of logits (any float format, as its raw bit pattern) and one bitmask row
//! (bit `t % 32` of word `t / 32` set iff token `t` is allowed); writes `-inf` over every
//! disallowed logit. Pure slices: the binding crate turns numpy/torch buffers into rows.

/// A float format's `-inf`, as the unsigned integer of the same width (the kernel only copies
/// bit patterns, so one generic loop serves float32, float16, bfloat16 and float64).
pub trait NegInf: Copy {
    const NEG_INF: Self;

    /// `chunk[j] = -inf` for every zero bit `j` of `w` (`chunk` holds 32 logits), branch-free.
    ///
    /// PERF: a per-lane select the compiler vectorizes for 16- and 32-bit lanes; walking the zero
    /// bits of random words mispredicts (86 us against 4x less on a 152k row of random words).
    #[inline]
    fn select_32(chunk: &mut [Self], w: u32) {
        for (j, x) in chunk.iter_mut().enumerate().take(32) {
            let keep = (w >> j) & 1 == 1;
            *x = if keep { *x } else { Self::NEG_INF };
        }
    }
}

/// float32 and float64 `-inf` bit patterns.
impl NegInf for u32 {
    const NEG_INF: u32 = 0xFF80_0000;
}
/// NOTE: float64 lanes compile to a branch per lane (~650 us on a 152k row of random words);
/// a branch-free mask (`u64::from(bit).wrapping_neg()`) was wrong under the release profile's
/// LTO with rustc 1.95 (disallowed logits became 0), so float64 keeps the plain select.
impl NegInf for u64 {
    const NEG_INF: u64 = 0xFFF0_0000_0000_0000;
}

/// float16 `-inf` (`0xFC00`) and bfloat16 `-inf` (`0xFF80`) share `u16`; [`F16`] and [`Bf16`]
/// tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16(pub u16);
impl NegInf for F16 {
    const NEG_INF: F16 = F16(0xFC00);
}
impl NegInf for Bf16 {
    const NEG_INF: Bf16 = Bf16(0xFF80);
}

/// Mask words tested together before any logit is touched: 8 words, 256 tokens.
const BLOCK: usize = 8;

/// Sets `row[t] = -inf` for every `t < row.len()` whose bit in `mask` is 0; tokens past the
/// mask's `32 * mask.len()` bits are left alone.
///
/// PERF: constrained rows are mostly all-zero or all-one words. Blocks of [`BLOCK`] words are
/// tested at once (an AND and an OR the compiler vectorizes): an all-ones block is skipped and
/// an all-zeros block is one `fill`, so a dense 152k row costs about 600 block tests rather than
/// 4,748 per-word branches; only mixed blocks go word by word.
pub fn mask_row<T: NegInf>(row: &mut [T], mask: &[u32]) {
    let n = row.len().min(mask.len() * 32);
    let (whole, tail) = row[..n].split_at_mut(n / 32 * 32);
    let mut rows = whole.chunks_exact_mut(32 * BLOCK);
    let mut blocks = mask.chunks_exact(BLOCK);
    for (chunk, ws) in (&mut rows).zip(&mut blocks) {
        let ws: &[u32; BLOCK] = ws.try_into().expect("chunks_exact(BLOCK)");
        let all = ws.iter().fold(u32::MAX, |a, &w| a & w);
        if all == u32::MAX {
            continue;
        }
        let any = ws.iter().fold(0, |a, &w| a | w);
        if any == 0 {
            chunk.fill(T::NEG_INF);
            continue;
        }
        mask_words(chunk, ws);
    }
    // The words after the last whole block (fewer than BLOCK), then the partial last word.
    let rest = rows.into_remainder();
    let rest_words = &mask[(n / 32) / BLOCK * BLOCK..];
    mask_words(rest, rest_words);
    if !tail.is_empty() {
        clear_zero_bits(tail, mask[n / 32]);
    }
}

/// `mask_row` word by word over `chunk` (a multiple of 32 logits, one word of `ws` each).
#[inline]
fn mask_words<T: NegInf>(chunk: &mut [T], ws: &[u32]) {
    for (c, &w) in chunk.chunks_exact_mut(32).zip(ws) {
        match w {
            u32::MAX => {}
            0 => c.fill(T::NEG_INF),
            _ => T::select_32(c, w),
        }
    }
}

/// `chunk[j] = -inf` for every zero bit `j < chunk.len()` of `w`.
#[inline]
fn clear_zero_bits<T: NegInf>(chunk: &mut [T], w: u32) {
    let mut zeros = !w;
    while zeros != 0 {
        let j = zeros.trailing_zeros() as usize;
        if j >= chunk.len() {
            break;
        }
        chunk[j] = T::NEG_INF;
        zeros &= zeros - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_exactly_the_zero_bits() {
        for len in [0usize, 1, 31, 32, 33, 64, 100, 151_936] {
            let mask: Vec<u32> = (0..len.div_ceil(32) as u32).map(|i| i.wrapping_mul(0x9E37_79B9) ^ (i << 7)).collect();
            let mut row: Vec<u32> = (0..len as u32).collect();
            mask_row(&mut row, &mask);
            for (t, &x) in row.iter().enumerate() {
                let allowed = mask[t / 32] >> (t % 32) & 1 == 1;
                assert_eq!(x, if allowed { t as u32 } else { u32::NEG_INF }, "token {t}");
            }
        }
    }

    /// Words laid out by block: all ones, all zeros, all ones but one word (zero or mixed), all
    /// zeros but one word (ones or mixed), random; then a short run of words after the last
    /// whole block and a partial last word. Each block shortcut must still touch exactly the
    /// zero bits.
    fn block_patterns(words: usize) -> Vec<u32> {
        let mixed = |i: usize| (i as u32).wrapping_mul(0x9E37_79B9) ^ 0x5555_0001;
        (0..words)
            .map(|i| {
                let kind = i / BLOCK % 7;
                let odd_word = matches!((kind, i % BLOCK), (2, 5) | (3, 0) | (4, 7) | (5, 3));
                match (kind, odd_word) {
                    (0 | 2 | 3, false) | (4, true) => u32::MAX,
                    (1 | 4 | 5, false) | (2, true) => 0,
                    _ => mixed(i),
                }
            })
            .collect()
    }

    fn check_every_format(len: usize, mask: &[u32]) {
        fn check<T: NegInf + PartialEq + std::fmt::Debug>(len: usize, mask: &[u32], value: impl Fn(usize) -> T) {
            let mut row: Vec<T> = (0..len).map(&value).collect();
            mask_row(&mut row, mask);
            for (t, x) in row.iter().enumerate() {
                let allowed = t >= mask.len() * 32 || mask[t / 32] >> (t % 32) & 1 == 1;
                assert_eq!(*x, if allowed { value(t) } else { T::NEG_INF }, "token {t} of {len}");
            }
        }
        check(len, mask, |t| t as u32);
        check(len, mask, |t| t as u64);
        check(len, mask, |t| F16(t as u16 & 0x7BFF));
        check(len, mask, |t| Bf16(t as u16 & 0x7F7F));
    }

    #[test]
    fn block_shortcuts_mask_exactly_the_zero_bits() {
        for len in [BLOCK * 32 * 7 * 3, BLOCK * 32 * 7 + 3 * 32, BLOCK * 32 * 9 + 5 * 32 + 17, 151_936] {
            check_every_format(len, &block_patterns(len.div_ceil(32)));
        }
        // A mask shorter than the row, ending inside a block: logits past it stay.
        check_every_format(BLOCK * 32 * 2, &block_patterns(BLOCK + 3));
    }

    #[test]
    fn tokens_past_the_mask_are_left_alone() {
        let mut row = vec![F16(1); 40];
        mask_row(&mut row, &[0]);
        assert!(row[..32].iter().all(|&x| x == F16::NEG_INF));
        assert!(row[32..].iter().all(|&x| x == F16(1)));
    }
}
