//! Times the stages of a first compile against a fresh vocabulary: EBNF parse, automata, and each
//! per-vocabulary class index the grammar asks for (run indexes, class slices), then the whole
//! `CompiledGrammar::new` again (indexes built) for comparison.
//! `cargo run --profile ci --example class_index_costs -- VOCAB.json GRAMMAR.ebnf [new [N]]`
//! With `new`, only the `CompiledGrammar::new` timings (the first builds the indexes), N times
//! over (for a profiler).
use grammask_core::compiler::{Automata, StateId};
use grammask_core::ebnf::parse_ebnf;
use grammask_core::mask::{ascii_loop, MIN_ROW_RUN_BYTES};
use grammask_core::matcher::CompiledGrammar;
use grammask_core::slice::{BodySlice, ClassSlice, CoverMemo, RunIndex};
use grammask_core::vocab::Vocabulary;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let text = std::fs::read_to_string(&args[2]).unwrap();
    let pin = CompiledGrammar::new(&parse_ebnf("root ::= \"a\"", "root").unwrap(), &vocab).unwrap();
    let (trie, n) = (&pin.index().trie, vocab.vocab_size());
    if args.get(3).is_some_and(|a| a == "new") {
        let g = parse_ebnf(&text, "root").unwrap();
        let times: usize = args.get(4).map_or(1, |k| k.parse().unwrap());
        for _ in 0..times {
            let t = Instant::now();
            let fresh = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
            let _pin = CompiledGrammar::new(&parse_ebnf("root ::= \"a\"", "root").unwrap(), &fresh).unwrap();
            let setup = ms(t);
            let t = Instant::now();
            CompiledGrammar::new(&g, &fresh).unwrap();
            let first = ms(t);
            let t = Instant::now();
            CompiledGrammar::new(&g, &fresh).unwrap();
            println!("setup {setup:7.2} ms  first new {first:7.2} ms  second new {:7.2} ms", ms(t));
        }
        return;
    }
    let t = Instant::now();
    let g = parse_ebnf(&text, "root").unwrap();
    println!("parse      {:7.2} ms", ms(t));
    let t = Instant::now();
    let a = Automata::build(&g).unwrap();
    println!("automata   {:7.2} ms ({} states)", ms(t), a.states().len());
    let mut classes: Vec<(u128, bool, bool)> = Vec::new();
    let t = Instant::now();
    for s in (0..a.states().len() as u32).map(StateId) {
        let mut note = |c: u128, utf8: bool| {
            let free = BodySlice::covers(&a, s, &CoverMemo::default()).is_none();
            match classes.iter_mut().find(|x| (x.0, x.1) == (c, utf8)) {
                Some(x) => x.2 |= free,
                None => classes.push((c, utf8, free)),
            }
        };
        if let Some(c) = ClassSlice::loop_class(&a, s) {
            note(c, true);
        }
        let c = ascii_loop(&a, s);
        if c.count_ones() >= MIN_ROW_RUN_BYTES {
            note(c, false);
        }
    }
    println!("classes    {:7.2} ms", ms(t));
    for &(c, utf8, free) in &classes {
        let mut line = format!("class {c:032x} utf8={utf8:<5} free={free:<5}");
        if free || utf8 {
            let t = Instant::now();
            let ri = RunIndex::new(trie, n, c, utf8);
            let _ = write!(line, " run index {:6.2} ms", ms(t));
            if free && utf8 {
                let t = Instant::now();
                ClassSlice::new(trie, n, c);
                let _ = write!(line, " class slice walked {:6.2} ms", ms(t));
                let t = Instant::now();
                ri.class_slice(trie);
                let _ = write!(line, " from the run index {:6.2} ms", ms(t));
            }
        }
        println!("{line}");
    }
    let t = Instant::now();
    CompiledGrammar::new(&g, &vocab).unwrap();
    println!("first new  {:7.2} ms", ms(t));
    let t = Instant::now();
    CompiledGrammar::new(&g, &vocab).unwrap();
    println!("second new {:7.2} ms", ms(t));
}
