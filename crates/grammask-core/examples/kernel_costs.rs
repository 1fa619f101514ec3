//! Times the first classification of every kernel state met along a byte string, as the matcher
//! would compute it (string-body and class slices, FOLLOW sets), without the kernel caches (the
//! counted-body levels are memoized as in the matcher).
//! `cargo run --release --example kernel_costs -- VOCAB.json GRAMMAR.ebnf INPUT [MIN_US]`
//! A grammar file ending in `.json` is a JSON Schema, converted with MaskBench's options
//! (`strict_mode=false`, any whitespace) and the converter's facts (excluded key words).
//! With `CHECK=1`, each kernel is also classified without the row memo and run indexes; the results must be
//! equal, and the total time of that walk is printed too. With `REPEAT=N`, each kernel is timed as the fastest
//! of N classifications (after an untimed one).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::mask::kernel_items;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::slice::ClassSlice;
use grammask_core::vocab::Vocabulary;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

#[path = "common/kernel_path.rs"]
mod kernel_path;
use kernel_path::path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let text = std::fs::read_to_string(&args[2]).unwrap();
    let is_schema = std::path::Path::new(&args[2]).extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let g = if is_schema {
        let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
        json_schema_to_grammar(&text, &opts).unwrap()
    } else {
        parse_ebnf(&text, "root").unwrap()
    };
    let input = std::fs::read(&args[3]).unwrap();
    let min_us: u128 = args.get(4).map_or(200, |s| s.parse().unwrap());
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let a = cg.automata();
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let mut seen = HashSet::new();
    let mut total = std::time::Duration::ZERO;
    let mut total_stack = std::time::Duration::ZERO;
    let check = std::env::var_os("CHECK").is_some();
    // REPEAT=N: each kernel's time is the fastest of N classifications after an untimed one.
    // COMPOSE=1: kernels through the compiled grammar's cache (composed from their callees'
    // kernels where that applies), each timed once.
    let compose = std::env::var_os("COMPOSE").is_some();
    // ONLY=S: just kernel state S.
    let only: Option<u32> = std::env::var("ONLY").ok().and_then(|n| n.parse().ok());
    let repeat: usize = std::env::var("REPEAT").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    for i in 0..=input.len() {
        let b = input.get(i).copied().unwrap_or(b'$');
        for it in kernel_items(a, m.chart()) {
            if !seen.insert(it.state) || only.is_some_and(|o| o != it.state.0) {
                continue;
            }
            if let Some(c) = ClassSlice::loop_class(a, it.state) {
                cg.index().class_slice(c); // built outside the timing
            }
            if (check || repeat > 0) && !compose {
                // Lazy per-grammar data (FOLLOW sets, body levels) outside both timings.
                cg.classify(it.state, usize::MAX, &mut || false).unwrap();
            }
            let before = cg.kernel_stats();
            let t = Instant::now();
            let km = if compose {
                (*cg.kernel(it.state).unwrap()).clone()
            } else {
                cg.classify(it.state, usize::MAX, &mut || false).unwrap().unwrap()
            };
            let mut el = t.elapsed();
            for _ in 1..if compose { 0 } else { repeat } {
                let t = Instant::now();
                cg.classify(it.state, usize::MAX, &mut || false).unwrap();
                el = el.min(t.elapsed());
            }
            total += el;
            if check {
                let t = Instant::now();
                let stack = cg.classify_uninterned(it.state).unwrap();
                total_stack += t.elapsed();
                assert!(stack == km, "state {}", it.state.0);
            }
            if el.as_micros() >= min_us {
                println!(
                    "byte {i} {:?} state {} rule {} {:?} {} accepted {} uncertain {} suffixes {}",
                    b as char,
                    it.state.0,
                    a.rule_name(a.state(it.state).rule),
                    el,
                    path(&before, &cg.kernel_stats()),
                    km.accepted.count_ones(),
                    km.uncertain.len(),
                    km.suffixes.len()
                );
            }
        }
        if i < input.len() {
            assert!(m.accept_bytes(&[b]).unwrap(), "input rejected at byte {i}");
        }
    }
    println!("kernels {} total {total:?}", seen.len());
    if std::env::var_os("RULE_STARTS").is_some() {
        for r in 0..a.num_rules() {
            let s = a.rule_start(grammask_core::grammar::RuleId(r as u32));
            let t = Instant::now();
            let Ok(Some(km)) = cg.classify(s, usize::MAX, &mut || false) else { continue };
            println!(
                "rule start {} state {} {:?} accepted {} uncertain {} suffixes {}",
                a.rule_name(a.state(s).rule),
                s.0,
                t.elapsed(),
                km.accepted.count_ones(),
                km.uncertain.len(),
                km.suffixes.len()
            );
        }
    }
    if check {
        println!("without the row memo and run indexes: total {total_stack:?}");
    }
}
