//! A "whitespace then t" kernel (`CompiledGrammar::lead_kernel`) walks from `t` twice: below the
//! whitespace runs, and for `t`'s own kernel. The second walk goes on from the rows the first
//! interned, so it repeats none of the Earley work the first did.

use grammask_core::compiled::hold_class_bodies;
use grammask_core::compiler::StateId;
use grammask_core::earley::with_work_budget;
use grammask_core::ebnf::parse_ebnf;
use grammask_core::grammar::Grammar;
use grammask_core::matcher::CompiledGrammar;
use grammask_core::vocab::Vocabulary;
use grammask_core::ErrorKind;
use std::sync::Arc;

mod common;
use common::raw_vocab_with_stop;

/// Every key of 1-4 letters `abcd` quoted, those of 4 also followed by `"`, `":` and `":1`,
/// each alone and after a space or a newline: the runs' subtrees mirror the quote's, and the
/// quote's is too large for a literal walk (`LITERAL_WALK_VISITS`).
fn key_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = [" ", "\n", "{", "}", "\"", ":", "1"].iter().map(|s| s.as_bytes().to_vec()).collect();
    let mut keys: Vec<String> = vec![String::new()];
    for _ in 0..4 {
        keys = keys.iter().flat_map(|k| "abcd".chars().map(move |c| format!("{k}{c}"))).chain(keys.clone()).collect();
    }
    keys.retain(|k| !k.is_empty());
    for k in &keys {
        let tails: &[&str] = if k.len() == 4 { &["", "\"", "\":", "\":1"] } else { &[""] };
        for tail in tails {
            for lead in ["", " ", "\n"] {
                toks.push(format!("{lead}\"{k}{tail}").into_bytes());
            }
        }
    }
    raw_vocab_with_stop(toks)
}

/// The least Earley work (`with_work_budget`) classifying `state`'s kernel takes, on a fresh
/// compile (no kernel cached). The caller holds the compiles' class-body threads back.
fn kernel_work(g: &Grammar, vocab: &Arc<Vocabulary>, state: StateId) -> usize {
    let fits = |work: usize| {
        let cg = CompiledGrammar::new(g, vocab).unwrap();
        match with_work_budget(work, || cg.kernel(state)) {
            Ok(_) => true,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
                false
            }
        }
    };
    let (mut lo, mut hi) = (0, 1 << 20);
    assert!(fits(hi));
    while hi - lo > 1 {
        let mid = usize::midpoint(lo, hi);
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// After `{`, the kernel (whitespace then `t`, the key's quote) costs less Earley work than
/// `t`'s own kernel (a walk) and a walk of the same size below the runs: every token `w"k...` after a run `w` steps the
/// rows `"k...` steps from `t`. Fails if `t`'s walk starts on a fresh chart (then the lead
/// kernel costs about twice `t`'s).
#[test]
fn lead_kernel_walks_share_rows() {
    let text = "root ::= \"{\" ws kv ws \"}\"\n\
                kv ::= \"\\\"\" [a-d]+ \"\\\"\" ws \":\" ws \"1\"\n\
                ws ::= [ \\n]{0,64}";
    let g = parse_ebnf(text, "root").unwrap();
    let vocab = key_vocab();
    // No class-body threads: they search the covers of states that only call a quoted rule (`t`
    // here) in the background, and the vocabulary's index they share (with its cached results)
    // can outlive a dropped grammar while one runs, so this thread's work would depend on timing.
    hold_class_bodies(true);
    let (x, t) = {
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        let a = cg.automata();
        let calls = |s: StateId, name: &str| a.rule_edges(s).iter().any(|&(r, _)| a.rule_name(r) == name);
        // The state after `{`: its only move calls `ws`, then `t` reads the key's quote.
        let x = (0..a.states().len() as u32)
            .map(StateId)
            .find(|&s| a.rule_edges(s).len() == 1 && a.byte_edges(s).is_empty() && calls(s, "ws"))
            .expect("a state calling ws");
        let t = a.rule_edges(x)[0].1;
        let walked = cg.kernel_stats().walked;
        assert!(cg.lead_kernel(x).unwrap().is_some(), "the lead kernel applies");
        assert_eq!(cg.kernel_stats().walked, walked + 1, "t's kernel is walked");
        (x, t)
    };
    // Dropped above: the vocabulary's index (and its cross-grammar kernel cache, where `t`'s small
    // kernel is shared) lives only while a grammar uses it, so each `kernel_work` compile walks anew.
    let (lead, own) = (kernel_work(&g, &vocab, x), kernel_work(&g, &vocab, t));
    hold_class_bodies(false);
    assert!(own > 0, "t's walk closes rows");
    assert!(2 * lead < 3 * own, "lead kernel {lead} units, t's own {own}");
}
