//! The compiler cache stays within `cache_limit_bytes` counting the memos that cached grammars
//! grow while matchers use them (sizes are re-measured at each insert).

use grammask_core::grammar_compiler::GrammarCompiler;
use grammask_core::matcher::{Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

#[test]
fn cache_stays_within_limit_as_memos_grow() {
    let toks: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).chain([b"</s>".to_vec()]).collect();
    let opts = VocabularyOptions { stop_token_ids: Some(vec![256]), ..VocabularyOptions::default() };
    let v = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let limit = 256 << 10;
    let compiler = GrammarCompiler::new(&v, true, limit);
    let mut grown = 0;
    for i in 0..24 {
        let text =
            format!("root ::= \"k{i}\" item (\",\" item)*\nitem ::= [a-z]+ \"=\" [0-9]{{1,4}} | \"(\" root \")\"");
        let cg = compiler.compile_ebnf(&text, "root").unwrap();
        let before = cg.memory_size();
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for b in format!("k{i}abc=12,(k{i}x=1),zz=9").bytes() {
            m.compute_mask().unwrap();
            assert!(m.accept_token(u32::from(b)).unwrap());
        }
        grown += cg.memory_size() - before;
        assert!(compiler.cache_size_bytes() <= limit as usize, "{} > {limit}", compiler.cache_size_bytes());
    }
    assert!(grown > 0, "masks did not grow the grammars' memos");
}
