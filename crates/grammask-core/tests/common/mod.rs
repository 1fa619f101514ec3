//! Helpers shared by the integration tests (each test file includes it with `mod common;`).

use grammask_core::grammar::{ExprId, Grammar, GrammarBuilder};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

/// A small deterministic xorshift* generator: tests draw paths and tokens from a fixed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..n` for tests.
    #[allow(dead_code)]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The reference mask: for each token, whether a copy of `m` accepts it.
#[allow(dead_code)]
pub fn brute_force(m: &grammask_core::matcher::Matcher, vocab: &Vocabulary) -> Vec<bool> {
    (0..vocab.vocab_size() as u32).map(|t| m.clone().accept_token(t).unwrap()).collect()
}

/// A raw vocabulary of `toks` sorted and without duplicates, then `</s>`: the last id, the stop
/// token.
#[allow(dead_code)]
pub fn raw_vocab_with_stop(mut toks: Vec<Vec<u8>>) -> Arc<Vocabulary> {
    toks.sort();
    toks.dedup();
    toks.push(b"</s>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..VocabularyOptions::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// The bytes random grammars and vocabularies are made of.
#[allow(dead_code)]
pub const ALPHABET: &[u8] = b"ab(),";

#[allow(dead_code)]
fn random_expr(rng: &mut Rng, b: &mut GrammarBuilder, n_rules: u32, depth: u32) -> ExprId {
    let pick = if depth > 3 { rng.below(3) } else { rng.below(7) };
    match pick {
        0 => {
            let len = rng.below(3) as usize;
            let s: Vec<u8> = (0..len).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize]).collect();
            b.bytes(&s)
        }
        1 => {
            let lo = u32::from(ALPHABET[rng.below(ALPHABET.len() as u64) as usize]);
            let hi = lo + rng.below(3) as u32;
            let neg = rng.below(5) == 0;
            b.char_class(&[(lo, hi)], neg)
        }
        2 => {
            let r = rng.below(u64::from(n_rules)) as u32;
            let id = b.rule_id(&format!("r{r}"));
            b.rule_ref(id)
        }
        3 | 4 => {
            let n = 1 + rng.below(3) as usize;
            let items = (0..n).map(|_| random_expr(rng, b, n_rules, depth + 1)).collect();
            b.seq(items)
        }
        5 => {
            let n = 1 + rng.below(3) as usize;
            let items = (0..n).map(|_| random_expr(rng, b, n_rules, depth + 1)).collect();
            b.choice(items)
        }
        _ => {
            let x = random_expr(rng, b, n_rules, depth + 1);
            let min = rng.below(2) as u32;
            let max = match rng.below(3) {
                0 => None,
                _ => Some(min + rng.below(3) as u32),
            };
            b.repeat(x, min, max).unwrap()
        }
    }
}

/// A random grammar of up to four rules (recursion, nullable rules, repetition) over [`ALPHABET`].
#[allow(dead_code)]
pub fn random_grammar(rng: &mut Rng) -> Grammar {
    let n_rules = 1 + rng.below(4) as u32;
    let mut b = GrammarBuilder::new();
    for r in 0..n_rules {
        let body = random_expr(rng, &mut b, n_rules, 0);
        b.define(&format!("r{r}"), body, None).unwrap();
    }
    b.build("r0").unwrap()
}

/// Llama 3's vocabulary from the shared data dir (`$GRAMMASK_SHARED`, else `../shared` next to
/// the repository); `None`, saying so, when the file is missing.
#[allow(dead_code)]
pub fn llama3_vocab() -> Option<Arc<Vocabulary>> {
    shared_vocab("llama3")
}

/// A byte-level BPE vocabulary of the shared data dir (`tokenizers/NAME/tokenizer.json`), as
/// [`llama3_vocab`].
#[allow(dead_code)]
pub fn shared_vocab(name: &str) -> Option<Arc<Vocabulary>> {
    let root = std::env::var_os("GRAMMASK_SHARED").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        std::path::PathBuf::from,
    );
    let path = root.join(format!("tokenizers/{name}/tokenizer.json"));
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipping: {} not found (set GRAMMASK_SHARED)", path.display());
        return None;
    };
    let spec: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut pairs: Vec<(usize, String, bool)> = spec["model"]["vocab"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (v.as_u64().unwrap() as usize, k.clone(), false))
        .collect();
    for t in spec["added_tokens"].as_array().into_iter().flatten() {
        let special = t["special"].as_bool() == Some(true);
        pairs.push((t["id"].as_u64().unwrap() as usize, t["content"].as_str().unwrap().to_string(), special));
    }
    let mut encoded = vec![Vec::new(); pairs.iter().map(|p| p.0 + 1).max().unwrap()];
    let special: Vec<u32> = pairs.iter().filter(|p| p.2).map(|p| p.0 as u32).collect();
    for (id, tok, _) in pairs {
        encoded[id] = tok.into_bytes();
    }
    let options = VocabularyOptions { special_token_ids: Some(special), ..Default::default() };
    Some(Arc::new(Vocabulary::new(encoded, VocabType::ByteLevel, options).unwrap()))
}
