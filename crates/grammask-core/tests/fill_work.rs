//! The per-call Earley work budget (`limits::MAX_FILL_WORK`): a highly ambiguous grammar's mask
//! fill fails with `LimitExceeded` once its chart grows too large, instead of running on, and
//! leaves the matcher as it was; short texts still mask exactly.

use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use grammask_core::ErrorKind;
use std::sync::Arc;

mod common;
use common::{brute_force, raw_vocab_with_stop};

/// Every string of 1-6 letters `abc`, each also followed by `(` (which the grammar refuses), and
/// `</s>`: a token ends the kernel's rule and its suffix is read on the chart's completion rows.
fn letter_runs_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = vec![Vec::new()];
    let mut out = Vec::new();
    while let Some(t) = toks.pop() {
        if !t.is_empty() {
            out.push(t.clone());
            out.push([&t[..], b"("].concat());
        }
        if t.len() < 6 {
            toks.extend(b"abc".iter().map(|&x| [&t[..], &[x]].concat()));
        }
    }
    raw_vocab_with_stop(out)
}

/// `root ::= root root | [a-c] | ""` after 8 letters masks as brute force says; after 210 more
/// (each read row within the per-byte bounds) a fill costs more than the budget (cubic in the
/// text) and fails with `LimitExceeded`, twice, leaving the chart as it was; rolling the long
/// text back masks as before. Since the row memo steps `a`, `b` and `c` at once (session 60) the
/// window is narrow: from 168 letters the first fill fails, and the kernels it finished (cached)
/// let a later one succeed (the third from 210); from 220 the walk fills the memo's arena first
/// and its plain redo, which reuses a sibling's row, stays within the budget. Before, 220 letters
/// failed every time.
#[test]
fn ambiguous_fill_after_long_text_exceeds_the_work_budget() {
    let vocab = letter_runs_vocab();
    let g = parse_ebnf(r#"root ::= root root | [a-c] | """#, "root").unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(b"abcacbbc").unwrap());
    let short = m.compute_mask().unwrap().clone();
    let want = brute_force(&m, &vocab);
    assert!(want.iter().any(|&w| !w) && want.iter().filter(|&&w| w).count() > 1000);
    for (t, &w) in want.iter().enumerate() {
        assert_eq!(short.get(t), w, "token {:?}", vocab.token_bytes(t as u32));
    }
    let long = b"abcacbbcabac".repeat(20);
    assert!(m.accept_bytes(&long[..210]).unwrap());
    let (rows, sig) = (m.chart().num_rows(), m.chart().last_signature());
    {
        let err = m.compute_mask().map(drop).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert!(err.message().contains("one mask"), "{err}");
        assert_eq!((m.chart().num_rows(), m.chart().last_signature()), (rows, sig));
        let mut row = vec![0u32; vocab.vocab_size().div_ceil(32)];
        assert_eq!(m.fill_next_token_bitmask(&mut row).unwrap_err().kind(), ErrorKind::LimitExceeded);
    }
    m.rollback(1).unwrap();
    assert_eq!(m.compute_mask().unwrap(), &short);
}
