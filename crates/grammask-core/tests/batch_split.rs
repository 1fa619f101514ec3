//! When a batch fill is split across threads: a batch whose masks are all memoized runs on the
//! calling thread alone (a hand-off costs more than it saves), a batch of cold rows with distinct
//! parser states is split, and either way every row equals a serial fill.

use grammask_core::batch::{batch_fill_with, Workers};
use grammask_core::grammar_compiler::GrammarCompiler;
use grammask_core::json_schema::JsonSchemaOptions;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const SCHEMA: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},
"tags":{"type":"array","items":{"type":"string"}}},"required":["name","n","tags"]}"#;
const DOC: &str = r#"{"name": "ab", "n": -12, "tags": ["x", "yz"]}"#;

fn vocab() -> Arc<Vocabulary> {
    let toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).chain([b"</s>".to_vec()]).collect();
    let opts =
        VocabularyOptions { stop_token_ids: Some(vec![(toks.len() - 1) as u32]), ..VocabularyOptions::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// Runs the calling thread's share only (allowed by the `Workers` contract) and counts calls.
#[derive(Default)]
struct Counted(AtomicUsize);

impl Workers for Counted {
    fn run(&self, _extra: usize, job: &(dyn Fn() + Sync)) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed);
        job();
        false
    }
}

/// `rows` matchers, row `i` having read the first `i % cycle` bytes of `DOC`.
fn matchers(cg: &Arc<CompiledGrammar>, rows: usize, cycle: usize) -> Vec<Matcher> {
    (0..rows)
        .map(|i| {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            for &b in &DOC.as_bytes()[..i % cycle] {
                assert!(m.accept_token(u32::from(b - 0x20)).unwrap());
            }
            m
        })
        .collect()
}

/// Batch-fills `ms` on up to two threads through `w`; returns the rows.
fn batch(ms: &mut [Matcher], words: usize, w: &Counted) -> Vec<u32> {
    let mut bitmask = vec![0u32; ms.len() * words];
    let mut work: Vec<(&mut Matcher, &mut [u32])> = ms.iter_mut().zip(bitmask.chunks_mut(words)).collect();
    batch_fill_with(&mut work, 2, w).unwrap();
    bitmask
}

fn serial(ms: &mut [Matcher], words: usize) -> Vec<u32> {
    let mut bitmask = vec![0u32; ms.len() * words];
    for (m, row) in ms.iter_mut().zip(bitmask.chunks_mut(words)) {
        m.fill_next_token_bitmask(row).unwrap();
    }
    bitmask
}

#[test]
fn memoized_batch_stays_on_the_calling_thread_and_cold_batch_splits() {
    let v = vocab();
    let words = v.vocab_size().div_ceil(32);
    let compile =
        || GrammarCompiler::new(&v, false, -1).compile_json_schema(SCHEMA, &JsonSchemaOptions::default()).unwrap();
    let expected = serial(&mut matchers(&compile(), 64, DOC.len()), words);

    // Cold: a fresh grammar, 40+ distinct states, no miss recorded yet (predicted expensive).
    let mut ms = matchers(&compile(), 64, DOC.len());
    let w = Counted::default();
    assert_eq!(batch(&mut ms, words, &w), expected);
    if std::thread::available_parallelism().map_or(1, std::num::NonZero::get) >= 2 {
        assert_eq!(w.0.load(Ordering::Relaxed), 1, "a cold batch of distinct states was not split");
    }

    // Warm: every mask is memoized now.
    let w = Counted::default();
    assert_eq!(batch(&mut ms, words, &w), expected);
    assert_eq!(w.0.load(Ordering::Relaxed), 0, "a memoized batch was handed to other threads");
}

#[test]
fn rows_sharing_a_state_equal_serial() {
    // Rows cycle through 3 states, so most cold rows follow a leader placed after or before them.
    let v = vocab();
    let words = v.vocab_size().div_ceil(32);
    let compile =
        || GrammarCompiler::new(&v, false, -1).compile_json_schema(SCHEMA, &JsonSchemaOptions::default()).unwrap();
    for rows in [2, 3, 5, 17, 64] {
        let expected = serial(&mut matchers(&compile(), rows, 3), words);
        let mut ms = matchers(&compile(), rows, 3);
        assert_eq!(batch(&mut ms, words, &Counted::default()), expected, "{rows} cold rows");
        assert_eq!(batch(&mut ms, words, &Counted::default()), expected, "{rows} memoized rows");
    }
}
