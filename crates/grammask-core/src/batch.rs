//! Batch mask filling: one mask per matcher, on several threads.
//!
//! Pipeline place: the engine side of `batch_fill_next_token_bitmask` in the Python API. Takes
//! matchers (each at its own state) and one bitmask row per matcher, and fills the rows in
//! parallel ([`Matcher::fill_next_token_bitmask`] on each). The threads come from a [`Workers`]:
//! [`ScopedThreads`] starts them per call; the Python binding passes a pool of parked threads.
use crate::error::{Error, ErrorKind, Result};
use crate::matcher::{Matcher, MemoLookup};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// Runs one job on several threads at once.
pub trait Workers: Sync {
    /// Runs `job` on the calling thread and on up to `extra` other threads, and returns once
    /// every call of `job` has returned. `job` hands out its own work items and returns when none
    /// is left, so an extra thread that has not started by the time the calling thread's call
    /// returns may be skipped. Returns true when a call of `job` panicked.
    fn run(&self, extra: usize, job: &(dyn Fn() + Sync)) -> bool;
}

/// [`Workers`] that start `extra` scoped threads per call (tens of microseconds of CPU each).
pub struct ScopedThreads;

impl Workers for ScopedThreads {
    fn run(&self, extra: usize, job: &(dyn Fn() + Sync)) -> bool {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..extra).map(|_| s.spawn(job)).collect();
            let here = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err();
            handles.into_iter().fold(here, |p, h| h.join().is_err() || p)
        })
    }
}

/// Predicted cost of a row whose mask is memoized (a copy of the memoized mask into the row).
const HIT_NS: u64 = 400;

/// Predicted cost of a memo miss of a matcher that has not missed in a batch before.
const UNKNOWN_MISS_NS: u64 = 1_000_000;

/// A batch is split across threads only when this much predicted work can run beside its
/// longest row: a hand-off (waking a parked thread, waiting for its last row) costs several
/// microseconds of wall time, and tens on a busy machine.
pub const SPLIT_MIN_NS: u64 = 50_000;

/// The machine's available parallelism, read once.
///
/// PERF: `std::thread::available_parallelism` reads the cgroup quota files on Linux on every
/// call (five allocations and several system calls per batch).
fn available_parallelism() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
}

/// [`batch_fill_with`] on [`ScopedThreads`].
pub fn batch_fill_next_token_bitmask(work: &mut [(&mut Matcher, &mut [u32])], max_threads: usize) -> Result<()> {
    batch_fill_with(work, max_threads, &ScopedThreads)
}

/// One row of a batch: the matcher, its row, its memo look-up (None: look up at fill time) and
/// the fill's result.
type Slot<'a> = (&'a mut Matcher, &'a mut [u32], Option<MemoLookup>, Option<Result<bool>>);

/// Fills one row, with the memo look-up taken when the batch was sorted if there is one (else a
/// fresh one). A row that misses the memo updates its predicted miss cost (`Matcher::miss_ns`).
fn fill_row(m: &mut Matcher, row: &mut [u32], lookup: Option<MemoLookup>) -> Result<bool> {
    let lookup = lookup.unwrap_or_else(|| m.memo_lookup());
    if lookup.is_hit() {
        return m.fill_next_token_bitmask_with(row, lookup);
    }
    let t = std::time::Instant::now();
    let r = m.fill_next_token_bitmask_with(row, lookup);
    m.miss_ns = next_miss_estimate(m.miss_ns, u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX));
    r
}

/// The predicted cost of a matcher's next memo miss after one that took `took_ns`: the larger of
/// that and 9/10 of the previous prediction (at least 1, so that 0 keeps meaning "no miss yet").
///
/// A matcher's misses are uneven (a 1.9 ms kernel walk after a run of 10-50 us fills), and the
/// batch's order matters only for its costly rows: a decaying maximum keeps a matcher that has
/// been costly near the front for a while. PERF: replayed on measured row costs of 64-row
/// MaskBench batches (bench/batch_critical_path.py --dump, 2 threads), the last miss alone gave
/// 1.62x / 1.72x / 1.51x (seeds 0 / 1 / 2), this 1.66x / 1.76x / 1.58x; bounds 1.74x / 1.86x / 1.64x.
fn next_miss_estimate(previous_ns: u32, took_ns: u32) -> u32 {
    took_ns.max(previous_ns / 10 * 9).max(1)
}

/// The predicted cost of filling `m`'s row on a memo miss.
fn miss_ns(m: &Matcher) -> u64 {
    if m.miss_ns == 0 {
        UNKNOWN_MISS_NS
    } else {
        u64::from(m.miss_ns)
    }
}

/// Fills `work[i].1` with the mask of `work[i].0`, on at most `max_threads` threads (at least
/// one, and no more than the machine's available parallelism). Rows come in three groups:
/// "leaders", the first row of each (grammar, parser signature) whose mask is not memoized yet,
/// most expensive first (predicted from the row's past misses, [`next_miss_estimate`]); rows whose mask is memoized (a
/// copy); and the other rows sharing a leader's signature, which wait until every leader is done
/// so that they find its mask memoized instead of computing it a second time on another thread.
/// Threads take rows one at a time from a shared counter, so a few slow rows do not leave the
/// other threads idle. One thread is used unless [`SPLIT_MIN_NS`] of predicted work can run
/// beside the longest row. Rows are written as they are filled: after an error the other rows
/// may or may not have been written. Returns the first error in batch order; a panicking fill is
/// an `Internal` error.
pub fn batch_fill_with(
    work: &mut [(&mut Matcher, &mut [u32])],
    max_threads: usize,
    workers: &dyn Workers,
) -> Result<()> {
    let max = max_threads.clamp(1, available_parallelism());
    if max == 1 || work.len() < 2 {
        return work.iter_mut().try_for_each(|(m, row)| m.fill_next_token_bitmask(row).map(drop));
    }
    let mut lookups: Vec<Option<MemoLookup>> = work.iter().map(|(m, _)| Some(m.memo_lookup())).collect();
    // Misses by (grammar, signature): the first of each group leads, the others follow (their
    // look-up is dropped: they look up again once their leader is done).
    let mut cold: Vec<(usize, u128, usize)> = work
        .iter()
        .zip(&lookups)
        .enumerate()
        .filter(|(_, (_, l))| !l.as_ref().is_some_and(MemoLookup::is_hit))
        .map(|(i, ((m, _), _))| (std::sync::Arc::as_ptr(m.compiled()) as usize, m.chart().last_signature(), i))
        .collect();
    cold.sort_unstable();
    let mut order: Vec<usize> = Vec::with_capacity(work.len());
    for (j, &(g, s, i)) in cold.iter().enumerate() {
        if j > 0 && (cold[j - 1].0, cold[j - 1].1) == (g, s) {
            lookups[i] = None;
        } else {
            order.push(i);
        }
    }
    let leaders = order.len();
    order.sort_unstable_by_key(|&i| std::cmp::Reverse(miss_ns(work[i].0)));
    let longest = order.first().map_or(HIT_NS, |&i| miss_ns(work[i].0));
    let total: u64 = order.iter().map(|&i| miss_ns(work[i].0)).sum::<u64>() + (work.len() - leaders) as u64 * HIT_NS;
    if total - longest < SPLIT_MIN_NS {
        // Serial, in batch order: a miss looks up again, so a follower placed before its leader
        // computes the mask and the leader then copies it.
        return work
            .iter_mut()
            .zip(lookups)
            .try_for_each(|((m, row), l)| fill_row(m, row, l.filter(MemoLookup::is_hit)).map(drop));
    }
    order.extend((0..work.len()).filter(|&i| lookups[i].as_ref().is_some_and(MemoLookup::is_hit)));
    let followers_from = order.len();
    order.extend((0..work.len()).filter(|&i| lookups[i].is_none()));
    let threads = max;
    let slots: Vec<Mutex<Slot<'_>>> =
        work.iter_mut().zip(lookups).map(|((m, row), l)| Mutex::new((&mut **m, &mut **row, l, None))).collect();
    let next = AtomicUsize::new(0);
    let leaders_left = Mutex::new(leaders);
    let leaders_done = Condvar::new();
    let fill = |i: usize| {
        let mut slot = slots[i].lock().unwrap_or_else(PoisonError::into_inner);
        let (m, row, lookup, result) = &mut *slot;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fill_row(m, row, lookup.take())));
        *result = Some(r.unwrap_or_else(|_| Err(Error::new(ErrorKind::Internal, "a batch fill panicked"))));
    };
    let job = || {
        loop {
            let j = next.fetch_add(1, Ordering::Relaxed);
            if j >= order.len() {
                return;
            }
            if j >= followers_from {
                // Followers start once every leader's mask is memoized (every leader was taken
                // before any follower, so this waits only on running fills).
                let mut left = leaders_left.lock().unwrap_or_else(PoisonError::into_inner);
                while *left > 0 {
                    left = leaders_done.wait(left).unwrap_or_else(PoisonError::into_inner);
                }
            }
            fill(order[j]);
            if j < leaders {
                let mut left = leaders_left.lock().unwrap_or_else(PoisonError::into_inner);
                *left -= 1;
                if *left == 0 {
                    leaders_done.notify_all();
                }
            }
        }
    };
    if workers.run(threads - 1, &job) {
        return Err(Error::new(ErrorKind::Internal, "a batch fill thread panicked"));
    }
    for slot in slots {
        let (_, _, _, r) = slot.into_inner().unwrap_or_else(PoisonError::into_inner);
        r.ok_or_else(|| Error::new(ErrorKind::Internal, "a batch row was not filled"))??;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::next_miss_estimate;

    /// A costly miss keeps a matcher's prediction high for a while, then cheap misses bring it
    /// down; a 0 ns miss still counts as "missed before".
    #[test]
    fn miss_estimate_is_a_decaying_maximum() {
        let after_spike = next_miss_estimate(next_miss_estimate(0, 2_000_000), 10_000);
        assert_eq!(after_spike, 1_800_000);
        let mut est = after_spike;
        for _ in 0..60 {
            est = next_miss_estimate(est, 10_000);
        }
        assert_eq!(est, 10_000);
        assert_eq!(next_miss_estimate(0, 0), 1);
        assert_eq!(next_miss_estimate(50_000, 80_000), 80_000);
    }
}
