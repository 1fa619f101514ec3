//! Times first-visit mask fills along a token sequence on freshly compiled grammars (every
//! kernel cold), reporting per-step wall time medians over the repeats.
//! `cargo run --profile ci --example profile_first_masks -- VOCAB.json GRAMMAR.ebnf IDS.txt [REPEAT]`
//! (IDS.txt: token ids separated by spaces; VOCAB.json from `TokenizerInfo.serialize_json()`).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

/// Nanoseconds since the first call (wall time: compare base and change back to back).
fn elapsed_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let g = parse_ebnf(&std::fs::read_to_string(&args[2]).unwrap(), "root").unwrap();
    let ids: Vec<u32> =
        std::fs::read_to_string(&args[3]).unwrap().split_whitespace().map(|s| s.parse().unwrap()).collect();
    let repeat: usize = args.get(4).map_or(5, |s| s.parse().unwrap());
    let mut per_step: Vec<Vec<u64>> = vec![Vec::new(); ids.len()];
    let mut totals = Vec::new();
    // Held so that the vocabulary's token index (built once per vocabulary) stays warm.
    let _warm = CompiledGrammar::new(&g, &vocab).unwrap();
    for _ in 0..repeat {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
        let mut total = 0;
        for (i, &t) in ids.iter().enumerate() {
            let t0 = elapsed_ns();
            m.compute_mask().unwrap();
            let el = elapsed_ns() - t0;
            per_step[i].push(el);
            total += el;
            assert!(m.accept_token(t).unwrap());
        }
        totals.push(total);
    }
    let mut steps: Vec<u64> = per_step
        .iter()
        .map(|v| {
            let mut v = v.clone();
            v.sort_unstable();
            v[v.len() / 2]
        })
        .collect();
    if std::env::var("STEPS").is_ok() {
        for (i, s) in steps.iter().enumerate() {
            println!("step {i:>3} {:>8.1} µs", *s as f64 / 1e3);
        }
    }
    totals.sort_unstable();
    steps.sort_unstable();
    let pct = |p: f64| steps[((steps.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
    println!(
        "steps {} (median over {repeat} compiles): p50 {:.1} µs p90 {:.1} µs p99 {:.1} µs max {:.1} µs; walk total median {:.1} µs",
        steps.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0),
        totals[totals.len() / 2] as f64 / 1e3
    );
}
