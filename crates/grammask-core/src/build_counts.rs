//! Per-thread counts of the shared tables a thread built and the shared caches it started over
//! (with the wall time each took: a build preempted counts its time off the CPU too), for benches: the difference of [`thread_counts`] around a fill
//! says what that fill built (`bench/tail_states.py --builds`).
//!
//! Invariant: counted only where a table is built, a cache cleared or a thread waited for
//! another's build (milliseconds of work each), never on a lookup, so the fill path pays nothing for them.
use std::cell::Cell;
use std::time::Instant;

/// What a thread built or started over ([`NAMES`] in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// A [`crate::mask::LeadNodes`] of the token index.
    LeadNodes,
    /// The token index's lead-node list cleared when full.
    LeadNodesRestart,
    /// A [`crate::mask::BodyEnds`] of the token index.
    BodyEnds,
    /// The token index's body-end table cleared when full.
    BodyEndsRestart,
    /// The cross-grammar kernel cache cleared when full.
    KernelCacheRestart,
    /// A costly kernel walk shared into the cross-grammar cache (a later grammar with the same
    /// structure finds it there).
    KernelShared,
    /// A run index ([`crate::slice::RunIndex`]) of the token index.
    RunIndex,
    /// A wait for the run index another thread of the process was building
    /// (`TokenIndex::run_index`): what the waiting thread did instead of building it again.
    RunIndexWait,
    /// A UTF-8 run index less a call loop's refused characters
    /// (`TokenIndex::run_index_less_off_fill`), kept per vocabulary or past its bound not.
    WideRunIndex,
    /// A free-text class slice of the token index.
    ClassSlice,
    /// A walked body slice of the token index.
    WalkedBody,
    /// A counted class-body slice of the token index.
    ClassBodySlice,
    /// The tokens' quote table ([`crate::mask::QuoteEnds`]).
    QuoteEnds,
    /// `FirstChars` or `StringIndex` built on use.
    WalkedIndex,
    /// A quote cut ([`crate::slice::QuoteCut`]) of the token index.
    QuoteCut,
    /// The token index's quote-cut table cleared when full.
    QuoteCutsRestart,
}

const KINDS: usize = 16;

/// The names of [`Build`]'s kinds, in order.
pub const NAMES: [&str; KINDS] = [
    "lead_nodes",
    "lead_nodes_restart",
    "body_ends",
    "body_ends_restart",
    "kernel_cache_restart",
    "kernel_shared",
    "run_index",
    "run_index_wait",
    "wide_run_index",
    "class_slice",
    "walked_body",
    "class_body_slice",
    "quote_ends",
    "walked_index",
    "quote_cut",
    "quote_cuts_restart",
];

thread_local! {
    /// Per kind: how many, and their wall-clock nanoseconds.
    static COUNTS: [Cell<(u64, u64)>; KINDS] = const { [const { Cell::new((0, 0)) }; KINDS] };
}

/// Runs `f` (a build or a restart), counting it with its time on this thread as one `kind`.
pub fn timed<T>(kind: Build, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    count(kind, u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
    out
}

/// Counts one `kind` that took `ns` wall-clock nanoseconds on this thread (a wait, timed by the
/// caller).
pub fn count(kind: Build, ns: u64) {
    COUNTS.with(|c| {
        let (n, t) = c[kind as usize].get();
        c[kind as usize].set((n + 1, t.saturating_add(ns)));
    });
}

/// Counts and wall-clock nanoseconds by kind name of what this thread built so far.
pub fn thread_counts() -> Vec<(&'static str, u64, u64)> {
    COUNTS.with(|c| NAMES.iter().zip(c).map(|(&name, c)| (name, c.get().0, c.get().1)).collect())
}

/// How many of `kind` this thread built so far.
pub fn thread_count(kind: Build) -> u64 {
    COUNTS.with(|c| c[kind as usize].get().0)
}
