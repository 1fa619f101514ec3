//! Replays sampled token sequences with and without a budget, timing each mask fill in turn on
//! two compilations of each schema (cold caches of their own):
//! `replay_budget VOCAB.json TRACES.json [BUDGET] [budget]` (TRACES.json from
//! `bench/sample_outputs.py --traces`, VOCAB.json from `TokenizerInfo.serialize_json()`; a last
//! argument `budget` times the budgeted fills only).
use grammask_core::grammar_compiler::GrammarCompiler;
use grammask_core::json_schema::JsonSchemaOptions;
use grammask_core::matcher::{Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Instant;

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * q / 100.0).round() as usize] * 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let cases: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let budget: usize = args.get(3).map_or(384, |r| r.parse().unwrap());
    let only_budget = args.get(4).is_some_and(|s| s == "budget");
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let ca = GrammarCompiler::new(&vocab, false, -1);
    let cb = GrammarCompiler::new(&vocab, false, -1);
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for case in &cases {
        let schema = case["schema"].to_string();
        let ga = ca.compile_json_schema(&schema, &opts).unwrap();
        let gb = cb.compile_json_schema(&schema, &opts).unwrap();
        for run in case["runs"].as_array().unwrap() {
            let ids: Vec<u32> = run.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
            let mut ma =
                Matcher::new(ga.clone(), MatcherOptions { max_tokens: Some(budget), ..Default::default() }).unwrap();
            let mut mb = Matcher::new(gb.clone(), MatcherOptions::default()).unwrap();
            for (i, &t) in ids.iter().enumerate() {
                let t0 = Instant::now();
                ma.compute_mask().unwrap();
                ta.push(t0.elapsed().as_secs_f64());
                if !only_budget {
                    let t0 = Instant::now();
                    mb.compute_mask().unwrap();
                    tb.push(t0.elapsed().as_secs_f64());
                }
                if i + 1 < ids.len() {
                    assert!(ma.accept_token(t).unwrap());
                    if !only_budget {
                        assert!(mb.accept_token(t).unwrap());
                    }
                }
            }
        }
    }
    let sa: f64 = ta.iter().sum();
    let sb: f64 = tb.iter().sum();
    println!(
        "budget   n {} p50 {:.2} p90 {:.2} p99 {:.1} total {:.1} ms",
        ta.len(),
        pct(&mut ta, 50.0),
        pct(&mut ta, 90.0),
        pct(&mut ta, 99.0),
        sa * 1e3
    );
    if !only_budget {
        println!(
            "nobudget n {} p50 {:.2} p90 {:.2} p99 {:.1} total {:.1} ms",
            tb.len(),
            pct(&mut tb, 50.0),
            pct(&mut tb, 90.0),
            pct(&mut tb, 99.0),
            sb * 1e3
        );
    }
}
