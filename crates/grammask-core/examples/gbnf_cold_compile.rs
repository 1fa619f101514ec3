//! Instruction counts of the cold compile of GBNF grammars: after the per-tokenizer set-up (a
//! trivial grammar compiled and masked, as in bench/gbnf_bench.py), each grammar file is compiled
//! and masked once in `cold_compile`, in order (later grammars find the per-vocabulary indexes the
//! earlier ones built).
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='gbnf_cold_compile::cold_compile' \
//!   target/release/examples/gbnf_cold_compile VOCAB.json GRAMMAR.gbnf...`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`); without valgrind it prints thread CPU time,
//! and each first mask's allowed count and FNV-1a hash (to compare builds).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::grammar::Grammar;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

#[path = "common/cpu_clock.rs"]
mod cpu_clock;

/// This thread's CPU time in microseconds (`CLOCK_THREAD_CPUTIME_ID`, Linux).
fn thread_us() -> f64 {
    cpu_clock::seconds(cpu_clock::THREAD) * 1e6
}

/// Compiles `g` and fills its first mask; kept out of line for callgrind's `--toggle-collect`.
#[inline(never)]
fn cold_compile(g: &Grammar, vocab: &Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    let cg = Arc::new(CompiledGrammar::new(g, vocab).unwrap());
    Matcher::new(cg.clone(), MatcherOptions::default()).unwrap().compute_mask().unwrap();
    cg
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let pin = Arc::new(CompiledGrammar::new(&parse_ebnf("root ::= \"a\"", "root").unwrap(), &vocab).unwrap());
    Matcher::new(pin.clone(), MatcherOptions::default()).unwrap().compute_mask().unwrap();
    let mut total = 0.0;
    for path in &args[2..] {
        let g = parse_ebnf(&std::fs::read_to_string(path).unwrap(), "root").unwrap();
        let t = thread_us();
        let cg = cold_compile(&g, &vocab);
        let us = thread_us() - t;
        total += us;
        let name = std::path::Path::new(path).file_stem().unwrap().to_string_lossy();
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        let mask = m.compute_mask().unwrap();
        let hash = mask
            .words()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &w| (h ^ u64::from(w)).wrapping_mul(0x100_0000_01b3));
        println!(
            "{name:12} cold compile + first mask {us:9.0} us CPU ({} states; first mask {} allowed, hash {hash:016x})",
            cg.automata().states().len(),
            mask.count_ones()
        );
    }
    println!("total {total:.0} us CPU");
}
