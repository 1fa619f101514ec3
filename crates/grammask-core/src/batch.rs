//! Batch mask filling: one mask per matcher, on several threads.
//!
//! Pipeline place: the engine side of `batch_fill_next_token_bitmask` in the Python API. Takes
//! matchers (each at its own state) and one bitmask row per matcher, and fills the rows in
//! parallel ([`Matcher::fill_next_token_bitmask`] on each); the caller copies the rows into its
//! bitmask only when every fill succeeded.
use crate::error::{Error, ErrorKind, Result};
use crate::matcher::Matcher;

/// Fills `work[i].1` with the mask of `work[i].0`, on at most `max_threads` threads (at least
/// one, and no more than the machine's available parallelism), each taking a contiguous chunk.
/// Returns the first error in batch order; a panicking thread is an `Internal` error.
pub fn batch_fill_next_token_bitmask(work: &mut [(&mut Matcher, &mut Vec<u32>)], max_threads: usize) -> Result<()> {
    let threads = max_threads.clamp(1, std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let n = work.len();
    let results: Vec<Result<bool>> = {
        let chunk = work.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = work
                .chunks_mut(chunk)
                .map(|part| {
                    s.spawn(move || part.iter_mut().map(|(m, row)| m.fill_next_token_bitmask(row)).collect::<Vec<_>>())
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|_| vec![])).collect()
        })
    };
    if results.len() != n {
        return Err(Error::new(ErrorKind::Internal, "a batch fill thread panicked"));
    }
    for r in results {
        r?;
    }
    Ok(())
}
