//! Times kernel classification and mask fills along a byte string.
//! `cargo run --release --example profile_mask -- VOCAB.json GRAMMAR.ebnf INPUT`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let g = parse_ebnf(&std::fs::read_to_string(&args[2]).unwrap(), "root").unwrap();
    let input = std::fs::read(&args[3]).unwrap();
    let t = Instant::now();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    println!("compile {:?}", t.elapsed());
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    for (i, &b) in input.iter().enumerate() {
        let t = Instant::now();
        let n = m.compute_mask().unwrap().count_ones();
        let el = t.elapsed();
        if el.as_micros() > 200 {
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
}
