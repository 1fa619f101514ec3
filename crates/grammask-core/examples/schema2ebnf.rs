//! Prints the EBNF for a JSON Schema file: `schema2ebnf [--compact|--indent N|--lax|--any-order] FILE`.
//! `--lax` sets strict_mode=false. With `--batch`, reads a JSON array of schemas on stdin and prints
//! one JSON line per schema: {"ebnf": ...} or {"error": kind, "message": ...}, with the conversion
//! time in microseconds ("us"); `--stats` prints only a summary (count, errors, p50/p90/p99/max).
use std::io::Read;

use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};

fn main() {
    let mut opts = JsonSchemaOptions::default();
    let mut file = None;
    let mut batch = false;
    let mut stats = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--compact" => opts.any_whitespace = false,
            "--indent" => {
                opts.any_whitespace = false;
                opts.indent = args.next().and_then(|n| n.parse().ok());
            }
            "--lax" => opts.strict_mode = false,
            "--any-order" => opts.any_order = true,
            "--batch" => batch = true,
            "--stats" => {
                batch = true;
                stats = true;
            }
            _ => file = Some(a),
        }
    }
    if batch {
        let mut input = String::new();
        std::io::stdin().read_to_string(&mut input).expect("stdin");
        let schemas: Vec<serde_json::Value> = serde_json::from_str(&input).expect("a JSON array");
        let mut times: Vec<u128> = Vec::new();
        let mut errors = 0usize;
        for s in schemas {
            let text = s.to_string();
            let t0 = std::time::Instant::now();
            let r = json_schema_to_ebnf(&text, &opts);
            let us = t0.elapsed().as_micros();
            times.push(us);
            errors += usize::from(r.is_err());
            if stats {
                continue;
            }
            let line = match r {
                Ok(g) => serde_json::json!({"ebnf": g, "us": us}),
                Err(e) => serde_json::json!({"error": format!("{:?}", e.kind()), "message": e.to_string(), "us": us}),
            };
            println!("{line}");
        }
        if stats {
            times.sort_unstable();
            let q = |f: f64| {
                times.get(((times.len() as f64 * f) as usize).min(times.len().saturating_sub(1))).copied().unwrap_or(0)
            };
            println!(
                "schemas {} errors {} conversion p50 {:.3} ms p90 {:.3} ms p99 {:.3} ms max {:.3} ms",
                times.len(),
                errors,
                q(0.5) as f64 / 1e3,
                q(0.9) as f64 / 1e3,
                q(0.99) as f64 / 1e3,
                times.last().copied().unwrap_or(0) as f64 / 1e3
            );
        }
        return;
    }
    let text = match file {
        Some(f) => std::fs::read_to_string(f).expect("readable file"),
        None => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).expect("stdin");
            s
        }
    };
    match json_schema_to_ebnf(&text, &opts) {
        Ok(g) => print!("{g}"),
        Err(e) => {
            eprintln!("error ({:?}): {e}", e.kind());
            std::process::exit(1);
        }
    }
}
