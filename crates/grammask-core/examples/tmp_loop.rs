use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::CompiledGrammar;
use grammask_core::compiler::StateId;
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = Arc::new(Vocabulary::from_json(&std::fs::read_to_string(&args[1]).unwrap()).unwrap());
    let g = parse_ebnf(&std::fs::read_to_string(&args[2]).unwrap(), "root").unwrap();
    let st = StateId(args[3].parse().unwrap());
    let n: usize = args[4].parse().unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.classify(st, usize::MAX, &mut || false).unwrap();
    let t = Instant::now();
    for _ in 0..n { cg.classify(st, usize::MAX, &mut || false).unwrap(); }
    println!("{:?} per classify", t.elapsed() / n as u32);
}
