//! Time to first mask of JSON Schemas, split in phases, in process CPU time (usable on a loaded
//! machine; counts the automata's build threads): conversion (schema -> grammar), rule automata
//! (`Automata::build`), the rest of `CompiledGrammar::new` (token edges, class indexes, FOLLOW
//! sets) and the first mask (matcher and its first fill). Options as MaskBench's grammask engine
//! (`strict_mode=False`).
//! `cargo run --release --example ttfm_phases -- VOCAB.json LIST [REPEAT]`: `LIST` holds schema
//! paths, one per line (`MaskBench` files: the `schema` field); `VOCAB.json` from
//! `TokenizerInfo.serialize_json()`. One line per schema (minimum over `REPEAT` runs of each
//! phase, ms), then the phases' totals. With `TOP_RULES=N`, also the `N` rules with the most
//! automaton states. With `WARM=LIST`, the schemas of `LIST` are compiled first, filling the
//! vocabulary's shared rule automata (`RuleMemo`): `rest` then counts the compile's build with
//! the memo, less the build without it (`build`); use `REPEAT` 1, or later runs find their own
//! rules.
use grammask_core::compiler::Automata;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

#[path = "common/cpu_clock.rs"]
mod cpu_clock;

/// This process's CPU time in ms (`CLOCK_PROCESS_CPUTIME_ID`, Linux): all threads, as the
/// automata build on several.
fn cpu_ms() -> f64 {
    cpu_clock::seconds(cpu_clock::PROCESS) * 1e3
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = cpu_ms();
    let out = f();
    (out, cpu_ms() - t)
}

/// The `n` rules with the most states in `a`.
fn print_top_rules(g: &grammask_core::grammar::Grammar, a: &Automata, n: usize) {
    let mut per_rule = vec![0usize; a.states().iter().map(|s| s.rule.0 as usize + 1).max().unwrap_or(0)];
    for st in a.states() {
        per_rule[st.rule.0 as usize] += 1;
    }
    let mut top: Vec<(usize, usize)> = per_rule.into_iter().enumerate().filter(|x| x.1 > 0).collect();
    top.sort_by_key(|x| std::cmp::Reverse(x.1));
    println!("  rules with states: {}", top.len());
    for (r, k) in top.into_iter().take(n) {
        println!("  {k:>7} {}", g.rules().get(r).map_or("(lifted)", |r| r.name.as_str()));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let list = std::fs::read_to_string(&args[2]).expect("readable list");
    let repeat: usize = args.get(3).map_or(1, |s| s.parse().unwrap());
    let opts = JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() };
    // The per-vocabulary token index is built once, outside the timings, and kept alive.
    let _pin = CompiledGrammar::new(&grammask_core::ebnf::parse_ebnf("root ::= \"a\"", "root").unwrap(), &vocab);
    if let Ok(warm) = std::env::var("WARM") {
        for path in std::fs::read_to_string(warm).expect("readable list").lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).expect("readable schema")).expect("JSON");
            let schema = v.get("schema").cloned().unwrap_or(v).to_string();
            if let Ok(g) = json_schema_to_grammar(&schema, &opts) {
                let _ = CompiledGrammar::new(&g, &vocab);
            }
        }
    }
    let mut totals = [0.0f64; 5];
    for path in list.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("readable schema")).expect("JSON");
        let schema = v.get("schema").cloned().unwrap_or(v).to_string();
        let mut best = [f64::INFINITY; 5];
        let mut states = 0;
        for _ in 0..repeat {
            let (g, conv) = timed(|| json_schema_to_grammar(&schema, &opts));
            let Ok(g) = g else {
                println!("{path} error");
                break;
            };
            let (a, build) = timed(|| Automata::build(&g));
            if let (Ok(a), Ok(n)) = (&a, std::env::var("TOP_RULES").map(|n| n.parse::<usize>().unwrap_or(10))) {
                print_top_rules(&g, a, n);
            }
            states = a.map_or(0, |a| a.states().len());
            let (cg, compiled) = timed(|| CompiledGrammar::new(&g, &vocab));
            let Ok(cg) = cg else { break };
            let (_, first) = timed(|| {
                let mut m = Matcher::new(Arc::new(cg), MatcherOptions::default()).unwrap();
                m.compute_mask().unwrap().count_ones()
            });
            // `compiled` includes a second build of the automata: its own part is the rest.
            let ttfm = conv + compiled + first;
            for (b, x) in best.iter_mut().zip([conv, build, (compiled - build).max(0.0), first, ttfm]) {
                *b = b.min(x);
            }
        }
        if best[4].is_finite() {
            println!(
                "{path} ttfm {:.2} conv {:.2} build {:.2} rest {:.2} first {:.2} states {states}",
                best[4], best[0], best[1], best[2], best[3]
            );
            for (t, b) in totals.iter_mut().zip(best) {
                *t += b;
            }
        }
    }
    println!(
        "total ttfm {:.1} conv {:.1} build {:.1} rest {:.1} first {:.1} ms",
        totals[4], totals[0], totals[1], totals[2], totals[3]
    );
}
