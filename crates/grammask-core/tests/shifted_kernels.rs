//! Kernels shifted from a reference state ([`grammask_core::mask::shift_kernel`]) equal the plain
//! walk's classification, and masks along free text with a trigger (a structural tag's text
//! before `{"name":`) equal a brute-force reference, with the shifted path taken.

use grammask_core::compiler::StateId;
use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

mod common;
use common::Rng;

/// Free text that excludes the trigger `{"name":` and `<think>`/`</think>` (as a structural tag
/// compiles it), then tags.
const GRAMMAR: &str = "st1_tx ::= ([{] | [\"] ([{] | [n] ([{] | [a] ([{] | [m] ([{] | [e] ([{] | [\"] ([{] | [:] [{])))))))* ([^\"<{] | [\"] ([^<n{] | [n] ([^<a{] | [a] ([^<m{] | [m] ([^<e{] | [e] ([^\"<{] | [\"] ([^:<{] | [:] [^ <{])))))))
st2_tx ::= ([{] | [\"] ([{] | [n] ([{] | [a] ([{] | [m] ([{] | [e] ([{] | [\"] ([{] | [:] [{])))))))* ([<] | [\"] ([<] | [n] ([<] | [a] ([<] | [m] ([<] | [e] ([<] | [\"] ([<] | [:] [<])))))))
st3_tx ::= ([{] | [\"] ([{] | [n] ([{] | [a] ([{] | [m] ([{] | [e] ([{] | [\"] ([{] | [:] [{])))))))* (\"\" | [\"] (\"\" | [n] (\"\" | [a] (\"\" | [m] (\"\" | [e] (\"\" | [\"] (\"\" | [:] \"\")))))))
st4_tx ::= ([<] | [t] ([<] | [h] ([<] | [i] ([<] | [n] ([<] | [k] [<])))) | [/] ([<] | [t] ([<] | [h] ([<] | [i] ([<] | [n] ([<] | [k] [<]))))) | ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))) | [/] ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))))) st2_tx)* ([^/<t{] | [t] ([^<h{] | [h] ([^<i{] | [i] ([^<n{] | [n] ([^<k{] | [k] [^<>{])))) | [/] ([^<t{] | [t] ([^<h{] | [h] ([^<i{] | [i] ([^<n{] | [n] ([^<k{] | [k] [^<>{]))))) | ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))) | [/] ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))))) st1_tx)
st5_tx ::= ([<] | [t] ([<] | [h] ([<] | [i] ([<] | [n] ([<] | [k] [<])))) | [/] ([<] | [t] ([<] | [h] ([<] | [i] ([<] | [n] ([<] | [k] [<]))))) | ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))) | [/] ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))))) st2_tx)* (((\"\" | [t] (\"\" | [h] (\"\" | [i] (\"\" | [n] (\"\" | [k] \"\"))))) | [/] (\"\" | [t] (\"\" | [h] (\"\" | [i] (\"\" | [n] (\"\" | [k] \"\")))))) | ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))) | [/] ([{] | [t] ([{] | [h] ([{] | [i] ([{] | [n] ([{] | [k] [{])))))) st3_tx)
st6_text ::= ([^<{] | [{] st1_tx | ([<] | [{] st2_tx) st4_tx)* ((\"\" | [{] st3_tx) | ([<] | [{] st2_tx) st5_tx)
root ::= st6_text (tag st6_text)*
tag ::= \"{\\\"name\\\": \\\"\" (\"fa\" | \"fb\") \"\\\", \\\"parameters\\\": {\\\"q\\\": \\\"\" [^\"\\\\]* \"\\\"}}\"
";

/// Tokens over the text's bytes and the trigger's pieces (many crossing the trigger's prefixes),
/// plus every printable ASCII byte and a two-byte character.
fn text_vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let pieces: &[&[u8]] = &[
        b"{",
        b"\"",
        b"{\"",
        b"name",
        b"n",
        b"na",
        b"\":",
        b":",
        b" ",
        b" \"",
        b"<",
        b"</",
        b"think",
        b">",
        b"x",
        b"\xc3\xa9",
        b"}",
        b"fa",
        b"\", ",
        b"parameters",
        b"q",
        b"\n",
    ];
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    toks.extend(pieces.iter().map(|p| p.to_vec()));
    for _ in 0..600 {
        let n = 1 + rng.below(4) as usize;
        toks.push((0..n).flat_map(|_| pieces[rng.below(pieces.len() as u64) as usize].to_vec()).collect());
    }
    common::raw_vocab_with_stop(toks)
}

#[test]
fn shifted_kernels_equal_plain_walks() {
    let g = parse_ebnf(GRAMMAR, "root").unwrap();
    let mut rng = Rng(0x51F7_ED4E_C0DE_0001);
    let mut shifted = 0;
    for _ in 0..4 {
        let vocab = text_vocab(&mut rng);
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        for s in 0..cg.automata().states().len() {
            let s = StateId(s as u32);
            if let Some(km) = cg.shifted_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {}", s.0);
                shifted += 1;
            }
        }
    }
    // The text states after each partial trigger (`{`, `{"`, ..., `<`, `</`, ...) qualify.
    assert!(shifted >= 40, "only {shifted} kernels shifted");
}

#[test]
fn trigger_text_masks_match_brute_force_through_shifted_kernels() {
    let g = parse_ebnf(GRAMMAR, "root").unwrap();
    let mut rng = Rng(0x51F7_ED4E_C0DE_0002);
    let inputs: &[&[u8]] = &[
        b"hi {\"nam {\"n {\"name\" {\"name\":x <thin </thi {\"name\": \"fa\", \"parameters\": {\"q\": \"v\"}} ok",
        b"{{\"\"na<<//think {\"name\": \"fb\", \"parameters\": {\"q\": \"\"}}{\"name\"",
    ];
    for &input in inputs {
        let vocab = text_vocab(&mut rng);
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (i, &b) in input.iter().enumerate() {
            let mask = m.compute_mask().unwrap().clone();
            for t in 0..vocab.vocab_size() as u32 {
                let want = m.clone().accept_token(t).unwrap();
                assert_eq!(mask.get(t as usize), want, "byte {i} token {t} {:?}", vocab.token_bytes(t));
            }
            assert!(m.accept_bytes(&[b]).unwrap(), "input rejected at byte {i}");
        }
        let stats = cg.kernel_stats();
        assert!(stats.shifted >= 5, "the partial-trigger states were not shifted: {stats:?}");
    }
}

/// The refutation before the cover search never changes its answer: every state of the trigger
/// text and of JSON-like free text, with its loop class and its readable ASCII bytes as classes.
#[test]
fn refuted_class_covers_equal_cover_searches() {
    use grammask_core::compiler::Automata;
    use grammask_core::mask::{ascii_loop, class_covers, state_bytes};
    use grammask_core::slice::{ClassSlice, CoverMemo};
    let json = "root ::= \"{\\\"q\\\": \\\"\" [^\"\\\\\\n]* \"\\\"}\" ([^<]* \"<\" [^>]* \">\")*";
    let (mut covered, mut refused) = (0, 0);
    for src in [GRAMMAR, json] {
        let a = Automata::build(&parse_ebnf(src, "root").unwrap()).unwrap();
        for s in (0..a.states().len() as u32).map(StateId) {
            let readable = state_bytes(&a, s).ascii();
            for c in [ClassSlice::loop_class(&a, s), Some(ascii_loop(&a, s)), Some(readable)].into_iter().flatten() {
                let want = ClassSlice::covers(&a, s, c, &CoverMemo::default());
                assert_eq!(class_covers(&a, s, c, &CoverMemo::default()), want, "state {} class {c:#x}", s.0);
                if want {
                    covered += 1;
                } else {
                    refused += 1;
                }
            }
        }
    }
    assert!(covered > 10 && refused > 10, "covered {covered} refused {refused}");
}

/// Key patterns as MaskBench `Github_medium---o83286` has them: after `net_` (and after
/// `net_abc`), a key that must not match `net_[a-z]+[0-9]+` refuses a digit after the token's
/// leading letters.
/// `zz` listed: the keys stay one alternative per part (joined into one automaton, no position
/// shifts a kernel).
const KEY_PATTERNS: &str = r#"{"type": "object", "properties": {"devices": {"type": "object",
    "properties": {"zz": {"type": "integer"}}, "patternProperties": {"netdir_(projects|work|scratch|share)": {"type": "integer"},
    "netdrv_([a-z]+)": {"type": "integer"}, "net_[a-z]+[0-9]+": {"type": "integer"}}}},
    "additionalProperties": false}"#;

/// Tokens over the keys' text, most of them starting with a non-letter (so that the letter
/// subtrees a shift walks hold under a quarter of the trie), plus every printable ASCII byte.
fn key_vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let (letters, others) = (b"netdrvi_abcokpsjw", b" 0123456789_\":,{}.-");
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    let pieces = ["net_", "netdrv_", "netdir_", "abc", "abc1", "a1", "net_a1", "et_", "rv_", "ir_", "work", "\": "];
    toks.extend(pieces.iter().map(|p| p.as_bytes().to_vec()));
    for _ in 0..4000 {
        let mut t = vec![match rng.below(5) {
            0 => letters[rng.below(letters.len() as u64) as usize],
            _ => others[rng.below(others.len() as u64) as usize],
        }];
        for _ in 0..rng.below(7) {
            let pool: &[u8] = if rng.below(3) == 0 { others } else { letters };
            t.push(pool[rng.below(pool.len() as u64) as usize]);
        }
        toks.push(t);
    }
    toks.sort();
    toks.dedup();
    common::raw_vocab_with_stop(toks)
}

/// The key positions of `KEY_PATTERNS` that refuse a digit after the token's leading letters
/// shift with a walked body from the token start (`KernelStats::shifted_walked`): each equals the
/// plain walk. Fails with the walked body undone (the shifted states walk their letter subtrees:
/// `shifted_walked` stays 0).
#[test]
fn start_run_shifted_kernels_equal_plain_walks() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let g =
        json_schema_to_grammar(KEY_PATTERNS, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let mut rng = Rng(0x0833_2860_5117_0036);
    let (mut shifted, mut walked) = (0, 0);
    for _ in 0..2 {
        let vocab = key_vocab(&mut rng);
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        for s in 0..cg.automata().states().len() {
            let s = StateId(s as u32);
            if let Some(km) = cg.shifted_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {}", s.0);
                shifted += 1;
            }
        }
        walked += cg.kernel_stats().shifted_walked;
    }
    assert!(walked >= 8, "{walked} of {shifted} shifted kernels took a walked body");
}
