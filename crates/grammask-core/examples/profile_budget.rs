//! Times budgeted mask fills at recorded states, each on a freshly compiled grammar (a cold
//! budget memo): `profile_budget VOCAB.json CASES.json [REPS] [BUDGET]`, where CASES.json is a
//! list of `{"schema": ..., "ids": [...]}` (JSON Schemas compiled with `strict_mode=false`, the
//! token ids accepted before the fill) and VOCAB.json comes from `TokenizerInfo.serialize_json()`.
use grammask_core::grammar_compiler::GrammarCompiler;
use grammask_core::json_schema::JsonSchemaOptions;
use grammask_core::matcher::{Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let cases: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let reps: usize = args.get(3).map_or(1, |r| r.parse().unwrap());
    let budget: usize = args.get(4).map_or(384, |r| r.parse().unwrap());
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let compiler = GrammarCompiler::new(&vocab, false, -1);
    let mut total = 0.0;
    for case in &cases {
        let schema = case["schema"].to_string();
        let ids: Vec<u32> = case["ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        let mut best = f64::INFINITY;
        let mut allowed = 0;
        for _ in 0..reps {
            let cg = compiler.compile_json_schema(&schema, &opts).unwrap();
            let mut m = Matcher::new(cg, MatcherOptions { max_tokens: Some(budget), ..Default::default() }).unwrap();
            for &t in &ids {
                assert!(m.accept_token(t).unwrap());
            }
            let t = Instant::now();
            allowed = m.compute_mask().unwrap().count_ones();
            best = best.min(t.elapsed().as_secs_f64());
        }
        total += best;
        println!("{:8.2} ms allowed {allowed:6} {}", best * 1e3, case["name"].as_str().unwrap_or(""));
    }
    println!("total {:.1} ms", total * 1e3);
}
