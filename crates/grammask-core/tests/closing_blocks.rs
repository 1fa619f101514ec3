//! A string with a long `maxLength` (`json_char{1024}` blocks; MaskBench
//! `Github_medium---o82710`'s `description`, `maxLength: 5000`): the last positions of a block,
//! fewer characters before its end than the longest token, classify from the body slice and the
//! boundary nodes after the remaining characters (`CompiledGrammar::closing_body`) instead of a
//! walk of the whole vocabulary, equal to that walk; masks along documents across block ends equal
//! a brute-force reference.

use grammask_core::compiler::StateId;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::slice::BodySlice;
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

mod common;
use common::{llama3_vocab, raw_vocab_with_stop};

const SCHEMA: &str = r#"{"type": "object", "properties": {"d": {"type": "string", "maxLength": 5000},
    "n": {"type": "integer"}}, "additionalProperties": false}"#;

fn grammar() -> grammask_core::grammar::Grammar {
    json_schema_to_grammar(SCHEMA, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap()
}

/// Printable ASCII and longer tokens across a block's end: body text, escapes, a two-byte
/// character, `\u` escapes, the closing quote and what follows it.
fn small_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    toks.extend(
        ["ab", "abc", "\\n", "a\\n", "\\u0041", "a\\u00", "\\\"", "\"}", "a\"", "aa\", \"", "é", "éa", "aé", "a\u{1}"]
            .map(|t| t.as_bytes().to_vec()),
    );
    for n in [3, 5, 9, 17] {
        toks.push(vec![b'a'; n]);
        let mut t = vec![b'a'; n];
        t.push(b'"');
        toks.push(t);
    }
    raw_vocab_with_stop(toks)
}

/// Fails with `closing_body` undone (no state takes it), or with a classification it gives that
/// differs from the plain walk.
#[test]
fn block_ends_classify_like_the_walk() {
    let vocab = small_vocab();
    let cg = CompiledGrammar::new(&grammar(), &vocab).unwrap();
    let a = cg.automata();
    let mut closing = 0;
    for s in (0..a.states().len() as u32).map(StateId) {
        if cg.closing_body(s).is_some() {
            closing += 1;
            let km = cg.classify_uninterned(s).unwrap();
            assert_eq!(cg.beyond_listed(s, &km), cg.classify_plain(s).unwrap(), "state {}", s.0);
        }
    }
    // The last 18 positions of the block (the longest token reads 18 characters), and of the
    // shorter run after the last block.
    assert!(closing >= 17, "only {closing} states close a counted body");
}

/// Masks at every byte of documents across the first block's end equal the brute force (every
/// token accepted by a copy of the matcher), on the small vocabulary and on Llama 3.
#[test]
fn block_end_masks_match_brute_force() {
    let doc = |mid: &str, pad: usize| format!("{{\"d\": \"{}{mid}{}\", \"n\": 1}}", "a".repeat(pad), "b".repeat(30));
    let docs = [doc("\\n\\u00e9é\\\"", 1010), doc("", 1020), doc("é", 1023)];
    let mut vocabs = vec![(small_vocab(), &docs[..])];
    vocabs.extend(llama3_vocab().map(|v| (v, &docs[..1])));
    for (vocab, docs) in vocabs {
        let cg = Arc::new(CompiledGrammar::new(&grammar(), &vocab).unwrap());
        for doc in docs {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            for (i, &b) in doc.as_bytes().iter().enumerate() {
                // The brute force only where a block's end is near (the rest is the body slice's).
                if i > 900 {
                    let mask = m.compute_mask().unwrap().clone();
                    for t in 0..vocab.vocab_size() as u32 {
                        let want = m.clone().accept_token(t).unwrap();
                        let at = String::from_utf8_lossy(&doc.as_bytes()[i - 20..i]);
                        assert_eq!(
                            mask.get(t as usize),
                            want,
                            "byte {i} after {at:?}: token {:?}",
                            vocab.token_bytes(t)
                        );
                    }
                }
                assert!(m.accept_bytes(&[b]).unwrap(), "byte {i} of {doc}");
            }
            assert!(m.is_completed(), "{doc}");
        }
    }
}

/// [`grammar`] with `d` as the converter wrote it before the head chain and the quote inside
/// `short`: blocks first, then a counted body that may end (`json_char{0,1023}` in its own rule).
fn ending_body_grammar() -> grammask_core::grammar::Grammar {
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let text = grammask_core::json_schema::json_schema_to_ebnf(SCHEMA, &opts).unwrap();
    let mut lines: Vec<String> =
        text.lines().filter(|l| !l.starts_with("d ::=") && !l.starts_with("json_char.")).map(String::from).collect();
    lines.push("json_char.block ::= json_char{1024}".into());
    lines.push("json_char.short ::= json_char{0,1023}".into());
    lines
        .push(r#"d ::= "\"" (json_char.block{0,3} json_char.short | json_char.block{4} json_char{0,904}) "\"""#.into());
    grammask_core::ebnf::parse_ebnf(&lines.join("\n"), "root").unwrap()
}

/// The positions of a counted body that may end (`json_char{0,1023}` after the blocks) that no
/// token outruns are keyed before any walk and answered by the cross-grammar cache from the
/// second one on; their masks equal the brute force. Fails with that key taken only after a walk
/// reaches its budget (the small vocabulary's walks never do: nothing is shared).
#[test]
fn counted_body_positions_are_shared_before_a_walk() {
    let vocab = small_vocab();
    let cg = Arc::new(CompiledGrammar::new(&ending_body_grammar(), &vocab).unwrap());
    let body: String = (0..60).map(|i| ["ab", "\\n", "é", "a\\u00e9"][i % 4]).collect();
    let doc = format!("{{\"d\": \"{body}\", \"n\": 1}}");
    masks_equal_brute_force_along(&cg, &vocab, &doc, 0);
    // One new `json_char{0,1023}` position per character of the body (90), the first walked.
    let stats = cg.kernel_stats();
    assert!(stats.shared_early >= 80, "{stats:?}");
}

/// At a block's end the tokens that cross it leave hundreds of distinct suffixes, which the fill
/// walks on interned rows (`walk_suffixes_interned`): masks at every byte around the end equal
/// the brute force, and the interned walk ran. Fails with the fill's suffixes walked on plain
/// chart rows only (the count stays 0).
#[test]
fn block_end_suffixes_are_walked_on_interned_rows() {
    // Single printable bytes and every 2-4 byte string over a few body and structure bytes.
    let alphabet = [b'a', b'b', b'"', b',', b'}', b' ', b'\\', b'n'];
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    let mut level: Vec<Vec<u8>> = vec![Vec::new()];
    for len in 1..=4 {
        level = level.iter().flat_map(|p| alphabet.iter().map(move |&x| [p.as_slice(), &[x]].concat())).collect();
        if len >= 2 {
            toks.extend(level.iter().cloned());
        }
    }
    let vocab = raw_vocab_with_stop(toks);
    let cg = Arc::new(CompiledGrammar::new(&grammar(), &vocab).unwrap());
    let doc = format!("{{\"d\": \"{}{}\", \"n\": 1}}", "a".repeat(1021), "ba\\nb");
    let before = grammask_core::mask::interned_suffix_walks();
    masks_equal_brute_force_along(&cg, &vocab, &doc, 1016);
    let walks = grammask_core::mask::interned_suffix_walks() - before;
    assert!(walks >= 3, "{walks} interned suffix walks");
}

/// Reads `doc` byte by byte from a fresh matcher of `cg`, which completes it; before every byte
/// from `from` on, the mask equals the brute force (a copy of the matcher accepting each token).
fn masks_equal_brute_force_along(cg: &Arc<CompiledGrammar>, vocab: &Vocabulary, doc: &str, from: usize) {
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    for (i, &b) in doc.as_bytes().iter().enumerate() {
        if i >= from {
            let mask = m.compute_mask().unwrap().clone();
            for t in 0..vocab.vocab_size() as u32 {
                let want = m.clone().accept_token(t).unwrap();
                assert_eq!(mask.get(t as usize), want, "byte {i}: token {:?}", vocab.token_bytes(t));
            }
        }
        assert!(m.accept_bytes(&[b]).unwrap(), "byte {i} of {doc}");
    }
    assert!(m.is_completed());
}

/// A grammar with 20-character blocks (more than the small vocabulary's longest token, 18
/// characters): after the first block a counted body no token outruns follows (`block` or
/// `short`), after the second only `json_char{0,5}` and the quote (the fill then walks the
/// group's subtrees).
fn small_block_grammar() -> grammask_core::grammar::Grammar {
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let text = grammask_core::json_schema::json_schema_to_ebnf(SCHEMA, &opts).unwrap();
    let mut lines: Vec<String> =
        text.lines().filter(|l| !l.starts_with("d ::=") && !l.starts_with("json_char.")).map(String::from).collect();
    lines.push("json_char.block ::= json_char{20}".into());
    lines.push(r#"json_char.short ::= json_char{0,19} "\"""#.into());
    lines.push(
        r#"d ::= "\"" json_char{20} (json_char.block{0,1} json_char.short | json_char.block{2} json_char{0,5} "\"")"#
            .into(),
    );
    grammask_core::ebnf::parse_ebnf(&lines.join("\n"), "root").unwrap()
}

/// A block's last positions leave the body-text tokens that cross its end as one group
/// (`KernelMask::beyond`), listing one by one only the tokens that read something else past the
/// end (a quote, a control byte): fails with every crossing token listed (the list then holds
/// `ab`, `aaaaa`, `a\n`...).
#[test]
fn block_ends_list_only_tokens_that_leave_body_text() {
    let vocab = small_vocab();
    let cg = CompiledGrammar::new(&small_block_grammar(), &vocab).unwrap();
    let a = cg.automata();
    let mut grouped = 0;
    for s in (0..a.states().len() as u32).map(StateId) {
        let Some(c) = cg.closing_body(s) else { continue };
        // Classified with every shortcut (the small vocabulary's kernels are byte regions).
        let km = cg.classify(s, usize::MAX, &mut || false).unwrap().unwrap();
        for &(t, _) in &km.uncertain {
            let bytes = vocab.token_bytes(t);
            assert!(BodySlice::chars_and_state(bytes).is_none(), "state {} ({c} left): {:?} listed", s.0, bytes);
        }
        grouped += km.beyond.as_ref().map_or(0, |b| b.tokens.count_ones());
    }
    assert!(grouped > 0, "no token grouped past a block's end");
}

/// Masks at every byte of documents across 20-character block ends, filled from the kernels'
/// classifications with every shortcut (`cg.kernel` finds the small vocabulary's as byte regions,
/// which list every token), equal the brute force: where the continuation reads every body text
/// (after the first block: the group allowed at once) and where it reads at most 5 characters and
/// the quote (after the second: the group's subtrees walked). Fails with the group decided
/// wrongly either way (both are met: counted below).
#[test]
fn small_block_ends_match_brute_force() {
    let vocab = small_vocab();
    let cg = Arc::new(CompiledGrammar::new(&small_block_grammar(), &vocab).unwrap());
    let a = cg.automata();
    let (mut reads, mut walks) = (0, 0);
    // Pieces of body text and the characters each is.
    let pieces = [("ab", 2), ("\\n", 1), ("é", 1), ("a\\u00e9", 2), ("abc", 3)];
    for (chars, shift) in [(45, 0), (59, 1), (65, 2), (63, 3)] {
        let (mut body, mut n) = (String::new(), 0);
        for &(p, k) in pieces.iter().cycle().skip(shift) {
            if n + k > chars {
                break;
            }
            body.push_str(p);
            n += k;
        }
        body.push_str(&"z".repeat(chars - n));
        let doc = format!("{{\"d\": \"{body}\", \"n\": 1}}");
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (i, &b) in doc.as_bytes().iter().enumerate() {
            let mut chart = m.chart().clone();
            let mut out = grammask_core::bitset::Bitset::new(vocab.vocab_size());
            let mut get = |s: StateId| Ok(Arc::new(cg.classify(s, usize::MAX, &mut || false)?.unwrap()));
            let items = grammask_core::mask::kernel_items(a, &chart);
            if items.iter().any(|it| get(it.state).unwrap().beyond.is_some()) {
                let any_reads = |it: &grammask_core::earley::Item| {
                    let mut c = chart.clone();
                    c.push_completion_of(a, it).unwrap() && c.last_row().iter().any(|x| cg.reads_body(x.state))
                };
                if items.iter().any(any_reads) {
                    reads += 1;
                } else {
                    walks += 1;
                }
            }
            let reads_body = |s: StateId| cg.reads_body(s);
            let len = out.len();
            let (trie, words) = (cg.trie(), out.words_mut());
            grammask_core::mask::fill_mask_kernels(a, &mut chart, trie, words, len, &mut get, None, Some(&reads_body))
                .unwrap();
            for t in 0..vocab.vocab_size() as u32 {
                let want = m.clone().accept_token(t).unwrap();
                if vocab.token_bytes(t).is_empty() {
                    continue;
                }
                assert_eq!(out.get(t as usize), want, "byte {i} of {doc}: token {:?}", vocab.token_bytes(t));
            }
            assert!(m.accept_bytes(&[b]).unwrap(), "byte {i} of {doc}");
        }
        assert!(m.is_completed());
    }
    assert!(reads > 0 && walks > 0, "group allowed at once {reads} times, walked {walks} times");
}
