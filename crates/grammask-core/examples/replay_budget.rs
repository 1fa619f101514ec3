//! Replays sampled token sequences with and without a budget, timing each mask fill in turn on
//! two compilations of each schema, each side with a vocabulary of its own (so neither pays the
//! other's cold per-vocabulary caches, e.g. the shared kernels of text masks):
//! `replay_budget VOCAB.json TRACES.json [BUDGET] [budget]` (TRACES.json from
//! `bench/sample_outputs.py --traces`, VOCAB.json from `TokenizerInfo.serialize_json()`; a last
//! argument `budget` times the budgeted fills only). With `REPLAY_SLOW=MS` set, prints each
//! budgeted fill slower than `MS` milliseconds (schema, run, step, tokens left, and the same
//! step's unbudgeted fill); with `REPLAY_ONLY=NAME[,NAME...]`, replays only the schemas whose
//! file name contains one of the `NAME`s. Times are this thread's CPU time. Prints a hash of
//! every budgeted mask (`masks ...`): builds that fill the same masks print the same hash. With
//! `REPLAY_CENSUS=1` and both sides, also how many budgeted masks equal the unbudgeted one
//! (`unbound ...`: the budget removed no token) and their time, and how many schemas' grammars
//! have a finite cost ceiling (`Completion::ceiling`: limits at or above it take no walk), the
//! budgeted fills split by what `Budget::restrict` did (no walk, a walk of a state new to the
//! memo, a walk of a state whose entry did not answer its limit; `WalkStats::fresh_walks`,
//! `stale_walks`) and the schemas with most fills at or above the budgeted p99; off by
//! default, as its copies and compares of each row touch the caches the fills use.
#[path = "common/cpu_clock.rs"]
mod cpu_clock;

use grammask_core::grammar_compiler::GrammarCompiler;
use grammask_core::json_schema::JsonSchemaOptions;
use grammask_core::matcher::{Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The `q`th percentile of `v` (seconds) in microseconds.
fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * q / 100.0).round() as usize] * 1e6
}

/// One side of the replay: its compiler, its matcher options and the times of its fills.
struct Side {
    name: &'static str,
    compiler: GrammarCompiler,
    max_tokens: Option<usize>,
    times: Vec<f64>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab_json = std::fs::read_to_string(&args[1]).unwrap();
    let vocab = Arc::new(Vocabulary::from_json(&vocab_json).unwrap());
    let cases: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let budget: usize = args.get(3).map_or(384, |r| r.parse().unwrap());
    let only_budget = args.get(4).is_some_and(|s| s == "budget");
    let slow_ms: Option<f64> = std::env::var("REPLAY_SLOW").ok().map(|s| s.parse().unwrap());
    let only: Option<Vec<String>> =
        std::env::var("REPLAY_ONLY").ok().map(|s| s.split(',').map(str::to_string).collect());
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    // PERF: one shared vocabulary made the side that fills first pay the per-vocabulary caches'
    // cold cost (search_hotels steps 1-8: ~0.9 ms budgeted against 0.02 ms unbudgeted).
    let side = |name, max_tokens| Side {
        name,
        compiler: GrammarCompiler::new(&Arc::new(Vocabulary::from_json(&vocab_json).unwrap()), false, -1),
        max_tokens,
        times: Vec::new(),
    };
    let mut masks = std::collections::hash_map::DefaultHasher::new();
    let mut sides = vec![side("budget", Some(budget))];
    // Budgeted fills whose mask equals the unbudgeted one: count, their budgeted time; schemas
    // with a finite ceiling, schemas.
    let (mut unbound, mut ceilings, mut schemas) = (Vec::new(), 0usize, 0usize);
    // Census: each budgeted fill's time, walk kind (0 none, 1 fresh state, 2 stale entry),
    // whether the budget removed no token, and its schema.
    let mut kinds: Vec<(f64, u8, bool, String)> = Vec::new();
    // Census of the walks: each walking fill's time, `budget::last_walk` and whether it bound.
    let mut walk_kinds: Vec<(f64, usize, bool)> = Vec::new();
    let census = std::env::var_os("REPLAY_CENSUS").is_some() && !only_budget;
    if !only_budget {
        sides.push(side("nobudget", None));
    }
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("");
        if only.as_ref().is_some_and(|o| !o.iter().any(|n| name.contains(n.as_str()))) {
            continue;
        }
        let schema = case["schema"].to_string();
        let grammars: Vec<_> = sides.iter().map(|s| s.compiler.compile_json_schema(&schema, &opts).unwrap()).collect();
        schemas += 1;
        ceilings += usize::from(grammars[0].completion().ceiling() < grammask_core::budget::INF);
        for (r, run) in case["runs"].as_array().unwrap().iter().enumerate() {
            let ids: Vec<u32> = run.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
            let mut matchers: Vec<Matcher> = sides
                .iter()
                .zip(&grammars)
                .map(|(s, g)| {
                    Matcher::new(g.clone(), MatcherOptions { max_tokens: s.max_tokens, ..Default::default() }).unwrap()
                })
                .collect();
            let mut row = vec![0u32; vocab.vocab_size().div_ceil(32)];
            let mut budgeted_row = row.clone();
            for (i, &t) in ids.iter().enumerate() {
                // Each side's fill in turn (as a binding fills a bitmask row), then each side
                // accepts the sampled token.
                let walks = |g: &grammask_core::matcher::CompiledGrammar| {
                    let w = g.completion().walk_stats();
                    (w.fresh_walks, w.stale_walks)
                };
                let before = walks(&grammars[0]);
                for (k, (s, m)) in sides.iter_mut().zip(&mut matchers).enumerate() {
                    let t0 = cpu_clock::seconds(cpu_clock::THREAD);
                    m.fill_next_token_bitmask(&mut row).unwrap();
                    s.times.push(cpu_clock::seconds(cpu_clock::THREAD) - t0);
                    if k == 0 {
                        row.hash(&mut masks);
                        if census {
                            budgeted_row.copy_from_slice(&row);
                        }
                    }
                }
                if census && budgeted_row == row {
                    unbound.push(sides[0].times.last().copied().unwrap_or(0.0));
                }
                if census {
                    let after = walks(&grammars[0]);
                    let kind = if after.0 > before.0 { 1 } else { 2 * u8::from(after.1 > before.1) };
                    let dt = sides[0].times.last().copied().unwrap_or(0.0);
                    kinds.push((dt, kind, budgeted_row == row, name.to_string()));
                    if kind != 0 {
                        walk_kinds.push((dt, grammask_core::budget::last_walk(), budgeted_row == row));
                    }
                }
                let dt = sides[0].times.last().copied().unwrap_or(0.0);
                if slow_ms.is_some_and(|ms| dt * 1e3 > ms) {
                    let free = sides.get(1).and_then(|s| s.times.last()).map_or(f64::NAN, |t| t * 1e3);
                    println!(
                        "slow {:.2} ms (unbudgeted {free:.2} ms) {name} run {r} step {i} left {}",
                        dt * 1e3,
                        budget - i
                    );
                }
                if i + 1 < ids.len() {
                    for m in &mut matchers {
                        assert!(m.accept_token(t).unwrap());
                    }
                }
            }
        }
    }
    println!("masks {:016x}", masks.finish());
    if census {
        let total: f64 = sides[0].times.iter().sum();
        let p99 = pct(&mut sides[0].times, 99.0) / 1e6;
        let tail = sides[0].times.iter().filter(|&&t| t >= p99).count();
        println!(
            "unbound {} of {} fills, {:.1} of {:.1} ms budgeted, {} of the {tail} at or above the p99; \
             ceilings {ceilings} of {schemas} schemas",
            unbound.len(),
            sides[0].times.len(),
            unbound.iter().sum::<f64>() * 1e3,
            total * 1e3,
            unbound.iter().filter(|&&t| t >= p99).count()
        );
    }
    if census {
        let p99 = pct(&mut sides[0].times.clone(), 99.0) / 1e6;
        let mut by = std::collections::BTreeMap::new();
        let mut names: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for (t, kind, same, name) in &kinds {
            let e = by.entry((*kind, *same)).or_insert((0usize, 0usize, 0.0f64));
            e.0 += 1;
            e.1 += usize::from(*t >= p99);
            e.2 += t * 1e3;
            if *t >= p99 {
                *names.entry(name).or_default() += 1;
            }
        }
        for ((kind, same), (n, tail, ms)) in by {
            let kind = ["no walk", "fresh state", "stale entry"][kind as usize];
            println!("census {kind:12} unbound {same:5}: {n} fills, {ms:.1} ms, {tail} at or above the p99");
        }
        // Walking fills by `limit - now` and the walks made.
        let mut by = std::collections::BTreeMap::new();
        for &(t, w, same) in &walk_kinds {
            let d = w >> 8;
            let band = [0, 1, 7, 31, 101].iter().rposition(|&b| d >= b).unwrap();
            let e = by.entry((band, w & 0xff, same)).or_insert((0usize, 0usize, 0.0f64));
            e.0 += 1;
            e.1 += usize::from(t >= p99);
            e.2 += t * 1e3;
        }
        for ((band, w, same), (n, tail, ms)) in by {
            let band = ["0", "1-6", "7-30", "31-100", ">100"][band];
            let w: Vec<&str> = [(1, "fit-near"), (2, "capped"), (4, "fit-limit"), (8, "over")]
                .iter()
                .filter(|b| w & b.0 != 0)
                .map(|b| b.1)
                .collect();
            println!(
                "walks limit-now {band:>6} {:28} unbound {same:5}: {n} fills, {ms:.1} ms, {tail} at or above the p99",
                w.join("+")
            );
        }
        let mut names: Vec<_> = names.into_iter().collect();
        names.sort_by_key(|e| std::cmp::Reverse(e.1));
        for (name, n) in names.iter().take(15) {
            println!("p99 fills {n:5} {name}");
        }
    }
    for s in &mut sides {
        let total: f64 = s.times.iter().sum();
        let n = s.times.len();
        println!(
            "{:8} n {n} p50 {:.2} p90 {:.2} p99 {:.1} us, max {:.2} ms, total {:.1} ms",
            s.name,
            pct(&mut s.times, 50.0),
            pct(&mut s.times, 90.0),
            pct(&mut s.times, 99.0),
            pct(&mut s.times, 100.0) / 1e3,
            total * 1e3
        );
    }
}
