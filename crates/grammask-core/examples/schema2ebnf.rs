//! Prints the EBNF for a JSON Schema file: `schema2ebnf [--compact|--indent N|--lax|--any-order] FILE`.
//! `--lax` sets strict_mode=false. With `--batch`, reads a JSON array of schemas on stdin and prints
//! one JSON line per schema: {"ebnf": ...} or {"error": kind, "message": ...}.
use std::io::Read;

use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};

fn main() {
    let mut opts = JsonSchemaOptions::default();
    let mut file = None;
    let mut batch = false;
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
            _ => file = Some(a),
        }
    }
    if batch {
        let mut input = String::new();
        std::io::stdin().read_to_string(&mut input).expect("stdin");
        let schemas: Vec<serde_json::Value> = serde_json::from_str(&input).expect("a JSON array");
        for s in schemas {
            let text = s.to_string();
            let t0 = std::time::Instant::now();
            let r = json_schema_to_ebnf(&text, &opts);
            let us = t0.elapsed().as_micros();
            let line = match r {
                Ok(g) => serde_json::json!({"ebnf": g, "us": us}),
                Err(e) => serde_json::json!({"error": format!("{:?}", e.kind()), "message": e.to_string(), "us": us}),
            };
            println!("{line}");
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
