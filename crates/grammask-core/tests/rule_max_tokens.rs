//! The `max_tokens` rule option against a reference written from its definition.
//!
//! Grammars `root ::= ("<" x ">")+` with `x[max_tokens=N]` over a small regular body, given here
//! also as a hand-written DFA. The reference reads the accepted steps byte by byte: an occurrence
//! of `x` starting at byte `o` has used `K - first(o)` tokens while the step after `K` tokens is
//! read (`first(o)`: tokens ending at or before `o`; strings are not tokens), and once that
//! reaches `N` tokens may only read bytes that bring its DFA one byte nearer a final state
//! (ending in a final state); strings are read as if no budget were spent (but `max_tokens=0`
//! rules are built spent). Along random walks of tokens and strings, every mask bit is checked against
//! the reference and against `accept_token` on a copy of the matcher; rollback and reset are
//! checked to restore the budgets.

use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

mod common;
use common::Rng;

const ALPHABET: &[u8] = b"<>abcd.";

/// `x`'s body in EBNF and as a DFA: `(state, byte, target)` edges from start state 0, finals.
struct Body {
    ebnf: &'static str,
    edges: &'static [(u8, u8, u8)],
    finals: &'static [u8],
}

const BODIES: &[Body] = &[
    Body { ebnf: "[ab]* \".\"", edges: &[(0, b'a', 0), (0, b'b', 0), (0, b'.', 1)], finals: &[1] },
    Body {
        ebnf: "\"a\"+ | \"bcd\"",
        edges: &[(0, b'a', 1), (1, b'a', 1), (0, b'b', 2), (2, b'c', 3), (3, b'd', 4)],
        finals: &[1, 4],
    },
    Body {
        ebnf: "(\"ab\" | \"c\")+ \"d\"?",
        edges: &[(0, b'a', 1), (1, b'b', 2), (0, b'c', 2), (2, b'a', 1), (2, b'c', 2), (2, b'd', 3)],
        finals: &[2, 3],
    },
];

impl Body {
    fn step(&self, q: u8, b: u8) -> Option<u8> {
        self.edges.iter().find(|e| e.0 == q && e.1 == b).map(|e| e.2)
    }

    /// Bytes from `q` to the nearest final state.
    fn dist(&self, q: u8) -> u32 {
        let mut d = [u32::MAX; 8];
        for &f in self.finals {
            d[f as usize] = 0;
        }
        for _ in 0..8 {
            for &(s, _, t) in self.edges {
                if d[t as usize] != u32::MAX {
                    d[s as usize] = d[s as usize].min(d[t as usize] + 1);
                }
            }
        }
        d[q as usize]
    }
}

/// The reference: whether the steps (bytes, is a token) are a prefix of the language, and
/// whether the whole input is complete.
fn reference(body: &Body, n: u32, steps: &[(Vec<u8>, bool)]) -> Option<bool> {
    // Phase: 0 expects '<', 1 inside x (DFA state q, occurrence start `o`), 2 after '>'.
    let (mut phase, mut q, mut o) = (0u8, 0u8, 0usize);
    let mut token_ends: Vec<usize> = Vec::new();
    let mut pos = 0usize;
    for (bytes, is_token) in steps {
        let k = token_ends.len();
        for &b in bytes {
            match phase {
                0 | 2 => {
                    if b != b'<' {
                        return None;
                    }
                    phase = 1;
                    q = 0;
                    o = pos + 1;
                }
                _ => {
                    let first = token_ends.iter().filter(|&&e| e <= o).count();
                    // Strings ignore budgets (as in XGrammar); `max_tokens=0` is built spent.
                    let spent = (*is_token || n == 0) && k - first >= n as usize;
                    let fin = body.finals.contains(&q);
                    if b == b'>' && fin {
                        phase = 2;
                    } else {
                        let t = body.step(q, b)?;
                        if spent && (fin || body.dist(t) + 1 != body.dist(q)) {
                            return None;
                        }
                        q = t;
                    }
                }
            }
            pos += 1;
        }
        if *is_token {
            token_ends.push(pos);
        }
    }
    Some(phase == 2)
}

fn vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = ALPHABET.iter().map(|&c| vec![c]).collect();
    for _ in 0..60 {
        let len = 2 + rng.below(3) as usize;
        toks.push((0..len).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize]).collect());
    }
    toks.sort();
    toks.dedup();
    toks.push(b"</s>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

fn compiled(body: &Body, n: u32, vocab: &Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    let text = format!("root ::= (\"<\" x \">\")+\nx[max_tokens={n}] ::= {}", body.ebnf);
    let g = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
    Arc::new(CompiledGrammar::new(&g, vocab).unwrap())
}

/// Checks the mask of `m` (after `steps`) bit by bit against the reference and `accept_token`.
fn check_mask(m: &mut Matcher, body: &Body, n: u32, steps: &[(Vec<u8>, bool)], vocab: &Vocabulary) -> Vec<u32> {
    let mask = m.compute_mask().unwrap().clone();
    let stop = *m.stop_token_ids().first().unwrap();
    let mut allowed = Vec::new();
    let mut ext = steps.to_vec();
    for t in 0..vocab.vocab_size() as u32 {
        let want = if t == stop {
            reference(body, n, steps) == Some(true)
        } else {
            ext.push((vocab.token_bytes(t).to_vec(), true));
            let ok = reference(body, n, &ext).is_some();
            ext.pop();
            ok
        };
        let mut c = m.clone();
        assert_eq!(c.accept_token(t).unwrap(), want, "accept {:?} after {steps:?}", vocab.token_bytes(t));
        assert_eq!(
            mask.get(t as usize),
            want,
            "mask bit {:?} after {steps:?} (N={n}, {})",
            vocab.token_bytes(t),
            body.ebnf
        );
        if want && t != stop {
            allowed.push(t);
        }
    }
    allowed
}

#[test]
fn masks_follow_the_reference_along_random_walks() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..6 {
        let vocab = vocab(&mut rng);
        for body in BODIES {
            for n in 0..4 {
                let cg = compiled(body, n, &vocab);
                for _walk in 0..3 {
                    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                    let mut steps: Vec<(Vec<u8>, bool)> = Vec::new();
                    for _ in 0..14 {
                        let allowed = check_mask(&mut m, body, n, &steps, &vocab);
                        if allowed.is_empty() {
                            break;
                        }
                        match rng.below(8) {
                            // A string step (any short string; not counted as a token, and
                            // read as if no budget were spent): accepted iff the reference says.
                            0 | 2 => {
                                let len = 1 + rng.below(3) as usize;
                                let b: Vec<u8> = (0..len).map(|_| ALPHABET[rng.below(7) as usize]).collect();
                                steps.push((b.clone(), false));
                                let want = reference(body, n, &steps).is_some();
                                assert_eq!(m.accept_bytes(&b).unwrap(), want, "string {b:?} after {steps:?}");
                                if !want {
                                    steps.pop();
                                }
                            }
                            // Rollback of one or two steps restores the budgets.
                            1 if !steps.is_empty() => {
                                let k = 1 + rng.below(2.min(steps.len() as u64)) as usize;
                                m.rollback(k).unwrap();
                                steps.truncate(steps.len() - k);
                            }
                            _ => {
                                let t = allowed[rng.below(allowed.len() as u64) as usize];
                                assert!(m.accept_token(t).unwrap());
                                steps.push((vocab.token_bytes(t).to_vec(), true));
                            }
                        }
                    }
                    // Reset restores the start.
                    m.reset();
                    check_mask(&mut m, body, n, &[], &vocab);
                }
                let _ = round;
            }
        }
    }
}

/// The boundary rule on a fixed vocabulary: a token read across the start of `x` is its first.
#[test]
fn a_token_across_the_start_is_the_first_token() {
    let toks: Vec<Vec<u8>> = [&b"<"[..], b"<a", b"a", b">", b".", b"</s>"].iter().map(|t| t.to_vec()).collect();
    let opts = VocabularyOptions { stop_token_ids: Some(vec![5]), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let cg = compiled(&BODIES[0], 2, &vocab);
    let allows = |m: &mut Matcher, t: u32| m.compute_mask().unwrap().get(t as usize);
    // "<a" is x's first token; "a" its second; then only "." may follow.
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_token(1).unwrap() && m.accept_token(2).unwrap());
    assert!(!allows(&mut m, 2) && allows(&mut m, 4));
    // "<" ends before x: "a", "a" are x's two tokens.
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_token(0).unwrap() && m.accept_token(2).unwrap());
    assert!(allows(&mut m, 2));
    assert!(m.accept_token(2).unwrap());
    assert!(!allows(&mut m, 2) && allows(&mut m, 4));
    // A string does not count: "<", then the string "a" three times, then tokens.
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    assert!(m.accept_token(0).unwrap());
    for _ in 0..3 {
        assert!(m.accept_bytes(b"a").unwrap());
    }
    assert!(m.accept_token(2).unwrap() && allows(&mut m, 2));
    assert!(m.accept_token(2).unwrap() && !allows(&mut m, 2));
    // Rolling back one token opens the budget again.
    m.rollback(1).unwrap();
    assert!(allows(&mut m, 2));
}
