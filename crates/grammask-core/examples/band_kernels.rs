//! Which kernels make up a schema's slow fills (issue 18's p99 band), in thread CPU time.
//! `cargo run --release --example band_kernels -- VOCAB.json SCHEMA.json DOC.txt DOC.at [DOC.txt DOC.at]...`
//! (files as for `tail_fills`; one compiled grammar for all documents, a fresh matcher for each,
//! as `bench/tail_states.py` runs a schema's instances). Before each fill, the row's kernels are
//! classified one by one through the compiled grammar's cache; each line `K doc token µs path
//! rule state byte-edges rule-edges callees` is a new kernel over 2 µs, each line `F doc token µs
//! kernels-µs` a fill (its kernels' time included).
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let schema = std::fs::read_to_string(&args[2]).unwrap();
    let g = json_schema_to_grammar(&schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let a = cg.automata();
    for (d, doc) in args[3..].chunks(2).enumerate() {
        let input = std::fs::read(&doc[0]).unwrap();
        let mut at: Vec<usize> =
            std::fs::read_to_string(&doc[1]).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
        at.push(input.len());
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (k, w) in at.windows(2).enumerate() {
            let t0 = micros();
            for it in kernel_items(a, m.chart()) {
                let before = cg.kernel_stats();
                let t = micros();
                cg.kernel(it.state).unwrap();
                let us = micros() - t;
                if us > 2.0 {
                    let how = kernel_path::path(&before, &cg.kernel_stats());
                    let st = a.state(it.state);
                    let callees: Vec<&str> = a.rule_edges(it.state).iter().map(|(r, _)| a.rule_name(*r)).collect();
                    println!(
                        "K {d} {k} {us:.1} {how} {} {} {} {} {}",
                        a.rule_name(st.rule),
                        it.state.0,
                        a.byte_edges(it.state).len(),
                        callees.len(),
                        callees.join(",")
                    );
                }
            }
            let tk = micros() - t0;
            m.compute_mask().unwrap();
            println!("F {d} {k} {:.1} {tk:.1}", micros() - t0);
            if !m.accept_bytes(&input[w[0]..w[1]]).unwrap_or(false) {
                println!("R {d} {k}");
                break;
            }
        }
    }
}
