//! A first walk along one output, as `bench/structural_tag_bench.py` times it: a warm-up grammar
//! compiled and walked (the vocabulary's indexes and cross-grammar cache), the grammar compiled
//! `REPEAT` times (default 3), then one matcher on the last compile fills a bitmask row before
//! each token. Prints each step's wall time (with `STEPS` set; `FAULTS` adds its minor page
//! faults) and the p50/p99/max; `AGAIN` reports a second walk, on a fresh compile, instead.
//! `cargo run --release --example profile_walk -- VOCAB.json WARM.ebnf WARM_IDS GRAMMAR.ebnf IDS [REPEAT]`
//! (VOCAB.json from `TokenizerInfo.serialize_json()`; the ids files: token ids separated by
//! spaces). Under callgrind, count the walk alone with `--toggle-collect=*measured_walk*`.
use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

fn read_ids(path: &str) -> Vec<u32> {
    std::fs::read_to_string(path).unwrap().split_whitespace().map(|s| s.parse().unwrap()).collect()
}

/// Nanoseconds since the first call (wall time: on a shared machine compare instruction counts).
fn elapsed_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

/// Minor page faults of the process so far (`/proc/self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    after.split_whitespace().nth(7).and_then(|f| f.parse().ok()).unwrap_or(0)
}

/// Fills a row before each token of `ids` and accepts it; returns each fill's nanoseconds and
/// minor page faults (counted only with `FAULTS` set).
#[inline(never)]
fn walk(m: &mut Matcher, row: &mut [u32], ids: &[u32]) -> Vec<(u64, u64)> {
    let faults = std::env::var("FAULTS").is_ok();
    let mut steps = Vec::with_capacity(ids.len());
    for &t in ids {
        let f0 = if faults { minor_faults() } else { 0 };
        let t0 = elapsed_ns();
        m.fill_next_token_bitmask(row).unwrap();
        let ns = elapsed_ns() - t0;
        steps.push((ns, if faults { minor_faults() - f0 } else { 0 }));
        assert!(m.accept_token(t).unwrap(), "token {t} rejected");
    }
    steps
}

/// The measured walk (the warm-up's is not): callgrind's `--toggle-collect` target.
#[inline(never)]
fn measured_walk(m: &mut Matcher, row: &mut [u32], ids: &[u32]) -> Vec<(u64, u64)> {
    walk(m, row, ids)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let warm = parse_ebnf(&std::fs::read_to_string(&args[2]).unwrap(), "root").unwrap();
    let g = parse_ebnf(&std::fs::read_to_string(&args[4]).unwrap(), "root").unwrap();
    let ids = read_ids(&args[5]);
    let repeat: usize = args.get(6).map_or(3, |s| s.parse().unwrap());
    let mut row = vec![0u32; vocab.vocab_size().div_ceil(32)];
    let warm = Arc::new(CompiledGrammar::new(&warm, &vocab).unwrap());
    let mut wm = Matcher::new(warm, MatcherOptions::default()).unwrap();
    walk(&mut wm, &mut row, &read_ids(&args[3]));
    let mut cg = None;
    for _ in 0..repeat {
        cg = Some(Arc::new(CompiledGrammar::new(&g, &vocab).unwrap()));
    }
    let mut m = Matcher::new(cg.unwrap(), MatcherOptions::default()).unwrap();
    let mut steps = measured_walk(&mut m, &mut row, &ids);
    if std::env::var("AGAIN").is_ok() {
        // Same work on a fresh compile, right after: what the first walk's memory state costs.
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
        steps = walk(&mut m, &mut row, &ids);
    }
    if std::env::var("STEPS").is_ok() {
        for (i, (ns, faults)) in steps.iter().enumerate() {
            println!("step {i:>3} {:>8.1} µs {faults:>3} faults", *ns as f64 / 1e3);
        }
    }
    let mut s: Vec<u64> = steps.iter().map(|s| s.0).collect();
    s.sort_unstable();
    // numpy's percentile (linear interpolation), as the bench reports.
    let pct = |p: f64| {
        let x = (s.len() - 1) as f64 * p;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        (s[lo] as f64 + (s[hi] as f64 - s[lo] as f64) * (x - lo as f64)) / 1e3
    };
    println!("steps {}: p50 {:.1} µs p99 {:.1} µs max {:.1} µs", s.len(), pct(0.5), pct(0.99), pct(1.0));
}
