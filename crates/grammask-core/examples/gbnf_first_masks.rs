//! Wall time of compile and first mask per grammar file: the first compile in the process
//! (per-vocabulary indexes and cross-grammar kernels cold) and the minimum of N more (the least
//! disturbed by other load; compare base and change back to back).
//! `cargo run --profile ci --example gbnf_first_masks -- VOCAB.json N GRAMMAR.ebnf...`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

/// Nanoseconds since the first call.
fn elapsed_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let n: usize = args[2].parse().unwrap();
    // The per-tokenizer set-up, paid before any timing (as in bench/gbnf_bench.py); held so that
    // the vocabulary's token index stays alive.
    let pin = Arc::new(CompiledGrammar::new(&parse_ebnf("root ::= \"a\"", "root").unwrap(), &vocab).unwrap());
    Matcher::new(pin.clone(), MatcherOptions::default()).unwrap().compute_mask().unwrap();
    for path in &args[3..] {
        let g = parse_ebnf(&std::fs::read_to_string(path).unwrap(), "root").unwrap();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for _ in 0..=n {
            let t0 = elapsed_ns();
            let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
            let t1 = elapsed_ns();
            Matcher::new(cg, MatcherOptions::default()).unwrap().compute_mask().unwrap();
            runs.push((t1 - t0, elapsed_ns() - t1));
        }
        let min = |k: fn(&(u64, u64)) -> u64| {
            let v: Vec<u64> = runs[1..].iter().map(k).collect();
            v.iter().min().map_or(0.0, |&x| x as f64 / 1e3)
        };
        let name = std::path::Path::new(path).file_stem().unwrap().to_string_lossy();
        println!(
            "{name:10} cold compile {:8.0} us 1st {:6.0} us | warm compile {:7.0} us 1st {:6.0} us",
            runs[0].0 as f64 / 1e3,
            runs[0].1 as f64 / 1e3,
            min(|r| r.0),
            min(|r| r.1)
        );
    }
}
