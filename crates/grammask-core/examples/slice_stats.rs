//! Prints the size of a vocabulary's string-body slice and frontier, and what the walked-body
//! indexes (`FirstChars`, `StringIndex`) cost to build (thread CPU time, best of 5) and hold:
//! `slice_stats VOCAB.json` (VOCAB.json from `TokenizerInfo.serialize_json()`).
use grammask_core::slice::{BodySlice, FirstChars, StringIndex};
use grammask_core::trie::TokenTrie;
use grammask_core::vocab::Vocabulary;

#[path = "common/cpu_clock.rs"]
mod cpu_clock;

/// Best thread CPU time of 5 builds, in ms, and the last build.
fn best<T>(f: impl Fn() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..5 {
        let t = cpu_clock::seconds(cpu_clock::THREAD);
        let v = f();
        best = best.min(cpu_clock::seconds(cpu_clock::THREAD) - t);
        last = Some(v);
    }
    (best * 1e3, last.unwrap())
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: slice_stats VOCAB.json");
    let vocab = Vocabulary::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let trie = TokenTrie::new(&vocab);
    let (ms, sl) = best(|| BodySlice::new(&trie, vocab.vocab_size()));
    let dead = sl.frontier.iter().filter(|f| f.dead).count();
    println!(
        "trie nodes {} slice tokens {} frontier walk {} dead {} built in {ms:.2} ms",
        trie.nodes.len(),
        sl.slice.count_ones(),
        sl.frontier.len() - dead,
        dead,
    );
    let (ms, fc) = best(|| FirstChars::new(&trie));
    println!("FirstChars built in {ms:.2} ms, {} bytes", fc.memory_size());
    let (ms, si) = best(|| StringIndex::new(&trie));
    println!("StringIndex built in {ms:.2} ms, {} bytes", si.memory_size());
}
