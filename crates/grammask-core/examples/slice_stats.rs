//! Prints the size of a vocabulary's string-body slice and frontier:
//! `slice_stats VOCAB.json` (VOCAB.json from `TokenizerInfo.serialize_json()`).
use grammask_core::slice::BodySlice;
use grammask_core::trie::TokenTrie;
use grammask_core::vocab::Vocabulary;

fn main() {
    let path = std::env::args().nth(1).expect("usage: slice_stats VOCAB.json");
    let vocab = Vocabulary::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let trie = TokenTrie::new(&vocab);
    let t = std::time::Instant::now();
    let sl = BodySlice::new(&trie, vocab.vocab_size());
    let dead = sl.frontier.iter().filter(|f| f.dead).count();
    println!(
        "trie nodes {} slice tokens {} frontier walk {} dead {} built in {:?}",
        trie.nodes.len(),
        sl.slice.count_ones(),
        sl.frontier.len() - dead,
        dead,
        t.elapsed()
    );
}
