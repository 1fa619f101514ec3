//! The first compile of a grammar against a fresh vocabulary, as a process's first compile pays
//! it (token trie, string-body slice, the grammar's class indexes, automata), then a second one.
//! `first_compile VOCAB.json GRAMMAR.ebnf [first]`: with `first`, only the first compile (for
//! instruction counts: `valgrind --tool=callgrind --toggle-collect='*CompiledGrammar::new*'`).
use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::CompiledGrammar;
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let g = parse_ebnf(&std::fs::read_to_string(&args[2]).unwrap(), "root").unwrap();
    let t = Instant::now();
    let first = CompiledGrammar::new(&g, &vocab).unwrap();
    println!("first  {:7.2} ms", t.elapsed().as_secs_f64() * 1e3);
    if args.get(3).is_some_and(|a| a == "first") {
        return;
    }
    let t = Instant::now();
    CompiledGrammar::new(&g, &vocab).unwrap();
    println!("second {:7.2} ms", t.elapsed().as_secs_f64() * 1e3);
    drop(first);
}
