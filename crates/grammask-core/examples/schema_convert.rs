//! Converts each JSON Schema of `LIST` (paths, one per line; `MaskBench` files: the `schema`
//! field) with `json_schema_to_grammar` and MaskBench's options (`strict_mode=False`, as
//! `ttfm_phases`), and prints one line per schema: its path and a hash of the grammar's printed
//! text (or the error kind), to check that a change of the converter leaves its output unchanged.
//! `cargo run --release --example schema_convert -- LIST`. For the conversion's instructions
//! alone: `valgrind --tool=callgrind --toggle-collect='*json_schema_to_grammar*'`.
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};

fn main() {
    let list = std::env::args().nth(1).expect("a file listing schema paths");
    let opts = JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() };
    for path in std::fs::read_to_string(list).expect("readable list").lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("readable schema")).expect("JSON");
        let schema = v.get("schema").cloned().unwrap_or(v).to_string();
        match json_schema_to_grammar(&schema, &opts) {
            Ok(g) => {
                // FNV-1a over the printed grammar.
                let h = g
                    .to_string()
                    .bytes()
                    .fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3));
                println!("{path} {h:016x}");
            }
            Err(e) => println!("{path} error {:?}", e.kind()),
        }
    }
}
