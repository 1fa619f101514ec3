//! The fuzz targets as plain functions over bytes, shared by the cargo-fuzz binaries
//! (`fuzz/fuzz_targets/*.rs`, nightly + libFuzzer) and the stable-toolchain driver and regression
//! replay (`crates/grammask-core/tests/fuzz.rs`, which includes this file by path).
//!
//! Each target panics exactly when it finds a bug: a panic inside the engine, an `Internal` error,
//! a mask that differs from the brute-force reference (a copy of the matcher accepting each
//! token), or two spellings of one grammar (parsed text vs. its printed form) that disagree.
//! Errors for bad input (syntax, unsupported, limits) are the expected answer and pass; a work
//! limit hit along a path (a mask, or the reference's `accept_token` on a highly ambiguous
//! grammar) ends that path's comparison.

use grammask_core::earley::with_work_budget;
use grammask_core::ebnf::parse_ebnf;
use grammask_core::error::ErrorKind;
use grammask_core::grammar::{ExprId, Grammar, GrammarBuilder};
use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::regex::{Regex, RegexFlags};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::{Arc, OnceLock};

/// Names of the targets, in the order of [`run_target`].
pub const TARGETS: &[&str] = &["ebnf", "regex", "json_schema", "differential"];

/// Runs target `name` on `data`; panics on a bug. Returns true when the input got past the front
/// end (compiled and masked), which the stable driver uses to grow its corpus.
pub fn run_target(name: &str, data: &[u8]) -> bool {
    match name {
        "ebnf" => ebnf(data),
        "regex" => regex(data),
        "json_schema" => json_schema(data),
        "differential" => differential(data),
        _ => panic!("unknown fuzz target {name}"),
    }
}

/// Front ends get text; the bytes are read as UTF-8 with replacement.
fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

fn check_err(what: &str, e: &grammask_core::Error) {
    assert!(e.kind() != ErrorKind::Internal, "{what}: internal error: {e}");
}

/// A fixed small vocabulary over JSON-ish, regex-ish and non-ASCII bytes (UTF-8 fragments
/// included), with a stop token, so that brute-force masks stay cheap.
fn shared_vocab() -> &'static Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
        for s in [
            "\n", "\t", "  ", "{\"", "\":", "\",", "\"}", "true", "false", "null", "0.", "12", "-1", "e+", "ab", "abc",
            "aa", "ba", "::=", "é", "\u{2028}", "日本", "\\u00", "\\n", "[]", "{}", "\", \"", "\": ", "a\"", "1}",
        ] {
            toks.push(s.as_bytes().to_vec());
        }
        toks.push(vec![0xC3]); // a lone UTF-8 lead byte
        toks.push(vec![0xA9]); // a lone continuation byte
        toks.push(vec![0xE6, 0x97]);
        toks.push(b"</s>".to_vec());
        let stop = (toks.len() - 1) as u32;
        let opts = VocabularyOptions {
            stop_token_ids: Some(vec![stop]),
            vocab_size: Some(toks.len() + 2),
            ..VocabularyOptions::default()
        };
        Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).expect("fuzz vocabulary"))
    })
}

/// The brute-force mask: token `t` is allowed iff a copy of the matcher accepts it. `None` when
/// accepting some token hits a documented work limit (a highly ambiguous grammar: the Earley
/// work per input byte is bounded), where the reference has no answer to compare with.
fn brute_force(m: &Matcher, what: &str) -> Option<Vec<bool>> {
    let n = m.compiled().vocab().vocab_size() as u32;
    (0..n).map(|t| accept_within_limits(&mut m.clone(), t, what)).collect()
}

/// `accept_token`, with a limit error as `None`; any other error is a bug.
fn accept_within_limits(m: &mut Matcher, t: u32, what: &str) -> Option<bool> {
    match m.accept_token(t) {
        Ok(ok) => Some(ok),
        Err(e) if e.kind() == ErrorKind::LimitExceeded => None,
        Err(e) => panic!("{what}: accept_token({t}): {e}"),
    }
}

/// Walks `grammars` (spellings of one language) in lockstep for up to `steps` tokens chosen by
/// `choices`: every mask must equal the brute-force mask of the first matcher.
fn walk(grammars: &[&Grammar], vocab: &Arc<Vocabulary>, choices: &[u8], steps: usize, what: &str) {
    let mut ms = Vec::new();
    for g in grammars {
        match CompiledGrammar::new(g, vocab) {
            Ok(cg) => ms.push(Matcher::new(Arc::new(cg), MatcherOptions::default()).expect("matcher")),
            Err(e) => {
                check_err(what, &e);
                // One spelling compiles only if all do (the limits see the same grammar).
                assert!(ms.is_empty(), "{what}: spelling compiles differently: {e}\n{g}");
                return;
            }
        }
    }
    for step in 0..steps {
        if ms[0].is_terminated() {
            assert!(ms.iter().all(Matcher::is_terminated), "{what}: termination differs at step {step}");
            return;
        }
        // A work limit may stop the reference; the walk then ends (as for a mask below).
        let Some(want) = brute_force(&ms[0], what) else { return };
        let mut allowed = Vec::new();
        for (i, m) in ms.iter_mut().enumerate() {
            let mask = match m.compute_mask() {
                Ok(mask) => mask,
                Err(e) => {
                    check_err(what, &e);
                    // A work limit may stop a mask; the spellings then are not compared further.
                    return;
                }
            };
            for (t, &w) in want.iter().enumerate() {
                assert_eq!(
                    mask.get(t),
                    w,
                    "{what}: spelling {i} step {step} token {t} {:?}: mask {} brute force {w}\n{}",
                    String::from_utf8_lossy(vocab.token_bytes(t as u32)),
                    mask.get(t),
                    grammars[i]
                );
            }
            if i == 0 {
                allowed = mask.iter_ones().collect::<Vec<_>>();
            }
        }
        if allowed.is_empty() {
            return;
        }
        let pick = choices.get(step).map_or(0, |&c| usize::from(c));
        let t = allowed[pick % allowed.len()] as u32;
        for m in &mut ms {
            // A limit here ends the walk, as in the brute force.
            let Some(ok) = accept_within_limits(m, t, what) else { return };
            assert!(ok, "{what}: allowed token {t} rejected");
        }
    }
}

/// A parsed grammar, its printed text reparsed, and the masks of both along one path. Printing
/// the reparsed grammar gives the same text (the printer's documented round trip).
fn check_spellings(g: &Grammar, choices: &[u8], what: &str) {
    let printed = g.to_string();
    let root = g.rule(g.root()).name.clone();
    let g2 = match parse_ebnf(&printed, &root) {
        Ok(g2) => g2,
        Err(e) => panic!("{what}: printed grammar does not parse: {e}\n{printed}"),
    };
    assert_eq!(printed, g2.to_string(), "{what}: print(parse(print(g))) != print(g)");
    walk(&[g, &g2], shared_vocab(), choices, 6, what);
}

/// Splits fuzz input into the text part and the path choices (after the last 0xFF byte).
fn split_choices(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().rposition(|&b| b == 0xFF) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// EBNF parser: any text; a grammar that parses prints, reparses and masks consistently.
pub fn ebnf(data: &[u8]) -> bool {
    let (src, choices) = split_choices(data);
    let src = text(src);
    match parse_ebnf(&src, "root") {
        Ok(g) => {
            check_spellings(&g, choices, "ebnf");
            true
        }
        Err(e) => {
            check_err("ebnf", &e);
            false
        }
    }
}

/// Regex front end: a pattern that parses gives EBNF that parses; masks match brute force.
pub fn regex(data: &[u8]) -> bool {
    let (src, choices) = split_choices(data);
    let (flags, src) = match src.split_first() {
        Some((&f, rest)) => (RegexFlags { ignore_case: f & 1 != 0, dot_all: f & 2 != 0 }, rest),
        None => (RegexFlags { ignore_case: false, dot_all: true }, src),
    };
    let pattern = text(src);
    let re = match Regex::parse(&pattern, flags) {
        Ok(re) => re,
        Err(e) => {
            check_err("regex", &e);
            return false;
        }
    };
    let ebnf_text = match re.to_ebnf("root") {
        Ok(t) => t,
        Err(e) => {
            check_err("regex to_ebnf", &e);
            return false;
        }
    };
    match parse_ebnf(&ebnf_text, "root") {
        Ok(g) => {
            check_spellings(&g, choices, "regex");
            true
        }
        Err(e) => panic!("regex: emitted EBNF does not parse: {e}\n{ebnf_text}"),
    }
}

/// JSON Schema front end: a schema that converts gives EBNF that parses; masks match brute force.
pub fn json_schema(data: &[u8]) -> bool {
    let (src, choices) = split_choices(data);
    let (opts, src) = match src.split_first() {
        Some((&f, rest)) => (
            JsonSchemaOptions {
                any_whitespace: f & 1 != 0,
                strict_mode: f & 2 != 0,
                any_order: f & 4 != 0,
                indent: if f & 8 != 0 { Some(2) } else { None },
                ..JsonSchemaOptions::default()
            },
            rest,
        ),
        None => (JsonSchemaOptions::default(), src),
    };
    let schema = text(src);
    let ebnf_text = match json_schema_to_ebnf(&schema, &opts) {
        Ok(t) => t,
        Err(e) => {
            check_err("json_schema", &e);
            return false;
        }
    };
    match parse_ebnf(&ebnf_text, "root") {
        Ok(g) => {
            check_spellings(&g, choices, "json_schema");
            true
        }
        Err(e) => panic!("json_schema: emitted EBNF does not parse: {e}\n{ebnf_text}"),
    }
}

/// Reads the fuzz input as a stream of small numbers (zero once exhausted).
struct Bytes<'a>(&'a [u8]);
impl Bytes<'_> {
    fn below(&mut self, n: u8) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b % n
            }
            None => 0,
        }
    }
}

const ALPHABET: &[u8] = b"ab(),";

fn random_expr(r: &mut Bytes<'_>, b: &mut GrammarBuilder, n_rules: u8, depth: u32) -> ExprId {
    let pick = if depth > 3 { r.below(3) } else { r.below(7) };
    let letter = |r: &mut Bytes<'_>| ALPHABET[usize::from(r.below(ALPHABET.len() as u8))];
    match pick {
        0 => {
            let len = r.below(3);
            let s: Vec<u8> = (0..len).map(|_| letter(r)).collect();
            b.bytes(&s)
        }
        1 => {
            let lo = u32::from(letter(r));
            let hi = lo + u32::from(r.below(3));
            let neg = r.below(5) == 0;
            b.char_class(&[(lo, hi)], neg)
        }
        2 => {
            let id = b.rule_id(&format!("r{}", r.below(n_rules)));
            b.rule_ref(id)
        }
        3 | 4 => {
            let n = 1 + r.below(3);
            let items = (0..n).map(|_| random_expr(r, b, n_rules, depth + 1)).collect();
            b.seq(items)
        }
        5 => {
            let n = 1 + r.below(3);
            let items = (0..n).map(|_| random_expr(r, b, n_rules, depth + 1)).collect();
            b.choice(items)
        }
        _ => {
            let x = random_expr(r, b, n_rules, depth + 1);
            let min = u32::from(r.below(2));
            let max = match r.below(3) {
                0 => None,
                _ => Some(min + u32::from(r.below(3))),
            };
            b.repeat(x, min, max).expect("repeat bounds are valid")
        }
    }
}

/// Differential: a grammar and a vocabulary built from the input bytes (recursive, nullable,
/// repeated rules over a five-letter alphabet); masks equal brute force, and the grammar's printed
/// spelling reparsed gives the same masks along the same path.
pub fn differential(data: &[u8]) -> bool {
    let mut r = Bytes(data);
    let n_rules = 1 + r.below(4);
    let mut b = GrammarBuilder::new();
    for i in 0..n_rules {
        let body = random_expr(&mut r, &mut b, n_rules, 0);
        b.define(&format!("r{i}"), body, None).expect("define");
    }
    let g = match b.build("r0") {
        Ok(g) => g,
        Err(e) => {
            check_err("differential build", &e);
            return false;
        }
    };
    let mut toks: Vec<Vec<u8>> = ALPHABET.iter().map(|&c| vec![c]).collect();
    for _ in 0..(8 + r.below(24)) {
        let len = 1 + r.below(4);
        toks.push((0..len).map(|_| ALPHABET[usize::from(r.below(ALPHABET.len() as u8))]).collect());
    }
    toks.push(b"</s>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts =
        VocabularyOptions { stop_token_ids: Some(vec![stop]), vocab_size: Some(toks.len() + 3), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).expect("vocabulary"));
    let printed = g.to_string();
    let g2 = match parse_ebnf(&printed, "r0") {
        Ok(g2) => g2,
        Err(e) => panic!("differential: printed grammar does not parse: {e}\n{printed}"),
    };
    let choices: Vec<u8> = (0..12).map(|_| r.below(255)).collect();
    // Random recursive, nullable grammars are often highly ambiguous: each fill then runs up to
    // its work limit (`MAX_FILL_WORK`, ~100 ms), and a few such inputs took the whole fuzzing
    // budget (1.5k execs in 30 s instead of ~100k). The walk's calls share a smaller budget; past
    // it the walk ends as at any work limit.
    with_work_budget(DIFFERENTIAL_WORK, || walk(&[&g, &g2], &vocab, &choices, 12, "differential"));
    true
}

/// Earley work all the matcher calls of one differential input may take together.
const DIFFERENTIAL_WORK: usize = 2_000_000;
