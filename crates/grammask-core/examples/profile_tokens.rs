//! Times mask fills along a token sequence and, for slow fills, each kernel's first
//! classification (composed or walked) and the rest of the fill (suffix checks).
//! `cargo run --profile ci --example profile_tokens -- VOCAB.json GRAMMAR.ebnf IDS.txt [MIN_US]`
//! (IDS.txt: token ids separated by spaces; VOCAB.json from `TokenizerInfo.serialize_json()`).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::mask::kernel_items;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let g = parse_ebnf(&std::fs::read_to_string(&args[2]).unwrap(), "root").unwrap();
    let ids: Vec<u32> =
        std::fs::read_to_string(&args[3]).unwrap().split_whitespace().map(|s| s.parse().unwrap()).collect();
    let min_us: u128 = args.get(4).map_or(150, |s| s.parse().unwrap());
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let a = cg.automata();
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let mut text = Vec::new();
    for &t in &ids {
        // Kernels first (cold), then the fill with all kernels cached.
        let items = kernel_items(a, m.chart());
        let mut lines = Vec::new();
        let t0 = Instant::now();
        for it in &items {
            let t1 = Instant::now();
            let km = cg.kernel(it.state).unwrap();
            let el = t1.elapsed();
            if el.as_micros() >= 20 {
                let composed = cg.composed_kernel(it.state).unwrap().is_some();
                lines.push(format!(
                    "   kernel state {} origin {} rule {} {:?} composed {} accepted {} uncertain {} suffixes {} rule_edges {}",
                    it.state.0, it.origin, a.rule_name(a.state(it.state).rule), el, composed,
                    km.accepted.count_ones(), km.uncertain.len(), km.suffixes.len(), a.rule_edges(it.state).len()
                ));
            }
        }
        let kt = t0.elapsed();
        let t2 = Instant::now();
        m.compute_mask().unwrap();
        let ft = t2.elapsed();
        if (kt + ft).as_micros() >= min_us {
            println!(
                "after {:?}: kernels {} items in row {} kernel time {kt:?} fill {ft:?}",
                String::from_utf8_lossy(&text[text.len().saturating_sub(30)..]),
                items.len(),
                m.chart().last_row().len()
            );
            for l in lines {
                println!("{l}");
            }
        }
        let b = vocab.token_bytes(t).to_vec();
        assert!(m.accept_token(t).unwrap());
        text.extend_from_slice(&b);
    }
}
