//! Steady-state fill + accept steps for counting instructions (callgrind) of the memoized fill
//! path: 8 matchers decoding `[{"a": true}, ...` under the builtin JSON grammar with a small
//! vocabulary, every mask memoized after the warm-up.
//! `cargo run --release -p grammask-core --example fill_lookups -- MODE STEPS` with MODE `single`
//! (one matcher, `fill_next_token_bitmask`) or `batch` (`batch_fill_next_token_bitmask`, 8 rows,
//! 2 threads allowed: the sorted path, on one thread since every mask is memoized). Run twice
//! with different STEPS and subtract to get the cost per step without the set-up.
use grammask_core::batch::batch_fill_next_token_bitmask;
use grammask_core::builtin::builtin_json_grammar_with;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::spelling::Spelling;
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let batch = args[1] == "batch";
    let steps: usize = args[2].parse().unwrap();
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    for s in ["{\"", "a\"", ": ", "true", "}", ", ", "[", "</s>"] {
        toks.push(s.as_bytes().to_vec());
    }
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..VocabularyOptions::default() };
    let v = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let id = |s: &str| (0..v.vocab_size() as u32).find(|&t| v.token_bytes(t) == s.as_bytes()).unwrap();
    let element: Vec<u32> = ["{\"", "a\"", ": ", "true", "}", ", "].iter().map(|s| id(s)).collect();
    let cg = Arc::new(CompiledGrammar::new(&builtin_json_grammar_with(Spelling::Any, None).unwrap(), &v).unwrap());
    let rows = if batch { 8 } else { 1 };
    let mut ms: Vec<Matcher> = (0..rows)
        .map(|i| {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_token(id("[")).unwrap());
            for &t in &element[..i % element.len()] {
                assert!(m.accept_token(t).unwrap());
            }
            m
        })
        .collect();
    let words = v.vocab_size().div_ceil(32);
    let mut bitmask = vec![0u32; rows * words];
    for s in 0..600 + steps {
        if batch {
            let mut work: Vec<(&mut Matcher, &mut [u32])> = ms.iter_mut().zip(bitmask.chunks_mut(words)).collect();
            batch_fill_next_token_bitmask(&mut work, 2).unwrap();
        } else {
            ms[0].fill_next_token_bitmask(&mut bitmask).unwrap();
        }
        for (i, m) in ms.iter_mut().enumerate() {
            assert!(m.accept_token(element[(i + s) % element.len()]).unwrap());
        }
    }
    println!("{}", bitmask.iter().map(|&w| u64::from(w.count_ones())).sum::<u64>());
}
