//! The rule-automata memo shared by compiles ([`RuleMemo`]) on JSON Schemas (`strict_mode=False`,
//! as MaskBench's grammask engine), one build thread, thread CPU time.
//! `cargo run --release --example rule_memo -- [--warm LIST] [--limit BYTES] [--quiet|--check] LIST`:
//! builds every schema of the `--warm` list into the memo first, then per schema of `LIST` (paths,
//! one a line; `MaskBench` files: the `schema` field): its automata without the memo (best of two
//! builds; one with `--check`, which also implies `--quiet`) and with it (once: the memo holds the other schemas' rules, not yet this one's). Checks
//! that both automata are identical (a hash over every state, edge and rule start) and prints one
//! line per schema (unless `--quiet`), the mismatches, the totals and the memo's size.
use grammask_core::compiler::{Automata, RuleMemo, StateId};
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};

#[path = "common/cpu_clock.rs"]
mod cpu_clock;

fn ms() -> f64 {
    cpu_clock::seconds(cpu_clock::THREAD) * 1e3
}

/// A hash of everything the matcher reads from the automata: states (rule, finality), their byte
/// and rule edges, and each rule's start.
fn hash_automata(a: &Automata) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    let mut mix = |w: u64| h = (h ^ w).wrapping_mul(0x0000_0100_0000_01B3);
    for (i, st) in a.states().iter().enumerate() {
        let s = StateId(i as u32);
        mix(u64::from(st.is_final) | u64::from(st.rule.0) << 1);
        for e in a.byte_edges(s) {
            mix(u64::from(e.lo) | u64::from(e.hi) << 8 | u64::from(e.target.0) << 16);
        }
        mix(u64::MAX);
        for &(r, t) in a.rule_edges(s) {
            mix(u64::from(r.0) | u64::from(t.0) << 32);
        }
        mix(u64::MAX - 1);
    }
    for r in 0..a.num_rules() {
        mix(u64::from(a.rule_start(grammask_core::grammar::RuleId(r as u32)).0));
    }
    h
}

#[path = "common/schema_list.rs"]
mod schema_list;
use schema_list::schema_list as schemas;

fn main() {
    let (mut warm, mut list, mut limit, mut quiet) = (None, None, grammask_core::limits::RULE_MEMO_BYTES, false);
    let mut repeat = 2;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--warm" => warm = args.next(),
            "--limit" => limit = args.next().and_then(|n| n.parse().ok()).expect("--limit BYTES"),
            "--quiet" => quiet = true,
            "--check" => (quiet, repeat) = (true, 1),
            _ => list = Some(a),
        }
    }
    let opts = JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() };
    let memo = RuleMemo::new(limit);
    let t = ms();
    for (_, schema) in warm.as_deref().map(schemas).unwrap_or_default() {
        if let Ok(g) = json_schema_to_grammar(&schema, &opts) {
            let _ = Automata::build_shared(&g, 1, Some(&memo));
        }
    }
    println!("warm: {:.1} ms, memo {} entries, {} bytes", ms() - t, memo.len(), memo.memory_size());
    let warm_lookups = memo.lookups();
    let (mut plain_total, mut memo_total, mut n, mut bad) = (0.0, 0.0, 0usize, 0usize);
    let (mut plain_ms, mut memo_ms) = (Vec::new(), Vec::new());
    for (path, schema) in schemas(&list.expect("a list of schema paths")) {
        let Ok(g) = json_schema_to_grammar(&schema, &opts) else { continue };
        let mut best = f64::INFINITY;
        let mut plain = None;
        for _ in 0..repeat {
            let t = ms();
            let a = Automata::build_on(&g, 1);
            best = best.min(ms() - t);
            plain = Some(a);
        }
        let t = ms();
        let shared = Automata::build_shared(&g, 1, Some(&memo));
        let once = ms() - t;
        let (plain, shared) = (plain.expect("built"), shared);
        let same = match (&plain, &shared) {
            (Ok(a), Ok(b)) => a.states().len() == b.states().len() && hash_automata(a) == hash_automata(b),
            (Err(a), Err(b)) => a.to_string() == b.to_string(),
            _ => false,
        };
        if !same {
            bad += 1;
            println!("MISMATCH {path}");
        }
        if plain.is_err() {
            continue;
        }
        n += 1;
        plain_total += best;
        memo_total += once;
        plain_ms.push(best);
        memo_ms.push(once);
        if !quiet {
            println!("{path} plain {best:.3} memo {once:.3} ms");
        }
    }
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1))).copied().unwrap_or(0.0)
    };
    println!(
        "{n} built, {bad} mismatches; plain total {plain_total:.1} p50 {:.3} p90 {:.3} ms; memo total {memo_total:.1} \
         p50 {:.3} p90 {:.3} ms; memo {} entries, {} bytes; lookups (hits, misses) warming {:?}, after {:?}",
        q(&mut plain_ms, 0.5),
        q(&mut plain_ms, 0.9),
        q(&mut memo_ms, 0.5),
        q(&mut memo_ms, 0.9),
        memo.len(),
        memo.memory_size(),
        warm_lookups,
        memo.lookups()
    );
}
