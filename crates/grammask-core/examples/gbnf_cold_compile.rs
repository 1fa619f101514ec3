//! Instruction counts of the cold compile of GBNF grammars: after the per-tokenizer set-up (a
//! trivial grammar compiled and masked, as in bench/gbnf_bench.py), each grammar file is compiled
//! and masked once in `cold_compile`, in order (later grammars find the per-vocabulary indexes the
//! earlier ones built).
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*cold_compile*' \
//!   target/release/examples/gbnf_cold_compile VOCAB.json GRAMMAR.gbnf...`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`); without valgrind it prints thread CPU time.
use grammask_core::ebnf::parse_ebnf;
use grammask_core::grammar::Grammar;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, out: *mut Timespec) -> i32;
}

/// This thread's CPU time in microseconds (`CLOCK_THREAD_CPUTIME_ID`, Linux).
#[allow(unsafe_code, clippy::cast_precision_loss)] // a libc call on a local struct
fn thread_us() -> f64 {
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the call's duration.
    assert_eq!(unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &raw mut t) }, 0);
    t.sec as f64 * 1e6 + t.nsec as f64 / 1e3
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
        println!("{name:12} cold compile + first mask {us:9.0} us CPU ({} states)", cg.automata().states().len());
    }
    println!("total {total:.0} us CPU");
}
