//! Per-step mask times along a tokenized output, for finding which steps cost a latency
//! percentile. `cargo run --release --example profile_steps -- VOCAB.json GRAMMAR.ebnf INPUT AT`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`, AT: the token start offsets of INPUT, one a
//! line). `KERNELS=1` prints each step's row size and its kernels' accepted/uncertain/suffix
//! counts (first round); `WARM=1` computes each step's kernels before timing it (the time is then
//! the fill only). Each of `ROUNDS=N` (default 20) rounds compiles the grammar afresh and fills a mask at
//! every offset, as `fill_next_token_bitmask` does (`compute_mask` then one row copy); prints each
//! step's minimum over the rounds, then the p50/p99/max of those minima.
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
    let mut at: Vec<usize> =
        std::fs::read_to_string(&args[4]).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
    at.push(input.len());
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
    let mut best = vec![u128::MAX; at.len() - 1];
    let mut row = vec![0u32; vocab.vocab_size().div_ceil(32)];
    let mut kept = Vec::new();
    let kernels = std::env::var("KERNELS").is_ok();
    let warm = std::env::var("WARM").is_ok();
    for _ in 0..rounds {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (i, w) in at.windows(2).enumerate() {
            if warm {
                for it in grammask_core::mask::kernel_items(cg.automata(), m.chart()) {
                    cg.kernel(it.state).unwrap();
                }
            }
            if kernels && best[i] == u128::MAX {
                let ks = grammask_core::mask::kernel_items(cg.automata(), m.chart());
                let d: Vec<String> = ks
                    .iter()
                    .map(|it| {
                        let km = cg.kernel(it.state).unwrap();
                        format!("{}/{}/{}", km.accepted.count_ones(), km.uncertain.len(), km.suffixes.len())
                    })
                    .collect();
                println!("step {i:>3} row {} kernels {:?}", m.chart().last_row().len(), d);
            }
            let t = Instant::now();
            m.fill_next_token_bitmask(&mut row).unwrap();
            best[i] = best[i].min(t.elapsed().as_nanos());
            assert!(m.accept_bytes(&input[w[0]..w[1]]).unwrap());
        }
        kept.push(cg);
    }
    for (i, w) in at.windows(2).enumerate() {
        println!(
            "step {i:>3} {:>9.1} us  before {:?}",
            best[i] as f64 / 1e3,
            String::from_utf8_lossy(&input[w[0]..w[1]])
        );
    }
    let mut s = best.clone();
    s.sort_unstable();
    let pct = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
    println!("p50 {:.1} us  p99 {:.1} us  max {:.1} us", pct(0.5), pct(0.99), pct(1.0));
}
