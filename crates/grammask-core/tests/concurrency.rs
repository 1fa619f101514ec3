//! Concurrency stress: one compiled grammar shared by 8 threads with a matcher each, batch fills
//! on several threads, and 8 concurrent compiles of one grammar into one compiler cache. Every
//! mask equals the mask of a serial run on a fresh compiled grammar (cold caches).

use grammask_core::batch::batch_fill_next_token_bitmask;
use grammask_core::grammar_compiler::GrammarCompiler;
use grammask_core::json_schema::JsonSchemaOptions;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::{Arc, Barrier};

const SCHEMA: &str = r##"{"type":"object","properties":{"name":{"type":"string","maxLength":8},
"tags":{"type":"array","items":{"enum":["a","bc",1,null]}},"n":{"type":"integer","minimum":-5},
"sub":{"$ref":"#"}},"required":["name"]}"##;

fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    for s in [
        "{\"", "name", "\":", "\": \"", "\",", "tags", "[\"", "bc", "\"]", "null", ", ", "-1", "sub", "{}", "}", "\n",
        "</s>",
    ] {
        toks.push(s.as_bytes().to_vec());
    }
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..VocabularyOptions::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// A deterministic path per `seed`: masks (as words) at each step, choosing allowed tokens.
fn run_path(cg: &Arc<CompiledGrammar>, seed: u64, steps: usize) -> Vec<Vec<u32>> {
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::new();
    for _ in 0..steps {
        if m.is_terminated() {
            break;
        }
        let mask = m.compute_mask().unwrap().clone();
        out.push(mask.words().to_vec());
        let allowed: Vec<usize> = mask.iter_ones().collect();
        if allowed.is_empty() {
            break;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        assert!(m.accept_token(allowed[(x % allowed.len() as u64) as usize] as u32).unwrap());
    }
    out
}

fn compile(v: &Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    GrammarCompiler::new(v, false, -1).compile_json_schema(SCHEMA, &JsonSchemaOptions::default()).unwrap()
}

#[test]
fn shared_grammar_eight_threads_equals_serial() {
    let v = vocab();
    const THREADS: u64 = 8;
    const PATHS: u64 = 6;
    let serial: Vec<Vec<Vec<u32>>> = (0..THREADS * PATHS).map(|s| run_path(&compile(&v), s, 60)).collect();
    let shared = compile(&v);
    let barrier = Arc::new(Barrier::new(THREADS as usize));
    let got: Vec<Vec<Vec<Vec<u32>>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (shared, barrier) = (shared.clone(), barrier.clone());
                s.spawn(move || {
                    barrier.wait();
                    (0..PATHS).map(|p| run_path(&shared, t * PATHS + p, 60)).collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, paths) in got.iter().enumerate() {
        for (p, masks) in paths.iter().enumerate() {
            assert_eq!(masks, &serial[t * PATHS as usize + p], "thread {t} path {p}");
        }
    }
}

#[test]
fn concurrent_compiles_into_one_cache_and_batch_fill() {
    let v = vocab();
    let compiler = GrammarCompiler::new(&v, true, -1);
    let barrier = Barrier::new(8);
    let grammars: Vec<Arc<CompiledGrammar>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    compiler.compile_json_schema(SCHEMA, &JsonSchemaOptions::default()).unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // All compiles give the same masks; the cache holds the grammar once.
    let serial = run_path(&compile(&v), 7, 40);
    for cg in &grammars {
        assert_eq!(run_path(cg, 7, 40), serial);
    }
    let again = compiler.compile_json_schema(SCHEMA, &JsonSchemaOptions::default()).unwrap();
    assert!(grammars.iter().any(|c| Arc::ptr_eq(c, &again)), "no cache hit after concurrent compiles");
    // Batch fill of 64 matchers at different states on 1 and 4 threads equals single fills.
    let cg = grammars[0].clone();
    let mut ms: Vec<Matcher> = (0..64u64)
        .map(|i| {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for _ in 0..(i % 20) {
                if m.is_terminated() {
                    break;
                }
                let allowed: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
                if allowed.is_empty() {
                    break;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                m.accept_token(allowed[(x % allowed.len() as u64) as usize] as u32).unwrap();
            }
            m
        })
        .filter(|m| !m.is_terminated())
        .collect();
    let words = v.vocab_size().div_ceil(32);
    let single: Vec<Vec<u32>> = ms.iter().map(|m| m.clone().compute_mask().unwrap().words().to_vec()).collect();
    for threads in [1, 2, 4] {
        let mut rows = vec![vec![0u32; words]; ms.len()];
        let mut work: Vec<(&mut Matcher, &mut [u32])> =
            ms.iter_mut().zip(rows.iter_mut().map(Vec::as_mut_slice)).collect();
        batch_fill_next_token_bitmask(&mut work, threads).unwrap();
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row[..single[i].len()], single[i][..], "row {i} threads {threads}");
        }
    }
}
