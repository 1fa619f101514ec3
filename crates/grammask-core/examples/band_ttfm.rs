//! Time to first mask over a band of JSON Schemas after a warm phase, as MaskBench's grammask
//! engine runs it (`strict_mode=False`, one build thread, a `GrammarCompiler` without cache per
//! schema): conversion, the compile (the vocabulary's shared rule automata filled by the warm
//! schemas) and the first mask.
//! `band_ttfm VOCAB.json WARM_LIST BAND_LIST`: lists of schema paths, one a line (`MaskBench`
//! files: the `schema` field); `VOCAB.json` from `TokenizerInfo.serialize_json()`. Prints the
//! band's thread CPU time. The band runs inside `band`, for instruction counts of it alone:
//! `valgrind --tool=callgrind --toggle-collect='band_ttfm::band' band_ttfm ...`.
use grammask_core::grammar_compiler::GrammarCompiler;
use grammask_core::json_schema::JsonSchemaOptions;
use grammask_core::matcher::{Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

#[path = "common/cpu_clock.rs"]
mod cpu_clock;

#[path = "common/schema_list.rs"]
mod schema_list;

/// The schema texts of a list file.
fn schemas(list: &str) -> Vec<String> {
    schema_list::schema_list(list).into_iter().map(|(_, s)| s).collect()
}

/// Compiles each schema and fills its first mask; returns the number of masks filled.
#[inline(never)]
fn band(schemas: &[String], vocab: &Arc<Vocabulary>, opts: &JsonSchemaOptions) -> usize {
    let mut n = 0;
    for schema in schemas {
        let compiler = GrammarCompiler::new(vocab, false, -1).with_max_threads(1);
        let Ok(cg) = compiler.compile_json_schema(schema, opts) else { continue };
        let mut m = Matcher::new(cg, MatcherOptions::default()).expect("matcher");
        n += usize::from(m.compute_mask().expect("mask").count_ones() > 0);
    }
    n
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let opts = JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() };
    // The per-vocabulary token index is built once and kept alive, as a server's compiler does.
    let keep = GrammarCompiler::new(&vocab, false, -1).with_max_threads(1);
    for schema in schemas(&args[2]) {
        let _ = keep.compile_json_schema(&schema, &opts);
    }
    let list = schemas(&args[3]);
    let t = cpu_clock::seconds(cpu_clock::THREAD);
    let n = band(&list, &vocab, &opts);
    let ms = (cpu_clock::seconds(cpu_clock::THREAD) - t) * 1e3;
    println!("band: {n} of {} schemas, {ms:.1} ms thread CPU", list.len());
}
