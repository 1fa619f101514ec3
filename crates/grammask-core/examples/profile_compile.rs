//! Times the stages of schema compilation (JSON Schema -> EBNF -> grammar -> automata).
//! `cargo run --release --example profile_compile -- [--lax] [--repeat N] [--dump] [--slow MS] LIST`
//! `LIST` is a file of JSON Schema paths, one per line (`MaskBench` files: the schema is taken from
//! their `schema` field when present). Prints p50/p90/p99 of each stage; with `--dump`, one line
//! per schema with the automaton size, a hash of the whole automaton and one of the EBNF text (to check that a
//! change of the compiler leaves its output unchanged); with `--slow MS`, the schemas whose build is slower;
//! with `--vocab FILE` (a serialized `TokenizerInfo`), also `CompiledGrammar::new` (build included).
use grammask_core::compiler::{Automata, StateId};
use grammask_core::ebnf::parse_ebnf;
use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
use std::time::Instant;

fn hash_automata(a: &Automata) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    let mut mix = |w: u64| h = (h ^ w).wrapping_mul(0x0000_0100_0000_01B3);
    for (i, st) in a.states().iter().enumerate() {
        let s = StateId(i as u32);
        mix(u64::from(st.is_final) | u64::from(st.rule.0) << 1);
        for e in a.byte_edges(s) {
            mix(u64::from(e.lo) | u64::from(e.hi) << 8 | u64::from(e.target.0) << 16);
        }
        mix(u64::MAX);
        for &(r, t) in a.rule_edges(s) {
            mix(u64::from(r.0) | u64::from(t.0) << 32);
        }
        mix(u64::MAX - 1);
    }
    h
}

fn main() {
    let mut opts = JsonSchemaOptions::default();
    let (mut repeat, mut dump, mut slow, mut list) = (1usize, false, f64::INFINITY, None);
    let mut vocab = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--lax" => opts.strict_mode = false,
            "--repeat" => repeat = args.next().and_then(|n| n.parse().ok()).expect("--repeat N"),
            "--dump" => dump = true,
            "--slow" => slow = args.next().and_then(|n| n.parse().ok()).expect("--slow MS"),
            "--vocab" => {
                let text = std::fs::read_to_string(args.next().expect("--vocab FILE")).expect("readable vocabulary");
                vocab = Some(std::sync::Arc::new(
                    grammask_core::vocab::Vocabulary::from_json(&text).expect("a vocabulary"),
                ));
            }
            _ => list = Some(a),
        }
    }
    let list = std::fs::read_to_string(list.expect("a file listing schema paths")).expect("readable list");
    let (mut conv, mut parse, mut build, mut full) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // The per-vocabulary token index is built once, outside the timings, and kept alive.
    let _pin = vocab.as_ref().map(|v| {
        let g = parse_ebnf("root ::= \"a\"", "root").expect("EBNF");
        grammask_core::matcher::CompiledGrammar::new(&g, v).expect("compiles")
    });
    for path in list.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("readable schema")).expect("JSON");
        let schema = v.get("schema").cloned().unwrap_or(v).to_string();
        let t0 = Instant::now();
        let Ok(ebnf) = json_schema_to_ebnf(&schema, &opts) else { continue };
        let t1 = Instant::now();
        let Ok(g) = parse_ebnf(&ebnf, "root") else { continue };
        let t2 = Instant::now();
        let mut best = f64::INFINITY;
        let mut out = None;
        for _ in 0..repeat {
            let t = Instant::now();
            let a = Automata::build(&g);
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            out = Some(a);
        }
        if let Some(v) = &vocab {
            let t = Instant::now();
            let _ = grammask_core::matcher::CompiledGrammar::new(&g, v);
            full.push(t.elapsed().as_secs_f64() * 1e3);
        }
        conv.push((t1 - t0).as_secs_f64() * 1e3);
        parse.push((t2 - t1).as_secs_f64() * 1e3);
        build.push(best);
        let a = out.expect("repeat >= 1");
        if dump {
            match &a {
                Ok(a) => {
                    println!(
                        "{path} states {} hash {:016x} ebnf {:016x} build_ms {best:.3} to_ebnf_ms {:.3} parse_ms {:.3}",
                        a.states().len(),
                        hash_automata(a),
                        ebnf.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b))
                            .wrapping_mul(0x0000_0100_0000_01B3)),
                        (t1 - t0).as_secs_f64() * 1e3,
                        (t2 - t1).as_secs_f64() * 1e3
                    );
                }
                Err(e) => println!("{path} error {e}"),
            }
        }
        if best > slow {
            let n = a.as_ref().map_or(0, |a| a.states().len());
            println!("slow {path} build {best:.2} ms states {n} ebnf {} bytes", ebnf.len());
        }
    }
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    for (name, mut xs) in [("to_ebnf", conv), ("parse", parse), ("build", build), ("compiled (with --vocab)", full)] {
        if xs.is_empty() {
            continue;
        }
        xs.sort_by(f64::total_cmp);
        let q =
            |p: f64| xs.get(((xs.len() as f64 * p) as usize).min(xs.len().saturating_sub(1))).copied().unwrap_or(0.0);
        let total: f64 = xs.iter().sum();
        println!(
            "{name} p50 {:.3} p90 {:.3} p99 {:.3} max {:.3} total {total:.1} ms ({} schemas)",
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0),
            xs.len()
        );
    }
}
