//! The mask and accept paths do not allocate per token in steady state: a counting global
//! allocator counts heap allocations across many fill + accept steps of a matcher on the JSON
//! grammar, after a warm-up that fills the mask memo and the kernel cache.
//!
//! Growth of the matcher's chart and history (one row per byte, one entry per token) is amortized
//! doubling, so a few allocations over a long run are expected; "per token" would be one or more
//! per step. The bound asserted is far below one per step.
#![allow(unsafe_code)]

use grammask_core::builtin::builtin_json_grammar_with;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::spelling::Spelling;
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

struct Counting;

// Per thread: the test harness runs tests on parallel threads, and a global counter would count
// another test's allocations (a CI run failed that way). Const-initialized `Cell`s need no
// allocation to access, so the allocator can read them.
thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

/// Counts one allocation if the current thread is counting (no-op while the thread-locals are
/// being torn down).
fn note_allocation() {
    let _ = COUNTING.try_with(|c| {
        if c.get() {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        }
    });
}

/// Starts counting this thread's allocations from zero.
fn start_counting() {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
}

/// Stops counting and returns this thread's allocations since `start_counting`.
fn stop_counting() -> usize {
    COUNTING.with(|c| c.set(false));
    ALLOCS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    for s in ["[", "1", ", ", "{\"", "a\"", ": ", "true", "}", "]", "null", "\"x\"", "\n", "  ", "12", "</s>"] {
        toks.push(s.as_bytes().to_vec());
    }
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..VocabularyOptions::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// The token sequence of one array element `{"a": true}, ` (repeated to reach steady state).
fn element(v: &Vocabulary) -> Vec<u32> {
    let id = |s: &str| (0..v.vocab_size() as u32).find(|&t| v.token_bytes(t) == s.as_bytes()).unwrap();
    ["{\"", "a\"", ": ", "true", "}", ", "].iter().map(|s| id(s)).collect()
}

/// Runs `steps` fill + accept steps of the repeating element and returns the allocations counted.
fn count(m: &mut Matcher, tokens: &[u32], row: &mut [u32], steps: usize) -> usize {
    start_counting();
    for i in 0..steps {
        m.fill_next_token_bitmask(row).unwrap();
        let t = tokens[i % tokens.len()];
        assert!(m.accept_token(t).unwrap());
    }
    stop_counting()
}

/// Counts allocations over 600 steady-state steps of `[{"a": true}, {"a": true}, ...` under
/// the builtin JSON grammar in `spelling`.
fn steady_state_allocations(spelling: Spelling) -> (usize, usize) {
    steady_state_allocations_of(&builtin_json_grammar_with(spelling, None).unwrap())
}

/// Counts allocations over 600 steady-state steps of `[{"a": true}, {"a": true}, ...` under `g`.
fn steady_state_allocations_of(g: &grammask_core::grammar::Grammar) -> (usize, usize) {
    let v = vocab();
    let cg = Arc::new(CompiledGrammar::new(g, &v).unwrap());
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    let open = (0..v.vocab_size() as u32).find(|&t| v.token_bytes(t) == b"[").unwrap();
    assert!(m.accept_token(open).unwrap());
    let tokens = element(&v);
    let mut row = vec![0u32; v.vocab_size().div_ceil(32)];
    // Warm up: the memo of masks and kernels fills, the chart and history reach their size.
    count(&mut m, &tokens, &mut row, 600);
    let steps = 600;
    (count(&mut m, &tokens, &mut row, steps), steps)
}

#[test]
fn fill_and_accept_do_not_allocate_per_token() {
    let (n, steps) = steady_state_allocations(Spelling::Any);
    eprintln!("{n} allocations in {steps} fill + accept steps");
    assert!(n * 20 < steps, "{n} allocations in {steps} steps: the mask/accept path allocates per token");
}

/// The canonical builtin JSON grammar (the default: bounded whitespace, canonical numbers) has
/// nullable rules, so closing a row records empty completions; their list is reused per chart.
#[test]
fn canonical_json_does_not_allocate_per_token() {
    let (n, steps) = steady_state_allocations(Spelling::Canonical);
    eprintln!("canonical JSON: {n} allocations in {steps} fill + accept steps");
    assert!(n * 20 < steps, "{n} allocations in {steps} steps: the mask/accept path allocates per token");
}

/// A JSON Schema grammar with default options (what most users compile).
#[test]
fn json_schema_does_not_allocate_per_token() {
    let schema = r#"{"type": "array", "items": {"type": "object",
        "properties": {"a": {"type": "boolean"}, "b": {"type": "string"}}, "required": ["a"]}}"#;
    let g = json_schema_to_grammar(schema, &JsonSchemaOptions::default()).unwrap();
    let (n, steps) = steady_state_allocations_of(&g);
    eprintln!("JSON Schema: {n} allocations in {steps} fill + accept steps");
    assert!(n * 20 < steps, "{n} allocations in {steps} steps: the mask/accept path allocates per token");
}

/// Runs the calling thread's share only (allowed by the `Workers` contract: threads that have
/// not started when it returns are skipped), so thread starts are not counted. Counts its runs
/// (batches that took the scheduled path).
#[derive(Default)]
struct CallerOnly(std::sync::atomic::AtomicUsize);

impl grammask_core::batch::Workers for CallerOnly {
    fn run(&self, _extra: usize, job: &(dyn Fn() + Sync)) -> bool {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        job();
        false
    }
}

/// Batch fill + accept of `rows` matchers in steady state: allocations per batch step, with
/// `max_threads` 1 (the serial path) and 2 (the memo look-up pass, whose per-call vectors are
/// allowed, then the rows: serially once every mask is memoized unless there are enough rows to
/// split; a per-row allocation would be `rows` per step). Also returns the share of the counted
/// steps that ran through `Workers::run` (the scheduled path).
fn batch_allocations_per_step(rows: usize, max_threads: usize) -> (f64, f64) {
    let v = vocab();
    let g = builtin_json_grammar_with(Spelling::Any, None).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, &v).unwrap());
    let open = (0..v.vocab_size() as u32).find(|&t| v.token_bytes(t) == b"[").unwrap();
    let tokens = element(&v);
    let mut ms: Vec<Matcher> = (0..rows)
        .map(|i| {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_token(open).unwrap());
            // Rows at different places of the element, so their signatures differ.
            for &t in &tokens[..i % tokens.len()] {
                assert!(m.accept_token(t).unwrap());
            }
            m
        })
        .collect();
    let words = v.vocab_size().div_ceil(32);
    let mut bitmask = vec![0u32; rows * words];
    let workers = CallerOnly::default();
    let mut step = |ms: &mut [Matcher], s: usize| {
        let mut work: Vec<(&mut Matcher, &mut [u32])> = ms.iter_mut().zip(bitmask.chunks_mut(words)).collect();
        grammask_core::batch::batch_fill_with(&mut work, max_threads, &workers).unwrap();
        drop(work);
        for (i, m) in ms.iter_mut().enumerate() {
            assert!(m.accept_token(tokens[(i + s) % tokens.len()]).unwrap());
        }
    };
    for s in 0..600 {
        step(&mut ms, s);
    }
    let steps = 300;
    let runs_before = workers.0.load(std::sync::atomic::Ordering::Relaxed);
    start_counting();
    for s in 600..600 + steps {
        step(&mut ms, s);
    }
    let allocations = stop_counting() as f64 / steps as f64;
    let runs = workers.0.load(std::sync::atomic::Ordering::Relaxed) - runs_before;
    (allocations, runs as f64 / steps as f64)
}

#[test]
fn batch_fill_does_not_allocate_per_row() {
    // The `work` vector of each step is the test's own allocation: one per step.
    let (serial, _) = batch_allocations_per_step(32, 1);
    eprintln!("serial batch path: {serial:.2} allocations per step of 32 rows");
    assert!(serial < 1.5, "{serial:.2} allocations per batch step of 32 rows on one thread");
    let (looked_up, _) = batch_allocations_per_step(32, 2);
    eprintln!("2 threads, 32 memoized rows (serial after the look-ups): {looked_up:.2} allocations per step");
    assert!(looked_up < 8.0, "{looked_up:.2} allocations per batch step of 32 rows: the batch path allocates per row");
}

/// Enough memoized rows that a step's copies are split across threads (over `SPLIT_MIN_NS` of
/// predicted work beside the longest row): the scheduled path (row order, slots, the shared
/// counter) runs every step and allocates per call, not per row.
#[test]
fn scheduled_batch_fill_does_not_allocate_per_row() {
    let rows = 200;
    let (n, scheduled) = batch_allocations_per_step(rows, 2);
    eprintln!(
        "scheduled batch path: {n:.2} allocations per step of {rows} rows, {scheduled:.2} of the steps scheduled"
    );
    if std::thread::available_parallelism().map_or(1, std::num::NonZero::get) >= 2 {
        assert!(scheduled > 0.99, "only {scheduled:.2} of the steps of {rows} memoized rows took the scheduled path");
    }
    assert!(n < 8.0, "{n:.2} allocations per batch step of {rows} rows: the scheduled path allocates per row");
}
