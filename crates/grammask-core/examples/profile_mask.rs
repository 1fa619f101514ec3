//! Times kernel classification and mask fills along a byte string.
//! `cargo run --release --example profile_mask -- VOCAB.json GRAMMAR.ebnf INPUT`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`). A grammar file ending in `.json` is a JSON
//! Schema, converted with MaskBench's options (`strict_mode=false`, any whitespace).
//! `MIN_US=N` prints the fills over N µs (default 200); `FILL_FROM=N` fills only from byte N on;
//! `FILL_AT=FILE` only at the byte offsets listed in FILE (one a line: the token boundaries of
//! a tokenized input, as a tokenizer-level harness fills); `ROUNDS=N` compiles and replays N times in
//! one process (later rounds find the vocabulary's shared caches warm, as a long-lived process does).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let text = std::fs::read_to_string(&args[2]).unwrap();
    let g = if std::path::Path::new(&args[2]).extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
        json_schema_to_grammar(&text, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap()
    } else {
        parse_ebnf(&text, "root").unwrap()
    };
    let min_us: u128 = std::env::var("MIN_US").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let input = std::fs::read(&args[3]).unwrap();
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
    // Earlier rounds' grammars stay alive, and with them the vocabulary's shared index.
    let mut kept = Vec::new();
    for round in 0..rounds {
        println!("round {round}");
        kept.push(replay(&g, &vocab, &input, min_us));
    }
}

fn replay(
    g: &grammask_core::grammar::Grammar,
    vocab: &Arc<Vocabulary>,
    input: &[u8],
    min_us: u128,
) -> Arc<CompiledGrammar> {
    let t = Instant::now();
    let cg = Arc::new(CompiledGrammar::new(g, vocab).unwrap());
    println!("compile {:?}", t.elapsed());
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let fill_from: usize = std::env::var("FILL_FROM").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    let fill_at: Option<std::collections::HashSet<usize>> = std::env::var("FILL_AT")
        .ok()
        .map(|f| std::fs::read_to_string(f).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect());
    for (i, &b) in input.iter().enumerate() {
        if i < fill_from || fill_at.as_ref().is_some_and(|at| !at.contains(&i)) {
            assert!(m.accept_bytes(&[b]).unwrap());
            continue;
        }
        let t = Instant::now();
        let n = m.compute_mask().unwrap().count_ones();
        let el = t.elapsed();
        if el.as_micros() > min_us {
            println!("byte {i} {:?}: {el:?} allowed {n}", b as char);
            if std::env::var("KERNELS").is_ok() {
                for it in grammask_core::mask::kernel_items(cg.automata(), m.chart()) {
                    let t = Instant::now();
                    let km = cg.classify(it.state, usize::MAX, &mut || false).unwrap().unwrap();
                    println!(
                        "   kernel {:?} rule {} {:?} accepted {} uncertain {} suffixes {}",
                        it,
                        cg.automata().rule_name(cg.automata().state(it.state).rule),
                        t.elapsed(),
                        km.accepted.count_ones(),
                        km.uncertain.len(),
                        km.suffixes.len()
                    );
                }
            }
        }
        assert!(m.accept_bytes(&[b]).unwrap());
    }
    cg
}
