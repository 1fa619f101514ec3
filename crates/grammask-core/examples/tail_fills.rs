//! The slowest token-level mask fills along a tokenized document, in thread CPU time, for
//! finding and profiling the MaskBench tail (issue 18; `bench/tail_states.py` finds the fills).
//! `cargo run --release --example tail_fills -- VOCAB.json SCHEMA.json INPUT AT [MIN_US]`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`; AT: the token start offsets of INPUT, one a
//! line; the schema is converted with MaskBench's options, `strict_mode=false`, any whitespace).
//! Fills once at every token start, as the harness does, and prints the fills over `MIN_US`
//! (default 300) with the row's kernel count and the text before them.
//! `KERNELS=N`: before the fill at token `N`, its kernels are classified one by one through the
//! compiled grammar's cache, each printed with its time and how it was found (a walk, a literal,
//! a composition...); the fill's own time then leaves them out. With `EDGES=1`, each kernel's
//! state is printed with its byte and rule edges, and so are its callees' starts and the states
//! after them, two levels down.
//! `DIRECT=N`: also times the fill at token `N` as a walk of the whole trie on the real chart
//! (`fill_mask_direct`), for comparison.
//! `PROFILE_AT=N` runs the fill at token `N` through `profiled_fill`, for callgrind:
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*profiled_fill*' ...`.
//! `FAULTS=1`: each printed fill also shows its thread's user and system time (`getrusage`, whose
//! clock ticks coarser than the thread CPU clock) and minor page faults.
//! `WAIT_THREAD=1`: the fills start once the compile's class-body thread is done (its slices
//! and call-loop run indexes built), and so are the walked-body indexes' thread (`wait_walked`)
//! and the thread that builds the run indexes the compile left (`wait_run_indexes`).
//! `HOLD_THREAD=1`: the compile starts no class-body thread (`hold_class_bodies`): every reserved
//! slice stays pending, as when the fills come before that thread (the racing fills, exactly).
//! `WARM=LIST`: first compiles the schemas `LIST` names (one path stem a line: `STEM.schema.json`
//! and its documents `STEM.N.txt` / `STEM.N.at`) and fills along their documents, in that order,
//! as `bench/tail_states.py` does before the target schema: the per-vocabulary parts (run indexes,
//! class slices, the cross-grammar kernel cache) are then in the state the sample left them in.
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::mask::kernel_items;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

#[path = "common/cpu_clock.rs"]
mod cpu_clock;
#[path = "common/kernel_path.rs"]
mod kernel_path;

fn micros() -> f64 {
    cpu_clock::seconds(cpu_clock::THREAD) * 1e6
}

/// One fill, kept out of line for callgrind's `--toggle-collect`.
#[inline(never)]
fn profiled_fill(m: &mut Matcher) -> usize {
    m.compute_mask().unwrap().count_ones()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let schema = std::fs::read_to_string(&args[2]).unwrap();
    let g = json_schema_to_grammar(&schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let input = std::fs::read(&args[3]).unwrap();
    let mut at: Vec<usize> =
        std::fs::read_to_string(&args[4]).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
    at.push(input.len());
    let min_us: f64 = args.get(5).map_or(300.0, |s| s.parse().unwrap());
    let profile_at: Option<usize> = std::env::var("PROFILE_AT").ok().and_then(|n| n.parse().ok());
    let kernels_at: Option<usize> = std::env::var("KERNELS").ok().and_then(|n| n.parse().ok());
    // The per-vocabulary index lives while a grammar (or this) holds it.
    let _index = grammask_core::token_index::TokenIndex::for_vocab(&vocab);
    if let Ok(list) = std::env::var("WARM") {
        warm_up(&vocab, &std::fs::read_to_string(list).unwrap());
    }
    let hold = std::env::var("HOLD_THREAD").is_ok();
    grammask_core::compiled::hold_class_bodies(hold);
    let t = micros();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    grammask_core::compiled::hold_class_bodies(false);
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    println!("compile {:.0} µs", micros() - t);
    if std::env::var("WAIT_THREAD").is_ok() {
        cg.wait_class_bodies();
        cg.index().wait_walked();
        cg.wait_run_indexes();
    }
    let faults = std::env::var("FAULTS").is_ok();
    let mut times = Vec::new();
    for (k, w) in at.windows(2).enumerate() {
        if kernels_at == Some(k) {
            print_kernels(&cg, &m);
        }
        if std::env::var("DIRECT").ok().and_then(|n| n.parse::<usize>().ok()) == Some(k) {
            let mut chart = m.chart().clone();
            let mut out = grammask_core::bitset::Bitset::new(vocab.vocab_size());
            let t = micros();
            grammask_core::mask::fill_mask_direct(cg.automata(), &mut chart, cg.trie(), &mut out).unwrap();
            println!("direct fill at token {k}: {:.0} µs, allowed {}", micros() - t, out.count_ones());
        }
        let usage = faults.then(cpu_clock::thread_usage);
        let t = micros();
        let n = if profile_at == Some(k) { profiled_fill(&mut m) } else { m.compute_mask().unwrap().count_ones() };
        let us = micros() - t;
        times.push(us);
        if us > min_us {
            let kernels = kernel_items(cg.automata(), m.chart()).len();
            let before = String::from_utf8_lossy(&input[w[0].saturating_sub(40)..w[0]]);
            println!("token {k} byte {}: {us:.0} µs, allowed {n}, kernels {kernels}, after {before:?}", w[0]);
            if let Some((user, sys, flt)) = usage {
                let (user2, sys2, flt2) = cpu_clock::thread_usage();
                let (u, s) = ((user2 - user) * 1e6, (sys2 - sys) * 1e6);
                println!("    user {u:.0} µs, sys {s:.0} µs, minor faults {}", flt2 - flt);
            }
        }
        assert!(m.accept_bytes(&input[w[0]..w[1]]).unwrap(), "token {k} rejected");
    }
    times.sort_by(f64::total_cmp);
    let total: f64 = times.iter().sum();
    println!("{} fills, total {total:.0} µs, max {:.0} µs", times.len(), times.last().unwrap_or(&0.0));
    println!("class-body slices built in fills: {}", cg.class_bodies_built_in_fills());
}

/// Classifies the kernels of `m`'s row through `cg`'s cache, printing each new one.
fn print_kernels(cg: &CompiledGrammar, m: &Matcher) {
    let a = cg.automata();
    for it in kernel_items(a, m.chart()) {
        let before = cg.kernel_stats();
        let t = micros();
        let km = cg.kernel(it.state).unwrap();
        let us = micros() - t;
        let after = cg.kernel_stats();
        let how = kernel_path::path(&before, &after);
        println!(
            "  state {} rule {} origin {}: {us:.0} µs {how}, accepted {} uncertain {} suffixes {}",
            it.state.0,
            a.rule_name(a.state(it.state).rule),
            it.origin,
            km.accepted.count_ones(),
            km.uncertain.len(),
            km.suffixes.len()
        );
        if std::env::var("EDGES").is_ok() {
            print_state(a, it.state, 0);
        }
    }
}

/// Prints the edges of `s` and, below it, those of its callees' starts and of the states after
/// them, down to depth 2.
fn print_state(a: &grammask_core::compiler::Automata, s: grammask_core::compiler::StateId, depth: usize) {
    let pad = "    ".repeat(depth + 2);
    let bytes: Vec<String> =
        a.byte_edges(s).iter().map(|e| format!("{:?}-{:?}->{}", e.lo as char, e.hi as char, e.target.0)).collect();
    let calls: Vec<String> = a
        .rule_edges(s)
        .iter()
        .map(|(r, t)| format!("{}(start {})->{}", a.rule_name(*r), a.callee_start(s, *r).0, t.0))
        .collect();
    println!("{pad}{} final {} bytes [{}] calls [{}]", s.0, a.state(s).is_final, bytes.join(" "), calls.join(" "));
    if depth < 2 {
        for (r, t) in a.rule_edges(s).to_vec() {
            print_state(a, a.callee_start(s, r), depth + 1);
            print_state(a, t, depth + 1);
        }
    }
}

/// Compiles each schema of `list` and fills along its documents (see `WARM` in the module doc).
fn warm_up(vocab: &Arc<Vocabulary>, list: &str) {
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let mut schemas = 0;
    for stem in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Ok(schema) = std::fs::read_to_string(format!("{stem}.schema.json")) else { continue };
        let Ok(g) = json_schema_to_grammar(&schema, &opts) else { continue };
        let Ok(cg) = CompiledGrammar::new(&g, vocab) else { continue };
        let cg = Arc::new(cg);
        schemas += 1;
        for i in 0.. {
            let (Ok(input), Ok(at)) =
                (std::fs::read(format!("{stem}.{i}.txt")), std::fs::read_to_string(format!("{stem}.{i}.at")))
            else {
                break;
            };
            let mut at: Vec<usize> = at.lines().map(|l| l.trim().parse().unwrap()).collect();
            at.push(input.len());
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            for w in at.windows(2) {
                if m.compute_mask().is_err() || !m.accept_bytes(&input[w[0]..w[1]]).unwrap_or(false) {
                    break;
                }
            }
        }
    }
    let index = grammask_core::token_index::TokenIndex::for_vocab(vocab);
    let parts: Vec<String> = index.memory_parts().iter().map(|(n, b)| format!("{n} {b}")).collect();
    println!("warmed up on {schemas} schemas; per-vocabulary parts: {}", parts.join(", "));
}
