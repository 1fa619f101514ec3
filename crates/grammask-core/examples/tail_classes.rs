//! Classifies every mask fill of a MaskBench sample by what it did, to find which kinds of step
//! hold the p99 / p99.9 tail (issue 18).
//! `cargo run --release --example tail_classes -- VOCAB.json LIST [MIN_US]`
//! (`python bench/tail_states.py --limit 300 --seed 1818 --dump DIR` writes DIR/vocab.json and
//! DIR/list.txt.) LIST names one path stem a line (`STEM.schema.json`, documents `STEM.N.txt` / `STEM.N.at`, as
//! `tail_fills`'s `WARM`), in the sample's order; each schema is compiled and filled along its
//! documents as `bench/tail_states.py` does, in thread CPU time. Each fill is put in one class:
//! `memo` (the row's mask was memoized), `new:PATH` (it classified new kernels; PATH the first
//! one's path) or `cached` (every kernel cached: the union and the suffix checks), and the
//! classes' shares of the fills over p99 and p99.9 are printed, with the slow fills over `MIN_US`
//! (default 100) and their kernel items' rules.
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::mask::kernel_items;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::collections::BTreeMap;
use std::sync::Arc;

#[path = "common/cpu_clock.rs"]
mod cpu_clock;
#[path = "common/kernel_path.rs"]
mod kernel_path;

fn micros() -> f64 {
    cpu_clock::seconds(cpu_clock::THREAD) * 1e6
}

struct Fill {
    us: f64,
    class: String,
    stem: usize,
    doc: usize,
    pos: usize,
    detail: String,
}

/// A short description of a kernel state: its rule (digits folded), the bytes it reads and
/// the rules it calls.
fn state_kind(a: &grammask_core::compiler::Automata, s: grammask_core::compiler::StateId) -> String {
    let fold = |r: &str| r.chars().map(|c| if c.is_ascii_digit() { 'N' } else { c }).collect::<String>();
    let mut bytes = String::new();
    for e in a.byte_edges(s) {
        let show = |b: u8| if b.is_ascii_graphic() { (b as char).to_string() } else { format!("\\x{b:02x}") };
        if e.lo == e.hi {
            bytes += &show(e.lo);
        } else {
            bytes.push('[');
            bytes += &show(e.lo);
            bytes.push('-');
            bytes += &show(e.hi);
            bytes.push(']');
        }
        if bytes.len() > 24 {
            bytes += "..";
            break;
        }
    }
    let mut calls: Vec<String> = a.rule_edges(s).iter().map(|(r, _)| fold(a.rule_name(*r))).collect();
    calls.dedup();
    calls.truncate(3);
    let f = if a.state(s).is_final { " final" } else { "" };
    format!("{} bytes {bytes} calls {}{f}", fold(a.rule_name(a.state(s).rule)), calls.join(","))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let list = std::fs::read_to_string(&args[2]).unwrap();
    let min_us: f64 = args.get(3).map_or(100.0, |s| s.parse().unwrap());
    let _index = grammask_core::token_index::TokenIndex::for_vocab(&vocab);
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    // The per-vocabulary index is built by the first compile (as the bench does).
    let g = json_schema_to_grammar(r#"{"type": "object", "properties": {"a": {"type": "string"}}}"#, &opts).unwrap();
    CompiledGrammar::new(&g, &vocab).unwrap();
    let stems: Vec<&str> = list.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut fills: Vec<Fill> = Vec::new();
    // `PER_KERNEL=1`: each new kernel is classified (and timed) alone before its fill.
    let per_kernel = std::env::var("PER_KERNEL").is_ok();
    let mut kernels: Vec<(f64, String, usize, usize)> = Vec::new();
    // Class-body slices reserved at compile that a fill built before the compile's thread did.
    let mut built_in_fills: Vec<(usize, usize)> = Vec::new();
    for (si, stem) in stems.iter().enumerate() {
        let Ok(schema) = std::fs::read_to_string(format!("{stem}.schema.json")) else { continue };
        let Ok(g) = json_schema_to_grammar(&schema, &opts) else { continue };
        let Ok(cg) = CompiledGrammar::new(&g, &vocab) else { continue };
        let cg = Arc::new(cg);
        if Matcher::new(cg.clone(), MatcherOptions::default()).and_then(|mut m| m.compute_mask().map(drop)).is_err() {
            continue;
        }
        for doc in 0.. {
            let (Ok(input), Ok(at)) =
                (std::fs::read(format!("{stem}.{doc}.txt")), std::fs::read_to_string(format!("{stem}.{doc}.at")))
            else {
                break;
            };
            let mut at: Vec<usize> = at.lines().map(|l| l.trim().parse().unwrap()).collect();
            at.push(input.len());
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut pos = 0;
            loop {
                let hit = m.memo_lookup().is_hit();
                if per_kernel && !hit {
                    let a = cg.automata();
                    for it in kernel_items(a, m.chart()) {
                        let before = cg.kernel_stats();
                        let t = micros();
                        let Ok(km) = cg.kernel(it.state) else { break };
                        let us = micros() - t;
                        let path = kernel_path::path(&before, &cg.kernel_stats());
                        if path != "cached" {
                            kernels.push((
                                us,
                                format!("{path:9} {} (state {})", state_kind(a, it.state), it.state.0),
                                km.uncertain.len(),
                                si,
                            ));
                        }
                    }
                }
                let before = cg.kernel_stats();
                let t = micros();
                if m.compute_mask().is_err() {
                    break;
                }
                let us = micros() - t;
                let after = cg.kernel_stats();
                let path = kernel_path::path(&before, &after);
                let class = if hit {
                    "memo".to_string()
                } else if path == "cached" {
                    "cached".to_string()
                } else {
                    format!("new:{path}")
                };
                let mut detail = String::new();
                if us > min_us {
                    let a = cg.automata();
                    let items = kernel_items(a, m.chart());
                    let mut rules: BTreeMap<&str, usize> = BTreeMap::new();
                    let mut unc = 0;
                    for it in &items {
                        *rules.entry(a.rule_name(a.state(it.state).rule)).or_default() += 1;
                        unc += cg.kernel(it.state).map_or(0, |k| k.uncertain.len());
                    }
                    let w = at[pos];
                    let before = String::from_utf8_lossy(&input[w.saturating_sub(30)..w]);
                    let rules: Vec<String> = rules.iter().take(6).map(|(r, n)| format!("{r}x{n}")).collect();
                    detail =
                        format!("kernels {} uncertain {unc} after {before:?} rules {}", items.len(), rules.join(" "));
                }
                fills.push(Fill { us, class, stem: si, doc, pos, detail });
                if pos + 1 >= at.len() {
                    break;
                }
                if !m.accept_bytes(&input[at[pos]..at[pos + 1]]).unwrap_or(false) {
                    break;
                }
                pos += 1;
            }
        }
        if cg.class_bodies_built_in_fills() > 0 {
            built_in_fills.push((si, cg.class_bodies_built_in_fills()));
        }
    }
    let unbuilt: Vec<String> =
        built_in_fills.iter().map(|&(s, n)| format!("{} {n}", stems[s].rsplit('/').next().unwrap())).collect();
    let total: usize = built_in_fills.iter().map(|f| f.1).sum();
    println!("class-body slices a fill built before the compile's thread: {total} ({})", unbuilt.join(", "));
    let mut times: Vec<f64> = fills.iter().map(|f| f.us).collect();
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((times.len() - 1) as f64 * p / 100.0).round() as usize];
    println!(
        "{} fills: p50 {:.1} p95 {:.1} p99 {:.1} p99.9 {:.1} max {:.1} µs",
        times.len(),
        pct(50.0),
        pct(95.0),
        pct(99.0),
        pct(99.9),
        pct(100.0)
    );
    let over = |t: f64| times.iter().filter(|&&u| u > t).count();
    println!(
        "total {:.1} ms; fills over 100 µs: {}, over 300 µs: {}",
        times.iter().sum::<f64>() / 1000.0,
        over(100.0),
        over(300.0)
    );
    for (lo, hi) in [(pct(99.0) * 0.5, f64::MAX), (pct(99.0), f64::MAX), (pct(99.9), f64::MAX), (100.0, 1000.0)] {
        let mut by: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
        let mut n = 0;
        for f in fills.iter().filter(|f| f.us >= lo && f.us < hi) {
            let e = by.entry(&f.class).or_default();
            e.0 += 1;
            e.1 += f.us;
            n += 1;
        }
        let hi = if hi.is_finite() && hi < 1e300 { format!("{hi:.0}") } else { "inf".to_string() };
        println!("fills in [{lo:.0}, {hi}) µs: {n}");
        let mut v: Vec<_> = by.into_iter().collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1 .0));
        for (c, (k, s)) in v {
            println!("  {c:16} {k:6} fills  {s:8.0} µs");
        }
    }
    let mut per_stem: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    for f in fills.iter().filter(|f| f.us >= pct(99.0)) {
        let e = per_stem.entry(f.stem).or_default();
        e.0 += 1;
        e.1 += usize::from(f.class == "cached");
    }
    let mut v: Vec<_> = per_stem.into_iter().collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1 .0));
    println!("schemas with the most fills over p99 (fills, of them cached):");
    for (s, (n, c)) in v.iter().take(25) {
        println!("  {n:5} {c:5}  {}", stems[*s].rsplit('/').next().unwrap());
    }
    if per_kernel {
        for lo in [50.0, 100.0, 300.0] {
            let mut by: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
            for k in kernels.iter().filter(|k| k.0 >= lo) {
                let e = by.entry(k.1.split(" (state").next().unwrap()).or_default();
                e.0 += 1;
                e.1 += k.0;
            }
            let mut v: Vec<_> = by.into_iter().collect();
            v.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
            let n = kernels.iter().filter(|k| k.0 >= lo).count();
            println!("new kernels over {lo} µs: {n} (of {}), by kind (count, total µs):", kernels.len());
            for (c, (k, s)) in v.iter().take(40) {
                println!("  {k:5} {s:8.0}  {c}");
            }
        }
    }
    if per_kernel {
        println!("new kernels over 100 µs:");
        for k in kernels.iter().filter(|k| k.0 >= 100.0) {
            println!("  {:8.0} {} uncertain {}  {}", k.0, stems[k.3].rsplit('/').next().unwrap(), k.2, k.1);
        }
    }
    println!("slow fills:");
    for f in fills.iter().filter(|f| f.us > min_us) {
        println!(
            "  {:8.0} {:14} {} doc {} token {}  {}",
            f.us,
            f.class,
            stems[f.stem].rsplit('/').next().unwrap(),
            f.doc,
            f.pos,
            f.detail
        );
    }
}
