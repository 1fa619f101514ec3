//! Batch mask filling: one mask per matcher, on several threads.
//!
//! Pipeline place: the engine side of `batch_fill_next_token_bitmask` in the Python API. Takes
//! matchers (each at its own state) and one bitmask row per matcher, and fills the rows in
//! parallel ([`Matcher::fill_next_token_bitmask`] on each); the caller copies the rows into its
//! bitmask only when every fill succeeded.
use crate::error::{Error, ErrorKind, Result};
use crate::matcher::Matcher;

/// Fills `work[i].1` with the mask of `work[i].0`, on at most `max_threads` threads (at least
/// one, and no more than the machine's available parallelism). Rows whose mask is already
/// memoized in their compiled grammar are a copy, cheaper than starting a thread, so extra threads
/// are started only for the rows that need a mask computed ("cold" rows, at most one thread per
/// cold row). The calling thread works too; rows are handed out one at a time from a shared queue,
/// cold rows first, so a few slow rows do not leave the other threads idle as fixed chunks would.
/// Returns the first error in batch order; a panicking thread is an `Internal` error.
pub fn batch_fill_next_token_bitmask(work: &mut [(&mut Matcher, &mut Vec<u32>)], max_threads: usize) -> Result<()> {
    let n = work.len();
    let mut results: Vec<Option<Result<bool>>> = (0..n).map(|_| None).collect();
    let cold: Vec<bool> =
        work.iter().map(|(m, _)| m.compiled().memoized_mask(m.chart().last_signature()).is_none()).collect();
    let n_cold = cold.iter().filter(|&&c| c).count();
    let threads =
        max_threads.clamp(1, std::thread::available_parallelism().map_or(1, std::num::NonZero::get)).min(n_cold.max(1));
    if threads == 1 {
        for ((m, row), r) in work.iter_mut().zip(&mut results) {
            *r = Some(m.fill_next_token_bitmask(row));
        }
    } else {
        let mut order: Vec<_> = work.iter_mut().zip(results.iter_mut()).zip(&cold).collect();
        order.sort_by_key(|(_, &c)| !c);
        let queue = std::sync::Mutex::new(order.into_iter().map(|(x, _)| x));
        let drain = || loop {
            let next = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next();
            let Some(((m, row), r)) = next else { break };
            *r = Some(m.fill_next_token_bitmask(row));
        };
        let panicked = std::thread::scope(|s| {
            let handles: Vec<_> = (1..threads).map(|_| s.spawn(drain)).collect();
            let here = std::panic::catch_unwind(std::panic::AssertUnwindSafe(drain)).is_err();
            handles.into_iter().fold(here, |p, h| h.join().is_err() || p)
        });
        if panicked {
            return Err(Error::new(ErrorKind::Internal, "a batch fill thread panicked"));
        }
    }
    for r in results {
        r.ok_or_else(|| Error::new(ErrorKind::Internal, "a batch row was not filled"))??;
    }
    Ok(())
}
