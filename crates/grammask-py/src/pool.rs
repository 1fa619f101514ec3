//! A process-wide pool of parked threads for batch mask fills ([`grammask_core::batch::Workers`]).
//!
//! Starting threads per batch costs tens of microseconds of CPU each, against batch steps of a
//! few hundred microseconds. The pool's threads sleep on a condition variable between batches (no
//! spinning, so an idle pool takes no core from torch) and are woken per batch. The caller runs the
//! job too and, once its own call returns (the job's work is all taken), withdraws the slots no
//! worker has taken yet, so a batch never waits for a sleeping thread to be scheduled; it waits only
//! for workers already running the job.
#![allow(unsafe_code)]

use grammask_core::batch::{ScopedThreads, Workers};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How long the caller spins for workers still running a batch's last rows before it sleeps:
/// a sleeping caller is woken through the scheduler, which costs more than a short spin.
const CALLER_SPIN: Duration = Duration::from_micros(30);

/// A job reference with its lifetime erased.
///
/// Invariant: dereferenced only by a worker that claimed a slot of the current batch while
/// `State::job` held it; [`ParkedPool::run`] does not return before every such worker is done.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn() + Sync + 'static));

// SAFETY: the referent is `Sync`, and the invariant above keeps it alive while it is used.
unsafe impl Send for JobRef {}

#[derive(Default)]
struct State {
    job: Option<JobRef>,
    /// Bumped per batch, so a worker takes at most one slot of each.
    batch: u64,
    /// Slots offered in this batch, and taken so far.
    offered: usize,
    taken: usize,
    /// Workers still running this batch's job.
    running: usize,
    panicked: bool,
    workers: usize,
}

struct Shared {
    state: Mutex<State>,
    /// `State::running`, readable without the lock (written under it).
    running: AtomicUsize,
    wake: Condvar,
    done: Condvar,
}

pub struct ParkedPool {
    shared: Arc<Shared>,
    /// Held for a whole batch: one batch at a time uses the pool.
    busy: Mutex<()>,
    pid: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ParkedPool {
    /// The pool of this process (a forked child gets its own: the parent's threads are not in it).
    pub fn get() -> Arc<ParkedPool> {
        static POOL: OnceLock<Mutex<Option<Arc<ParkedPool>>>> = OnceLock::new();
        let mut p = lock(POOL.get_or_init(Mutex::default));
        let pid = std::process::id();
        match &*p {
            Some(pool) if pool.pid == pid => pool.clone(),
            _ => {
                let pool = Arc::new(ParkedPool {
                    shared: Arc::new(Shared {
                        state: Mutex::default(),
                        running: AtomicUsize::new(0),
                        wake: Condvar::new(),
                        done: Condvar::new(),
                    }),
                    busy: Mutex::new(()),
                    pid,
                });
                *p = Some(pool.clone());
                pool
            }
        }
    }

    fn worker(shared: &Shared) {
        let mut seen = 0u64;
        let mut st = lock(&shared.state);
        loop {
            while !(st.job.is_some() && st.batch != seen && st.taken < st.offered) {
                st = shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            seen = st.batch;
            st.taken += 1;
            st.running += 1;
            shared.running.store(st.running, Ordering::Release);
            let job = st.job.expect("checked above");
            drop(st);
            // SAFETY: this worker claimed a slot while `job` was set (see `JobRef`).
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { (*job.0)() })).is_err();
            st = lock(&shared.state);
            st.panicked |= panicked;
            st.running -= 1;
            shared.running.store(st.running, Ordering::Release);
            if st.running == 0 {
                shared.done.notify_all();
            }
        }
    }
}

impl Workers for ParkedPool {
    fn run(&self, extra: usize, job: &(dyn Fn() + Sync)) -> bool {
        // Another Python thread's batch holds the pool: start threads for this one instead.
        let Ok(_busy) = self.busy.try_lock() else { return ScopedThreads.run(extra, job) };
        let shared = &self.shared;
        {
            let mut st = lock(&shared.state);
            while st.workers < extra {
                let s = shared.clone();
                if std::thread::Builder::new().name("grammask-batch".into()).spawn(move || Self::worker(&s)).is_err() {
                    break;
                }
                st.workers += 1;
            }
            // SAFETY (lifetime erasure): see `JobRef`; the job is withdrawn below before returning.
            let erased: &'static (dyn Fn() + Sync) = unsafe { std::mem::transmute(job) };
            st.job = Some(JobRef(erased));
            st.batch += 1;
            st.offered = extra.min(st.workers);
            st.taken = 0;
            st.panicked = false;
        }
        shared.wake.notify_all();
        let here = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err();
        let mut st = lock(&shared.state);
        st.offered = st.taken;
        if st.running > 0 {
            drop(st);
            let start = Instant::now();
            while shared.running.load(Ordering::Acquire) > 0 && start.elapsed() < CALLER_SPIN {
                std::hint::spin_loop();
            }
            st = lock(&shared.state);
        }
        while st.running > 0 {
            st = shared.done.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.job = None;
        here || st.panicked
    }
}
