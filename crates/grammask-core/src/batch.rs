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

/// A batch of this many rows or more is split across threads even when every mask is memoized
/// (each row is then a copy of a few microseconds, against a few microseconds to wake a thread).
pub const SPLIT_WARM_ROWS: usize = 16;

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

/// Fills one row, with the memo look-up taken when the batch was sorted if there is one.
fn fill_row(m: &mut Matcher, row: &mut [u32], lookup: Option<MemoLookup>) -> Result<bool> {
    match lookup {
        Some(l) => m.fill_next_token_bitmask_with(row, l),
        None => m.fill_next_token_bitmask(row),
    }
}

/// Fills `work[i].1` with the mask of `work[i].0`, on at most `max_threads` threads (at least
/// one, and no more than the machine's available parallelism). Rows come in three groups:
/// "leaders", the first row of each (grammar, parser signature) whose mask is not memoized yet;
/// rows whose mask is memoized (a copy); and the other rows sharing a leader's signature, which
/// wait until every leader is done so that they find its mask memoized instead of computing it a
/// second time on another thread. Threads take rows one at a time from shared counters, leaders
/// first, so a few slow rows do not leave the other threads idle. One thread is used when there
/// are fewer than two leaders and fewer than [`SPLIT_WARM_ROWS`] rows. Rows are written as they
/// are filled: after an error the other rows may or may not have been written. Returns the first
/// error in batch order; a panicking fill is an `Internal` error.
pub fn batch_fill_with(
    work: &mut [(&mut Matcher, &mut [u32])],
    max_threads: usize,
    workers: &dyn Workers,
) -> Result<()> {
    let max = max_threads.clamp(1, available_parallelism());
    if max == 1 || work.len() < 2 {
        return work.iter_mut().try_for_each(|(m, row)| m.fill_next_token_bitmask(row).map(drop));
    }
    // Row order: leaders, memoized rows, followers. Each row's memo look-up is passed down to
    // its fill (followers, misses here, look up again once their leader is done).
    let mut lookups: Vec<Option<MemoLookup>> = work.iter().map(|(m, _)| Some(m.memo_lookup())).collect();
    let mut keyed: Vec<(usize, u128, bool, usize)> = work
        .iter()
        .zip(&lookups)
        .enumerate()
        .map(|(i, ((m, _), l))| {
            let grammar = std::sync::Arc::as_ptr(m.compiled()) as usize;
            (grammar, m.chart().last_signature(), !l.as_ref().is_some_and(MemoLookup::is_hit), i)
        })
        .collect();
    keyed.sort_unstable();
    let mut order: Vec<(u8, usize)> = Vec::with_capacity(work.len());
    for (j, &(g, s, cold, i)) in keyed.iter().enumerate() {
        let leader = j == 0 || (keyed[j - 1].0, keyed[j - 1].1) != (g, s);
        order.push((
            if !cold {
                1
            } else if leader {
                0
            } else {
                2
            },
            i,
        ));
    }
    order.sort_unstable();
    for &(k, i) in &order {
        if k == 2 {
            lookups[i] = None;
        }
    }
    let leaders = order.iter().take_while(|&&(k, _)| k == 0).count();
    let followers_from = order.iter().take_while(|&&(k, _)| k < 2).count();
    let threads = if leaders >= 2 {
        max.min(leaders)
    } else if work.len() >= SPLIT_WARM_ROWS {
        max
    } else {
        1
    };
    if threads == 1 {
        return work.iter_mut().zip(lookups).try_for_each(|((m, row), l)| fill_row(m, row, l).map(drop));
    }
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
            fill(order[j].1);
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
