//! Vocabulary on real tokenizer files from the shared data dir (`$GRAMMASK_SHARED`, else
//! `../shared` next to the repository). Each test returns early, saying so, when the files are
//! missing, so `cargo test` needs no data.
use std::path::PathBuf;

use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use serde_json::Value;

fn tokenizer_json(family: &str) -> Option<Value> {
    let root = std::env::var_os("GRAMMASK_SHARED")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"), PathBuf::from);
    let path = root.join("tokenizers").join(family).join("tokenizer.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).expect("tokenizer.json is JSON")),
        Err(_) => {
            eprintln!("skipping: {} not found (set GRAMMASK_SHARED)", path.display());
            None
        }
    }
}

/// Tokens by id (model vocab plus added tokens) and the ids of added tokens marked special.
fn encoded_vocab(spec: &Value) -> (Vec<Vec<u8>>, Vec<u32>) {
    let mut pairs: Vec<(u64, String)> = spec["model"]["vocab"]
        .as_object()
        .expect("BPE vocab object")
        .iter()
        .map(|(k, v)| (v.as_u64().unwrap(), k.clone()))
        .collect();
    let mut special = Vec::new();
    for t in spec["added_tokens"].as_array().into_iter().flatten() {
        let id = t["id"].as_u64().unwrap();
        pairs.push((id, t["content"].as_str().unwrap().to_string()));
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

fn id_of(v: &Vocabulary, spec: &Value, token: &str) -> u32 {
    let id = spec["model"]["vocab"][token].as_u64().expect("token in vocab") as u32;
    assert!(v.token_bytes(id).len() <= token.len());
    id
}

#[test]
fn llama3_byte_level() {
    let Some(spec) = tokenizer_json("llama3") else {
        return;
    };
    let (encoded, special) = encoded_vocab(&spec);
    let options = VocabularyOptions { special_token_ids: Some(special), ..Default::default() };
    let v = Vocabulary::new(encoded, VocabType::ByteLevel, options).unwrap();
    assert_eq!(v.vocab_size(), 128_256);
    assert_eq!(v.token_bytes(id_of(&v, &spec, "Hello")), b"Hello");
    assert_eq!(v.token_bytes(1917), b" world");
    assert_eq!(v.token_bytes(id_of(&v, &spec, "Ċ")), b"\n");
    // Detected stops: <|end_of_text|>, <|eom_id|>, <|eot_id|>.
    assert_eq!(v.stop_token_ids(), &[128_001, 128_008, 128_009]);
    assert!(v.is_special(128_000) && v.is_special(128_006) && !v.is_special(128_009));
    assert_eq!(v.sorted_text_tokens().len(), 128_000);
    // Every one of the 256 bytes is a token of its own.
    let singles: std::collections::HashSet<&[u8]> =
        (0..128_000).map(|id| v.token_bytes(id)).filter(|b| b.len() == 1).collect();
    assert_eq!(singles.len(), 256);
    let w = Vocabulary::from_json(&v.to_json()).unwrap();
    assert_eq!(w.sorted_text_tokens(), v.sorted_text_tokens());
}

#[test]
fn llama2_byte_fallback() {
    let Some(spec) = tokenizer_json("llama2") else {
        return;
    };
    let (encoded, special) = encoded_vocab(&spec);
    let options = VocabularyOptions {
        vocab_size: Some(32_064),
        special_token_ids: Some(special),
        add_prefix_space: true,
        ..Default::default()
    };
    let v = Vocabulary::new(encoded, VocabType::ByteFallback, options).unwrap();
    assert_eq!(v.token_bytes(13), b"\n"); // <0x0A>
    assert_eq!(v.token_bytes(15_043), b" Hello");
    assert_eq!(v.token_bytes(id_of(&v, &spec, "<0xE2>")), b"\xe2");
    assert_eq!(v.stop_token_ids(), &[2]);
    assert!(v.is_special(0) && v.is_special(1) && v.is_special(32_063));
    assert_eq!(
        v.metadata_json(),
        r#"{"vocab_type":1,"vocab_size":32064,"add_prefix_space":true,"stop_token_ids":[2]}"#
    );
}
