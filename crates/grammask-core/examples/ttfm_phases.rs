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
//! rules. With `REACH=D`, also how many rules and states a text of at most `D` bytes from the
//! start can reach (an upper bound: a rule edge is taken into its callee and past it after the
//! callee's shortest text, whatever the caller), which is what a build of only the automata the first mask needs
//! (a first mask reads at most the longest token's bytes) would have to make.
use grammask_core::compiler::{Automata, StateId};
use grammask_core::grammar::RuleId;
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

/// (rules, states) of the rules a text of at most `d` bytes from the start reaches (upper bound).
fn reach(a: &Automata, d: usize) -> (usize, usize) {
    let n = a.states().len();
    // dist[s]: fewest bytes from s to a final state of its rule; minlen[r] = dist[start of r].
    // Relaxed in reverse state order until stable (chains are numbered from their start).
    let mut dist = vec![usize::MAX; n];
    let mut minlen = vec![usize::MAX; a.num_rules()];
    for _pass in 0..1000 {
        let mut changed = false;
        for i in (0..n).rev() {
            let s = StateId(i as u32);
            let mut best = if a.state(s).is_final { 0 } else { usize::MAX };
            for e in a.byte_edges(s) {
                best = best.min(dist[e.target.0 as usize].saturating_add(1));
            }
            for &(r, t) in a.rule_edges(s) {
                best = best.min(minlen[r.index()].saturating_add(dist[t.0 as usize]));
            }
            if best < dist[i] {
                dist[i] = best;
                changed = true;
            }
        }
        for r in 0..a.num_rules() {
            let m = dist[a.rule_start(RuleId(r as u32)).0 as usize];
            if m < minlen[r] {
                minlen[r] = m;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // Least depth at which each state is reached; a rule edge leads to its callee's start and to
    // its target at the same depth (breadth-first over depths, 0-1 edges first).
    let mut depth = vec![usize::MAX; n];
    let mut queue = std::collections::VecDeque::new();
    let start = a.rule_start(a.root());
    depth[start.0 as usize] = 0;
    queue.push_back(start);
    while let Some(s) = queue.pop_front() {
        let k = depth[s.0 as usize];
        for &(r, t) in a.rule_edges(s) {
            let callee = a.callee_start(s, r);
            if depth[callee.0 as usize] > k {
                depth[callee.0 as usize] = k;
                queue.push_front(callee);
            }
            let past = k.saturating_add(minlen[r.index()]);
            if past <= d && depth[t.0 as usize] > past {
                depth[t.0 as usize] = past;
                if past == k {
                    queue.push_front(t);
                } else {
                    queue.push_back(t);
                }
            }
        }
        if k < d {
            for e in a.byte_edges(s) {
                if depth[e.target.0 as usize] > k + 1 {
                    depth[e.target.0 as usize] = k + 1;
                    queue.push_back(e.target);
                }
            }
        }
    }
    let mut rules = vec![false; a.num_rules()];
    for (i, st) in a.states().iter().enumerate() {
        if depth[i] != usize::MAX {
            rules[st.rule.index()] = true;
        }
    }
    let states = a.states().iter().filter(|st| rules[st.rule.index()]).count();
    (rules.iter().filter(|&&x| x).count(), states)
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
            if let (Ok(a), Ok(d)) = (&a, std::env::var("REACH").map(|d| d.parse::<usize>().unwrap_or(16))) {
                let (r, k) = reach(a, d);
                let all = a.states().iter().map(|s| s.rule.index()).collect::<std::collections::HashSet<_>>().len();
                println!("  reach {d} bytes: rules {r} of {all}, states {k} of {}", a.states().len());
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
    let [direct, inlined, shape] = grammask_core::compiler::key_set_writes();
    println!(
        "key-set rules: {direct} written directly, generic: {inlined} with an inlined entry, {shape} other shapes"
    );
}
