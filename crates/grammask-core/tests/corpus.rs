//! The shared grammar corpus (testdata/grammars/*.json, format in its README.md), run from Rust:
//! every `accept` string is accepted as a whole (fed as one byte string and, separately, one byte
//! token at a time, then `is_completed`), every `reject` string is not, and the printed grammar
//! parses back to a grammar with the same verdicts. `error` cases must fail with the expected
//! message substring. All failures are collected and reported together.

use grammask_core::ebnf::{parse_ebnf, parse_iso_ebnf};
use grammask_core::grammar::Grammar;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::path::PathBuf;
use std::sync::Arc;

/// The 256 single bytes (id = byte value) and `</s>` (id 256, the stop token).
fn byte_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    toks.push(b"</s>".to_vec());
    let opts = VocabularyOptions { stop_token_ids: Some(vec![256]), ..Default::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

fn corpus_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/grammars");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Whole-string acceptance, checked two ways that must agree.
fn accepts(compiled: &Arc<CompiledGrammar>, text: &[u8]) -> Result<bool, String> {
    let mut m = Matcher::new(compiled.clone(), MatcherOptions::default()).map_err(|e| e.to_string())?;
    let whole = m.accept_bytes(text).map_err(|e| e.to_string())? && m.is_completed();
    let mut t = Matcher::new(compiled.clone(), MatcherOptions::default()).map_err(|e| e.to_string())?;
    let mut by_token = true;
    for &b in text {
        if !t.accept_token(u32::from(b)).map_err(|e| e.to_string())? {
            by_token = false;
            break;
        }
    }
    let by_token = by_token && t.is_completed();
    if whole != by_token {
        return Err(format!("accept_bytes says {whole}, byte tokens say {by_token}"));
    }
    if whole {
        // A complete sentence takes the stop token.
        if !m.accept_token(256).map_err(|e| e.to_string())? || !m.is_terminated() {
            return Err("complete, but the stop token was refused".into());
        }
    }
    Ok(whole)
}

fn check_strings(
    name: &str,
    what: &str,
    compiled: &Arc<CompiledGrammar>,
    case: &serde_json::Value,
    failures: &mut Vec<String>,
) {
    for (key, want) in [("accept", true), ("reject", false)] {
        let Some(list) = case.get(key).and_then(|v| v.as_array()) else {
            continue;
        };
        for s in list {
            let s = s.as_str().unwrap();
            match accepts(compiled, s.as_bytes()) {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!("{name} ({what}): {s:?} accepted={got}, expected {want}")),
                Err(e) => failures.push(format!("{name} ({what}): {s:?}: {e}")),
            }
        }
    }
}

#[test]
fn corpus_accepts_and_rejects() {
    let vocab = byte_vocab();
    let files = corpus_files();
    assert!(files.len() >= 40, "only {} corpus files", files.len());
    let mut failures: Vec<String> = Vec::new();
    let mut checked = 0usize;
    for path in files {
        let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = case["name"].as_str().unwrap().to_owned();
        assert_eq!(Some(name.as_str()), path.file_stem().and_then(|s| s.to_str()), "name = file name");
        let text = case["grammar"].as_str().unwrap();
        let root = case["root"].as_str().unwrap();
        let parsed: Result<Grammar, _> = match case["dialect"].as_str().unwrap() {
            "xgrammar" => parse_ebnf(text, root),
            "iso" => parse_iso_ebnf(text, root),
            d => panic!("{name}: unknown dialect {d}"),
        };
        if let Some(want) = case.get("error").and_then(|v| v.as_str()) {
            match parsed {
                Ok(_) => failures.push(format!("{name}: parsed, expected an error containing {want:?}")),
                Err(e) if !e.to_string().contains(want) => {
                    failures.push(format!("{name}: error {e:?} does not contain {want:?}"));
                }
                Err(_) => checked += 1,
            }
            continue;
        }
        let grammar = match parsed {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("{name}: parse error {e}"));
                continue;
            }
        };
        match CompiledGrammar::new(&grammar, &vocab) {
            Ok(c) => check_strings(&name, "as written", &Arc::new(c), &case, &mut failures),
            Err(e) => {
                failures.push(format!("{name}: compile error: {e}"));
                continue;
            }
        }
        let printed = grammar.to_string();
        match parse_ebnf(&printed, root).and_then(|g| CompiledGrammar::new(&g, &vocab)) {
            Ok(c) => check_strings(&name, "printed", &Arc::new(c), &case, &mut failures),
            Err(e) => failures.push(format!("{name}: printed grammar fails: {e}\n{printed}")),
        }
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "{} corpus failures ({checked} cases passed):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
