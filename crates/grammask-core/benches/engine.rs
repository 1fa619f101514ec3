//! Micro benchmarks (divan) of the two hot paths: compiling a grammar and filling a token mask.
//!
//! `cargo bench -p grammask-core --bench engine` (filter with a trailing name, e.g. `-- mask_warm`).
//! Grammars: the builtin JSON grammar and the EBNF files of `bench/grammars/` (arith: ambiguous and
//! left-recursive; sql; logline). Mask states: the matcher after 0%, 25%, 50%, 75% and 100% of the
//! bytes of `bench/grammars/docs/<grammar>/00.txt`.
//!
//! The vocabulary is Llama 3's, built from `$GRAMMASK_SHARED/tokenizers/llama3/tokenizer.json` (else
//! a `shared/` folder next to the repository or one of its parents), serialized once as
//! `TokenizerInfo` JSON into the system temp dir and loaded back from there. Without that file every
//! benchmark is skipped, with a message.
//!
//! * `compile/*`: EBNF parse, `Automata::build`, and the whole `parse + CompiledGrammar::new` (the
//!   token index is shared, as it is for every grammar compiled against one loaded tokenizer).
//! * `mask_cold`: first mask at a state with a fresh `CompiledGrammar` over a fresh copy of the
//!   vocabulary, so no kernel classification or memoized mask exists yet (the token trie is built in
//!   the untimed setup).
//! * `mask_new_grammar`: first mask with a fresh `CompiledGrammar` on the shared vocabulary, whose
//!   cross-grammar kernel cache is warm: what a server sees for a new grammar after some traffic.
//! * `mask_warm`: the mask at a state already memoized (the steady state of a grammar in use).
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use divan::Bencher;
use grammask_core::builtin::builtin_json_grammar;
use grammask_core::compiler::Automata;
use grammask_core::ebnf::parse_ebnf;
use grammask_core::grammar::Grammar;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use serde_json::Value;

const GRAMMARS: &[&str] = &["json", "arith", "sql", "logline"];
const STATES: &[&str] = &[
    "json@0",
    "json@25",
    "json@50",
    "json@75",
    "json@100",
    "arith@0",
    "arith@25",
    "arith@50",
    "arith@75",
    "arith@100",
    "sql@0",
    "sql@25",
    "sql@50",
    "sql@75",
    "sql@100",
    "logline@0",
    "logline@25",
    "logline@50",
    "logline@75",
    "logline@100",
];

fn main() {
    if vocab().is_none() {
        eprintln!(
            "skipping the grammask-core benchmarks: no llama3 tokenizer.json found \
             (set GRAMMASK_SHARED to the shared data folder)"
        );
        return;
    }
    divan::main();
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("GRAMMASK_SHARED") {
        return Some(PathBuf::from(dir));
    }
    let root = repo_root().canonicalize().ok()?;
    root.ancestors().map(|p| p.join("shared")).find(|p| p.join("tokenizers").is_dir())
}

/// Token strings by id (model vocab plus added tokens) and the ids of added tokens marked special,
/// from a byte-level BPE `tokenizer.json`.
fn encoded_vocab(spec: &Value) -> (Vec<Vec<u8>>, Vec<u32>) {
    let mut pairs: Vec<(u64, String)> = spec["model"]["vocab"]
        .as_object()
        .expect("BPE vocab object")
        .iter()
        .map(|(k, v)| (v.as_u64().expect("token id"), k.clone()))
        .collect();
    let mut special = Vec::new();
    for t in spec["added_tokens"].as_array().into_iter().flatten() {
        let id = t["id"].as_u64().expect("added token id");
        pairs.push((id, t["content"].as_str().expect("added token text").to_string()));
        if t["special"].as_bool() == Some(true) {
            special.push(id as u32);
        }
    }
    let n = pairs.iter().map(|p| p.0 + 1).max().unwrap_or(0) as usize;
    let mut encoded = vec![Vec::new(); n];
    for (id, tok) in pairs {
        encoded[id as usize] = tok.into_bytes();
    }
    (encoded, special)
}

/// The serialized `TokenizerInfo` of Llama 3: read from the temp dir, else made from
/// tokenizer.json and written there.
fn vocab_json(shared: &Path) -> Option<String> {
    let cache = std::env::temp_dir().join("grammask-bench-llama3-tokenizer-info.json");
    if let Ok(text) = std::fs::read_to_string(&cache) {
        return Some(text);
    }
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(shared.join("tokenizers/llama3/tokenizer.json")).ok()?)
            .expect("tokenizer.json is JSON");
    let (encoded, special) = encoded_vocab(&spec);
    let options = VocabularyOptions { special_token_ids: Some(special), ..Default::default() };
    let v = Vocabulary::new(encoded, VocabType::ByteLevel, options).expect("llama3 vocabulary");
    let text = v.to_json();
    // A failed write only costs rebuilding next time.
    let _ = std::fs::write(&cache, &text);
    Some(text)
}

fn vocab() -> Option<&'static Arc<Vocabulary>> {
    static V: OnceLock<Option<Arc<Vocabulary>>> = OnceLock::new();
    V.get_or_init(|| {
        let text = vocab_json(&shared_dir()?)?;
        Some(Arc::new(Vocabulary::from_json(&text).expect("serialized TokenizerInfo loads")))
    })
    .as_ref()
}

fn shared_vocab() -> &'static Arc<Vocabulary> {
    vocab().expect("checked in main")
}

fn grammar_text(name: &str) -> Option<String> {
    (name != "json").then(|| {
        std::fs::read_to_string(repo_root().join(format!("bench/grammars/{name}.ebnf"))).expect("bench grammar file")
    })
}

fn grammar(name: &str) -> Grammar {
    match grammar_text(name) {
        None => builtin_json_grammar(),
        Some(text) => parse_ebnf(&text, "root").expect("bench grammar parses"),
    }
}

/// The first `percent`% of document 00 of `name`, cut at a character boundary.
fn prefix(name: &str, percent: usize) -> Vec<u8> {
    let doc = std::fs::read_to_string(repo_root().join(format!("bench/grammars/docs/{name}/00.txt")))
        .expect("bench document");
    let mut cut = doc.len() * percent / 100;
    while !doc.is_char_boundary(cut) {
        cut -= 1;
    }
    doc.as_bytes()[..cut].to_vec()
}

fn parse_state(arg: &str) -> (&str, usize) {
    let (g, p) = arg.split_once('@').expect("grammar@percent");
    (g, p.parse().expect("percent"))
}

/// A matcher of `compiled` that has consumed `bytes`.
fn matcher_at(compiled: &Arc<CompiledGrammar>, bytes: &[u8]) -> Matcher {
    let mut m = Matcher::new(compiled.clone(), MatcherOptions::default()).expect("matcher");
    assert!(m.accept_bytes(bytes).expect("accept"), "document prefix rejected");
    m
}

/// Keeps the shared token index of the vocabulary alive, so compiles measure the grammar only.
fn pin() -> &'static Arc<CompiledGrammar> {
    static PIN: OnceLock<Arc<CompiledGrammar>> = OnceLock::new();
    PIN.get_or_init(|| Arc::new(CompiledGrammar::new(&grammar("json"), shared_vocab()).expect("compile")))
}

mod compile {
    use super::{grammar, grammar_text, parse_ebnf, pin, shared_vocab, Automata, Bencher, CompiledGrammar, GRAMMARS};

    #[divan::bench(args = GRAMMARS)]
    fn ebnf_parse(bencher: Bencher, name: &str) {
        let Some(text) = grammar_text(name) else {
            // The builtin JSON grammar is parsed once per process; time its text instead.
            bencher.bench(|| parse_ebnf(grammask_core::builtin::JSON_EBNF, "root").expect("parse"));
            return;
        };
        bencher.bench(|| parse_ebnf(divan::black_box(&text), "root").expect("parse"));
    }

    #[divan::bench(args = GRAMMARS)]
    fn automata_build(bencher: Bencher, name: &str) {
        let g = grammar(name);
        bencher.bench(|| Automata::build(divan::black_box(&g)).expect("build"));
    }

    #[divan::bench(args = GRAMMARS)]
    fn parse_and_compile(bencher: Bencher, name: &str) {
        let text = grammar_text(name);
        pin();
        bencher.bench(|| {
            let g = match &text {
                None => parse_ebnf(grammask_core::builtin::JSON_EBNF, "root").expect("parse"),
                Some(t) => parse_ebnf(t, "root").expect("parse"),
            };
            CompiledGrammar::new(&g, shared_vocab()).expect("compile")
        });
    }
}

#[divan::bench(args = STATES, sample_count = 20, sample_size = 1)]
fn mask_cold(bencher: Bencher, state: &str) {
    let (name, percent) = parse_state(state);
    let (g, bytes) = (grammar(name), prefix(name, percent));
    let mut row = vec![0u32; shared_vocab().vocab_size().div_ceil(32)];
    bencher
        .with_inputs(|| {
            // A fresh vocabulary Arc gets a fresh token index: no cached kernels anywhere.
            let v = Arc::new(Vocabulary::clone(shared_vocab()));
            let compiled = Arc::new(CompiledGrammar::new(&g, &v).expect("compile"));
            matcher_at(&compiled, &bytes)
        })
        .bench_local_refs(|m| m.fill_next_token_bitmask(&mut row).expect("mask"));
}

#[divan::bench(args = STATES, sample_count = 50, sample_size = 1)]
fn mask_new_grammar(bencher: Bencher, state: &str) {
    let (name, percent) = parse_state(state);
    let (g, bytes) = (grammar(name), prefix(name, percent));
    let mut row = vec![0u32; shared_vocab().vocab_size().div_ceil(32)];
    // Warm the shared kernel cache of the vocabulary with this state once.
    let warmup = Arc::new(CompiledGrammar::new(&g, shared_vocab()).expect("compile"));
    matcher_at(&warmup, &bytes).fill_next_token_bitmask(&mut row).expect("mask");
    bencher
        .with_inputs(|| {
            let compiled = Arc::new(CompiledGrammar::new(&g, shared_vocab()).expect("compile"));
            matcher_at(&compiled, &bytes)
        })
        .bench_local_refs(|m| m.fill_next_token_bitmask(&mut row).expect("mask"));
    drop(warmup);
}

#[divan::bench(args = STATES)]
fn mask_warm(bencher: Bencher, state: &str) {
    let (name, percent) = parse_state(state);
    let compiled = Arc::new(CompiledGrammar::new(&grammar(name), shared_vocab()).expect("compile"));
    let mut m = matcher_at(&compiled, &prefix(name, percent));
    let mut row = vec![0u32; shared_vocab().vocab_size().div_ceil(32)];
    m.fill_next_token_bitmask(&mut row).expect("mask");
    bencher.bench_local(|| m.fill_next_token_bitmask(divan::black_box(&mut row)).expect("mask"));
}
