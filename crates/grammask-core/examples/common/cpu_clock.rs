//! CPU clocks for the examples (Linux `clock_gettime`), shared through `#[path]`.
#![allow(dead_code)] // each example reads one of the clocks

/// `CLOCK_PROCESS_CPUTIME_ID`: all threads of the process.
pub const PROCESS: i32 = 2;
/// `CLOCK_THREAD_CPUTIME_ID`: the calling thread only.
pub const THREAD: i32 = 3;

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, out: *mut Timespec) -> i32;
}

/// The CPU time of `clock` ([`PROCESS`] or [`THREAD`]) in seconds.
#[allow(unsafe_code, clippy::cast_precision_loss)] // a libc call on a local struct
pub fn seconds(clock: i32) -> f64 {
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the call's duration.
    assert_eq!(unsafe { clock_gettime(clock, &raw mut t) }, 0);
    t.sec as f64 + t.nsec as f64 / 1e9
}

/// `getrusage(RUSAGE_THREAD)`: the calling thread's user and system CPU time (seconds) and its
/// minor page faults.
#[allow(unsafe_code, clippy::cast_precision_loss)] // a libc call on a local buffer
pub fn thread_usage() -> (f64, f64, i64) {
    // `struct rusage` on Linux x86_64/aarch64: two `timeval`s (16 bytes each), then 14 longs,
    // `ru_minflt` the fifth.
    let mut r = [0i64; 18];
    extern "C" {
        fn getrusage(who: i32, out: *mut i64) -> i32;
    }
    // SAFETY: `r` is a writable buffer of `struct rusage`'s size (144 bytes).
    assert_eq!(unsafe { getrusage(1, r.as_mut_ptr()) }, 0);
    let tv = |s: i64, us: i64| s as f64 + us as f64 / 1e6;
    (tv(r[0], r[1]), tv(r[2], r[3]), r[8])
}
