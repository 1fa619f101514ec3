//! Masks equal a brute-force reference: for every token, a copy of the matcher accepts its bytes.
//! Random grammars (with recursion, nullable rules, repetition) over a small random vocabulary.

use grammask_core::mask::kernel_items;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

mod common;
use common::{brute_force, llama3_vocab, random_grammar, shared_vocab, Rng, ALPHABET};

fn random_vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = Vec::new();
    for &c in ALPHABET {
        toks.push(vec![c]);
    }
    for _ in 0..40 {
        let len = 1 + rng.below(4) as usize;
        toks.push((0..len).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize]).collect());
    }
    toks.push(b"</s>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts =
        VocabularyOptions { stop_token_ids: Some(vec![stop]), vocab_size: Some(toks.len() + 3), ..Default::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// Checks `m`'s mask against [`brute_force`] at every position of `doc`, its end included,
/// calling `before_fill` first at each, and accepts `doc` byte by byte; returns the masks checked.
fn walk_masks_match_brute_force(
    m: &mut Matcher,
    vocab: &Vocabulary,
    doc: &[u8],
    mut before_fill: impl FnMut(&Matcher),
) -> usize {
    for i in 0..=doc.len() {
        before_fill(m);
        let mask = m.compute_mask().unwrap().clone();
        let text = String::from_utf8_lossy(&doc[..i]);
        for (t, &w) in brute_force(m, vocab).iter().enumerate() {
            let (n, bytes) = (vocab.vocab_size(), vocab.token_bytes(t as u32));
            assert_eq!(mask.get(t), w, "vocabulary of {n}, after {text:?}: token {bytes:?}");
        }
        if let Some(&b) = doc.get(i) {
            assert!(m.accept_bytes(&[b]).unwrap(), "byte {i} of {:?}", String::from_utf8_lossy(doc));
        }
    }
    doc.len() + 1
}

/// Walks each document from a fresh matcher of `cg` ([`walk_masks_match_brute_force`]) and checks
/// that it ends complete; returns the masks checked.
fn masks_along_docs_match_brute_force(cg: &Arc<CompiledGrammar>, vocab: &Vocabulary, docs: &[&[u8]]) -> usize {
    let mut checked = 0;
    for doc in docs {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        checked += walk_masks_match_brute_force(&mut m, vocab, doc, |_| {});
        assert!(m.is_completed(), "{:?}", String::from_utf8_lossy(doc));
    }
    checked
}

#[test]
fn masks_match_brute_force_on_random_grammars() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    for case in 0..400 {
        let g = random_grammar(&mut rng);
        let vocab = random_vocab(&mut rng);
        let Ok(cg) = CompiledGrammar::new(&g, &vocab) else {
            continue;
        };
        let cg = Arc::new(cg);
        let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
        for step in 0..12 {
            if m.is_terminated() {
                break;
            }
            let mask = m.compute_mask().unwrap().clone();
            let want = brute_force(&m, &vocab);
            for (t, &w) in want.iter().enumerate() {
                assert_eq!(
                    mask.get(t),
                    w,
                    "case {case} step {step} token {t} {:?}\n{g:?}",
                    vocab.token_bytes(t as u32)
                );
            }
            checked += 1;
            let allowed: Vec<usize> = mask.iter_ones().collect();
            if allowed.is_empty() {
                break;
            }
            let t = allowed[rng.below(allowed.len() as u64) as usize] as u32;
            assert!(m.accept_token(t).unwrap());
        }
    }
    assert!(checked > 500, "only {checked} masks checked");
}

/// Masks from memoized suffix verdicts (keyed by completion row and suffix list) equal the brute
/// force at every byte of open-object keys and counted, canonically spelled string values, the
/// same key rule completing into different contexts (`":` after an object key, `"]` in a list),
/// with one compiled grammar (one memo) for all documents. (`kx` keeps `key` a rule of its own:
/// a rule that calls a recursive one is not inlined into its three callers.)
#[test]
fn memoized_suffix_verdicts_match_brute_force() {
    let jc = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\bfnrt] | "\\u00" ("0" [0-7BEFbef] | "1" [0-9A-Fa-f])"#;
    let src = format!(
        "root ::= \"{{\" ws \"\\\"\" key \"\\\"\" ws \":\" ws val (\",\" ws \"\\\"\" key \"\\\"\" ws \":\" ws val)* \"}}\" | \"[\\\"\" key \"\\\"]\"\n\
         key ::= JsonStringExcept(\"name\", \"nam\", \"value\") | kx\n\
         kx ::= \"#\" kx | \"#\"\n\
         val ::= \"1\" | \"\\\"\" json_char{{0,6}} \"\\\"\"\n\
         ws ::= [ ]*\n{jc}"
    );
    let g = grammask_core::ebnf::parse_ebnf(&src, "root").unwrap();
    let vocab = ascii_vocab(
        &[
            "\":", "\": ", "\"]", "\"}", "\",", "na", "name", "me", "e\"", "\\\"", "\\/", "\\u00", "ab", "abc", "\"1",
            "_x\":", "d\": \"",
        ],
        &[],
    );
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let docs: [&[u8]; 3] =
        [br#"{"name_x": 1, "named": "abcdef", "q r": "a\"b"}"#, br#"["nam_e"]"#, br#"{ "vals": "\u001f", "name1":1}"#];
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(checked > 70);
    assert!(!cg.suffix_memo().is_empty(), "no suffix verdict was memoized");
}

/// The interned kernel walk (rows memoized by signature) classifies every kernel exactly as the
/// plain stack walk does.
#[test]
fn interned_kernel_walks_equal_stack_walks() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut compared = 0;
    for _ in 0..300 {
        let g = random_grammar(&mut rng);
        let vocab = random_vocab(&mut rng);
        let Ok(cg) = CompiledGrammar::new(&g, &vocab) else {
            continue;
        };
        let cg = Arc::new(cg);
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for _ in 0..10 {
            for it in kernel_items(cg.automata(), m.chart()) {
                let memo = cg.classify(it.state, usize::MAX, &mut || false).unwrap().unwrap();
                let stack = cg.classify_uninterned(it.state).unwrap();
                assert_eq!(memo.accepted, stack.accepted, "{g:?}");
                assert_eq!(memo.suffixes, stack.suffixes, "{g:?}");
                assert_eq!(memo.uncertain, stack.uncertain, "{g:?}");
                compared += 1;
            }
            if m.is_terminated() {
                break;
            }
            let allowed: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
            if allowed.is_empty() {
                break;
            }
            assert!(m.accept_token(allowed[rng.below(allowed.len() as u64) as usize] as u32).unwrap());
        }
    }
    assert!(compared > 500, "only {compared} kernels compared");
}

/// A kernel composed from its callees' rule-start kernels equals the plain walk's classification:
/// every state of random grammars (recursive, left-recursive, with nullable parts) and of an
/// ambiguous expression grammar.
#[test]
fn composed_kernels_equal_plain_walks() {
    let mut rng = Rng(0x8CB9_2BA7_2F3D_8DD7);
    let arith = grammask_core::ebnf::parse_ebnf(
        "root ::= s (\"\\n\" s)*\ns ::= [a-c]+ \" = \" e\ne ::= e \" + \" e | e \" * \" e | \"(\" e \")\" | f | [0-9]+ | [a-c]+\nf ::= [a-c]+ \"(\" e (\", \" e)* \")\"",
        "root",
    )
    .unwrap();
    let mut composed = 0;
    for case in 0..400 {
        let g = if case % 4 == 0 { arith.clone() } else { random_grammar(&mut rng) };
        let vocab = if case % 4 == 0 { arith_vocab(&mut rng) } else { random_vocab(&mut rng) };
        let Ok(cg) = CompiledGrammar::new(&g, &vocab) else {
            continue;
        };
        for s in 0..cg.automata().states().len() {
            let s = grammask_core::compiler::StateId(s as u32);
            if let Some(km) = cg.composed_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} of {g:?}", s.0);
                composed += 1;
            }
        }
    }
    assert!(composed > 300, "only {composed} kernels composed");
}

/// Tokens over the expression grammar's bytes, many of them crossing rule ends (`a)`, `1 +`).
fn arith_vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let pieces: &[&[u8]] = &[
        b"a", b"b", b"c", b"ab", b"0", b"12", b"(", b")", b" ", b" = ", b" + ", b" * ", b", ", b",", b"\n", b"+", b"*",
        b"=",
    ];
    pieces_vocab(rng, pieces, 120, Vec::new())
}

/// The pieces, `draws` tokens of 1-4 random pieces each, then `extra`; sorted, deduplicated,
/// with `</s>` last as the stop token.
fn pieces_vocab(rng: &mut Rng, pieces: &[&[u8]], draws: usize, extra: Vec<Vec<u8>>) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = pieces.iter().map(|p| p.to_vec()).collect();
    for _ in 0..draws {
        let n = 1 + rng.below(4) as usize;
        toks.push((0..n).flat_map(|_| pieces[rng.below(pieces.len() as u64) as usize].to_vec()).collect());
    }
    toks.extend(extra);
    toks.sort();
    toks.dedup();
    toks.push(b"</s>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts =
        VocabularyOptions { stop_token_ids: Some(vec![stop]), vocab_size: Some(toks.len()), ..Default::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// Kernel walks with every shortcut (row memo, run indexes, class slices) classify every state of
/// identifier-, digit- and free-text-heavy grammars exactly as the plain walk does, on a
/// vocabulary large enough for the run indexes to apply.
#[test]
fn shortcut_walks_equal_plain_walks() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let pieces: Vec<&[u8]> = vec![
        b"a",
        b"b",
        b"z",
        b"_",
        b"q",
        b"0",
        b"7",
        b" ",
        b"  ",
        b".",
        b",",
        b"(",
        b")",
        b"'",
        b"|",
        b"\n",
        b"\n",
        b"=",
        b"\"",
        b"A",
        b"-",
        "\u{e9}".as_bytes(),
        "\u{20ac}".as_bytes(),
        &[0xC3],
        &[0xA9],
        &[0x82, 0xAC],
        b"id",
        b"ab",
    ];
    let mut toks: Vec<Vec<u8>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while toks.len() < 6000 {
        let n = 1 + rng.below(6) as usize;
        // Half the tokens begin with `a`: a subtree large enough for precomputed run sets.
        let lead: &[u8] = if rng.below(2) == 0 { b"a" } else { b"" };
        let t: Vec<u8> = lead
            .iter()
            .copied()
            .chain((0..n).flat_map(|_| pieces[rng.below(pieces.len() as u64) as usize].to_vec()))
            .collect();
        if seen.insert(t.clone()) {
            toks.push(t);
        }
    }
    let n = toks.len();
    let opts = VocabularyOptions { stop_token_ids: Some(vec![]), vocab_size: Some(n), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let grammars = [
        "root ::= (\"s \" expr (\", \" expr)*)+\nexpr ::= term ((\" + \" | \" . \") term)*\nterm ::= ident | num | \"(\" expr \")\" | \"'\" [^'\\n]* \"'\"\nident ::= [a-z_] [a-z_0-9]*\nnum ::= [0-9]+ (\".\" [0-9]+)?",
        "root ::= line+\nline ::= [a-z]+ \" \" [^\\n|]+ (\"|\" (\" \" [a-z_]+ \"=\" [^ \\n|\"]+)+)? \"\\n\"",
        "root ::= \"x\" ([^\\n]* \"\\n\")* | [a-z0-9 ]* \"|\"",
    ];
    let mut compared = 0;
    for src in grammars {
        let g = grammask_core::ebnf::parse_ebnf(src, "root").unwrap();
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        for s in 0..cg.automata().states().len() as u32 {
            let state = grammask_core::compiler::StateId(s);
            let fast = cg.classify(state, usize::MAX, &mut || false).unwrap().unwrap();
            let plain = cg.classify_uninterned(state).unwrap();
            assert_eq!(fast.accepted, plain.accepted, "state {s} of {src}");
            assert_eq!(fast.suffixes, plain.suffixes, "state {s} of {src}");
            assert_eq!(fast.uncertain, plain.uncertain, "state {s} of {src}");
            compared += 1;
        }
    }
    assert!(compared > 60, "only {compared} states compared");
}

/// The strings of length <= `cap` over `ALPHABET` that each rule derives, by fixpoint iteration:
/// an independent reference for the automata + Earley recognizer.
mod reference {
    use super::ALPHABET;
    use grammask_core::grammar::{Expr, ExprId, Grammar};
    use std::collections::BTreeSet;

    pub type Lang = BTreeSet<Vec<u8>>;

    fn concat(a: &Lang, b: &Lang, cap: usize) -> Lang {
        let mut out = Lang::new();
        // Group `b` by length so only pairs within the cap are formed.
        let mut by_len: Vec<Vec<&Vec<u8>>> = vec![Vec::new(); cap + 1];
        for y in b {
            by_len[y.len()].push(y);
        }
        for x in a {
            for y in by_len[..=cap - x.len()].iter().flatten() {
                {
                    let mut s = x.clone();
                    s.extend_from_slice(y);
                    out.insert(s);
                }
            }
        }
        out
    }

    fn eval(g: &Grammar, e: ExprId, rules: &[Lang], cap: usize) -> Lang {
        match g.expr(e) {
            Expr::Bytes(b) => {
                if b.len() <= cap {
                    [b.to_vec()].into()
                } else {
                    Lang::new()
                }
            }
            Expr::CharClass(r) => ALPHABET
                .iter()
                .filter(|&&c| r.iter().any(|&(lo, hi)| lo <= u32::from(c) && u32::from(c) <= hi))
                .map(|&c| vec![c])
                .collect(),
            Expr::Seq(xs) => {
                let mut acc: Lang = [Vec::new()].into();
                for &x in xs {
                    acc = concat(&acc, &eval(g, x, rules, cap), cap);
                }
                acc
            }
            Expr::Choice(xs) => xs.iter().flat_map(|&x| eval(g, x, rules, cap)).collect(),
            Expr::RuleRef(r) => rules[r.index()].clone(),
            Expr::JsonStringIn(_) | Expr::JsonStringExcept(_) => unreachable!("random grammars have no JSON strings"),
            Expr::Token(_) | Expr::ExcludeToken(_) => unreachable!("random grammars have no token elements"),
            &Expr::Repeat { expr, min, max } => {
                let item = eval(g, expr, rules, cap);
                let mut out = Lang::new();
                let mut cur: Lang = [Vec::new()].into();
                let mut n = 0u32;
                loop {
                    if n >= min {
                        out.extend(cur.iter().cloned());
                    }
                    if max.is_some_and(|m| n >= m) || cur.is_empty() || n > cap as u32 + min {
                        break;
                    }
                    cur = concat(&cur, &item, cap);
                    n += 1;
                }
                out
            }
        }
    }

    pub fn language(g: &Grammar, cap: usize) -> Lang {
        let mut rules = vec![Lang::new(); g.rules().len()];
        loop {
            let next: Vec<Lang> = g.rules().iter().map(|r| eval(g, r.body, &rules, cap)).collect();
            if next == rules {
                return rules[g.root().index()].clone();
            }
            rules = next;
        }
    }
}

#[test]
fn recognizer_matches_reference_language() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let cap = 4;
    let mut compared = 0;
    for case in 0..150 {
        let g = random_grammar(&mut rng);
        let vocab = random_vocab(&mut rng);
        let Ok(cg) = CompiledGrammar::new(&g, &vocab) else {
            continue;
        };
        let lang = reference::language(&g, cap + 2);
        let cg = Arc::new(cg);
        // Every string over the alphabet up to length `cap`: membership and prefix validity.
        let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
        let mut frontier = strings.clone();
        for _ in 0..cap {
            frontier =
                frontier.iter().flat_map(|s| ALPHABET.iter().map(move |&c| [s.as_slice(), &[c]].concat())).collect();
            strings.extend(frontier.iter().cloned());
        }
        for s in &strings {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let ok = m.accept_bytes(s).unwrap();
            let member = lang.contains(s);
            assert_eq!(
                ok && m.is_completed(),
                member,
                "case {case}: {:?} membership\n{g:?}",
                String::from_utf8_lossy(s)
            );
            let ref_prefix = lang.iter().any(|w| w.starts_with(s));
            if ref_prefix {
                assert!(ok, "case {case}: {:?} is a prefix of the language\n{g:?}", String::from_utf8_lossy(s));
            }
            compared += 1;
        }
    }
    assert!(compared > 20_000, "only {compared} strings compared");
}

/// Masks equal the brute force at every byte of documents of a schema whose strings take the
/// string-body shortcut through cover searches shared by the whole grammar (a regex string with
/// `minLength`, every position a new state; a `format`; open-object keys; `maxLength`), with one
/// compiled grammar for all documents, so later positions' searches stop at pairs decided by
/// earlier ones.
#[test]
fn regex_string_masks_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {
        "t": {"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{6}", "minLength": 14},
        "d": {"type": "string", "format": "date"},
        "m": {"type": "string", "maxLength": 12},
        "p": {"type": "string", "pattern": "^[^0-9]*[0-9]{2}[a-z]*$", "minLength": 5}}, "required": ["t"]}"#;
    let g = lax_schema_grammar(schema);
    let vocab = ascii_vocab(
        &[
            "\":", "\": ", "\"}", "\",", "\", \"", "12", "1-", "-0", "ab", "abc", "0a", "a0", "-a", "\\\"", "\\n",
            "\\u00", "\\/", "\u{e9}", "x\u{e9}", "ff-", "00", "2024-", "-01", "01-", "e\"", "\"t", "t\":", "zz",
            "fe\"}", "ab\",",
        ],
        &[0xC3, 0xA9],
    );
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let docs: [&str; 4] = [
        r#"{"t": "x1-60f6f7e7-0123456789abcdef", "m": "a\"b\u00e9", "q\u00e9": 1}"#,
        r#"{"d": "2024-01-31", "t": "ab 12--ffffff00", "zz": "t", "p": "ab12cd"}"#,
        r#"{"p": "abcd12", "t": "1-0-0123456789"}"#,
        "{\"t\": \"\\n\u{e9}9-a-abcdef\\\"x\", \"m\": \"\"}",
    ];
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(checked > 100);
}

/// Masks equal the brute force where cover searches meet every multi-byte character of a set at
/// once (`Explored::characters_to`: the slice and each configuration read all well-formed
/// characters alike, to one pair; required to happen): regex strings whose `.` reads any
/// character (unanchored, with `minLength`), beside classes that read only some multi-byte
/// characters (`[^é]`, `[a-zé中]`, a range ending inside a lead's continuations) and must take
/// the full exploration; documents with two-, three- and four-byte characters and escapes, a
/// vocabulary with lone lead and continuation bytes. A class read as whole wrongly accepts a
/// refused character (checked: the range check of `char_exit` reduced to the edge holding the range's first byte
/// fails this at `"v"`'s start: `é` accepted).
#[test]
fn whole_characters_at_once_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {
        "t": {"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{6}", "minLength": 14},
        "a": {"type": "string", "pattern": "x.{2,}y", "minLength": 6},
        "n": {"type": "string", "pattern": "^[^é]*$"},
        "u": {"type": "string", "pattern": "^[^À-Å]*$"},
        "v": {"type": "string", "pattern": "^[^é]+[0-9]$"},
        "c": {"type": "string", "pattern": "^[a-zé中]+.$"},
        "r": {"type": "string", "pattern": "^[à-ï一-中]*[0-9]$"}}, "required": ["t"]}"#;
    let g = lax_schema_grammar(schema);
    let vocab = ascii_vocab(
        &[
            "\":",
            "\": ",
            "\"}",
            "\",",
            "\", \"",
            "12",
            "1-",
            "-0",
            "ab",
            "0a",
            "-a",
            "\\\"",
            "\\n",
            "\\u00",
            "\u{e9}",
            "x\u{e9}",
            "\u{e9}\"",
            "\u{4e2d}",
            "\u{4e2d}a",
            "\u{1f600}",
            "\u{1f600}\"",
            "\u{ef}",
            "\u{f0}",
            "ff-",
            "00",
            "e\"",
            "\"t",
            "t\":",
            "\"n",
            "\"c",
            "\"r",
            "\"a",
            "\"u",
            "\"v",
            "\u{c0}",
            "\u{c6}",
        ],
        &[0xC3, 0xA9, 0xA0, 0xAF, 0xB0, 0xE4, 0xB8, 0xAD, 0xF0, 0x9F, 0x98, 0x80, 0xED, 0xE0, 0xF4, 0x8F, 0xBF],
    );
    let docs: [&str; 4] = [
        "{\"t\": \"\u{e9}1-60f6-0123456789\u{1f600}\u{4e2d}\", \"n\": \"a\u{4e2d}\u{1f600}b\"}",
        "{\"a\": \"x\u{e9}\u{4e2d}\\t\u{1f600}y\", \"c\": \"a\u{e9}\u{4e2d}\u{1f600}\", \"t\": \"1-a-abcdef\u{ef}\u{f0}zz\"}",
        "{\"r\": \"\u{e0}\u{ef}\u{4e00}\u{4e2d}7\", \"t\": \"\\\"\u{4e2d}9-a-abcdefzz\\n\"}",
        "{\"t\": \"x\u{10ffff}\u{800}\u{ffff}2-ab-abcdef\", \"n\": \"\u{e8}\u{ea}\", \"u\": \"\u{c6}\u{e9}\", \"v\": \"\u{e8}a1\"}",
    ];
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    // With the compile's class-body thread done: it searched the string starts
    // (`slice::search_string_starts`), so the fills read its verdicts.
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.wait_class_bodies();
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) > 200);
    // With the thread held, the fills search themselves, and the counter (per thread) sees it.
    grammask_core::compiled::hold_class_bodies(true);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    grammask_core::compiled::hold_class_bodies(false);
    let before = grammask_core::slice::characters_met_at_once();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(grammask_core::slice::characters_met_at_once() > before, "no search met the characters at once");
    assert!(checked > 200, "{checked} masks checked");
}

/// Masks stay exact when the cover searches' per-state budget is tiny
/// (`slice::with_cover_budget`), end to end through a compiled grammar: states whose search
/// gives up take the walk without the slice shortcut (a regex string with `minLength`, a string
/// called between quotes, a key pattern, a counted body, a date). The budget's fallback itself
/// is checked state by state in `slice::tests::tiny_cover_budgets_classify_like_full_walks`
/// (this one did not catch a search that answers "covers" when out of budget: here the states
/// whose searches run out cover anyway or refute at their first set).
#[test]
fn cover_budget_fallback_masks_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {
        "t": {"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{6}", "minLength": 14},
        "d": {"type": "string", "format": "date"},
        "m": {"type": "string", "maxLength": 12},
        "p": {"type": "string", "pattern": "^[^0-9]*[0-9]{2}[a-z]*$", "minLength": 5}},
        "patternProperties": {"^(/[^/]+)+$": {"type": "string"}}, "required": ["t"]}"#;
    let g = lax_schema_grammar(schema);
    let vocab = ascii_vocab(
        &[
            "\":", "\": ", "\"}", "\",", "\", \"", "12", "1-", "-0", "ab", "abc", "0a", "a0", "-a", "\\\"", "\\n",
            "\\u00", "\\/", "\u{e9}", "x\u{e9}", "ff-", "00", "2024-", "-01", "01-", "e\"", "\"t", "t\":", "zz",
            "fe\"}", "ab\",", "//", "/a", "a/", "\"/",
        ],
        &[0xC3, 0xA9],
    );
    let docs: [&str; 4] = [
        r#"{"t": "x1-60f6f7e7-0123456789abcdef", "m": "a\"b\u00e9", "/x/y": "z"}"#,
        r#"{"d": "2024-01-31", "t": "ab 12--ffffff00", "p": "ab12cd"}"#,
        r#"{"p": "abcd12", "t": "1-0-0123456789"}"#,
        "{\"t\": \"\\n\u{e9}9-a-abcdef\\\"x\", \"m\": \"\", \"/a\": \"\"}",
    ];
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    for budget in [0, 1, 7, 60, usize::MAX] {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let checked =
            grammask_core::slice::with_cover_budget(budget, || masks_along_docs_match_brute_force(&cg, &vocab, &docs));
        assert!(checked > 100, "budget {budget}");
    }
}

/// A JSON Schema's grammar with JSON Schema's own semantics (`strict_mode: false`: objects stay
/// open unless the schema closes them).
fn lax_schema_grammar(schema: &str) -> grammask_core::grammar::Grammar {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap()
}

/// A vocabulary of `pieces` (with `draws` random joins of them), then each of the shared
/// vocabularies `names` that is present.
fn pieces_and_shared_vocabs(
    rng: &mut Rng,
    pieces: &[&[u8]],
    draws: usize,
    names: &[&'static str],
) -> Vec<(&'static str, Arc<Vocabulary>)> {
    let mut vocabs = vec![("pieces", pieces_vocab(rng, pieces, draws, Vec::new()))];
    vocabs.extend(names.iter().filter_map(|&name| Some((name, shared_vocab(name)?))));
    vocabs
}

/// `g` compiled on `vocab` with its class bodies and walked indexes built (by the compile's
/// threads: no fill builds them), the plain-text slice among them.
fn compile_with_text_slice(
    g: &grammask_core::grammar::Grammar,
    vocab: &Arc<Vocabulary>,
    name: &str,
) -> Arc<CompiledGrammar> {
    let cg = Arc::new(CompiledGrammar::new(g, vocab).unwrap());
    cg.wait_class_bodies();
    cg.index().wait_walked();
    assert!(cg.index().text_slice().is_some(), "{name}: no plain-text slice");
    cg
}

/// Masks equal the brute force at every byte of each `(prefix, text)` past its prefix, and each
/// kernel of the chart there equals the plain walk's classification (`classify_uninterned`);
/// each document completes. Returns the masks checked (one per text byte, plus the end's).
fn docs_and_kernels_match_brute_force(
    name: &str,
    cg: &Arc<CompiledGrammar>,
    vocab: &Vocabulary,
    docs: &[(&str, &str)],
) -> usize {
    let mut checked = 0;
    for (prefix, text) in docs {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(prefix.as_bytes()).unwrap(), "{name}: {prefix}");
        checked += walk_masks_match_brute_force(&mut m, vocab, text.as_bytes(), |m| {
            for it in kernel_items(cg.automata(), m.chart()) {
                let km = cg.kernel(it.state).unwrap();
                assert!(*km == cg.classify_uninterned(it.state).unwrap(), "{name}: state {}", it.state.0);
            }
        });
        assert!(m.is_completed(), "{name}: {prefix}{text}");
    }
    assert_eq!(checked, docs.iter().map(|d| d.1.len() + 1).sum::<usize>(), "{name}");
    checked
}

/// Printable ASCII, one byte a token, then the tokens of `extra`, the lone bytes of `lone` (parts
/// of UTF-8 characters), and the stop token `</s>` last.
fn ascii_vocab(extra: &[&str], lone: &[u8]) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    toks.extend(extra.iter().map(|t| t.as_bytes().to_vec()));
    toks.extend(lone.iter().map(|&b| vec![b]));
    toks.push(b"</s>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts =
        VocabularyOptions { stop_token_ids: Some(vec![stop]), vocab_size: Some(toks.len()), ..Default::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// The text of MaskBench file `NAME.json` of the shared data dir; `None`, saying so, when
/// `GRAMMASK_SHARED` is not set or the file is missing.
fn maskbench_file(name: &str) -> Option<String> {
    let Some(root) = std::env::var_os("GRAMMASK_SHARED").map(std::path::PathBuf::from) else {
        eprintln!("skipping: GRAMMASK_SHARED not set");
        return None;
    };
    let file = root.join(format!("maskbench/data/{name}.json"));
    let text = std::fs::read_to_string(&file);
    if text.is_err() {
        eprintln!("skipping: {} not found", file.display());
    }
    text.ok()
}

/// Masks equal the brute force on Llama 3 (whose longest token is 128 spaces) inside counted
/// strings of several bounds, at the positions where the characters left cross 128: `maxLength`s
/// up to the long-run bound (`json_char{0,n}` in the string), longer ones built from
/// 1,024-character blocks and a shorter rest (rules that end inside the string), and counted
/// rules of their own that end at every character or only at the last. A length filter off by
/// one accepts or refuses the 128-space token one position too early.
#[test]
fn counted_string_masks_match_brute_force_on_llama3() {
    let Some(vocab) = llama3_vocab() else { return };
    // `c`: 5,120 characters at most, so the fifth block's end is the string's.
    let schema = r#"{"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 300},
        "b": {"type": "string", "maxLength": 5000},
        "c": {"type": "string", "minLength": 1030, "maxLength": 5120}}}"#;
    let from_schema = lax_schema_grammar(schema);
    let schema_cg = Arc::new(CompiledGrammar::new(&from_schema, &vocab).unwrap());
    // Each counted rule used twice, so it keeps its own automaton (it is not inlined): every
    // state of `t` is final, `e`'s only at its end.
    let jc = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4}"#;
    let ebnf = format!(
        "root ::= \"{{\\\"t\\\": \\\"\" t \"\\\"}}\" | \"[\\\"\" t \"\\\"]\" | \"{{\\\"e\\\": \\\"\" e \"\\\"}}\" | \"(\\\"\" e \"\\\")\"\nt ::= json_char{{0,300}}\ne ::= json_char{{300}}\n{jc}"
    );
    let ebnf_cg =
        Arc::new(CompiledGrammar::new(&grammask_core::ebnf::parse_ebnf(&ebnf, "root").unwrap(), &vocab).unwrap());
    // (grammar, property, characters in the string, characters left in its chain at which to check).
    let cases = [
        (&ebnf_cg, "t", 300, 300),
        (&ebnf_cg, "e", 300, 300),
        (&schema_cg, "c", 5120, 5120),
        (&schema_cg, "b", 1100, 1023),
        (&schema_cg, "a", 300, 300),
    ];
    let mut checked = 0;
    for (cg, key, len, chain) in cases {
        let prefix = format!("{{\"{key}\": \"");
        let doc = format!("{prefix}{}\"}}", "ab".repeat(len).chars().take(len).collect::<String>());
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(prefix.as_bytes()).unwrap());
        for i in 0..len {
            let left = chain - i.min(chain);
            if i == 0 || (127..=128).contains(&left) {
                let mask = m.compute_mask().unwrap().clone();
                let want = brute_force(&m, &vocab);
                for (t, &w) in want.iter().enumerate() {
                    assert_eq!(mask.get(t), w, "{key} after {i} chars: token {:?}", vocab.token_bytes(t as u32));
                }
                checked += 1;
            }
            assert!(m.accept_bytes(&doc.as_bytes()[prefix.len() + i..][..1]).unwrap());
        }
        assert!(m.accept_bytes(b"\"}").unwrap() && m.is_completed(), "{key}");
    }
    assert_eq!(checked, 15);
}

/// Masks equal the brute force inside counted strings of one character class, where kernels
/// take the class-body slice (`grammask_core::slice::ClassBodySlice`, checked at every position
/// looked at): MaskBench's `Github_hard---o79409` `name` pattern (`^[...]{1,200}$`, a large
/// class with non-ASCII ranges and the space), and EBNF repetitions of a negated class (escapes,
/// non-ASCII), of a non-ASCII-only class with a minimum (both called per character) and of an
/// inline class; on Llama 3 and Qwen 2.5, at the first positions, at the last ones (2, 1 and 0
/// characters left) and where the characters left cross the longest class-text token (a run of
/// spaces): a count off by one accepts or refuses a token one position too early.
#[test]
fn counted_class_masks_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let Some(text) = maskbench_file("Github_hard---o79409") else { return };
    let task: serde_json::Value = serde_json::from_str(&text).unwrap();
    let pattern = &task["schema"]["properties"]["name"]["pattern"];
    assert!(pattern.as_str().is_some_and(|p| p.ends_with("]{1,200}$")), "{pattern}");
    let schema = serde_json::json!({"type": "object", "properties": {"u": {"type": "string", "pattern": pattern}}});
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let ebnf = json_schema_to_ebnf(&schema.to_string(), &opts).unwrap();
    let from_schema = grammask_core::ebnf::parse_ebnf(&ebnf, "root").unwrap();
    // `c` and `g` are used twice, so they keep automata of their own (called per character).
    let ebnf = r#"root ::= "{\"n\": \"" c{0,140} "\"}" | "{\"g\": \"" g{2,40} "\"}" | "{\"i\": \"" [ a-zA-Z\u00e9\u4e00-\u9fff]{0,130} "\"}" | "[" c g "]"
c ::= [^"\\a-c\u0000-\u001f] | "\\" ["\\/bfnrt]
g ::= [\u0370-\u03ff]"#;
    let from_ebnf = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    let mut checked = 0;
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        // The longest token of spaces only, in characters.
        let spaces = (0..vocab.vocab_size() as u32)
            .map(|t| vocab.token_bytes(t))
            .filter(|b| !b.is_empty() && b.iter().all(|&c| c == b' '))
            .map(<[u8]>::len)
            .max()
            .unwrap();
        assert!(spaces > 16, "{name}: longest run of spaces {spaces}");
        let schema_cg = Arc::new(CompiledGrammar::new(&from_schema, &vocab).unwrap());
        let ebnf_cg = Arc::new(CompiledGrammar::new(&from_ebnf, &vocab).unwrap());
        // (grammar, property, characters (JSON-spelled), most characters).
        let units = |s: &str, n: usize| s.chars().map(String::from).cycle().take(n).collect::<Vec<_>>();
        let negated = ["d", "\\n", "\\\\", "\\/", "\u{e9}", " ", "!", "\u{4e2d}", "{"];
        let cases: [(&Arc<CompiledGrammar>, &str, Vec<String>, usize); 4] = [
            (&schema_cg, "u", units("ab c\u{e9}\u{436}  ", 200), 200),
            (&ebnf_cg, "n", negated.iter().map(ToString::to_string).cycle().take(140).collect(), 140),
            (&ebnf_cg, "g", units("\u{3b1}\u{3c9}", 40), 40),
            (&ebnf_cg, "i", units("ab \u{e9}\u{4e2d} ", 130), 130),
        ];
        for (cg, key, chars, most) in cases {
            let prefix = format!("{{\"{key}\": \"");
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(prefix.as_bytes()).unwrap());
            for i in 0..=most {
                let left = most - i;
                if i <= 2 || left <= 2 || (spaces - 1..=spaces + 1).contains(&left) {
                    let a = cg.automata();
                    let sliced = kernel_items(a, m.chart()).iter().any(|it| cg.class_body_capacity(it.state).is_some());
                    // (With no character left, only the closing quote can be read: no class.)
                    assert!(sliced || left == 0, "{name} {key} after {i} chars: no kernel takes the class-body slice");
                    let mask = m.compute_mask().unwrap().clone();
                    let want = brute_force(&m, &vocab);
                    for (t, &w) in want.iter().enumerate() {
                        assert_eq!(
                            mask.get(t),
                            w,
                            "{name} {key} after {i} chars: token {:?}",
                            vocab.token_bytes(t as u32)
                        );
                    }
                    checked += 1;
                }
                if let Some(c) = chars.get(i) {
                    assert!(m.accept_bytes(c.as_bytes()).unwrap(), "{name} {key} char {i} {c:?}");
                }
            }
            assert!(m.accept_bytes(b"\"}").unwrap() && m.is_completed(), "{name} {key}");
        }
    }
    assert!(checked >= 60, "{checked} masks checked");
}

/// Masks equal the brute force inside counted class bodies whose rule may end after some of the
/// characters (`grammask_core::slice::ends_served`): MaskBench o79409's key pattern
/// `^[a-zA-Z0-9_]{1,500}$` (`patternProperties`: a key may end after any character, before `"`),
/// and EBNF rules ending after a minimum, followed by bytes outside the class that no string walk
/// reads (`-`, `.`, `>`), on Llama 3 and Qwen 2.5 at every position. The kernels there must take
/// the class-body slice, and the key positions before the later keys (`, "`) must be composed from
/// it, not walked; a rule whose FOLLOW set begins a class character (`v v`) must not take it.
/// An exit node of a final boundary left unwalked refuses `ab-` after `ab`; walked at a boundary
/// that is not final, it accepts `a-` before the minimum.
#[test]
fn counted_class_ends_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let schema = r#"{"type": "object", "properties": {"annotations": {"additionalProperties": false, "type": "object",
        "patternProperties": {"^[a-zA-Z0-9_]{1,500}$": {"type": ["string", "number", "boolean"]}}}}}"#;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let from_schema = grammask_core::ebnf::parse_ebnf(&json_schema_to_ebnf(schema, &opts).unwrap(), "root").unwrap();
    let ebnf = r#"root ::= "{\"" k "\": \"" k "-" k "." w "\"}" | "<" w ">" | "[" v v "]"
k ::= [a-z0-9_]{2,6}
w ::= [a-zA-Z\u00e9 ]{1,90}
v ::= [a-z]{1,3}"#;
    let from_ebnf = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    let (mut sliced_at, mut checked, mut composed) = (0, 0, 0);
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let schema_cg = Arc::new(CompiledGrammar::new(&from_schema, &vocab).unwrap());
        let ebnf_cg = Arc::new(CompiledGrammar::new(&from_ebnf, &vocab).unwrap());
        // (grammar, document): masks checked before every character and at the end.
        let long_key = "annotation_".repeat(4);
        let doc = format!(r#"{{"annotations": {{"a1_B": "x", "{long_key}": 1, "z": true}}}}"#);
        let cases: [(&Arc<CompiledGrammar>, String); 4] = [
            (&schema_cg, doc),
            (&ebnf_cg, "{\"ab1\": \"a_-b9zz0_.abc\u{e9} xyzzy\"}".to_string()),
            (&ebnf_cg, format!("<{}>", "Hello world ".repeat(7))),
            (&ebnf_cg, "[abcab]".to_string()),
        ];
        for (cg, doc) in cases {
            let a = cg.automata();
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let at = doc.char_indices().map(|(i, _)| i).chain([doc.len()]);
            for (i, c) in at.zip(doc.chars().map(Some).chain([None])) {
                let items = kernel_items(a, m.chart());
                let in_v = doc.starts_with('[') && (1..6).contains(&i);
                let sliced = items.iter().any(|it| cg.class_body_capacity(it.state).is_some());
                assert!(!(in_v && sliced), "{name} {doc:?} at {i}: `v v` took the class-body slice");
                sliced_at += usize::from(sliced);
                // Key positions after the first key, whose class slice is built by then.
                if doc.contains("annotations") && doc[..i].ends_with(", \"") {
                    assert!(items.iter().all(|it| cg.composed_kernel(it.state).unwrap().is_some()), "{name}");
                    composed += 1;
                }
                let mask = m.compute_mask().unwrap().clone();
                let want = brute_force(&m, &vocab);
                for (t, &w) in want.iter().enumerate() {
                    assert_eq!(mask.get(t), w, "{name} {doc:?} at {i}: token {:?}", vocab.token_bytes(t as u32));
                }
                checked += 1;
                if let Some(c) = c {
                    assert!(m.accept_bytes(c.to_string().as_bytes()).unwrap(), "{name} {doc:?} at {i}");
                }
            }
            assert!(m.is_completed(), "{name} {doc:?}");
        }
    }
    assert!(sliced_at >= 2 * 120, "{sliced_at} positions took a class-body slice");
    assert_eq!(composed, 4, "key positions composed");
    assert!(checked >= 2 * 150, "{checked} masks checked");
}

/// A counted class body's slice is reserved when its grammar is compiled and built on a thread
/// of its own (`CompiledGrammar::build_class_bodies`), not by the first fill that reaches it:
/// once that thread is done, before any fill, the first key position of o79409's key pattern
/// (`^[a-zA-Z0-9_]{1,500}$`, after `{"annotations": {"`) is composed from the slice, as the later
/// key positions are. In an exact count of a class (`[a-zA-Z0-9_ ]{40}`), the thread's slice
/// (no fill built one) gives at every position the tokens of class text that fit, by brute force,
/// and masks equal the brute force (on vocabularies of their own, so no earlier grammar built the
/// slices). Second grammars filled at once, racing their thread (a fill that finds the slice
/// unbuilt builds it itself), give the brute force's masks too. Fails without the compile-time
/// slices (that key position's kernel is not composed; fills build the slice) and with a wrong
/// slice set by the thread (checked with an empty class's).
#[test]
fn class_body_slices_taken_at_compile_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {"annotations": {"additionalProperties": false, "type": "object",
        "patternProperties": {"^[a-zA-Z0-9_]{1,500}$": {"type": ["string", "number", "boolean"]}}}}}"#;
    let extra = ["ab", "a1", "_B", "Ab_9", "annotation", "annotations", "\": ", "\"a", "ab\"", "\", \"", "\"}", "x\"}"];
    let doc = r#"{"annotations": {"a1_B": "x", "annotation_Ab_9annotation": 1, "z": true}}"#;
    let vocab = ascii_vocab(&extra, &[]);
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
    cg.wait_class_bodies();
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(br#"{"annotations": {""#).unwrap());
    let items = kernel_items(cg.automata(), m.chart());
    assert!(!items.is_empty());
    let composed = items.iter().all(|it| cg.composed_kernel(it.state).unwrap().is_some());
    assert!(composed, "the first key position is not composed from the class-body slice");
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[doc.as_bytes()]);
    assert_eq!(checked, doc.len() + 1);
    let vocab = ascii_vocab(&extra, &[]);
    let racing = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
    assert_eq!(masks_along_docs_match_brute_force(&racing, &vocab, &[doc.as_bytes()]), doc.len() + 1);

    let ebnf = r#"root ::= "<" [a-zA-Z0-9_ ]{40} ">""#;
    let g = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    let text = ["Hello", " world", "_9", "abc", "Ab_9 ", "a b", "xyz>", "9>", ">", "<Hi", "b>"];
    let doc = format!("<{}>", "Hello world_9 ".repeat(3).get(..40).unwrap());
    let vocab = ascii_vocab(&text, &[]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.wait_class_bodies();
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let mut sliced = 0;
    for (i, &b) in doc.as_bytes().iter().enumerate() {
        for it in kernel_items(cg.automata(), m.chart()) {
            let Some(tokens) = cg.class_body_tokens(it.state) else { continue };
            let fits =
                |t: &[u8]| t.len() <= 41 - i && t.iter().all(|&x| x.is_ascii_alphanumeric() || b"_ ".contains(&x));
            for t in 0..vocab.vocab_size() {
                let bytes = vocab.token_bytes(t as u32);
                assert_eq!(tokens.get(t), fits(bytes) && !bytes.is_empty(), "after {:?}: token {bytes:?}", &doc[..i]);
            }
            sliced += 1;
        }
        let mask = m.compute_mask().unwrap().clone();
        for (t, &w) in brute_force(&m, &vocab).iter().enumerate() {
            assert_eq!(mask.get(t), w, "after {:?}: token {:?}", &doc[..i], vocab.token_bytes(t as u32));
        }
        assert!(m.accept_bytes(&[b]).unwrap());
    }
    assert!(sliced >= 40, "{sliced} positions took the class-body slice");
    assert_eq!(cg.class_bodies_built_in_fills(), 0, "a fill built a slice the compile's thread had built");
    let vocab = ascii_vocab(&text, &[]);
    let racing = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    assert_eq!(masks_along_docs_match_brute_force(&racing, &vocab, &[doc.as_bytes()]), doc.len() + 1);
}

/// Two counted classes that read the same bytes but are different classes each take their slice
/// at compile (`class_signature` groups the states tried): `[a-zA-Z\u00c0-\u00df]` and
/// `[a-zA-Z\u00e0-\u00ff]` (both led by `0xC3`, continued by other bytes), `[a-zA-Z-]` and
/// `([a-zA-Z] | "-x")` (`-` a side byte, left out of its class `[a-zA-Z]`). Once the compile's thread is done,
/// no fill builds a slice, and masks equal the brute force at every position. Grouped by the
/// bytes read alone, the second class of each pair was never tried and a fill built its slice.
#[test]
fn classes_reading_the_same_bytes_each_take_a_slice_at_compile() {
    let ebnf = r#"root ::= "<" [a-zA-Z\u00c0-\u00df]{4} ">" [a-zA-Z\u00e0-\u00ff]{4} "<" [a-zA-Z-]{4} ">" ([a-zA-Z] | "-x"){4} ">""#;
    let g = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    let text = ["ab", "Ab", "\u{c0}", "\u{e9}", "a\u{e9}", "\u{c0}b", "b-", "-a", "ab>", "><", "<a", "a-b", "a.", ".a"];
    let doc = "<ab\u{c0}Z>\u{e9}xY\u{ff}<a-Bc>ab-xC>";
    let vocab = ascii_vocab(&text, &[0xC3, 0x80, 0xA9]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.wait_class_bodies();
    assert_eq!(masks_along_docs_match_brute_force(&cg, &vocab, &[doc.as_bytes()]), doc.len() + 1);
    assert_eq!(cg.class_bodies_built_in_fills(), 0, "a fill built a slice the compile did not reserve");
    // Every class position took a class-body slice (none built since).
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let mut sliced = 0;
    for &b in doc.as_bytes() {
        sliced +=
            kernel_items(cg.automata(), m.chart()).iter().filter(|it| cg.class_body_tokens(it.state).is_some()).count();
        assert!(m.accept_bytes(&[b]).unwrap());
    }
    assert!(sliced >= 16, "{sliced} positions took a class-body slice");
    assert_eq!(cg.class_bodies_built_in_fills(), 0);
}

/// A `^.*$` key (MaskBench o69161's `patternProperties`) reads the bytes of a JSON string body,
/// but its `\` escape reads no `n`: its states are no string body and take a class-body slice.
/// After four string properties (string bodies, which take none, read the same bytes) its slice
/// is still reserved at compile: once the compile's thread is done, no fill builds one, and masks
/// equal the brute force at every position. Grouped by the bytes read alone (not those after the
/// side bytes `"` and `\`), the key's states were never tried and its first fill built the slice
/// (2.7 ms on Llama 3).
#[test]
fn any_char_key_after_string_bodies_takes_its_slice_at_compile() {
    let schema = r#"{"type": "object", "properties": {"model": {"type": "string"}, "vendor": {"type": "string"},
        "serial": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
        "interfaces": {"type": "object", "additionalProperties": false,
            "patternProperties": {"^.*$": {"type": "integer"}}}}}"#;
    let extra = ["ab", "eth0", "\\n", "\\t", "\\", "\": ", "\"a", "a\"", "\", \"", "\"}", "0}", "\\u00e9", "{\""];
    let doc =
        r#"{"model": "x", "vendor": "y", "serial": "z", "tags": ["t"], "interfaces": {"eth0\t": 1, "a\u00e9b": 2}}"#;
    let vocab = ascii_vocab(&extra, &[0xC3, 0xA9]);
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
    cg.wait_class_bodies();
    assert_eq!(masks_along_docs_match_brute_force(&cg, &vocab, &[doc.as_bytes()]), doc.len() + 1);
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(br#"{"interfaces": {"eth"#).unwrap());
    let sliced =
        kernel_items(cg.automata(), m.chart()).iter().filter(|it| cg.class_body_tokens(it.state).is_some()).count();
    assert!(sliced >= 1, "the key position took no class-body slice");
    assert_eq!(cg.class_bodies_built_in_fills(), 0, "a fill built the key's slice");
}

/// A counted body of the JSON string character that is no string body (MaskBench o56021's `name`:
/// `^[A-Za-z][A-Za-z0-9_]*` within 18 characters, an unanchored pattern whose tail reads any
/// character, and the rule may end after each) takes the class-body slice of the string
/// character, read off the vocabulary's body slice (`ClassBodySlice::from_body`) rather than
/// walked (2.5 ms in o56021's fill at token 5 on Llama 3: its compile's tries went to the string
/// bodies of `value`, which read the same bytes). Masks equal the brute force at every position,
/// through escapes (`\/` refused, walked), `\u` and non-ASCII characters, on a vocabulary of this test's own and
/// on Llama 3 and Qwen 2.5; the tail's positions take a class-body slice. Fails without the
/// read-off (no slice counted by `class_body_slices_from_body`).
#[test]
fn string_character_chain_takes_its_slice_off_the_body_slice() {
    let schema = r#"{"type": "object", "properties": {
        "value": {"type": "string", "maxLength": 8177},
        "name": {"type": "string", "maxLength": 18, "minLength": 1, "pattern": "^[A-Za-z][A-Za-z0-9_]*"},
        "tags": {"type": "array", "items": {"type": "string"}}}, "additionalProperties": false}"#;
    let g = lax_schema_grammar(schema);
    let cases = ["TemperatureSensor", r#"a/ \u00e9\"x\n\\é中"#, "Ab-cd.ef gh ij klm", "Zz9_ "];
    let before = grammask_core::slice::class_body_slices_from_body();
    let extra = ["Temperature", "Sensor", "\\/", "\\u00", "e9", "\\\"", "\"}", "\", \"", "ab cd", "_9", "\\n"];
    let mut vocabs = vec![ascii_vocab(&extra, &[0xC3, 0xA9, 0xE4, 0xB8, 0xAD])];
    vocabs.extend(["llama3", "qwen2.5"].iter().filter_map(|name| shared_vocab(name)));
    let (mut checked, mut sliced) = (0, 0);
    for vocab in &vocabs {
        let cg = Arc::new(CompiledGrammar::new(&g, vocab).unwrap());
        cg.wait_class_bodies();
        for doc in cases {
            checked += masks_by_char_match_brute_force(&cg, vocab, "o56021 name", "name", doc);
        }
        // After `T` and `Te`: the tail of any character.
        for prefix in [r#"{"name": "T"#, r#"{"name": "Te"#] {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(prefix.as_bytes()).unwrap());
            let items = kernel_items(cg.automata(), m.chart());
            sliced += usize::from(items.iter().any(|it| cg.class_body_tokens(it.state).is_some()));
        }
    }
    assert_eq!(sliced, 2 * vocabs.len(), "tail positions that took no class-body slice");
    assert!(checked >= 50 * vocabs.len(), "{checked} masks checked");
    assert!(grammask_core::slice::class_body_slices_from_body() > before, "no slice read off the body slice");
}

/// Masks equal the brute force inside counted class bodies whose chain ends in a state reading
/// other bytes (an *exit*): o61649's `PayloadUUID` pattern
/// (`^[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-...-[0-9A-Za-z]{12}$`: the first four groups' chains exit
/// into a state reading `-`), an EBNF non-ASCII class exiting into several bytes (`.`, `,`, `\\`, `\u` escapes), and an
/// exit that reads `"` too; on Llama 3 and Qwen 2.5 at every position. A wrong count of the
/// characters before the exit accepts `abcd-` one position too early or refuses it.
#[test]
fn class_chain_exit_masks_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let Some(text) = maskbench_file("Github_hard---o61649") else { return };
    let task: serde_json::Value = serde_json::from_str(&text).unwrap();
    let pattern = text.split("\"pattern\": \"").nth(1).and_then(|p| p.split('"').next()).unwrap();
    assert!(pattern.starts_with("^[0-9A-Za-z]{8}-"), "{pattern} ({})", task["schema"]["title"]);
    let pattern = serde_json::from_str::<String>(&format!("\"{pattern}\"")).unwrap();
    let schema = serde_json::json!({"type": "object", "properties": {"u": {"type": "string", "pattern": pattern}}});
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let ebnf = json_schema_to_ebnf(&schema.to_string(), &opts).unwrap();
    let from_schema = grammask_core::ebnf::parse_ebnf(&ebnf, "root").unwrap();
    let ebnf = r#"root ::= "{\"x\": \"" [a-z\u00e0-\u00ff\u4e00-\u9fff]{6} ([.,] | "\\" ["n] | "\\u00" [0-9]{2}) [a-z]{0,3} "\"}" | "{\"q\": \"" [a-zA-Z ]{5} (["!] "!"?) "\"}""#;
    let from_ebnf = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    let mut exits = 0;
    let mut checked = 0;
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let schema_cg = Arc::new(CompiledGrammar::new(&from_schema, &vocab).unwrap());
        let ebnf_cg = Arc::new(CompiledGrammar::new(&from_ebnf, &vocab).unwrap());
        let cases: [(&Arc<CompiledGrammar>, &str, &str); 5] = [
            (&schema_cg, "u", "12345678-abcd-EFGH-1a2B-123456789012"),
            (&ebnf_cg, "x", "abc\u{e9}\u{4e2d}z.abc"),
            (&ebnf_cg, "x", "\u{4e2d}\u{4e2d}bcde\\u0041"),
            (&ebnf_cg, "q", "ab Cd!!"),
            (&ebnf_cg, "q", "ab Cd\""),
        ];
        for (cg, key, doc) in cases {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(format!("{{\"{key}\": \"").as_bytes()).unwrap());
            let chars: Vec<String> = doc.chars().map(String::from).collect();
            for i in 0..=chars.len() {
                let a = cg.automata();
                exits += kernel_items(a, m.chart()).iter().filter(|it| cg.class_body_exit(it.state).is_some()).count();
                let mask = m.compute_mask().unwrap().clone();
                let want = brute_force(&m, &vocab);
                for (t, &w) in want.iter().enumerate() {
                    assert_eq!(mask.get(t), w, "{name} {key} after {i} chars: token {:?}", vocab.token_bytes(t as u32));
                }
                checked += 1;
                if let Some(c) = chars.get(i) {
                    assert!(m.accept_bytes(c.as_bytes()).unwrap(), "{name} {key} char {i} {c:?}");
                }
            }
            assert!(m.accept_bytes(b"\"}").unwrap() && m.is_completed(), "{name} {key}");
        }
    }
    // Per vocabulary, the positions inside a chain with an exit: 8 + 3 * 4 in the UUID, 6 + 6 of
    // `x`, 5 + 5 of `q`.
    assert!(exits >= 2 * 30, "{exits} kernels took a class body with an exit");
    assert!(checked >= 100, "{checked} masks checked");
}

/// Checks the masks against the brute force at every position of string value `doc` (JSON text,
/// an escape one character) of property `key` of `cg`'s object, from its opening quote to the
/// object's end; returns the masks checked.
fn masks_by_char_match_brute_force(
    cg: &Arc<CompiledGrammar>,
    vocab: &Vocabulary,
    name: &str,
    key: &str,
    doc: &str,
) -> usize {
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(format!("{{\"{key}\": \"").as_bytes()).unwrap());
    // By JSON characters: an escape is one.
    let mut chars: Vec<String> = Vec::new();
    let mut rest = doc;
    while let Some(c) = rest.chars().next() {
        let n = match c {
            '\\' if rest[1..].starts_with('u') => 6,
            '\\' => 2,
            _ => c.len_utf8(),
        };
        chars.push(rest[..n].to_string());
        rest = &rest[n..];
    }
    for i in 0..=chars.len() {
        let mask = m.compute_mask().unwrap().clone();
        for (t, &w) in brute_force(&m, vocab).iter().enumerate() {
            assert_eq!(mask.get(t), w, "{name} {key} after {i} chars: token {:?}", vocab.token_bytes(t as u32));
        }
        if let Some(c) = chars.get(i) {
            assert!(m.accept_bytes(c.as_bytes()).unwrap(), "{name} {key} char {i} {c:?}");
        }
    }
    assert!(m.accept_bytes(b"\"}").unwrap() && m.is_completed(), "{name} {key} {doc}");
    chars.len() + 1
}

/// Masks equal the brute force inside fixed-shape pattern strings whose chains exit into a byte
/// that is itself a class character (`-` after `....`: an *inner* exit,
/// `grammask_core::slice::ClassChain::inner`): o89194's `clock_time`
/// (`^....-..-..T..:..:..((\+|-)..:..|Z)$`), a UUID of `.` groups, `\S\S:\S\S` and
/// `[a-z0-9]{3}x[a-z0-9]{2}` (a letter exit), through escapes, non-ASCII characters and the
/// exit characters inside the groups; on Llama 3, Qwen 2.5 and Phi 3.5 at every position. The
/// kernels at the group positions must take the class-body slice with its inner exit (they took
/// the region walk before: ~2-2.5 ms at o89194's first position on Llama 3). Nodes past the
/// chain left unwalked refuse `2022-` at the string start; walked at the wrong count, `202-`
/// is accepted.
#[test]
fn class_chain_inner_exit_masks_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {
        "t": {"type": "string", "pattern": "^....-..-..T..:..:..((\\+|-)..:..|Z)$"},
        "u": {"type": "string", "pattern": "^.{8}-.{4}-.{4}-.{4}-.{12}$"},
        "s": {"type": "string", "pattern": "^\\S\\S:\\S\\S$"},
        "w": {"type": "string", "pattern": "^[a-z0-9]{3}x[a-z0-9]{2}$"}}}"#;
    let g = lax_schema_grammar(schema);
    let cases: [(&str, &str); 8] = [
        ("t", "2022-01-01T12:00:00Z"),
        ("t", "1999-12-31T23:59:59+05:30"),
        ("t", r#"a-b\"-\u00e9\\-x-T-::\t::é-+:-:é:"#),
        ("t", "T:-Z----TTT:::-::---:-:-:"),
        ("u", "12345678-abcd-EFGH-1a2B-123456789012"),
        ("u", r#"-------\"-é-a\u00e9-b----x-y--z----------\\"#),
        ("s", "ab:c:"),
        ("w", "xx0xab"),
    ];
    let Some((inner, checked)) = class_cases_match_brute_force(&g, &cases) else { return };
    // Per vocabulary, the states inside a chain with an inner exit (each classified once, then
    // cached): 16 of `t` (its groups before `-`, `-`, `T`, `:`, `:`, `+-Z` and `:`), 20 of `u`, 2
    // of `s`, 3 of `w` (40 of them on each vocabulary, checked).
    assert!(inner >= 3 * 36, "{inner} kernels took a class body with an inner exit");
    assert!(checked >= 3 * 150, "{checked} masks checked");
}

/// Masks by character ([`masks_by_char_match_brute_force`]) along each `(key, text)` of `cases`
/// on Llama 3, Qwen 2.5 and Phi 3.5, once the compile's class-body thread is done: the kernels
/// that took a class body with an inner exit meanwhile, and the masks checked; `None` without
/// the shared vocabularies.
fn class_cases_match_brute_force(
    g: &grammask_core::grammar::Grammar,
    cases: &[(&str, &str)],
) -> Option<(usize, usize)> {
    let (before, mut checked) = (grammask_core::mask::class_inner_exits(), 0);
    for name in ["llama3", "qwen2.5", "phi3.5"] {
        let vocab = shared_vocab(name)?;
        let cg = Arc::new(CompiledGrammar::new(g, &vocab).unwrap());
        cg.wait_class_bodies();
        for &(key, doc) in cases {
            checked += masks_by_char_match_brute_force(&cg, &vocab, name, key, doc);
        }
    }
    Some((grammask_core::mask::class_inner_exits() - before, checked))
}

/// Masks equal the brute force in pattern strings whose class chains exit into a level of an
/// overlapping class, an exit that reads most of the chain's class characters: MaskBench
/// o63939's `file` (`^[\w\-\./]+\.php+$` within 16 to 1,024 characters: after a `.`, a level of
/// `[\w\-/]` less `p`, then one of `[\w\-/]`) and o82725's `theme`
/// (`^([\w\/-]|[\w-][\w\/-]*[\w-])$` within 255), on Llama 3, Qwen 2.5 and Phi 3.5 at every
/// position. No kernel may take the inner-exit walk there: its frontier would be all class text
/// past the chain (~30% of Llama 3's trie on chart frames; o63939's fills went 1.2 -> 4.4-8.6 ms
/// with it, session 62's `date62`); such an exit refuses the chain, as before inner exits.
#[test]
fn class_chain_wide_exit_masks_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {
        "f": {"type": "string", "minLength": 16, "maxLength": 1024, "pattern": "^[\\w\\-\\./]+\\.php+$"},
        "t": {"type": "string", "minLength": 0, "maxLength": 255, "pattern": "^([\\w\\/-]|[\\w-][\\w\\/-]*[\\w-])$"}}}"#;
    let g = lax_schema_grammar(schema);
    let cases: [(&str, &str); 7] = [
        ("f", "path/to/activity/MyActivityClass.php"),
        ("f", "a.b.c/d-e_f.g.phpp"),
        ("f", "..php/x.ph.php.php"),
        ("t", "christmas-taco"),
        ("t", "a//b/-c_d"),
        ("t", "/"),
        ("t", "-"),
    ];
    let Some((inner, checked)) = class_cases_match_brute_force(&g, &cases) else { return };
    assert_eq!(inner, 0, "kernels took the inner-exit walk");
    assert!(checked >= 3 * 90, "{checked} masks checked");
}

/// Masks equal the brute force inside counted class bodies whose levels read a few other ASCII
/// bytes into other states (*side bytes*, `grammask_core::slice::ClassLevel::Next`): the e-mail
/// `format`'s domain labels (`[0-9A-Za-z]`, up to 63 characters, `-` and `.` beside; the
/// label may end the string), and an EBNF counted class with `-`, `.` and `:` beside whose rule
/// ends before `>`; on Llama 3 and Qwen 2.5 at every position, through labels that run to their
/// last characters. The kernels at the label positions must take the class-body slice (they were
/// walked before: ~1-1.7 ms each on Llama 3, MaskBench o60252). A side byte's exit nodes left
/// unwalked refuse `bb-` or `.ru` after `aa@`; walked at the wrong count, a label of 64
/// characters is accepted.
#[test]
fn class_side_bytes_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {"e": {"type": "string", "format": "email"}}}"#;
    let ebnf = r#"root ::= "<" w ([-.:] w)* ">"
w ::= [a-zA-Z0-9]{1,40}"#;
    let from_schema = lax_schema_grammar(schema);
    let from_ebnf = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    // Labels of `n` characters, with (`label`) and without (`word`) a `-` inside.
    let label = |n: usize| "abc9-Z".chars().cycle().take(n - 1).chain(['x']).collect::<String>();
    let word = |n: usize| "abc9Z".chars().cycle().take(n).collect::<String>();
    let (mut sliced_at, mut checked) = (0, 0);
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let schema_cg = Arc::new(CompiledGrammar::new(&from_schema, &vocab).unwrap());
        let ebnf_cg = Arc::new(CompiledGrammar::new(&from_ebnf, &vocab).unwrap());
        let cases: [(&Arc<CompiledGrammar>, String); 4] = [
            (&schema_cg, r#"{"e": "aa@bb.ru"}"#.to_string()),
            (&schema_cg, format!(r#"{{"e": "x.y@{}.a--b.example-mail.com"}}"#, label(63))),
            (&schema_cg, format!(r#"{{"e": "info@{}"}}"#, label(62))),
            (&ebnf_cg, format!("<{}-ab.c:{}>", word(40), word(39))),
        ];
        for (cg, doc) in cases {
            let a = cg.automata();
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            checked += walk_masks_match_brute_force(&mut m, &vocab, doc.as_bytes(), |m| {
                sliced_at +=
                    usize::from(kernel_items(a, m.chart()).iter().any(|it| cg.class_body_capacity(it.state).is_some()));
            });
            assert!(m.is_completed(), "{name} {doc:?}");
        }
        // A domain label of 64 characters is refused.
        let mut m = Matcher::new(schema_cg.clone(), MatcherOptions::default()).unwrap();
        assert!(!m.accept_bytes(format!(r#"{{"e": "a@{}""#, label(64)).as_bytes()).unwrap_or(false), "{name}");
    }
    // Per vocabulary, most label positions: 2 + ~63 + ~15 + ~62 + ~80 in the EBNF.
    assert!(sliced_at >= 2 * 180, "{sliced_at} positions took a class-body slice");
    assert!(checked >= 2 * 280, "{checked} masks checked");
}

/// Masks equal the brute force inside `maxLength` strings whose `pattern` ends in `.*` (MaskBench
/// sp_340's `version`, `^(\d+\.\d+\.\d+.*)$` within 32 characters; a `^v.*$` tag within 12
/// beside it), which the regex converter writes as a call of the pattern's `.` rule per position
/// (JSON string characters but `\n`, `\r`, U+2028 and U+2029), a few positions inline and the
/// rest in nested optional rules (`str.re_30 ::= (str.re_1 str.re_31)?`): their positions take
/// the class-body slice of `.` through the nested calls (`class_capacity`'s `nested`, required),
/// on Llama 3 and Qwen 2.5, every byte position, with strings that stop short, fill the bound
/// exactly (the count left crosses every token length on the way), and hold escapes, `\u`
/// escapes and non-ASCII text; `\n`, a 33rd character and `1.0.x` are refused. A count off by
/// one accepts or refuses a token one character too early; a callee's end taken for the rule's
/// would lose the tokens that close the string.
#[test]
fn counted_call_bodies_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {
        "version": {"type": "string", "maxLength": 32, "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$"},
        "tag": {"type": "string", "maxLength": 12, "pattern": "^v.*$"}}}"#;
    let g = lax_schema_grammar(schema);
    // 32 characters: `1.0.0` and 27 more (an escape counts one).
    let full = format!("1.0.0-{}", "rc.7+b".chars().cycle().take(26).collect::<String>());
    let docs = [
        r#"{"version": "1.0.0"}"#.to_string(),
        format!(r#"{{"version": "{full}", "tag": "v1.2 final\"x"}}"#),
        "{\"tag\": \"vé\\u0001\\t ключ\", \"version\": \"10.20.30 \\\\ beta — сборка \\f\"}".to_string(),
        format!(r#"{{"version": "0.0.0{}"}}"#, " ".repeat(27)),
    ];
    let (mut sliced_at, mut checked) = (0, 0);
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        cg.wait_class_bodies();
        let a = cg.automata();
        for doc in &docs {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            checked += walk_masks_match_brute_force(&mut m, &vocab, doc.as_bytes(), |m| {
                sliced_at +=
                    usize::from(kernel_items(a, m.chart()).iter().any(|it| cg.class_body_capacity(it.state).is_some()));
            });
            assert!(m.is_completed(), "{name} {doc:?}");
        }
        // 33 characters, a line feed, or no third number, are refused.
        let bad_lines = [
            format!(r#"{{"version": "{full}x"#),
            r#"{"version": "1.0.0\n"#.to_string(),
            r#"{"version": "1.0.x"#.to_string(),
        ];
        for bad in bad_lines {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(!m.accept_bytes(bad.as_bytes()).unwrap_or(false), "{name} {bad}");
        }
    }
    eprintln!("{sliced_at} positions took a class-body slice, {checked} masks checked");
    assert!(sliced_at >= 2 * 70, "{sliced_at} positions took a class-body slice");
    assert!(checked >= 2 * 200, "{checked} masks checked");
}

/// Masks equal the brute force along string patterns the regex converter writes as a call per
/// character (`re ::= re_1*`, `re_1` a class rule: MaskBench o68280's `mkv` key-value list of
/// negated classes beside `\s`, and `mkw`'s `[^&]*`), on Llama 3 and Qwen 2.5, every byte
/// position: keys and values with spaces, Unicode spaces, escapes and non-ASCII text. Such a
/// loop's rows differ by their last character's spent end only, and the walk interns them as
/// one row (`Chart::last_future_signature`, required to happen); a spent item left out wrongly
/// (an end of the kernel's own rule) would take the rule's ends, and the `"` after them, from
/// another row.
#[test]
fn call_loop_rows_interned_match_brute_force() {
    let docs = [
        r#"{"mid": 1, "mkv": "color:blue,len:3", "mkw": "a,b"}"#,
        "{\"mid\": 2, \"mkv\": \" key : v ,\u{a0}ключ\u{a0}: знач\\n, \\tk3:\", \"mkw\": \"a: b,\\\"c\\\" é\"}",
        r#"{"mid": 3, "mkv": "  ", "mkw": ""}"#,
    ];
    let Some((checked, merged)) =
        call_loop_masks_match_brute_force(&docs, "", false, grammask_core::mask::spent_row_merges)
    else {
        return;
    };
    assert!(merged > 0, "no walk interned a call loop's rows as one");
    assert!(checked >= 2 * 150, "{checked} masks checked");
}

/// Masks equal the brute force where a call loop's rows take the run index of its class, built
/// on the compile's class-body thread (`CallLoopRuns`, waited for here; a fill never builds one):
/// o68280's two patterns on Llama 3 and Qwen 2.5, every byte position, with keys and values of
/// class runs broken by spaces, escapes, `"`, U+00A0 and Cyrillic text. Some row must take such an
/// index (`call_loop_runs_taken`); an index of the wrong class would accept tokens running into
/// a refused byte (`,` `:` `&`) or past the key into the `"`.
#[test]
fn call_loop_run_index_masks_match_brute_force() {
    let docs = [
        r#"{"mid": 1, "mkv": "color:blue,length:30,priceTypeName:gross", "mkw": "a,b"}"#,
        "{\"mid\": 2, \"mkv\": \"ke_y-1.x : v ,\u{a0}ключ\u{a0}: знач\\n, \\tk3\\\"q:\", \"mkw\": \"a: b,\\\"c\\\" é\"}",
    ];
    let Some((checked, taken)) =
        call_loop_masks_match_brute_force(&docs, WIDE_INDEX_REFUSED, true, call_loop_runs_taken)
    else {
        return;
    };
    assert!(taken > 0, "no walk took a call loop's run index");
    assert!(checked >= 2 * 150, "{checked} masks checked");
}

/// Masks equal the brute force where a row enters a call loop: after a key's first character
/// (a row of its own, whose class bytes all lead to the loop's row) the walk takes the loop's run
/// index and reads each run as staying in the loop's row (`KernelWalk::runs_at`). o68280's
/// patterns with keys of one and two characters, keys started by a space, by an escape or by a
/// non-ASCII character, keys broken right after their first character (`:`, a space, U+00A0,
/// `"`, Cyrillic) and later pairs after `,`. Some row must take such an index
/// (`call_loop_entries_taken`).
#[test]
fn call_loop_entry_masks_match_brute_force() {
    let docs = [
        r#"{"mid": 1, "mkv": "a:b,cd:e, f :g,h\"i:j", "mkw": "x"}"#,
        "{\"mid\": 2, \"mkv\": \"\\u00e9x:1,ж:2,k\u{a0}:3,é: b,kй:4, ab:\", \"mkw\": \"y\"}",
    ];
    let Some((checked, taken)) =
        call_loop_masks_match_brute_force(&docs, WIDE_INDEX_REFUSED, true, call_loop_entries_taken)
    else {
        return;
    };
    assert!(taken > 0, "no walk took the run index of the call loop it enters");
    assert!(checked >= 2 * 100, "{checked} masks checked");
}

/// Masks equal the brute force where a row holds a call loop's item and takes the UTF-8 run
/// index of its class less the multi-byte characters its callee refuses (o68280's key
/// `[^,:&\s]+` refuses 19 Unicode spaces), or a plain state's UTF-8 index (the value
/// `[^,:&]*` beside its rule's end): keys of multi-byte characters (2, 3 and 4 bytes), keys
/// ended by each refused space (U+00A0, U+1680, U+2000, U+200A, U+2028, U+2029, U+202F,
/// U+205F, U+3000, U+FEFF) before their `:`, characters next to them that keys read (U+00A1,
/// U+200B, U+2030, U+3001, U+FEFE), and values holding the spaces, on Llama 3 and Qwen 2.5
/// after the class-body thread. Some row must take such an index (`call_loop_wide_taken`).
#[test]
fn call_loop_wide_index_masks_match_brute_force() {
    let docs = [
        "{\"mid\": 1, \"mkv\": \"\u{e9}t\u{e9}:\u{a0}x\u{a0},\u{4e2d}\u{6587}\u{a0}:\u{3000}v\u{3000},\u{1f600}k\u{2000}:\u{2028}\"}",
        "{\"mid\": 2, \"mkv\": \"a\u{200a}:b, c\u{1680}:d,e\u{2029}:\u{feff}f,g\u{202f}:h,i\u{205f}:j\u{205f}\", \"mkw\": \"\u{a0}\"}",
        "{\"mid\": 3, \"mkv\": \"\u{a1}\u{200b}\u{2030}:x,\u{3001}\u{fefe}\u{feff}:y,\u{a1}x\u{200b}\u{3000}:\u{10ffff}\"}",
    ];
    let Some((checked, taken)) = call_loop_masks_match_brute_force(&docs, "", true, call_loop_wide_taken) else {
        return;
    };
    assert!(taken > 0, "no walk took a UTF-8 run index of a row's item");
    assert!(checked >= 2 * 150, "{checked} masks checked");
}

/// A call loop's wide index (`[^,:&\s]+` less its refused Unicode spaces) is set with the
/// compile, built on the compiling thread or taken from the vocabulary by a later compile
/// (`call_loop_wide_with_compile`), so that the very first fills take it without waiting for the
/// class-body thread (o68280 token 19 came before that thread in every sample run): o68280's
/// patterns compiled twice on Llama 3 and Qwen 2.5, masks against the brute force from the
/// first fill on, some row taking a wide index (`call_loop_wide_taken`).
#[test]
fn call_loop_wide_index_is_set_with_the_compile() {
    let schema = r#"{"type": "object", "properties": {"mid": {"type": "integer"},
        "mkv": {"type": "string", "pattern": "^(\\s*|((\\s*[^,:&\\s]+\\s*:[^,:&]*)(,\\s*[^,:&\\s]+\\s*:[^,:&]*)*))$"}},
        "required": ["mid"]}"#;
    let g = lax_schema_grammar(schema);
    let doc = "{\"mid\": 1, \"mkv\": \"col\u{e9}r:blue,\u{4e2d}\u{6587}\u{3000}: x,len:3\"}";
    let mut checked = 0;
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        for compile in 0..2 {
            let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
            assert!(cg.call_loop_wide_with_compile() > 0, "{name} compile {compile}: no wide index set with it");
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let before = call_loop_wide_taken();
            checked += walk_masks_match_brute_force(&mut m, &vocab, doc.as_bytes(), |_| {});
            assert!(call_loop_wide_taken() > before, "{name} compile {compile}: no row took a wide index");
            assert!(m.is_completed(), "{name}");
        }
    }
    assert!(checked >= 4 * 40, "{checked} masks checked");
}

use grammask_core::mask::{call_loop_entries_taken, call_loop_runs_taken, call_loop_wide_taken};

/// Walks `docs` against the brute force on o68280's `mkv`/`mkw` patterns, on Llama 3 and Qwen 2.5
/// (after the class-body thread when `wait`), and checks that `&`, and a key without its `:`, are
/// refused; returns the masks checked and how far `counter` (a per-thread test counter) rose
/// during the walks (the brute force only accepts: no walk of its own). `None` without the data.
/// Extra ranges for the key class of [`call_loop_masks_match_brute_force`] that refuse whole
/// UTF-8 prefixes (Greek and Coptic, `CE` / `CF`), so that no wide index is made for the loop
/// (`call_loop_refused` gives up) and the loop's ASCII index is what a row can take.
const WIDE_INDEX_REFUSED: &str = "\\\\u0370-\\\\u03ff";

/// o68280's schema, its keys' class also refusing the JSON-escaped regex ranges `key_refused`.
fn call_loop_masks_match_brute_force(
    docs: &[&str],
    key_refused: &str,
    wait: bool,
    counter: fn() -> usize,
) -> Option<(usize, usize)> {
    let schema = r#"{"type": "object", "properties": {"mid": {"type": "integer"},
        "mkv": {"type": "string", "pattern": "^(\\s*|((\\s*[^,:&\\sK]+\\s*:[^,:&]*)(,\\s*[^,:&\\sK]+\\s*:[^,:&]*)*))$"},
        "mkw": {"type": "string", "pattern": "^[^&]*$"}}, "required": ["mid"]}"#
        .replace('K', key_refused);
    let g = lax_schema_grammar(&schema);
    let (mut checked, mut rose) = (0, 0);
    for name in ["llama3", "qwen2.5"] {
        let vocab = shared_vocab(name)?;
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        if wait {
            cg.wait_class_bodies();
        }
        for doc in docs {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let before = counter();
            checked += walk_masks_match_brute_force(&mut m, &vocab, doc.as_bytes(), |_| {});
            rose += counter() - before;
            assert!(m.is_completed(), "{name} {doc:?}");
        }
        for bad in [r#"{"mid": 1, "mkw": "a&"#, r#"{"mid": 1, "mkv": "a:b&"#, r#"{"mid": 1, "mkv": "a b""#] {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(!m.accept_bytes(bad.as_bytes()).unwrap_or(false), "{name} {bad}");
        }
    }
    Some((checked, rose))
}

/// Masks equal the brute force inside regex-bodied strings whose loops refuse a few multi-byte
/// characters, which take their class's UTF-8 run index less those characters
/// (`loop_refused`): o64996's `^(.+)/(.+)$` (`.` refuses U+2028 and U+2029) and o22050's
/// `^[^:\s]+:[^:\s]+(:[^\s]+)?$` (`\s` refuses the Unicode spaces), with the characters next
/// to the refused ones (U+2027, U+202A, U+00A1, U+200B, U+2030, U+3001, U+FEFE), 2-, 3- and
/// 4-byte ones, on Llama 3, Qwen 2.5 and Phi 3.5 after the class-body thread (every token
/// holding a refused character is refused by the masks). Some walk must take such an index
/// (`call_loop_wide_taken`).
#[test]
fn plain_loop_wide_index_masks_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {"n": {"type": "integer"},
        "mediatype": {"type": "string", "pattern": "^(.+)/(.+)$"},
        "id": {"type": "string", "pattern": "^[^:\\s]+:[^:\\s]+(:[^\\s]+)?$"}}, "required": ["n"]}"#;
    let docs = [
        "{\"n\": 1, \"mediatype\": \"\u{e9}t\u{2027}/\u{202a}x\u{2030}/\u{4e2d}\u{6587}\u{1f600}\"}",
        "{\"n\": 2, \"mediatype\": \"\u{202a}\u{2027}/\u{e9}\", \"id\": \"\u{a1}\u{200b}:\u{3001}\u{fefe}x:\u{2030}:\u{10ffff}\"}",
        "{\"n\": 3, \"id\": \"\u{1f600}a\u{2027}:\u{202a}b\"}",
    ];
    let g = lax_schema_grammar(schema);
    for name in ["llama3", "qwen2.5", "phi3.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        cg.wait_class_bodies();
        let before = call_loop_wide_taken();
        let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
        assert!(call_loop_wide_taken() > before, "{name}: no walk took a loop's UTF-8 index");
        assert!(checked >= 150, "{checked} masks checked");
        for bad in ["\u{2028}", "\u{2029}", "a\u{2028}/b"] {
            let doc = format!("{{\"n\": 1, \"mediatype\": \"a/{bad}");
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(!m.accept_bytes(doc.as_bytes()).unwrap_or(false), "{name} {doc:?}");
        }
        for bad in ["\u{a0}", "\u{3000}", "\u{2028}", "\u{1680}"] {
            let doc = format!("{{\"n\": 1, \"id\": \"a{bad}");
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(!m.accept_bytes(doc.as_bytes()).unwrap_or(false), "{name} {doc:?}");
        }
    }
}

/// Masks equal the brute force inside the keys of an open object, where the kernels of the
/// excluded-key trie's positions are derived from the string body's kernel less the rests of
/// the known keys (`CompiledGrammar::excluded_kernel`, checked to be taken): known keys that
/// share prefixes and that are prefixes of one another, typed as extra keys that stop at, run
/// past or leave each of them, on Llama 3 and Qwen 2.5. A derived kernel that kept its string
/// body's uncertain tokens would accept a token closing a known key (`_"`) as an extra one.
#[test]
fn excluded_key_masks_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    // Long keys, and many: the trie's deeper nodes and the string body rule keep automata of
    // their own (a short trie's nodes past its first are inlined into that first one).
    let mut keys: Vec<String> =
        ["abcdefghijklmnop", "abcdefghijklmnop_", "abcdefghijklmnopq", "abcdefghijklmnopqr", "abcdefghijXYZ"]
            .map(String::from)
            .to_vec();
    keys.extend((0..30).map(|i| format!("filler_key_number_{i:02}")));
    let props: Vec<String> = keys.iter().map(|k| format!("\"{k}\": {{\"type\": \"integer\"}}")).collect();
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let separators = Some((",".to_string(), ":".to_string()));
    let opts = JsonSchemaOptions { strict_mode: false, separators, ..Default::default() };
    let g = json_schema_to_grammar(&schema, &opts).unwrap();
    // Through known keys and past them, leaving them at several depths. Known keys come back
    // only as extra keys once past the last property (properties keep their order): the extra
    // key must refuse `_"` after `abcdefghijklmnop`, which the string body's kernel accepts.
    let keys =
        ["abcdefghijklmnop_x", "abcdefghijklmnopqrs", "abcdefghijklmnoZ", "abcdefghijXYZW", "filler_key_number_1x"];
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut checked = 0;
        for key in keys {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(b"{\"filler_key_number_29\":1,\"").unwrap());
            for (i, &b) in key.as_bytes().iter().enumerate() {
                assert!(m.accept_bytes(&[b]).unwrap());
                let mask = m.compute_mask().unwrap().clone();
                let want = brute_force(&m, &vocab);
                for (t, &w) in want.iter().enumerate() {
                    let at = &key[..=i];
                    assert_eq!(mask.get(t), w, "{name} after {at:?}: token {:?}", vocab.token_bytes(t as u32));
                }
                checked += 1;
            }
            assert!(m.accept_bytes(b"\":1}").unwrap() && m.is_completed(), "{key}");
        }
        assert_eq!(checked, 87);
        assert!(cg.kernel_stats().excluded >= 10, "{name}: {:?}", cg.kernel_stats());
    }
}

/// Masks equal the brute force at every position inside an open object's keys on a vocabulary
/// made for the excluded-key kernels' look-up (`mask/excluded.rs`): for each rest `r` of a known
/// key, tokens `r"` and `r":` (refused as an extra key there), and tokens of the same length and
/// first byte that differ in a later byte (`r` with one byte changed, then `"`; allowed). The
/// look-up finds the tokens ending the key after `r` by length and first byte: without comparing
/// the rest it refuses the changed ones, and a derived kernel that kept the string body's own
/// (its `Arc`, taken where nothing ends after a rest) accepts `r"`.
#[test]
fn excluded_key_lookups_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    // Long keys, and many: the trie's deeper nodes keep automata of their own (a short trie's
    // nodes past its first are inlined into that first one).
    let mut keys: Vec<String> = ["abcdefghijklmnop", "abcdefghijklmnopq", "abcdefghijXYZ"].map(String::from).to_vec();
    keys.extend((0..30).map(|i| format!("filler_key_number_{i:02}")));
    let mut extra = Vec::new();
    for k in &keys[..3] {
        for i in 0..k.len() {
            let r = &k[i..];
            extra.push(format!("{r}\""));
            extra.push(format!("{r}\":"));
            if r.len() >= 2 {
                extra.push(format!("{}~\"", &r[..r.len() - 1]));
            }
        }
    }
    extra.sort();
    extra.dedup();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let vocab = ascii_vocab(&extra, &[]);
    let props: Vec<String> = keys.iter().map(|k| format!("\"{k}\": {{\"type\": \"integer\"}}")).collect();
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let separators = Some((",".to_string(), ":".to_string()));
    let opts = JsonSchemaOptions { strict_mode: false, separators, ..Default::default() };
    let cg = Arc::new(CompiledGrammar::new(&json_schema_to_grammar(&schema, &opts).unwrap(), &vocab).unwrap());
    // Extra keys after the last property: the known keys themselves are refused.
    let docs: Vec<Vec<u8>> = ["abcdefghijklmnop~", "abcdefghijklmnopqr", "abcdefghijXY~", "abcdefghijklmno~"]
        .map(|k| format!("{{\"filler_key_number_29\":1,\"{k}\":1}}").into_bytes())
        .to_vec();
    let docs: Vec<&[u8]> = docs.iter().map(|d| &d[..]).collect();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(checked >= 100, "{checked} masks checked");
    assert!(cg.kernel_stats().excluded >= 15, "{:?}", cg.kernel_stats());
}

/// Short known keys (a trie the automaton builder would inline into the extra-key entry): the
/// entry's state after its `"` calls the trie's first rule, and its kernel is composed from the
/// string body's less the words, as are the positions inside a key; masks along extra keys that
/// pass through every trie node, end right after a known key's prefix, or run on past a whole
/// known key, equal the brute force. The kernel counts fail with the trie inlined again (no
/// excluded kernel: the key start and every position inside the key are walked).
#[test]
fn short_excluded_key_starts_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let keys = ["config", "content", "co", "id"];
    let mut extra: Vec<String> = Vec::new();
    for k in keys {
        for i in 0..=k.len() {
            let r = &k[i..];
            for tail in ["\"", "\":", "\":1", "\":{\"", "x\"", "x\":"] {
                extra.push(format!("{r}{tail}"));
            }
            extra.push(r.to_string());
            extra.push(format!("{{\"{r}"));
            extra.push(format!(",\"{r}"));
        }
    }
    extra.sort();
    extra.dedup();
    extra.retain(|t| t.len() > 1);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let vocab = ascii_vocab(&extra, &[]);
    let schema = r#"{"type": "object", "properties": {"config": {"type": "integer"}, "content": {"type": "object",
        "properties": {"id": {"type": "integer"}}}, "co": {"type": "integer"}}}"#;
    let separators = Some((",".to_string(), ":".to_string()));
    let opts = JsonSchemaOptions { strict_mode: false, separators, ..Default::default() };
    let cg = Arc::new(CompiledGrammar::new(&json_schema_to_grammar(schema, &opts).unwrap(), &vocab).unwrap());
    let docs: Vec<&[u8]> = vec![
        br#"{"conf":1,"config":2,"contentx":{"idx":3,"i":{},"id":4},"c":1,"cox":2,"co":3}"#,
        br#"{"content":{"id":1,"":2},"configs":1,"":{"con":1}}"#,
        br#"{"x":1,"cont":2}"#,
    ];
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(checked >= 100, "{checked} masks checked");
    let stats = cg.kernel_stats();
    assert!(stats.excluded >= 8 && stats.composed >= 2, "{stats:?}");
    // A second grammar of the vocabulary takes the first's string-body kernel and its sorted
    // uncertain tokens (per vocabulary), less its own words.
    let schema = r#"{"type": "object", "properties": {"cox": {"type": "integer"}, "i": {"type": "integer"}}}"#;
    let cg = Arc::new(CompiledGrammar::new(&json_schema_to_grammar(schema, &opts).unwrap(), &vocab).unwrap());
    let docs: Vec<&[u8]> = vec![br#"{"co":1,"cox":2,"id":3,"i":4,"conf":5}"#, br#"{"c":{"config":1}}"#];
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) >= 50);
    assert!(cg.kernel_stats().excluded >= 4, "{:?}", cg.kernel_stats());
}

/// An open object's excluded-key trie is one rule per 32 trie levels (`jstr::not_in_ascii_trie`;
/// it was one rule per trie node): masks at every byte of extra keys that pass through the trie,
/// leave it at each depth, stop at or run past a known key, and cross the rule boundaries at
/// depths 32 and 64 (keys of 33-70 bytes, one exactly 32), equal the brute force under canonical
/// spelling on a vocabulary of the keys' pieces and on Llama 3 and Qwen 2.5. The rule count
/// fails with one rule per node.
#[test]
fn one_rule_key_tries_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let long = "spec_template_metadata_annotations_kubernetes_io_last_applied_config";
    let mut keys: Vec<String> = vec![long.into(), long[..40].into(), format!("{}X", &long[..32]), long[..32].into()];
    keys.extend(["a", "ab", "abc", "b", "name", "names", "x y", "x~"].map(String::from));
    keys.extend((0..30).map(|i| format!("filler_{i:02}")));
    keys.push("zz_last".into());
    let props: Vec<String> = keys.iter().map(|k| format!("\"{k}\": {{\"type\": \"integer\"}}")).collect();
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let separators = Some((",".to_string(), ":".to_string()));
    let opts = JsonSchemaOptions { strict_mode: false, separators, ..Default::default() };
    let g = json_schema_to_grammar(&schema, &opts).unwrap();
    // The root, one rule for the 32-byte prefix of `long` (three keys run past it, one ends
    // there) and one for its 64-byte prefix.
    // (`key_not_in_1`, no key excluded, is another object's.)
    let trie_rules = g.rules().iter().filter(|r| r.name == "key_not_in" || r.name.starts_with("key_not_in.")).count();
    assert_eq!(trie_rules, 3, "one rule per node?");
    assert_eq!(g.excluded_words().unwrap().rules.len(), 4);
    let mut docs: Vec<String> = Vec::new();
    for extra in [
        format!("{}Y", &long[..32]),
        format!("{}_", &long[..64]),
        format!("{}Z", &long[..65]),
        format!("{long}x"),
        long[..33].to_string(),
        long[..31].to_string(),
        format!("{}XY", &long[..32]),
        "abcd".into(),
        "a~".into(),
        "namesx".into(),
        "nam".into(),
        "x".into(),
        "filler_3".into(),
        "filler_030".into(),
        String::new(),
        "x\\u001f".into(),
        "na\\n".into(),
        "é".into(),
    ] {
        docs.push(format!("{{\"zz_last\":1,\"{extra}\":2}}"));
    }
    // Known keys in the schema's order (an object's properties keep it).
    docs.push(format!("{{\"{long}\":1,\"{}\":2,\"abc\":3,\"zz_last\":4}}", &long[..32]));
    let mut rng = Rng(67);
    let pieces: &[&[u8]] = &[
        b"{",
        b"}",
        b"\"",
        b":",
        b",",
        b"1",
        b"_",
        b"a",
        b"b",
        b"x",
        b"y",
        b"X",
        b"Y",
        b"Z",
        b"~",
        b" ",
        b"\\",
        b"u001f",
        b"spec",
        b"_template",
        b"metadata",
        b"_annotations",
        b"_kubernetes",
        b"_io",
        b"_last",
        b"_applied",
        b"_config",
        b"name",
        b"names",
        b"filler",
        b"_0",
        b"3",
        b"zz",
        b"\xc3",
        b"\xa9",
    ];
    // The large vocabularies along one document, an extra key that runs through both rule
    // boundaries and leaves the trie after 64 bytes (each brute force is ~150k matcher copies).
    let few = [docs[1].clone()];
    for (name, vocab) in pieces_and_shared_vocabs(&mut rng, pieces, 300, &["llama3", "qwen2.5"]) {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let docs: Vec<&[u8]> =
            (if name == "pieces" { &docs[..] } else { &few[..] }).iter().map(String::as_bytes).collect();
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
        assert!(checked >= 80, "{name}: {checked} masks checked");
        assert!(cg.kernel_stats().excluded >= 10, "{name}: {:?}", cg.kernel_stats());
    }
}

/// A tool-calling grammar in the shape of a structural tag (free text, then tags whose fixed
/// strings start with `{"name": "`, `", "parameters": ` and known keys, JSON-like arguments).
const TOOL_CALL_EBNF: &str = r#"
root ::= text (tag text)*
text ::= [^{]*
tag ::= "{\"name\": \"get_weather\", \"parameters\": {\"city\": " str ", \"unit\": " unit "}}"
    | "{\"name\": \"get_time\", \"parameters\": {\"zone\": " str ws "}}"
    | "{\"name\": \"get_timer_list\", \"parameters\": {\"limit\": " int "}}"
unit ::= "\"celsius\"" | "\"fahrenheit\""
str ::= "\"" [^"\\]* "\""
int ::= [1-9] [0-9]{0,2}
ws ::= [ \n]{0,4}
"#;

/// Literal kernels (`CompiledGrammar::literal_kernel`: a plain walk of the one subtree a
/// position inside a fixed string reads) equal the reference walks, and masks along tool calls
/// that pass through them equal the brute force, on Llama 3 and Qwen 2.5. A literal walk that
/// dropped the tokens the literal is a prefix of (`", "`), the tokens along it, or a rule end
/// below it, would differ from both.
/// Fills a bitmask row (over stale bits) at every byte of `doc` with two matchers of `cg` in turn,
/// the first computing each mask, the second copying it from the memo (few tokens: their ids),
/// and checks every row against [`brute_force`]; returns the rows checked.
fn rows_along_doc_match_brute_force(cg: &Arc<CompiledGrammar>, vocab: &Vocabulary, doc: &[u8]) -> usize {
    let mut checked = 0;
    for _ in 0..2 {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (i, &b) in doc.iter().enumerate() {
            let mut row = vec![u32::MAX; vocab.vocab_size().div_ceil(32)];
            m.fill_next_token_bitmask(&mut row).unwrap();
            for (t, w) in brute_force(&m, vocab).into_iter().enumerate() {
                let text = String::from_utf8_lossy(&doc[..i]);
                let got = row[t / 32] >> (t % 32) & 1 == 1;
                assert_eq!(got, w, "after {text:?}: token {:?}", vocab.token_bytes(t as u32));
            }
            checked += 1;
            assert!(m.accept_bytes(&[b]).unwrap());
        }
    }
    checked
}

/// The masks at a tool call's fixed strings allow a few tokens each, kept as token ids by their
/// kernels (literal chains, classified with the grammar) and by the mask memo: rows filled from
/// them, computed or memoized, equal brute force at every byte. Fails if a list of ids loses or
/// adds a token (e.g. the memo's write leaving a row's stale bits, or a fill dropping the
/// uncertain tokens from the list).
/// A string start whose kernel is shifted from its loop's (`CompiledGrammar::shifted_kernel`)
/// walks its few differing subtrees without the class-body slice the compile's thread has not set
/// yet, instead of building it in the fill (1.5 ms on Llama 3): o82696 / o82667's `css_class`
/// (`^[\w\s-]+$`; `\s` reads UTF-8 spaces, so the string start and the loop differ on their
/// leads), with that thread held back (`hold_class_bodies`, as when the fills come first). At the
/// string start the path is taken (`pending_class_bodies_shifted`) and no slice is built; masks
/// equal the brute force at every position on Llama 3, held and with the thread's slices built.
#[test]
fn shifted_string_starts_pass_a_pending_class_body_match_brute_force() {
    use grammask_core::compiled::hold_class_bodies;
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {"aside": {"type": "boolean"},
        "css_class": {"type": "string", "pattern": "^[\\w\\s-]+$"}, "etag": {"type": "string", "pattern": "^[\\w\\.:-]+$"}}}"#;
    let g = lax_schema_grammar(schema);
    hold_class_bodies(true);
    let held = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    hold_class_bodies(false);
    let mut m = Matcher::new(held.clone(), MatcherOptions::default()).unwrap();
    let start = br#"{"aside": false, "css_class": ""#;
    assert!(m.accept_bytes(start).unwrap());
    let mask = m.compute_mask().unwrap().clone();
    assert!(held.pending_class_bodies_shifted() > 0, "the string start was not shifted past its pending slice");
    assert_eq!(held.class_bodies_built_in_fills(), 0, "the string start's fill built its class-body slice");
    for (t, &w) in brute_force(&m, &vocab).iter().enumerate() {
        assert_eq!(mask.get(t), w, "after {start:?}: token {:?}", vocab.token_bytes(t as u32));
    }
    let docs: [&[u8]; 2] = [
        "{\"aside\": false, \"css_class\": \"a-b c_9\u{a0}x\", \"etag\": \"e.1:x\"}".as_bytes(),
        br#"{"css_class": "-"}"#,
    ];
    let n: usize = docs.iter().map(|d| d.len() + 1).sum();
    assert_eq!(masks_along_docs_match_brute_force(&held, &vocab, &docs), n);
    let built = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    built.wait_class_bodies();
    assert_eq!(masks_along_docs_match_brute_force(&built, &vocab, &docs), n);
}

/// A pending class body's bounded try (`CompiledGrammar::classify`, 8,192 nodes) whose region
/// walk would cross that budget asks it first and skips the walk it would drop: MaskBench
/// o63939's `activityTaskList` (`^[\w\.\- ]+$` within 64), its fill before the compile's thread
/// (`hold_class_bodies`), walked ~10 M instructions of region before building its slice. Taken
/// there (`region_budget_asked_first`); masks equal the brute force along documents on Llama 3,
/// held and with the thread's slices built. With `é` in the class (a class of body text no more,
/// so its slice is walked and the fill tries without it first, `ClassBodies::pending_cheap`).
#[test]
fn pending_class_body_skips_a_region_walk_past_its_budget_match_brute_force() {
    use grammask_core::compiled::hold_class_bodies;
    use grammask_core::mask::region_budget_asked_first;
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {
        "activityTaskList": {"type": "string", "pattern": "^[\\w\\.\\- é]+$", "minLength": 3, "maxLength": 64},
        "class": {"type": "string", "pattern": "^[\\w\\-]+$", "maxLength": 256}}}"#;
    let g = lax_schema_grammar(schema);
    hold_class_bodies(true);
    let held = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    hold_class_bodies(false);
    let mut m = Matcher::new(held.clone(), MatcherOptions::default()).unwrap();
    let start = br#"{"activityTaskList": ""#;
    assert!(m.accept_bytes(start).unwrap());
    let before = region_budget_asked_first();
    let mask = m.compute_mask().unwrap().clone();
    assert!(region_budget_asked_first() > before, "the pending try walked its region past its budget");
    for (t, &w) in brute_force(&m, &vocab).iter().enumerate() {
        assert_eq!(mask.get(t), w, "after {start:?}: token {:?}", vocab.token_bytes(t as u32));
    }
    let docs: [&[u8]; 2] = [
        "{\"activityTaskList\": \"my-task list.v2 \u{e9}t\u{e9}\", \"class\": \"My_Class-1\"}".as_bytes(),
        br#"{"class": "x"}"#,
    ];
    let n: usize = docs.iter().map(|d| d.len() + 1).sum();
    assert_eq!(masks_along_docs_match_brute_force(&held, &vocab, &docs), n);
    let built = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    built.wait_class_bodies();
    assert_eq!(masks_along_docs_match_brute_force(&built, &vocab, &docs), n);
}

/// Class-body slices of classes of body text are found by a scan of the trie that skips every
/// subtree of class text whole (`ClassBodySlice::pruned`, `ClassTextIndex`), rather than a walk of
/// the class text (~6.8 M instructions a slice on Llama 3, paid by a fill that finds the slice
/// unbuilt: MaskBench o63939 t6, o37613 t5, ~2-3.4 ms). o63939's `activityTaskList`, `file` and
/// `class` (`[\w\.\- ]`, `[\w\-\./]`, `[\w\-]`), o37613's `familyname` (`[^,"]`: the multi-byte
/// characters and escapes but `\"`), a class of a few multi-byte characters (left to the walk).
/// On Llama 3 each scanned slice equals the walked one; with the compile's thread held
/// (`hold_class_bodies`: each first fill builds its slice, the race's worst case) the fills build
/// them by the scan (`class_body_slices_pruned`) and masks equal the brute force along documents.
#[test]
fn class_text_slices_by_a_pruned_scan_match_brute_force() {
    use grammask_core::compiled::hold_class_bodies;
    use grammask_core::slice::{class_body_slices_pruned, BodySlice, ClassBodies, ClassBodySlice, ClassTextIndex};
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {
        "activityTaskList": {"type": "string", "pattern": "^[\\w\\.\\- ]+$", "minLength": 3, "maxLength": 64},
        "file": {"type": "string", "pattern": "^[\\w\\-\\./]+\\.php+$", "minLength": 16, "maxLength": 1024},
        "class": {"type": "string", "pattern": "^[\\w\\-]+$", "minLength": 8, "maxLength": 256},
        "familyname": {"type": "string", "pattern": "^[^,\"]+$", "maxLength": 255},
        "accented": {"type": "string", "pattern": "^[a-z\u00e0-\u00ff]{1,40}$"}}}"#;
    let g = lax_schema_grammar(schema);
    // Each class form of the grammar, scanned and walked.
    let a = grammask_core::compiler::Automata::build(&g).unwrap();
    let (bodies, follow) = (ClassBodies::default(), grammask_core::follow::ByteSet::default());
    let forms: Vec<Vec<u32>> = (0..a.states().len() as u32)
        .filter_map(|s| bodies.chain(&a, 16, grammask_core::compiler::StateId(s), &follow))
        .filter_map(|chain| bodies.reserve(chain.class))
        .collect();
    let trie = grammask_core::trie::TokenTrie::new(&vocab);
    let (body, index) = (BodySlice::new(&trie, vocab.vocab_size()), ClassTextIndex::new(&trie));
    let mut scanned = 0;
    for form in &forms {
        let Some(got) = ClassBodySlice::pruned(&trie, &index, &body, form) else { continue };
        scanned += 1;
        assert!(got.same_as(&ClassBodySlice::new(&trie, vocab.vocab_size(), form)), "form {form:?}");
    }
    assert!(scanned >= 4 && scanned < forms.len(), "{scanned} of {} forms scanned", forms.len());

    hold_class_bodies(true);
    let held = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    hold_class_bodies(false);
    let before = class_body_slices_pruned();
    let docs: [&[u8]; 3] = [
        br#"{"activityTaskList": "my-activity task.list", "class": "MyActivity_Class-1"}"#,
        br#"{"file": "path/to/activity/MyActivityClass.php", "familyname": "Doe \\ O'Brien"}"#,
        "{\"familyname\": \"M\u{fc}ller-\u{4e2d}\\n\\t x\", \"accented\": \"caf\u{e9}\"}".as_bytes(),
    ];
    let n: usize = docs.iter().map(|d| d.len() + 1).sum();
    assert_eq!(masks_along_docs_match_brute_force(&held, &vocab, &docs), n);
    assert!(class_body_slices_pruned() >= before + 3, "the held fills' slices were not scanned");
    assert!(held.class_bodies_built_in_fills() >= 3, "no fill built its class-body slice");
}

#[test]
fn few_token_rows_match_brute_force() {
    let g = grammask_core::ebnf::parse_ebnf(TOOL_CALL_EBNF, "root").unwrap();
    let doc: &[u8] = br#"Hi {"name": "get_weather", "parameters": {"city": "Oslo", "unit": "celsius"}} ok"#;
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    // Most fixed-string positions were classified with the grammar, as token ids.
    let kernels: Vec<_> = (0..cg.automata().states().len() as u32)
        .map(grammask_core::compiler::StateId)
        .filter(|&s| grammask_core::mask::literal_byte(cg.automata(), s).is_some())
        .map(|s| cg.kernel(s).unwrap())
        .collect();
    let ids = kernels.iter().filter(|k| k.accepted.ids().is_some()).count();
    assert!(ids * 10 >= kernels.len() * 9, "{ids} of {} literal kernels as ids", kernels.len());
    assert_eq!(rows_along_doc_match_brute_force(&cg, &vocab, doc), 2 * doc.len());
}

#[test]
fn literal_kernel_masks_match_brute_force() {
    let g = grammask_core::ebnf::parse_ebnf(TOOL_CALL_EBNF, "root").unwrap();
    let doc: &[u8] = br#"{"name": "get_time", "parameters": {"zone": "U" }}"#;
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        let (mut literal, mut walked, mut chains) = (0, 0, 0);
        for s in (0..a.states().len() as u32).map(grammask_core::compiler::StateId) {
            if grammask_core::mask::literal_byte(a, s).is_none() {
                continue;
            }
            literal += 1;
            let reference = cg.classify_uninterned(s).unwrap();
            if let Some(km) = cg.literal_kernel(s).unwrap() {
                assert!(km == reference, "{name}: state {s:?} differs from the reference");
                walked += 1;
            }
            // The trie descent along the chain (tried first by `literal_kernel`) on its own.
            if let Some(km) = grammask_core::mask::classify_literal_chain(a, cg.trie(), vocab.vocab_size(), s) {
                assert!(km == reference, "{name}: chain kernel of state {s:?} differs from the reference");
                chains += 1;
            }
        }
        assert!(literal >= 100 && walked * 10 >= literal * 9, "{name}: {walked} of {literal} literal kernels walked");
        assert!(chains * 2 >= literal, "{name}: {chains} of {literal} literal kernels by a trie descent");
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[doc]);
        assert_eq!(checked, doc.len() + 1);
    }
}

/// llama.cpp's `japanese.gbnf` (free text of multi-byte classes), and a byte region that a rule
/// (a recursive rule, so not inlined) ends inside tokens (uncertain suffixes filtered by FOLLOW).
const BYTE_REGION_EBNF: [&str; 2] = [
    include_str!("../../../testdata/gbnf/japanese.gbnf"),
    r#"root ::= "(" item (("," | "e") item)* ")"
item ::= [ぁ-ゟa-d]+ | "x" [0-9]* | "é" [^()] | "[" item "]""#,
];

#[test]
fn byte_region_kernel_masks_match_brute_force() {
    let docs: [&[&[u8]]; 2] =
        [&["こんにちは 世界、テスト".as_bytes()], &["(ab,あい,x12,éz)".as_bytes(), "([x]ebad,ée)".as_bytes()]];
    let Some(vocab) = llama3_vocab() else { return };
    for (k, (text, docs)) in BYTE_REGION_EBNF.iter().zip(docs).enumerate() {
        let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        let (mut regions, mut uncertain) = (0, 0);
        for s in (0..a.states().len() as u32).map(grammask_core::compiler::StateId) {
            if let Some(km) = cg.byte_region_kernel(s) {
                assert!(km == cg.classify_uninterned(s).unwrap(), "state {s:?} differs from the reference");
                regions += 1;
                uncertain += km.uncertain.len();
            }
        }
        assert!(regions >= 5, "{regions} byte region kernels");
        assert!(k == 0 || uncertain >= 100, "{uncertain} uncertain tokens");
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, docs);
        assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    }
}

/// o79409's `trace_id` as a one-property object (a regex-bodied string with `minLength`) and a
/// document along it.
fn trace_id_object() -> (grammask_core::grammar::Grammar, &'static [u8]) {
    let schema = r#"{"type": "object", "required": ["t"], "properties": {"t": {"type": "string",
        "minLength": 35, "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{24}"}}}"#;
    let doc: &[u8] = br#"{"t": "1-60f6f7e7-0123456789abcdef0123456789abcdef"}"#;
    (lax_schema_grammar(schema), doc)
}

/// A regex-bodied string with `minLength` (o79409's `trace_id`) compiled while the vocabulary's
/// index already saw its classes (an earlier grammar keeps the index alive): the compile-time
/// cover searches still fill the grammar's memo, so the second grammar holds the same verdicts
/// as the first (its first masks cost what a fresh process's do), and the masks along the string
/// match brute force. Fails if compiling skips the searches for classes the index has seen.
#[test]
fn warm_index_regex_string_masks_match_brute_force() {
    let Some(vocab) = llama3_vocab() else { return };
    let (g, doc) = trace_id_object();
    let first = CompiledGrammar::new(&g, &vocab).unwrap();
    let second = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    // The class-body threads add the key start's callee searches to the memos.
    first.wait_class_bodies();
    second.wait_class_bodies();
    assert_eq!(first.memory_size(), second.memory_size(), "the cover memos differ");
    let checked = masks_along_docs_match_brute_force(&second, &vocab, &[doc]);
    assert!(checked > 40, "{checked}");
    drop(first);
}

/// A string value whose start only calls its body rule (o79409's `trace_id`, a regex body with
/// `minLength`: the state after the value's `"` reads no byte itself) has that rule's cover search
/// run on the class-body thread (`BodySlice::quoted_callees`' value starts), so the fills along
/// the string explore few cover pairs of their own; the masks match brute force on Llama 3.
/// Fails if the thread searches only key starts' callees (2,233 pairs in the fills).
#[test]
fn value_string_callee_searched_on_class_body_thread() {
    use grammask_core::slice::cover_pairs_taken;
    let Some(vocab) = llama3_vocab() else { return };
    let (g, doc) = trace_id_object();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.wait_class_bodies();
    let before = cover_pairs_taken();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[doc]);
    let taken = cover_pairs_taken() - before;
    assert!(taken < 1000, "the fills explored {taken} cover pairs");
    assert_eq!(checked, doc.len() + 1);
}

/// An object of 13 optional properties (ordered, as the converter lays out more than 12) with
/// extra properties allowed (MaskBench `Github_hard---o30633` has ~94): after each `,` the row
/// holds two kernel items per property still to come, whose classifications are equal and share
/// one `Arc` in the kernel cache, next to items with other classifications; the masks (each
/// shared set merged once) match brute force on Llama 3. Fails if the cache shares a
/// classification between unequal kernels (the merge of shared sets is checked by
/// `merge_accepted_is_the_union` in `mask/fill.rs`).
#[test]
fn shared_kernel_masks_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let props: Vec<String> = (0..13).map(|i| format!(r#""p{i}q": {{"type": "integer"}}"#)).collect();
    let schema = format!(r#"{{"type": "object", "properties": {{{}}}}}"#, props.join(", "));
    let g = json_schema_to_grammar(&schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let doc: &[u8] = br#"{"p0q": 1, "p3q": 22, "zz": [true], "p7q": -3 , "p12q": 4}"#;
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[doc]);
    assert_eq!(checked, doc.len() + 1);
    // The rows after `{"p0q": 1,`: kernel items of different states sharing a classification.
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(br#"{"p0q": 1,"#).unwrap());
    let kernels: Vec<_> =
        kernel_items(cg.automata(), m.chart()).iter().map(|it| cg.kernel(it.state).unwrap()).collect();
    let shared = kernels.iter().enumerate().filter(|(i, k)| kernels[..*i].iter().any(|x| Arc::ptr_eq(x, k))).count();
    assert!(kernels.len() >= 20 && shared >= 10, "{shared} of {} kernel items share a classification", kernels.len());
}

/// Walks that record many uncertain tokens count them as work (`RECORD_COST` in `mask/walk.rs`),
/// so that they reach the vocabulary's cross-grammar kernel cache like long walks: a value's
/// whitespace (`ws ::= [ \n\t\r]{0,64}`, its own rule) has the same automaton in every JSON
/// Schema grammar but records different uncertain tokens where different bytes may follow it.
/// Three grammars on one vocabulary (Llama 3): an array of booleans (~3,000 uncertain tokens such
/// as ` true`, ` the`), an array of nulls (FOLLOW of `ws` differs: `n` instead of `t` and `f`)
/// and the boolean array again (same structure and FOLLOW: its whitespace kernel comes from the
/// cache). The masks inside the whitespace match brute force in each. Fails when the cache key
/// drops the FOLLOW set (the null array takes the boolean array's kernel and refuses ` null`
/// after `[null,`) and, on the `shared` counts, when recorded tokens are not counted as work
/// (the whitespace walks never reach the cache).
#[test]
fn whitespace_kernels_shared_across_grammars_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let Some(vocab) = llama3_vocab() else { return };
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let booleans = r#"{"type": "array", "items": {"type": "boolean"}}"#;
    let nulls = r#"{"type": "array", "items": {"type": "null"}}"#;
    let check = |cg: &Arc<CompiledGrammar>, prefix: &[u8]| {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(prefix).unwrap());
        let mask = m.compute_mask().unwrap().clone();
        let want = brute_force(&m, &vocab);
        for (t, &w) in want.iter().enumerate() {
            let text = String::from_utf8_lossy(prefix);
            assert_eq!(mask.get(t), w, "after {text:?}: token {:?}", vocab.token_bytes(t as u32));
        }
        assert!(want.iter().filter(|&&w| w).count() > 100, "{:?}", String::from_utf8_lossy(prefix));
    };
    let (mut shared, mut grammars) = (Vec::new(), Vec::new());
    for (schema, first) in [(booleans, "true"), (nulls, "null"), (booleans, "false")] {
        let cg = Arc::new(CompiledGrammar::new(&json_schema_to_grammar(schema, &opts).unwrap(), &vocab).unwrap());
        for sep in [", ", ",  ", ",\n\t"] {
            check(&cg, format!("[{first}{sep}").as_bytes());
        }
        shared.push(cg.kernel_stats().shared);
        // Kept: the vocabulary's index (and its cache) lives while a grammar uses it.
        grammars.push(cg);
    }
    // The boolean array walks its whitespace, the null array too (another FOLLOW set), the
    // second boolean array takes the first one's.
    assert_eq!(shared[..2], [0, 0], "{shared:?}");
    assert!(shared[2] >= 1, "{shared:?}");
}

/// Final kernel states that reach few states ask the cross-grammar cache before walking
/// (`EARLY_SHARE_STATES`). One vocabulary, four grammars whose `ws` rule is the same automaton
/// with another FOLLOW set (`a`-`m`, `n`-`z`) or another automaton with the same FOLLOW set
/// (`{0,2}` spaces), then the first grammar again: the masks inside the whitespace match brute
/// force in each, and the repeated grammar takes the cached kernel. Fails when the key drops the
/// FOLLOW set (the `n`-`z` grammar takes the first one's kernel and refuses ` the`).
#[test]
fn small_final_kernels_shared_before_walking_match_brute_force() {
    let Some(vocab) = llama3_vocab() else { return };
    let letters = "root ::= \"x\" ws [a-m]+ ws \".\"\nws ::= [ ]{0,8} | \"\\t\" ws";
    let late = "root ::= \"x\" ws [n-z]+ ws \".\"\nws ::= [ ]{0,8} | \"\\t\" ws";
    let short = "root ::= \"x\" ws [a-m]+ ws \".\"\nws ::= [ ]{0,2} | \"\\t\" ws";
    let (mut shared, mut grammars) = (Vec::new(), Vec::new());
    for text in [letters, late, short, letters] {
        let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        for prefix in ["x", "x ", "x  "] {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(prefix.as_bytes()).unwrap());
            let mask = m.compute_mask().unwrap().clone();
            let want = brute_force(&m, &vocab);
            for (t, &w) in want.iter().enumerate() {
                assert_eq!(mask.get(t), w, "{text:?} after {prefix:?}: token {:?}", vocab.token_bytes(t as u32));
            }
        }
        shared.push(cg.kernel_stats().shared);
        // Kept: the vocabulary's index (and its cache) lives while a grammar uses it.
        grammars.push(cg);
    }
    assert_eq!(shared[..3], [0, 0, 0], "{shared:?}");
    assert!(shared[3] >= 1, "{shared:?}");
}

/// Kernel states that are not final but reach few states ask the cross-grammar cache before
/// walking too, and share even a short walk (`EARLY_SHARE_STATES`, session 47): a string value's
/// body. One vocabulary, four grammars: an object with a string property, an array of strings
/// (another FOLLOW set: `]` where the object has `}`), an object with other keys, then the array
/// again. The masks inside the strings match brute force in each; the first two find nothing
/// early, the object with other keys takes the first object's string body from the cache. (The
/// array's string body reaches more than `EARLY_SHARE_STATES` states: it walks each time.)
#[test]
fn small_string_bodies_shared_before_walking_match_brute_force() {
    let Some(vocab) = llama3_vocab() else { return };
    let object = r#"{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}"#;
    let array = r#"{"type": "array", "items": {"type": "string"}}"#;
    let other = r#"{"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}"#;
    let (mut early, mut grammars) = (Vec::new(), Vec::new());
    for (schema, prefixes) in [
        (object, [r#"{"name": ""#, r#"{"name": "Bo"#]),
        (array, [r#"[""#, r#"["a", "b"#]),
        (other, [r#"{"city": ""#, r#"{"city": "x", "zip": "1"#]),
        (array, [r#"["x"#, r#"["x", ""#]),
    ] {
        let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
        let before = cg.kernel_stats().shared_early;
        for prefix in prefixes {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(prefix.as_bytes()).unwrap(), "{prefix:?}");
            let mask = m.compute_mask().unwrap().clone();
            let want = brute_force(&m, &vocab);
            for (t, &w) in want.iter().enumerate() {
                assert_eq!(mask.get(t), w, "{schema} after {prefix:?}: token {:?}", vocab.token_bytes(t as u32));
            }
        }
        early.push(cg.kernel_stats().shared_early - before);
        // Kept: the vocabulary's index (and its cache) lives while a grammar uses it.
        grammars.push(cg);
    }
    assert_eq!(early[..2], [0, 0], "{early:?}");
    assert!(early[2] >= 1, "{early:?}");
}

/// A `format: uri` string's state after `https://` reaches more than `EARLY_SHARE_STATES` states
/// and its walk is long (~47 k tokens on Llama 3): the first grammar walks it and shares it with
/// its prefix key; a second grammar with the same string under another key finds it before
/// walking (`KernelStats::shared_by_prefix`). Masks against brute force in both.
#[test]
fn long_walks_shared_by_prefix_key_match_brute_force() {
    let Some(vocab) = llama3_vocab() else { return };
    let schema = |key: &str| {
        format!(
            r#"{{"type": "object", "properties": {{"{key}": {{"type": "string", "format": "uri"}}}}, "required": ["{key}"]}}"#
        )
    };
    let mut grammars = Vec::new();
    let mut by_prefix = Vec::new();
    for key in ["url", "homepage"] {
        let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(&schema(key)), &vocab).unwrap());
        for rest in ["https://", "https://example.com/a?b=1#"] {
            let prefix = format!(r#"{{"{key}": "{rest}"#);
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(prefix.as_bytes()).unwrap(), "{prefix:?}");
            let mask = m.compute_mask().unwrap().clone();
            let want = brute_force(&m, &vocab);
            for (t, &w) in want.iter().enumerate() {
                assert_eq!(mask.get(t), w, "after {prefix:?}: token {:?}", vocab.token_bytes(t as u32));
            }
        }
        by_prefix.push(cg.kernel_stats().shared_by_prefix);
        // Kept: the vocabulary's index (and its cache) lives while a grammar uses it.
        grammars.push(cg);
    }
    assert_eq!(by_prefix[0], 0, "{by_prefix:?}");
    assert!(by_prefix[1] >= 1, "{by_prefix:?}");
}

/// MaskBench `Github_hard---o47674` after an integer value (`{"dpp_version": 1`): the kernels of
/// the object's rest (optional properties under `anyOf` variants, uuid patterns) are region walks
/// that ask the cross-grammar cache before walking, from states reaching more than
/// `REGION_ASK_STATES` states: each search gives up there and the walk goes on unshared
/// (`compiled::region_asks_unkeyed`). Masks against brute force on Llama 3 and Qwen 2.5.
#[test]
fn region_asks_past_their_key_limit_match_brute_force() {
    use grammask_core::compiled::region_asks_unkeyed;
    let Some(text) = maskbench_file("Github_hard---o47674") else { return };
    let task: serde_json::Value = serde_json::from_str(&text).unwrap();
    let grammar = lax_schema_grammar(&task["schema"].to_string());
    let before = region_asks_unkeyed();
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let cg = Arc::new(CompiledGrammar::new(&grammar, &vocab).unwrap());
        let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
        for part in [r#"{"dpp_version": 1"#, r#", "file_version": 1"#] {
            assert!(m.accept_bytes(part.as_bytes()).unwrap(), "{name}: {part:?}");
            let mask = m.compute_mask().unwrap().clone();
            let want = brute_force(&m, &vocab);
            for (t, &w) in want.iter().enumerate() {
                assert_eq!(mask.get(t), w, "{name} after {part:?}: token {:?}", vocab.token_bytes(t as u32));
            }
        }
    }
    assert!(region_asks_unkeyed() > before, "no region walk asked past its key limit");
}

/// Tokens over the bytes of small JSON-like objects, many of them whitespace runs (of 1-4 bytes)
/// followed by a quote, a digit or a brace (` "a`, `\n 1`, `  }`).
fn lead_vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let pieces: &[&[u8]] = &[
        b" ", b"  ", b"\n", b"\t", b"\"", b"a", b"b", b"ab", b":", b",", b"{", b"}", b"1", b"2", b"\":", b"\",", b"[",
        b"]",
    ];
    // Runs at a bound of 64 and one past it, alone and before a quote or a digit.
    let runs = [(64, ""), (65, ""), (63, "\""), (64, "\""), (65, "\""), (64, "1"), (65, "1")];
    pieces_vocab(
        rng,
        pieces,
        150,
        runs.iter().map(|(n, tail)| format!("{}{tail}", " ".repeat(*n)).into_bytes()).collect(),
    )
}

/// Kernels of states that call a whitespace run rule and go on in a state reading none of it
/// (`CompiledGrammar::lead_kernel`: the run's tokens plus walks from that state below each run
/// node) equal the plain walk's, and masks along documents equal brute force, for runs of
/// `{0,64}` (with tokens of 64 and 65 spaces, alone or before `"` or `1`), `{0,100}` and one byte
/// class, in objects, arrays and after keys (smaller whitespace rules are inlined: no call).
/// Fails if a run one past the bound is accepted, or if the run's frames count as rule ends.
/// Objects and arrays of `[ab]+` keys with the whitespace rule `ws ::= WS` between every token
/// (the lead-run tests' grammar): its text and grammar.
fn lead_grammar(ws: &str) -> (String, grammask_core::grammar::Grammar) {
    let text = format!(
        "root ::= obj | \"[\" ws (obj (ws \",\" ws obj)*)? ws \"]\"\n\
         obj ::= \"{{\" ws (kv (ws \",\" ws kv)*)? ws \"}}\"\n\
         kv ::= \"\\\"\" [ab]+ \"\\\"\" ws \":\" ws (\"1\" | \"2\" | \"\\\"\" [ab]* \"\\\"\" | obj)\n\
         ws ::= {ws}"
    );
    let g = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
    (text, g)
}

/// Checks every lead kernel of `cg` (grammar `text`) against the plain walk; returns how many.
fn lead_kernels_equal_plain_walks(cg: &CompiledGrammar, text: &str) -> usize {
    let mut lead = 0;
    for s in 0..cg.automata().states().len() {
        let s = grammask_core::compiler::StateId(s as u32);
        if let Some(km) = cg.lead_kernel(s).unwrap() {
            assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} of {text}", s.0);
            lead += 1;
        }
    }
    lead
}

#[test]
fn lead_run_kernels_equal_plain_walks() {
    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
    let mut lead = 0;
    let docs: &[&[u8]] = &[b"{\"a\": 1, \"ab\":2}", b"[ {\"b\" :\"ab\"}, { } ]", b"{ \"a\": {\"b\": \"\"} }"];
    let newlines: &[&[u8]] = &[b"[\n{\"a\":\n1},\n\n{}]"];
    let wide = format!("{{\"a\":{}1}}", " ".repeat(64));
    let wide: &[&[u8]] = &[wide.as_bytes()];
    let variants = [("[ \\n\\t]{0,64}", newlines), ("[ \\n\\t]{0,100}", newlines), ("[ ]{0,64}", wide)];
    for (ws, more) in variants {
        let (text, g) = lead_grammar(ws);
        for _ in 0..6 {
            let vocab = lead_vocab(&mut rng);
            let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
            lead += lead_kernels_equal_plain_walks(&cg, &text);
            masks_along_docs_match_brute_force(&cg, &vocab, docs);
            masks_along_docs_match_brute_force(&cg, &vocab, more);
        }
    }
    assert!(lead >= 30, "only {lead} lead kernels");
}

/// Literal positions before a whitespace run (`","` then `ws` then a key or an object, `":"` then
/// `ws` then a value) are classified from the run nodes below their byte
/// (`CompiledGrammar::literal_lead_kernel`: `LeadNodes` with a prefix): every such kernel equals the
/// plain walk and masks along documents equal brute force, on vocabularies with `,` and `:` before
/// runs at the bound, one past it, and before a quote or a digit. Fails if the prefix's own tokens
/// or its children outside the class are dropped, or if the run after the prefix is counted from
/// the root (`,` + 64 spaces refused, or `,` + 65 accepted).
#[test]
fn literal_lead_kernels_equal_plain_walks() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let pieces: &[&[u8]] = &[
        b" ", b"  ", b"\n", b"\t", b"\"", b"a", b"b", b"ab", b":", b",", b"{", b"}", b"1", b"2", b"\":", b"\",", b"[",
        b"]", b", ", b",\"", b": ", b":1", b", \"", b",\n",
    ];
    let mut runs = Vec::new();
    for p in [",", ":"] {
        for (n, tail) in [(63, ""), (64, ""), (65, ""), (64, "\""), (65, "\""), (64, "1"), (65, "{"), (0, "\"a")] {
            runs.push(format!("{p}{}{tail}", " ".repeat(n)).into_bytes());
        }
    }
    let docs: &[&[u8]] = &[b"{\"a\": 1, \"ab\":2}", b"[ {\"b\" :\"ab\"}, { } ]", b"{ \"a\": {\"b\": \"\"} }"];
    let wide = format!("{{\"a\":{}1,{}\"b\":2}}", " ".repeat(64), " ".repeat(64));
    let wide: &[&[u8]] = &[wide.as_bytes()];
    let newlines: &[&[u8]] = &[b"[\n{\"a\":\n1},\n\n{}]"];
    let mut lead = 0;
    for ws in ["[ \\n\\t]{0,64}", "[ ]{0,64}", "[ \\n\\t]{0,100}"] {
        let (text, g) = lead_grammar(ws);
        for _ in 0..5 {
            let vocab = pieces_vocab(&mut rng, pieces, 150, runs.clone());
            let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
            for s in 0..cg.automata().states().len() {
                let s = grammask_core::compiler::StateId(s as u32);
                if let Some(km) = cg.literal_lead_kernel(s).unwrap() {
                    assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} of {text}", s.0);
                    lead += 1;
                }
            }
            masks_along_docs_match_brute_force(&cg, &vocab, docs);
            masks_along_docs_match_brute_force(&cg, &vocab, wide);
            if ws.contains('n') {
                masks_along_docs_match_brute_force(&cg, &vocab, newlines);
            }
        }
    }
    assert!(lead >= 10, "only {lead} literal lead kernels");
}

/// Grammars of several whitespace runs compiled one after another against one vocabulary take
/// the run nodes their lead kernels read from the vocabulary's index (`LeadNodes`, by class and
/// bound), built by the first grammar with that run: every lead kernel equals the plain walk and
/// masks along documents equal brute force. Fails if one run's nodes serve another (a key that
/// ignored the bound takes `{0,64}`'s for `{0,40}`; one that ignored the class, `[ ]`'s for
/// `[ \n\t]`).
#[test]
fn lead_run_nodes_shared_by_vocabulary_equal_plain_walks() {
    let mut rng = Rng(0x3C6E_F372_FE94_F82B);
    let docs: &[&[u8]] = &[b"{\"a\": 1, \"ab\":2}", b"[ {\"b\" :\"ab\"}, { } ]"];
    let newlines: &[&[u8]] = &[b"[\n{\"a\":\n1},\n\n{}]"];
    let wide = format!("{{\"a\":{}1}}", " ".repeat(64));
    let short: &[&[u8]] = &[b"{   \"a\":   1}", b"[ {\"b\" :  \"ab\"} ]"];
    let variants = ["[ ]{0,64}", "[ \\n\\t]{0,64}", "[ \\n\\t]{0,40}", "[ ]{0,40}", "[ \\n\\t]{0,100}", "[ ]{0,64}"];
    let mut lead = 0;
    for _ in 0..3 {
        let vocab = lead_vocab(&mut rng);
        // The index lives as long as a grammar compiled against it does.
        let mut compiled = Vec::new();
        for ws in variants {
            let (text, g) = lead_grammar(ws);
            let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
            lead += lead_kernels_equal_plain_walks(&cg, &text);
            masks_along_docs_match_brute_force(&cg, &vocab, docs);
            masks_along_docs_match_brute_force(&cg, &vocab, short);
            if ws.contains('n') {
                masks_along_docs_match_brute_force(&cg, &vocab, newlines);
            }
            if ws.starts_with("[ ]{0,64}") {
                masks_along_docs_match_brute_force(&cg, &vocab, &[wide.as_bytes()]);
            }
            compiled.push(cg);
        }
    }
    assert!(lead >= 30, "only {lead} lead kernels");
}

/// On Llama 3 (runs of up to 128 spaces, newline and tab runs, ` "`, `\n\n"` tokens), masks at
/// the whitespace before a key, before `:` and before a value of a JSON Schema object (the
/// `{0,64}` whitespace rule) equal brute force, with and without whitespace already read.
#[test]
fn lead_run_masks_match_brute_force_on_llama3() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name"]}"#;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let cg = Arc::new(CompiledGrammar::new(&json_schema_to_grammar(schema, &opts).unwrap(), &vocab).unwrap());
    let before = cg.kernel_stats().composed;
    for prefix in [
        "{",
        "{\n  ",
        "{\"name\"",
        "{\"name\": ",
        "{\"name\":",
        "{\"name\": \"x\",",
        "{\"name\": \"x\",\n\t",
        "{\"n\": 1, \"tags\": [",
        "{\"n\": 1, \"tags\": [\"a\",",
    ] {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(prefix.as_bytes()).unwrap(), "{prefix:?}");
        let mask = m.compute_mask().unwrap().clone();
        for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
            assert_eq!(mask.get(t), w, "after {prefix:?}: token {:?}", vocab.token_bytes(t as u32));
        }
    }
    assert!(cg.kernel_stats().composed > before + 5, "{:?}", cg.kernel_stats());
}

/// Sibling kernels (`mask/sibling.rs`): after each `,` of an open object with many optional
/// properties (in schema order past 12), the kernels of the properties still to come differ
/// only in their keys, beside the extra-key rule; they share one classification where no token
/// reads a key to its closing quote. Masks at every byte of documents through such rows equal
/// brute force, on a small vocabulary made to catch a wrong share and on Llama 3 (whose tokens
/// hold common keys such as `id"`).
/// The small vocabulary has `"gamma":`, so the `gamma` position (the first sibling: the second
/// key's is inlined into the object's rule) reads a token no other sibling reads: a share that
/// ignored tokens containing `"gamma"` gives `delta` its classification, or the other way round.
/// An object inside takes extra keys of a pattern (`x12abqq`) only, so its extra-key rule reads none
/// of its keys: a share that did not ask whether the callee reads the key gives one key's `"s`
/// to another. Fails as well if nothing is shared (the `siblings` count).
#[test]
fn sibling_kernel_masks_match_brute_force() {
    let (g, docs) = sibling_grammar();
    let small = ascii_vocab(
        &["\"gamma\":", "\"gamma", "ma\"", "\"o", "\"t", "\"s", "\"x", "\"p", "\"a", "\"g", ", \"", "\":", "id\""],
        &[],
    );
    let cg = Arc::new(CompiledGrammar::new(&g, &small).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &small, &docs);
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    assert!(cg.kernel_stats().siblings >= 10, "{:?}", cg.kernel_stats());
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs[..2]);
    assert_eq!(checked, docs[0].len() + docs[1].len() + 2);
    assert!(cg.kernel_stats().siblings >= 10, "{:?}", cg.kernel_stats());
}

/// The open object of [`sibling_kernel_masks_match_brute_force`] and its documents.
fn sibling_grammar() -> (grammask_core::grammar::Grammar, [&'static [u8]; 4]) {
    let integers = |keys: &[String]| -> String {
        keys.iter().map(|k| format!("\"{k}\": {{\"type\": \"integer\"}}")).collect::<Vec<_>>().join(", ")
    };
    let mut inner: Vec<String> = ["one", "two", "six"].map(String::from).to_vec();
    inner.extend((3..13).map(|i| format!("p{i}")));
    // A pattern long enough for the extra-key rule to stay a rule of its own (short ones are
    // inlined beside the keys, leaving no call to compare them with).
    let pattern =
        r#""patternProperties": {"^x[0-9a-f]{4}[g-z]{2,5}$": {"type": "integer"}}, "additionalProperties": false"#;
    let inner = format!("{{\"type\": \"object\", \"properties\": {{{}}}, {pattern}}}", integers(&inner));
    let outer =
        ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "id", "name", "type"];
    let mut outer: Vec<String> = outer.map(String::from).to_vec();
    // Many keys: the excluded-key trie's deeper nodes keep rules of their own.
    outer.extend((0..20).map(|i| format!("filler_key_number_{i:02}")));
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}, \"inner\": {inner}}}}}", integers(&outer));
    let docs: [&[u8]; 4] = [
        br#"{"alpha": 1,"beta": 2,"gamma":3,"xx": 4,"delta": 5, "inner": {"one": 1,"x1a2bgh": 2,"six": 2}}"#,
        br#"{"alpha": 1,"gamma": 3,"epsilon": 5,"zeta":6,"bet": 7}"#,
        br#"{"beta": 1, "bet": 2,"id": 3,"idx":4,"name": 5,"inner": {"two": 2,"p5": 1}}"#,
        br#"{"type": 1,"ty": 2,"inner":{"one":1,"two":2,"x12abqrs":5,"six":3,"p12":4}}"#,
    ];
    (lax_schema_grammar(&schema), docs)
}

/// The vocabulary's `"` occurrences (`QuoteEnds`, found eight bytes at a time in the
/// vocabulary's bytes back to back) decide which sibling edges are dropped: the only token
/// holding `gamma"` is `"gamma":` (or, last, `"gamma"`), placed after a token of `k` bytes so
/// its quotes fall at every offset of an 8-byte chunk and in the bytes after the last chunk.
/// A quote missed there drops the `gamma` edge, and the `gamma` position then shares another
/// key's classification: with the bytes after the last chunk left unscanned, `"gamma"` (last)
/// is allowed again after `{"alpha": 1,"beta": 2,"gamma":3,` (checked).
#[test]
fn sibling_edges_see_quotes_at_every_offset_match_brute_force() {
    let (g, docs) = sibling_grammar();
    for k in 0..8 {
        let pad = "q".repeat(k);
        for key_last in [false, true] {
            let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
            toks.push(b"</s>".to_vec());
            toks.extend(["ma\"", "\"a", "\"g", "\":", ", \""].map(|t| t.as_bytes().to_vec()));
            if !pad.is_empty() {
                toks.push(pad.as_bytes().to_vec());
            }
            toks.push(if key_last { b"\"gamma\"".to_vec() } else { b"\"gamma\":".to_vec() });
            if !key_last {
                toks.push(b"\"o".to_vec());
            }
            let opts = VocabularyOptions { stop_token_ids: Some(vec![95]), ..Default::default() };
            let small = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
            let cg = Arc::new(CompiledGrammar::new(&g, &small).unwrap());
            let checked = masks_along_docs_match_brute_force(&cg, &small, &docs[..2]);
            assert_eq!(checked, docs[0].len() + docs[1].len() + 2);
            assert!(cg.kernel_stats().siblings >= 10, "{:?}", cg.kernel_stats());
        }
    }
}

/// Sibling kernels whose dropped keys share a prefix (`mask/sibling.rs`, `literal_tree`): an open
/// object of 70 optional properties `kNN_x` in schema order, whose rules are chained several
/// properties to an automaton, so each key start after `"` reads a tree of keys (`k` then the
/// digits) beside the extra-key call; the first key start (`{"`) is in `root` (FOLLOW: none), the
/// later ones in `obj.N_0_0` rules: their keys leave FOLLOW out (no listed state is final). Masks
/// at every byte equal brute force on a small vocabulary whose `k07_x":` keeps one tree (a share
/// across it gives a wrong mask at `{"`) and on Llama 3 along one key. Fails with `sibling.rs`
/// as it was before the trees and FOLLOW left out (the `siblings` count: 176 there, 212 here).
/// The key starts are composed (70 keys), without walks below their dropped first bytes.
#[test]
fn sibling_key_trees_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let props: Vec<String> = (0..70).map(|i| format!("\"k{i:02}_x\": {{\"type\": \"integer\"}}")).collect();
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let g = json_schema_to_grammar(&schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let docs: [&[u8]; 3] =
        [br#"{"k07_x": 1,"k30_x": 2}"#, br#"{"k1": 1, "k39_x":3,"zz": 4}"#, br#"{"q": 1,"k07_x":2}"#];
    let small = ascii_vocab(&["k07_x\":", "k0", "k1", "_x\"", "{\"", "\"k", "\": ", "x\":"], &[]);
    let cg = Arc::new(CompiledGrammar::new(&g, &small).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &small, &docs);
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    // 176 without the trees and FOLLOW left out, 212 with them.
    assert!(cg.kernel_stats().siblings >= 200, "{:?}", cg.kernel_stats());
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[br#"{"k07_x":1}"#]);
    assert_eq!(checked, 12);
}

/// Query objects as MaskBench o3626 nests them (`mask/sibling.rs`, dropped calls and callee
/// classes): `not` and `and` take a `oneOf` of four open query objects that differ in their
/// required keys, recursively, so the converter compiles one object rule per path, each with its
/// quoted keys called as rules beside the inlined extra-key path. After each `,` (and inside the
/// keys and values after it) the row holds one item per alternative still alive, and their kernels
/// share a classification where the keys are dropped calls. Masks at every byte of documents
/// through such rows equal brute force on a small vocabulary and, at the positions with most
/// kernels (182 items), on Llama 3. The small vocabulary's `"locations":[` keeps the `locations`
/// calls: a share that dropped them anyway gives the position after `"location": "x",` (which
/// offers `locations`) and the one after `"locations": [],` (which does not) one classification,
/// and allows that token after `[],` (checked). Fails as well if few kernels are shared (the
/// `siblings` count).
#[test]
fn query_object_siblings_match_brute_force() {
    let any_query = r##"{"oneOf": [{"$ref": "#/definitions/patternQuery"}, {"$ref": "#/definitions/codeQuery"},
        {"$ref": "#/definitions/notQuery"}, {"$ref": "#/definitions/andQuery"}]}"##;
    let schema = format!(
        r##"{{"definitions": {{
        "loc": {{"type": "object", "properties": {{"location": {{"type": "string"}},
            "locations": {{"type": "array", "items": {{"type": "string"}}}}}}}},
        "patternQuery": {{"type": "object", "allOf": [{{"properties": {{"pattern": {{"type": "object"}}}},
            "required": ["pattern"]}}, {{"$ref": "#/definitions/loc"}}]}},
        "codeQuery": {{"type": "object", "allOf": [{{"properties": {{"code": {{"type": "string"}}}},
            "required": ["code"]}}, {{"$ref": "#/definitions/loc"}}]}},
        "notQuery": {{"type": "object", "properties": {{"not": {any_query}}}, "required": ["not"]}},
        "andQuery": {{"type": "object", "properties": {{"and": {{"type": "array", "items": {any_query}}}}},
            "required": ["and"]}}}},
        "type": "object", "properties": {{"when": {{"$ref": "#/definitions/patternQuery"}}, "condition": {any_query},
            "q": {{"$ref": "#/definitions/codeQuery"}}}}}}"##
    );
    let g = lax_schema_grammar(&schema);
    let docs: [&[u8]; 6] = [
        br#"{"when": {"pattern": {"key": "value"}, "location": "l1"}, "condition": {"not": {"pattern": {"k": 1}, "locations": ["a", "b"]}}}"#,
        br#"{"condition": {"and": [{"code": "x", "not": 1}, {"not": {"code": "y"}, "zz": 2}]}}"#,
        br#"{"condition": {"q": 1, "not": {"not": {"pattern": {}, "cod": "c"}, "n": 3}}}"#,
        br#"{"condition": {"not": {"and": [], "nut": {"code": "d"}, "pattern2": {"not": 4}}}}"#,
        br#"{"q": {"location": "x", "locations": [], "code": "c"}}"#,
        br#"{"q": {"code": "c", "location": "y", "z": 1}}"#,
    ];
    let small = ascii_vocab(
        &["\"not\"", "\"not", "\": {\"", ", \"", "\"}", "{\"", "\":", "\"locations\":[", "\"pa", "nd\""],
        &[],
    );
    let cg = Arc::new(CompiledGrammar::new(&g, &small).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &small, &docs);
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    // 163 without dropped calls, self-calls and callee classes, 1,296 with them.
    assert!(cg.kernel_stats().siblings >= 1000, "{:?}", cg.kernel_stats());
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let mut many = 0;
    for prefix in [
        r#"{"when": {"pattern": {"key": "value"}, "location": "l1"}, "condition": {""#,
        r#"{"when": {"pattern": {"key": "value"}, "location": "l1"}, "condition": {"not": {"pattern":"#,
        r#"{"when": {"pattern": {"key": "value"}, "location": "l1"}, "condition": {"not": {"pattern": {"k": 1},"#,
        r#"{"when": {"pattern": {"key": "value"}, "location": "l1"}, "condition": {"not": {"pattern": {"k": 1}, ""#,
        r#"{"condition": {"q": 1, "not": {"not": {"pattern": {}, "cod": "c"},"#,
    ] {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(prefix.as_bytes()).unwrap(), "{prefix:?}");
        many = many.max(kernel_items(cg.automata(), m.chart()).len());
        let mask = m.compute_mask().unwrap().clone();
        for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
            assert_eq!(mask.get(t), w, "after {prefix:?}: token {:?}", vocab.token_bytes(t as u32));
        }
    }
    assert!(many >= 150, "{many} kernel items at most");
    // 16 without dropped calls, self-calls and callee classes, 564 with them.
    assert!(cg.kernel_stats().siblings >= 400, "{:?}", cg.kernel_stats());
}

/// String bodies that refuse some text of a few ASCII characters (`slice/walked.rs`): a
/// `patternProperties` key `^(/[^/]+)+$` (MaskBench `Github_hard---o12499`; after `{"/` it
/// refuses `//` and `/"`), a value pattern refusing `.` twice in a row and `,`, one refusing a
/// second `;`. Masks at every byte of documents through them equal brute force, on a small
/// vocabulary (tokens with `//`, `/"`, `/.`, escapes, UTF-8) and, before each byte of the keys
/// and values, on Llama 3. Fails if the walked characters' subtrees are left in the slice, or
/// their first nodes out of the frontier.
#[test]
fn walked_body_masks_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let schema = r#"{"type": "object", "properties": {
        "p": {"type": "string", "pattern": "^[^.,]+(\\.[^.,]+)*$"},
        "s": {"type": "string", "pattern": "^[^;]*;[^;]*$"}},
        "patternProperties": {"^(/[^/]+)+$": {"type": "string"}}, "additionalProperties": false}"#;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let g = json_schema_to_grammar(schema, &opts).unwrap();
    let docs: [&str; 3] = [
        r#"{"/alias/x\u00e9": "a/b", "p": "a.b.c"}"#,
        r#"{"s": "x;y", "/a\"b/c": "", "/\\/x": "."}"#,
        "{\"/\u{e9}/\\n\": \"//\", \"p\": \"\u{e9}.\u{e9}\"}",
    ];
    let small = ascii_vocab(
        &[
            "//", "/a", "a/", "/\"", "a/\"", "\"/", "{\"/", "/.", "..", ".a", "a.", ",", "a,", ";;", "a;", ";a", "\\/",
            "\\\"", "\\n", "\\u00", "/\u{e9}", "\u{e9}/", "\u{e9}.", "x\u{e9}", "\": \"", "\", \"", "\"}", "/alias",
            "lias/",
        ],
        &[0xC3, 0xA9],
    );
    let cg = Arc::new(CompiledGrammar::new(&g, &small).unwrap());
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    assert!(masks_along_docs_match_brute_force(&cg, &small, &docs) > 100);
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let doc = r#"{"/alias/x": "a", "p": "a.b", "s": "x;y"}"#;
    let mut checked = 0;
    for i in (1..doc.len()).filter(|&i| !matches!(doc.as_bytes()[i - 1], b' ' | b':' | b',')) {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(&doc.as_bytes()[..i]).unwrap());
        let mask = m.compute_mask().unwrap().clone();
        for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
            assert_eq!(mask.get(t), w, "after {:?}: token {:?}", &doc[..i], vocab.token_bytes(t as u32));
        }
        checked += 1;
    }
    assert!(checked > 25, "{checked}");
}

/// Kernel walks that step a virtual item (a plain state's single item) into a state needing a
/// row reuse the row that item closed to before (`RowMemo`'s rows by item): every kernel of a
/// grammar of nested arrays and objects of strings equals the stack walk, and masks along
/// documents equal the brute force, on a vocabulary whose tokens close a string and go on into
/// the next key or element. `"b": ["x"], "c": [["x"]]}` closes a string of two array rules
/// called at different rows within one walk (same state, different origins); with rows reused
/// by state alone, the second takes the first's continuation and the kernel differs.
#[test]
fn virtual_steps_reuse_rows_by_item() {
    let schema = r#"{"type": "array", "items": {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "array", "items": {"type": "string"}},
        "c": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}}}}"#;
    let g = lax_schema_grammar(schema);
    let extra = [
        "x\"",
        "x\",",
        "x\", \"",
        "\", \"",
        "\", \"b\": \"",
        "\", \"b\": [\"",
        "\"], [\"",
        "\"]], \"",
        "y\"]",
        "\"}, {\"",
        "\"}, {\"a\": \"",
        "\", \"x",
        "x\"], [\"y",
        "\"]}",
        "\"]]}]",
        "\"], [\"x\", \"",
        "x\"], [\"y\"]]",
        "\"}, {\"a\": \"x\", \"",
        "\"], \"c\": [[\"x\"]]",
        "x\"], \"c\": [[\"y\"]",
        "\"], \"c\": [[\"x\"]}",
        "[\"x\"], \"c\": [[\"y\"]]}",
        "\"b\": [\"x\"], \"c\": [[\"x\"]]}",
        ": [\"x\"], \"c\": [[\"x\"], [\"",
    ];
    let vocab = ascii_vocab(&extra, &[]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let mut compared = 0;
    for s in 0..cg.automata().states().len() {
        let s = grammask_core::compiler::StateId(s as u32);
        let Some(km) = cg.classify(s, usize::MAX, &mut || false).unwrap() else { continue };
        assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {}", s.0);
        compared += 1;
    }
    assert!(compared > 50, "only {compared} kernels compared");
    let docs: [&[u8]; 2] = [
        br#"[{"a": "x", "b": ["x", "y"], "c": [["x"], ["y", "x"]]}, {"a": "x", "x": "y"}]"#,
        br#"[{"b": ["x"]}, {"c": [["x", "x"], ["y"]], "y": "x"}, {"b": ["x"], "c": [["x"]]}]"#,
    ];
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) > 100);
}

/// A literal position that reads one fixed byte before a branching state, with more trie nodes
/// under that byte than a literal walk may visit, is not walked as a literal (`literal_kernel`
/// is `None`) even where the walk would have ended early (the grammar reads few of those
/// nodes), and its kernel still equals the stack walk and the masks the brute force; with fewer
/// nodes under the byte the literal walk is taken. Taking the walk regardless of the subtree makes
/// the first `literal_kernel` `Some`.
#[test]
fn one_byte_literals_over_large_subtrees_are_not_walked() {
    let g = grammask_core::ebnf::parse_ebnf("root ::= \"\\\"\" (\"ab\" | \"cd\") \"\\\"\"", "root").unwrap();
    let letters = b"abcdefghijklmnopqrstuvwxyz";
    let (mut big, mut small) = (vec!["\"ab\"".to_string(), "\"c".to_string()], vec!["\"ab\"".to_string()]);
    for &x in letters {
        for &y in letters {
            big.push(format!("\"{}{}", x as char, y as char));
        }
    }
    small.extend(letters.iter().map(|&x| format!("\"{}", x as char)));
    for (extra, walked) in [(big, false), (small, true)] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let vocab = ascii_vocab(&extra, &[]);
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let start = grammask_core::mask::kernel_items(
            cg.automata(),
            Matcher::new(cg.clone(), MatcherOptions::default()).unwrap().chart(),
        )[0]
        .state;
        assert_eq!(cg.literal_kernel(start).unwrap().is_some(), walked, "{} tokens", vocab.vocab_size());
        assert_eq!(*cg.kernel(start).unwrap(), cg.classify_uninterned(start).unwrap());
        assert!(masks_along_docs_match_brute_force(&cg, &vocab, &[b"\"ab\"", b"\"cd\""]) == 10);
    }
}

/// Masks equal the brute force along arrays of strings that each hold exactly one of a few words
/// (`oneOf` unanchored patterns, MaskBench `Github_easy---o65510`'s `scopes`), on a vocabulary
/// where the words' last characters begin too many trie nodes to be walked one by one: the
/// string starts take the body slice with the words' last characters walked as strings
/// (`slice::Walked::Strings`; their kernels are checked state by state against the full walk in
/// `slice::tests::walked_string_kernels_equal_full_walks`).
#[test]
fn walked_string_masks_match_brute_force() {
    let schema = r#"{"type": "array", "items": {"type": "string",
        "oneOf": [{"pattern": "maker"}, {"pattern": "admin"}, {"pattern": "tor"}]}}"#;
    let g = lax_schema_grammar(schema);
    let pieces: &[&[u8]] = &[
        b"ma",
        b"ker",
        b"ad",
        b"min",
        b"to",
        b"r",
        b"n",
        b"er",
        b"or",
        b"in",
        b"e",
        b"k",
        b"x",
        b"\"",
        b"\", \"",
        b"[\"",
        b"\"]",
        b" ",
        b"\\n",
        b"\xc3\xa9",
    ];
    let mut rng = Rng(0x0A55_1818);
    let letters = b"makerdinot ";
    let mut extra: Vec<Vec<u8>> = (0..120_000)
        .map(|_| (0..=rng.below(9)).map(|_| letters[rng.below(letters.len() as u64) as usize]).collect())
        .collect();
    extra.extend(["makeradmin", "adminmaker", "torker", "\"maker\"", "\\u0072"].map(|t| t.as_bytes().to_vec()));
    let vocab = pieces_vocab(&mut rng, pieces, 0, extra);
    let index = grammask_core::token_index::TokenIndex::for_vocab(&vocab);
    assert!(!index.first_chars().walkable(b'r') && !index.first_chars().walkable(b'n'), "`r` and `n` walkable");
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let docs: [&str; 2] = [r#"["maker", "xadminx", "tor\u00e9", "to\nr maker"]"#, r#"["admi admin", "ma ker tor"]"#];
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(checked > 50);
}

/// MaskBench `Github_medium---o23177`'s shape: a `oneOf` of two open objects (draft-04, no
/// `additionalProperties`) whose `urls` items have a `type` string that must match (or, in the
/// other alternative's reading, may hold anything but) an unanchored pattern of words. Masks
/// along documents equal the brute force on a vocabulary where the words' letters begin too many
/// trie nodes to be walked one by one, and on Llama 3 and Qwen 2.5 around the `type` values;
/// there the string start's body cover misreads after a few characters of a word: its bounded
/// search is spared (`slice::bounded_short`: it could answer no shortcut) and its walked
/// characters' rounds end at the first unwalkable misread (`slice::walked_rounds_cut`). Fails
/// when either path is not taken (the counters) or a mask differs.
#[test]
fn short_misread_string_masks_match_brute_force() {
    let schema = r#"{"$schema": "http://json-schema.org/draft-04/schema#", "type": "array",
        "items": {"oneOf": [
            {"required": ["$ref"], "properties": {"$ref": {"type": "string"}}},
            {"required": ["name"], "properties": {"name": {"type": "string"},
                "urls": {"type": "array", "items": {"required": ["type"], "properties": {
                    "type": {"type": "string",
                        "pattern": "^(portal)|(console)|(signup)|(swagger)|(X-[a-z0-9\\-]*)$"}}}}}}]}}"#;
    let g = lax_schema_grammar(schema);
    let docs: [&str; 2] = [
        r#"[{"name": "n", "urls": [{"type": "portal"}, {"type": "a signup"}]}]"#,
        r#"[{"$ref": "r"}, {"name": "m", "urls": [{"type": "X-a1"}, {"type": "\u00e9console"}]}]"#,
    ];
    let spared = grammask_core::slice::bounded_searches_spared;
    let cut = grammask_core::slice::walked_rounds_cut;
    let (spared0, cut0) = (spared(), cut());
    let pieces: &[&[u8]] = &[
        b"por",
        b"tal",
        b"con",
        b"sole",
        b"sign",
        b"up",
        b"swag",
        b"ger",
        b"X-",
        b"a1",
        b"a",
        b"\"",
        b"\", \"",
        b"\"}",
        b"\"}]",
        b"{\"",
        b"[{\"",
        b"\": \"",
        b"\": [{\"",
        b" ",
        b"\\n",
        b"\xc3\xa9",
    ];
    let mut rng = Rng(0x2317_7063);
    let letters = b"portalcnsigupwgeX- ";
    let extra: Vec<Vec<u8>> = (0..120_000)
        .map(|_| (0..=rng.below(9)).map(|_| letters[rng.below(letters.len() as u64) as usize]).collect())
        .collect();
    let vocab = pieces_vocab(&mut rng, pieces, 0, extra);
    let index = grammask_core::token_index::TokenIndex::for_vocab(&vocab);
    assert!(!index.first_chars().walkable(b'r') && !index.first_chars().walkable(b'e'), "`r` or `e` walkable");
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.wait_class_bodies();
    index.wait_walked();
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) > 100);
    assert!(spared() > spared0, "no bounded search spared");
    assert!(cut() > cut0, "no walked characters' rounds cut");
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = common::shared_vocab(name) else { return };
        let (spared0, cut0) = (spared(), cut());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        cg.wait_class_bodies();
        cg.index().wait_walked();
        let doc = docs[0];
        let mut checked = 0;
        // From the first `type` value's opening quote to the end of the second one.
        let from = doc.windows(9).position(|w| w == b"\"type\": \"").unwrap() + 9;
        for i in (from..doc.len() - 4).filter(|&i| !matches!(doc[i - 1], b' ' | b':' | b',')) {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(m.accept_bytes(&doc[..i]).unwrap());
            let mask = m.compute_mask().unwrap().clone();
            for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
                assert_eq!(mask.get(t), w, "{name} after {:?}: token {:?}", &doc[..i], vocab.token_bytes(t as u32));
            }
            checked += 1;
        }
        assert!(checked > 20, "{checked}");
        assert!(spared() > spared0, "{name}: no bounded search spared");
        assert!(cut() > cut0, "{name}: no walked characters' rounds cut");
    }
}

/// The walked-body indexes (`FirstChars`, `StringIndex`) are built off the fill path: the compile
/// of a grammar with string bodies starts their thread (`TokenIndex::prepare_walked`), and once
/// it has set them no fill builds them, with the masks exact. Fails when the compile does not
/// start the thread (`walked_prepared`) or the thread does not build them
/// (`walked_built_on_use` counts the builds made by fills).
#[test]
fn walked_indexes_are_built_off_the_fill_path() {
    let schema = r#"{"type": "object", "properties": {
        "p": {"type": "string", "pattern": "^[^.,]+(\\.[^.,]+)*$"},
        "w": {"type": "array", "items": {"type": "string", "oneOf": [{"pattern": "ab"}, {"pattern": "ba"}]}}},
        "patternProperties": {"^(/[^/]+)+$": {"type": "string"}}, "additionalProperties": false}"#;
    let g = lax_schema_grammar(schema);
    let docs: [&str; 2] = [r#"{"/a/b": "x", "p": "a.b"}"#, r#"{"w": ["xab", "bax"], "p": "b"}"#];
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    let tokens = ["//", "/a", "a/", "{\"/", "..", ".a", "a.", ",", "ab", "ba", "aba", "\": \"", "\"}"];
    // The compile of a grammar with string bodies starts the thread (it may or may not have set
    // the indexes before a fill needs them).
    let vocab = ascii_vocab(&tokens, &[]);
    let index = grammask_core::token_index::TokenIndex::for_vocab(&vocab);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    assert!(index.walked_prepared(), "the compile did not ask for the walked indexes");
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) > 40);
    // With the thread done, fills use its indexes.
    let vocab = ascii_vocab(&tokens, b"\t");
    let index = grammask_core::token_index::TokenIndex::for_vocab(&vocab);
    index.prepare_walked();
    index.wait_walked();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) > 40);
    let part = |name: &str| index.memory_parts().into_iter().find(|p| p.0 == name).map_or(0, |p| p.1);
    assert!(part("walked_bodies") > 0, "no walked body used");
    assert_eq!(index.walked_built_on_use(), 0);
    assert!(part("first_chars") > 0 && part("string_index") > 0);
}

/// A long counted run beside a loop on the same bytes (`[0-9]{3000} | [a-zA-Z0-9_]+ "t"`, as the
/// fuzzer's `\d{67440}|\w+t...` regex): every state of the run may take the loop's class, and
/// its refutation read 256 states ahead, undecided, for each of them (10 s to compile at 67k).
/// A compile's run-class searches stop at their budget; the masks stay exact.
#[test]
fn run_class_searches_of_a_compile_are_bounded() {
    let g = grammask_core::ebnf::parse_ebnf(r#"root ::= [0-9]{3000} | [a-zA-Z0-9_]+ "t""#, "root").unwrap();
    let pieces: &[&[u8]] = &[b"12", b"123456", b"ab", b"t", b"tt", b"x1t", b"_", b"9t", b"0"];
    let mut rng = Rng(0x3000_0067);
    let singles = (b'0'..=b'z').filter(u8::is_ascii_alphanumeric).map(|b| vec![b]).collect();
    let vocab = pieces_vocab(&mut rng, pieces, 0, singles);
    let before = grammask_core::mask::refute_states_read();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let read = grammask_core::mask::refute_states_read() - before;
    let bound = grammask_core::limits::MAX_COMPILE_RUN_CLASS_PAIRS;
    assert!(read <= bound, "the compile's refutations read {read} states (bound {bound})");
    let docs: [&[u8]; 3] = [b"0123456789t", b"ab12_t", b"9t"];
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) >= 19);
}

/// An any-order object past `MAX_ANY_ORDER_STATES` (2^9 key-set rules): its entries, each used by
/// 256 key-set rules, stay rules of their own instead of copies in every key-set rule
/// (`compiler/inline.rs`, `INLINE_SHARED_TOTAL_STATES`), which bounds the automata's states; masks
/// equal the brute force at every byte of instances with the keys in several orders, with extra
/// keys between them, and the same keys twice refused.
#[test]
fn key_set_entries_stay_rules_and_masks_match_brute_force() {
    let keys = ["name", "line", "column", "endLine", "endColumn", "source", "kind", "presentationHint", "id"];
    let props: Vec<String> = keys.iter().map(|k| format!("\"{k}\": {{\"type\": \"integer\"}}")).collect();
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let g = lax_schema_grammar(&schema);
    let a = grammask_core::compiler::Automata::build(&g).unwrap();
    let rules = a.states().iter().map(|s| s.rule.index()).collect::<std::collections::HashSet<_>>().len();
    assert!(rules > 512, "{rules} rules with states");
    assert!(a.states().len() < 12_000, "{} states", a.states().len());
    let extra: Vec<String> = keys.iter().map(|k| format!("\"{k}\":")).collect();
    let mut extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    extra.extend(["\"line", "Line\":", "Column", "\":1,", "\":2}", "{\"", ", \"", "12"]);
    let vocab = ascii_vocab(&extra, &[]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let docs = [
        r#"{"name":1,"line":2,"column":3,"endLine":4,"endColumn":5,"source":6,"kind":7,"presentationHint":8,"id":9}"#,
        r#"{"id":9,"presentationHint":8,"kind":7,"source":6,"endColumn":5,"endLine":4,"column":3,"line":2,"name":1}"#,
        r#"{"endLine":4, "x":0, "line":2,"lines":1,"column":3, "name":12}"#,
        r#"{"kind":7,"endColumn":5,"id":9}"#,
        r"{}",
    ];
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(checked > 250);
    for twice in [r#"{"line":1,"name":2,"line":3}"#, r#"{"id":1,"kind":2,"id":1}"#] {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        let ok = m.accept_bytes(twice.as_bytes()).unwrap_or(false) && m.is_completed();
        assert!(!ok, "{twice}");
    }
}

/// Any-order objects of one key-set language share one set of key-set rules (the converter's
/// `object_any_order` names an earlier equal object's rules): `x` and `y` reach the same object
/// through different goals and share; `z` (a required key), `w` (closed), `v` and `k.t` (other
/// `maxProperties`), `u` (other key values), `k.s` (`dependentRequired`), `k.r` (other additional
/// values) and `k.p` (`propertyNames`) differ from it, or from each other, in one thing each and
/// keep their own. Checked first by documents accepted exactly by the grammars of both the text
/// and the direct (`key_sets`) rules and by masks at every byte against brute force (a key that
/// misses one of these differences fails here), then by the objects with key-set rules in the EBNF
/// text (12 with the root, `k` and a schema-order one; 13 unshared).
#[test]
fn equal_any_order_objects_share_key_set_rules_and_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let o = r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
        "c": {"type": "integer"}, "d": {"type": "integer"}}}"#;
    let schema = format!(
        r##"{{"type": "object", "$defs": {{"O": {o}}}, "properties": {{
        "x": {{"$ref": "#/$defs/O"}},
        "y": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"minProperties": 0}}]}},
        "z": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"required": ["a"]}}]}},
        "w": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"properties": {{"a": {{}}, "b": {{}}, "c": {{}}, "d": {{}}}},
            "additionalProperties": false}}]}},
        "v": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"maxProperties": 2}}]}},
        "u": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"properties": {{"a": {{"minimum": 5}}}}}}]}},
        "k": {{"type": "object", "properties": {{
            "t": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"maxProperties": 3}}]}},
            "s": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"dependentRequired": {{"a": ["b"]}}}}]}},
            "r": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"additionalProperties": {{"type": "integer"}}}}]}},
            "p": {{"allOf": [{{"$ref": "#/$defs/O"}}, {{"propertyNames": {{"maxLength": 1}}}}]}}}}}}}}}}"##
    );
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let text = json_schema_to_ebnf(&schema, &opts).unwrap();
    let vocab = ascii_vocab(&["\":", "\": {\"", ", \"", "true"], &[]);
    let docs = [
        (r#"{"x": {"d": 1, "q": 2, "a": 3}, "y": {"c": 1, "b": 2, "zz": [], "a": 3, "d": 4}}"#, true),
        (r#"{"x": {"b": 1}, "y": {}}"#, true),
        (r#"{"x": {"a": 1, "a": 2}}"#, false),
        (r#"{"y": {"b": 1, "c": 2, "b": 3}}"#, false),
        (r#"{"z": {"b": 1, "a": 2}, "w": {"d": 1, "c": 2}, "v": {"q": 1, "a": 2}, "u": {"a": 7}}"#, true),
        (r#"{"z": {"b": 1}}"#, false),
        (r#"{"w": {"a": 1, "q": 2}}"#, false),
        (r#"{"v": {"a": 1, "b": 2, "c": 3}}"#, false),
        (
            r#"{"k": {"t": {"a": 1, "b": 2, "c": 3}, "s": {"b": 1, "a": 2}, "r": {"q": 1}, "p": {"a": 1, "q": 2}}}"#,
            true,
        ),
        (r#"{"k": {"t": {"a": 1, "b": 2, "c": 3, "d": 4}}}"#, false),
        (r#"{"k": {"s": {"a": 1, "c": 2}}}"#, false),
        (r#"{"k": {"r": {"q": true}}}"#, false),
        (r#"{"k": {"p": {"qq": 1}}}"#, false),
        (r#"{"u": {"a": 1}}"#, false),
        (r#"{"x": {"a": true}}"#, false),
        (r#"{"w": {}, "u": {"b": 1, "zz": 2}}"#, true),
    ];
    let from_text = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
    for g in [from_text, lax_schema_grammar(&schema)] {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        assert_accepts_exactly(&cg, &docs);
        let accepted: Vec<&[u8]> = docs.iter().filter(|d| d.1).map(|d| d.0.as_bytes()).collect();
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &accepted);
        assert_eq!(checked, accepted.iter().map(|d| d.len() + 1).sum::<usize>());
    }
    assert_eq!(key_set_bases(&text).len(), 12, "{:?}", key_set_bases(&text));
}

/// Key-set rules are each a class of their own for the equal-rule merging (the converter's
/// `Grammar::with_own_class` hint): `x` and `y` are closed any-order objects whose entries name
/// different value rules of one language (`I1`, `I2`), so their key-set texts differ (not shared
/// by `AnyOrderKey`) and their rules are equal; without the hint the refinement merges them
/// (fewer states), with it each keeps its own. Same language and masks either way.
#[test]
fn key_set_rules_own_class_hint_keeps_masks() {
    use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let schema = r##"{"type": "object", "$defs": {"I1": {"type": "integer", "title": "one"},
        "I2": {"type": "integer", "title": "two"}}, "properties": {
        "x": {"type": "object", "properties": {"a": {"$ref": "#/$defs/I1"}, "b": {"type": "boolean"},
            "c": {"type": "string"}, "d": {"type": "integer"}}, "required": ["b"], "additionalProperties": false},
        "y": {"type": "object", "properties": {"a": {"$ref": "#/$defs/I2"}, "b": {"type": "boolean"},
            "c": {"type": "string"}, "d": {"type": "integer"}}, "required": ["b"], "additionalProperties": false}},
        "additionalProperties": false}"##;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let text = json_schema_to_ebnf(schema, &opts).unwrap();
    let vocab = ascii_vocab(&["\": ", ", \"", "true", "\": {\""], &[]);
    let docs = [
        (r#"{"x": {"c": "q", "b": true, "a": 1}, "y": {"b": false}}"#, true),
        (r#"{"y": {"d": 3, "a": 2, "b": true}, "x": {"b": false, "d": 1}}"#, true),
        ("{}", true),
        (r#"{"x": {"a": 1}}"#, false),
        (r#"{"y": {"b": true, "b": false}}"#, false),
        (r#"{"x": {"b": true, "e": 1}}"#, false),
        (r#"{"y": {"a": 1.5, "b": true}}"#, false),
    ];
    let hinted = lax_schema_grammar(schema);
    let plain = hinted.clone().with_own_class(Vec::new());
    // The text's grammar with the rules the converter keeps (the key-set rules), by name.
    let from_text = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
    let kept = hinted.kept().iter().filter_map(|&r| from_text.rule_by_name(&hinted.rule(r).name)).collect();
    let from_text = from_text.with_kept(kept);
    let mut states = Vec::new();
    for g in [&hinted, &plain, &from_text] {
        let cg = Arc::new(CompiledGrammar::new(g, &vocab).unwrap());
        assert_accepts_exactly(&cg, &docs);
        let accepted: Vec<&[u8]> = docs.iter().filter(|d| d.1).map(|d| d.0.as_bytes()).collect();
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &accepted);
        assert_eq!(checked, accepted.iter().map(|d| d.len() + 1).sum::<usize>());
        states.push(cg.automata().states().len());
    }
    assert!(!hinted.own_class().is_empty());
    assert!(plain.own_class().is_empty());
    assert!(key_set_bases(&text).len() >= 2, "{:?}", key_set_bases(&text));
    // Taken: the hinted grammar keeps `x`'s and `y`'s key-set automata apart.
    assert!(states[0] > states[1], "states hinted / plain / text: {states:?}");
    assert_eq!(states[1], states[2], "states hinted / plain / text: {states:?}");
}

/// With `indent` (and no `any_whitespace`), the separator between entries depends on the depth:
/// the same object at two depths keeps two sets of key-set rules (its entries name the value
/// rules of each depth, and `AnyOrderKey::sep` tells the separators apart), each with its own
/// separator; `x` and `y` (one goal) keep one.
#[test]
fn any_order_objects_at_two_indent_depths_keep_their_separators() {
    use grammask_core::json_schema::{json_schema_to_ebnf, json_schema_to_grammar, JsonSchemaOptions};
    let schema = r##"{"type": "object", "$defs": {"O": {"type": "object", "properties": {"a": {"type": "integer"},
        "b": {"type": "integer"}}, "additionalProperties": false}}, "properties": {"x": {"$ref": "#/$defs/O"},
        "y": {"$ref": "#/$defs/O"}, "n": {"type": "object", "properties": {"x": {"$ref": "#/$defs/O"}},
        "additionalProperties": false}}, "additionalProperties": false}"##;
    let opts = JsonSchemaOptions { strict_mode: false, indent: Some(2), any_whitespace: false, ..Default::default() };
    let text = json_schema_to_ebnf(schema, &opts).unwrap();
    let doc = "{\n  \"y\": {\n    \"b\": 2,\n    \"a\": 1\n  },\n  \"n\": {\n    \"x\": {\n      \"b\": 2,\n      \"a\": 1\n    }\n  }\n}";
    // `n.x`'s separator at `y`'s depth, and `y`'s at `n.x`'s.
    let shallow = doc.replacen(",\n      \"a\"", ",\n    \"a\"", 1);
    let deep = doc.replacen(",\n    \"a\"", ",\n      \"a\"", 1);
    let docs = [(doc, true), (shallow.as_str(), false), (deep.as_str(), false)];
    let vocab = ascii_vocab(&[], &[]);
    let from_text = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
    for g in [from_text, json_schema_to_grammar(schema, &opts).unwrap()] {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        assert_accepts_exactly(&cg, &docs);
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[doc.as_bytes()]);
        assert_eq!(checked, doc.len() + 1);
    }
    // The root, `x` and `y` (one goal), `n` (schema order) and `n.x`.
    assert_eq!(key_set_bases(&text).len(), 4, "{:?}", key_set_bases(&text));
}

/// The objects with key-set rules in an EBNF text: the base of each `obj_N.MASK_COUNT_STARTED`
/// rule defined.
fn key_set_bases(text: &str) -> std::collections::HashSet<&str> {
    text.lines()
        .filter_map(|l| l.split_once(" ::= ").map(|(n, _)| n))
        .filter_map(|n| n.split_once('.'))
        .filter(|(_, st)| {
            st.split('_').count() == 3
                && st.split('_').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .map(|(b, _)| b)
        .collect()
}

/// Asserts that `cg` accepts (whole) exactly the documents marked `true`.
fn assert_accepts_exactly(cg: &Arc<CompiledGrammar>, docs: &[(&str, bool)]) {
    for &(doc, ok) in docs {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        let accepted = m.accept_bytes(doc.as_bytes()).unwrap_or(false) && m.is_completed();
        assert_eq!(accepted, ok, "{doc}");
    }
}

/// Open objects' key starts with few known keys (a state calling the excluded-key rule, then
/// the closing quote), whose cover search reads the excluded-key rule as the string-body rule
/// (`CoverMemo::with_substitutes`): keys that are prefixes of others, an empty key, a non-ASCII
/// key, nested and in arrays. Masks at every byte of documents through known and other keys
/// equal brute force, on a small vocabulary with tokens that close a known key, a prefix of one
/// or an empty key (`alp"`, `alpha":`, `"":`), and on Llama 3.
#[test]
fn open_object_key_starts_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let schema = r#"{"type": "object", "properties": {
        "alpha": {"type": "integer"}, "alp": {"type": "string"}, "": {"type": "integer"},
        "inner": {"type": "object", "properties": {"beta": {"type": "integer"}, "b\u00e9ta": {"type": "string"}}},
        "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}}}}"#;
    let g = json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let docs: [&[u8]; 4] = [
        br#"{"alpha": 1, "al": 2, "alp": "x", "": 3, "inner": {"beta": 1, "bet": 2}}"#,
        br#"{"alphab": [1], "list": [{"x": 1, "xy": {"": 1}}, {"y": 2}], "alpha": 2}"#,
        br#"{"": 1, " ": 2, "inner": {"b": {"alpha": 3}}}"#,
        "{\"al\u{e9}\": 1, \"inner\": {\"b\u{e9}ta\": \"z\", \"b\u{e9}\": null}}".as_bytes(),
    ];
    let small = ascii_vocab(
        &[
            "alp\"", "alpha\":", "\"\":", "\"\"", "al\"", "\"alp", "ha\": ", "x\":", "\"x", "beta\"", "é", "éta\":",
            "\": {\"", "\", \"",
        ],
        &[],
    );
    let cg = Arc::new(CompiledGrammar::new(&g, &small).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &small, &docs);
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs[..2]);
    assert_eq!(checked, docs[0].len() + docs[1].len() + 2);
}

/// Masks along keys of MaskBench `Github_medium---o83286`'s key patterns (a key after `net_` or
/// `net_abc` refuses a digit after the token's leading letters, a shifted kernel with a walked
/// body from the token start) equal brute force, and that path is taken.
#[test]
fn start_run_shifted_masks_match_brute_force() {
    // `zz` listed: the keys stay one alternative per part (joined, they take no shifted kernel).
    let schema = r#"{"type": "object", "properties": {"devices": {"type": "object",
        "properties": {"zz": {"type": "integer"}},
        "patternProperties": {"netdir_(projects|work|scratch|share)": {"type": "integer"},
        "netdrv_([a-z]+)": {"type": "integer"}, "net_[a-z]+[0-9]+": {"type": "integer"}}}},
        "additionalProperties": false}"#;
    let g = lax_schema_grammar(schema);
    let pieces: &[&[u8]] = &[
        b"net", b"_", b"a", b"bc", b"1", b"0", b"drv", b"dir", b"work", b" ", b"\"", b": ", b", ", b"{", b"}", b"x",
        b"n",
    ];
    let mut rng = Rng(0x0833_2860_0036);
    let mut extra: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    let others = b" 0123456789\":,{}";
    for _ in 0..3000 {
        let mut t = vec![others[rng.below(others.len() as u64) as usize]];
        t.extend((0..rng.below(5)).map(|_| b"abcnet_19 \""[rng.below(11) as usize]));
        extra.push(t);
    }
    extra.extend(
        ["abc1", "abc", "a1", "bc1x", "c_1", "abc\"", "et_a1", "drv_", "net_ab1"].map(|t| t.as_bytes().to_vec()),
    );
    let vocab = pieces_vocab(&mut rng, pieces, 600, extra);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let docs: [&str; 2] = [
        r#"{"devices": {"net_abc1": 1, "netdrv_a": 2, "net_abc": 3, "netdir_work": 4}}"#,
        r#"{"devices": {"xnet_ab": 5, "net_a0b1": 6, "net__a": 7}}"#,
    ];
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(checked > 100);
    assert!(cg.kernel_stats().shifted_walked > 0, "{:?}", cg.kernel_stats());
}

/// Kernels of states that call a whitespace run rule beside other rules (the start of an
/// optional property's rule in a chain, `r1 ::= ws "," ws key ws ":" ws val r2 | r2`), composed
/// with the run read as a lead (`classify_after_lead` from the state after it) and the other
/// callees' start kernels, equal the plain walk's, and masks along documents equal brute force,
/// on [`lead_vocab`] (runs before `,`, `"` and digits, runs one past the bound). Fails if no such
/// state is composed (before, the run callee, reading bytes only, refused the composition).
#[test]
fn lead_callee_compositions_equal_plain_walks() {
    let mut rng = Rng(0x0B5E_55ED_C4A1_7737);
    let mut composed = 0;
    let docs: &[&[u8]] =
        &[b"{\"a\": 1, \"b\":2, \"ab\": \"ab\"}", b"{\"a\":{}, \"ab\" : 12 }", b"{ \"a\": 2,\"ba\": {\"a\": 1} }"];
    let text = "root ::= \"{\" ws \"\\\"a\\\"\" ws \":\" ws val r1 ws \"}\"\n\
                r1 ::= ws \",\" ws \"\\\"b\\\"\" ws \":\" ws val r2 | r2\n\
                r2 ::= ws \",\" ws \"\\\"ab\\\"\" ws \":\" ws val r3 | r3\n\
                r3 ::= (ws \",\" ws \"\\\"ba\\\"\" ws \":\" ws val)?\n\
                val ::= [12]+ | \"\\\"\" [ab]* \"\\\"\" | \"{\" ws \"}\" | \"{\" ws \"\\\"a\\\"\" ws \":\" ws val r1 ws \"}\"\n\
                ws ::= [ \\n\\t]{0,64}";
    let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
    for _ in 0..6 {
        let vocab = lead_vocab(&mut rng);
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        for s in 0..a.states().len() {
            let s = grammask_core::compiler::StateId(s as u32);
            let edges = a.rule_edges(s);
            let beside_run = edges.len() > 1 && edges.iter().any(|&(r, _)| a.rule_name(r) == "ws");
            if let Some(km) = cg.composed_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} of {text}", s.0);
                composed += usize::from(beside_run);
            }
        }
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
    assert!(composed >= 12, "only {composed} compositions beside a run");
}

/// On Llama 3, masks inside and after the values of an object of optional properties (each
/// property's rule starts with the whitespace before its `,` beside the rest of the chain, a
/// composition through the whitespace run) equal brute force.
#[test]
fn lead_callee_masks_match_brute_force_on_llama3() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let Some(vocab) = llama3_vocab() else { return };
    let props: Vec<String> = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
        .iter()
        .enumerate()
        .map(|(i, k)| format!("\"{k}\": {{\"type\": \"{}\"}}", if i % 2 == 0 { "integer" } else { "string" }))
        .collect();
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let cg = Arc::new(CompiledGrammar::new(&json_schema_to_grammar(&schema, &opts).unwrap(), &vocab).unwrap());
    for prefix in
        ["{\"alpha\": 1", "{\"alpha\": 12,", "{\"alpha\": 1, \"beta\": \"x\"", "{\"beta\": \"x\" ", "{\"gamma\": 3"]
    {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(prefix.as_bytes()).unwrap(), "{prefix:?}");
        let mask = m.compute_mask().unwrap().clone();
        for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
            assert_eq!(mask.get(t), w, "after {prefix:?}: token {:?}", vocab.token_bytes(t as u32));
        }
    }
}

/// A number before the rest of a chain of 40 optional properties (a JSON Schema object of
/// optional integers, `obj.K_0_1 ::= ws "," ws ... ws ":" ws json_integer obj.K+1_0_1 |
/// obj.K+1_0_1`): the state before the number calls a rule reading bytes only, and the state
/// after it predicts every later property (a row of over 64 items), so it is composed from the
/// number's start kernel with each suffix read from that row. Every composed kernel equals the
/// plain walk's and masks along documents equal brute force, on tokens that end numbers inside
/// (`1,`, `0 ,`, `2}`, `12, "k`). Fails if no state before a number is composed (before, a
/// callee reading bytes only refused the composition).
#[test]
fn wide_row_compositions_equal_plain_walks() {
    let mut rng = Rng(0x7A11_C0DE_9E37_79B9);
    let props: Vec<String> = (0..40).map(|k| format!("\"k{k}\": {{\"type\": \"integer\"}}")).collect();
    let text = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let g = lax_schema_grammar(&text);
    let docs: &[&[u8]] =
        &[b"{\"k0\": 1, \"k1\": 20, \"k7\":3 , \"k39\": 0}", b"{\"k0\":12,\"k2\": 0,\n\"k38\": 7 }", b"{ \"k0\": 0}"];
    let pieces: &[&[u8]] = &[
        b" ", b"\n", b"\"", b"k", b"k1", b"k3", b"\"k", b"\":", b":", b",", b", \"", b"{", b"}", b"0", b"1", b"2",
        b"12", b"20", b"1,", b"0 ,", b"2}", b"12, \"k", b"7 }", b"0}", b", \"k3",
    ];
    let mut composed = 0;
    for _ in 0..4 {
        let vocab = pieces_vocab(&mut rng, pieces, 120, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        for s in 0..a.states().len() {
            let s = grammask_core::compiler::StateId(s as u32);
            let before_number = a.rule_edges(s).iter().any(|&(r, _)| a.rule_name(r) == "json_integer");
            if let Some(km) = cg.composed_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} of {text}", s.0);
                composed += usize::from(before_number);
            }
        }
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
    assert!(composed >= 8, "only {composed} compositions before a number");
}

/// An open object of 70 known keys: its key starts call the excluded-words rule, composed from
/// its kernel ([`CompiledGrammar::composed_kernel`]), whose uncertain tokens end the key inside
/// and leave suffixes that share prefixes (`"`, `":`, `": `, `": 1`, `":1,`) or die on the way
/// (`"}`, `"x`, `": }`). The composition reads them in byte order from the rows of the one
/// before's common prefix (`SuffixReader`, compose.rs). Every composed kernel equals the plain
/// walk's and masks along documents equal brute force.
#[test]
fn shared_prefix_suffix_compositions_equal_plain_walks() {
    let mut rng = Rng(0x5AFF_1C5E_0DD5_2929);
    let props: Vec<String> = (0..70).map(|k| format!("\"k{k:02}\": {{\"type\": \"integer\"}}")).collect();
    let text = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let g = lax_schema_grammar(&text);
    let docs: &[&[u8]] =
        &[b"{\"k00\": 1, \"x\": 20, \"k69\":3}", b"{\"xy\":12,\"k1\": 0 }", b"{ \"k05\": 0, \"k0\":1}"];
    let pieces: &[&[u8]] = &[
        b" ", b"\"", b"\":", b"\": ", b"\":\"", b"\": 1", b"\":1,", b"\"}", b"\"x", b"\": }", b"k", b"k0", b"k1", b"x",
        b"xy", b":", b",", b", \"", b"{", b"}", b"{\"", b"0", b"1", b"2", b"12", b"20", b"0 ,", b"1}",
    ];
    let mut composed = 0;
    for _ in 0..3 {
        let vocab = pieces_vocab(&mut rng, pieces, 150, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        for s in 0..a.states().len() {
            let s = grammask_core::compiler::StateId(s as u32);
            if let Some(km) = cg.composed_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} of {text}", s.0);
                composed += usize::from(!km.suffixes.is_empty());
            }
        }
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
    assert!(composed >= 100, "only {composed} compositions with suffixes");
}

/// Masks equal brute force inside open objects whose key-set rules share one automaton under a
/// renaming that does not keep the rules' order (`compiler/memo.rs`: rules keyed by first use).
/// `b` repeats some of `a`'s entries (`"p": integer`, `"r": boolean`: equal rules, named by
/// `a`'s lower ids) in another order, between entries of its own, so its key-set rules name
/// their entries and successors in an id order unlike `a`'s; `c` has `b`'s shape with other
/// value types. A renaming that named the wrong rule for a rank (an entry or successor of
/// another object or subset) would offer or refuse keys and values those objects do not have.
#[test]
fn key_set_rules_renamed_out_of_order_match_brute_force() {
    let a = r#"{"p": {"type": "integer"}, "q": {"type": "string", "maxLength": 2}, "r": {"type": "boolean"}, "s": {"type": "null"}}"#;
    let b = r#"{"s": {"enum": [1, 2]}, "r": {"type": "boolean"}, "x": {"type": "null"}, "p": {"type": "integer"}}"#;
    let c = r#"{"s": {"type": "boolean"}, "y": {"type": "null"}, "x": {"type": "integer"}, "p": {"enum": ["u"]}}"#;
    let schema = format!(
        r#"{{"type": "object", "properties": {{"a": {{"type": "object", "properties": {a}}}, "b": {{"type": "object", "properties": {b}}}, "c": {{"type": "object", "properties": {c}}}}}}}"#
    );
    let g = lax_schema_grammar(&schema);
    let vocab = ascii_vocab(&["\": ", ", \"", "true", "null", "{\"", "\"}", "12", "\"p\": ", "\"s\": "], &[]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let docs: &[&[u8]] = &[
        br#"{"a": {"s": null, "p": 1, "r": true, "q": "ab"}}"#,
        br#"{"b": {"p": 12, "x": null, "s": 2, "r": false}, "a": {"r": true, "zz": 1}}"#,
        br#"{"b": {"r": true, "p": 3, "k": "v"}, "c": {"p": "u", "x": 7, "y": null, "s": false}}"#,
        br#"{"c": {"y": null, "s": true}, "b": {"s": 1, "p": -4}, "a": {"q": "x", "p": 0}}"#,
    ];
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, docs);
    assert!(checked > 250, "{checked} masks");
}

/// A final item that still calls a rule is not spent (`Chart::last_future_signature`): after
/// `za` and after `zc` the rows hold the same items but `p`'s and `r`'s, each final with a call
/// of `x` pending, begun in row 1. Left out of the signatures, the two rows would be interned as
/// one, and the walk of `zc` would take `za`'s future: `]` after `zcb` (where `r` wants `w`).
/// (`p` and `r` recurse through `q` so that they stay rules, not inlined.) Every state and every
/// position of the documents, against the brute force and the stack walk.
#[test]
fn final_items_calling_a_rule_are_not_spent() {
    let g = grammask_core::ebnf::parse_ebnf(
        "root ::= \"z\" (p | r) \"]\"\np ::= \"a\" x? | \"q\" p\nr ::= \"c\" | \"c\" x \"w\" | \"q\" r\nx ::= \"b\" | \"b\" x",
        "root",
    )
    .unwrap();
    let vocab = ascii_vocab(&["zab]", "zcbw]", "zab", "zcb", "zcbw", "za", "zc", "ab]", "cb]", "cbw", "b]", "bw"], &[]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let a = cg.automata();
    let calls = |name: &str| {
        (0..a.states().len()).any(|s| {
            let s = grammask_core::compiler::StateId(s as u32);
            a.state(s).is_final && a.rule_edges(s).iter().any(|&(r, _)| a.rule_name(r) == name)
        })
    };
    assert!(calls("x"), "no final state calls x: the test needs `p` and `r` to stay rules");
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[b"zab]", b"zcbw]", b"za]", b"zc]", b"zcbbw]"]);
    assert!(checked >= 20);
    for s in 0..a.states().len() {
        let s = grammask_core::compiler::StateId(s as u32);
        if let Some(km) = cg.classify(s, usize::MAX, &mut || false).unwrap() {
            assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {}", s.0);
        }
    }
}

/// An open object with many optional keys (an any-order object: one key-set rule per set of keys
/// seen and entry count, `json_schema/key_sets.rs`), keys that are prefixes of others, two
/// required, `maxProperties`, and a nested open object. Masks at every byte of five documents
/// equal brute force, and 300 random documents (known keys in any order, some repeated, other
/// keys between them) are accepted exactly when the schema allows them: no known key twice, both
/// required keys, at most 7 entries. The net for a build of key-set rules on first use: the
/// brute force alone compares the grammar with itself, the documents with the schema.
#[test]
fn open_objects_with_many_optional_keys_match_brute_force() {
    let keys = ["a", "ab", "abc", "b", "id", "kind", "name", "nm", "x", "y"];
    let required = ["id", "kind"];
    let mut props: Vec<String> = keys.iter().map(|k| format!("\"{k}\": {{\"type\": \"integer\"}}")).collect();
    props.push(
        r#""in": {"type": "object", "properties": {"p": {"type": "integer"}, "q": {"type": "integer"},
        "r": {"type": "integer"}, "pq": {"type": "integer"}, "s": {"type": "integer"}}, "maxProperties": 3}"#
            .to_string(),
    );
    let schema = format!(r#"{{"type": "object", "properties": {{{}}}, "required": ["id", "kind"]}}"#, props.join(", "));
    let g = lax_schema_grammar(&schema);
    let vocab = ascii_vocab(&["\": ", ", \"", "{\"", "\"}", "12", "\"ab", "c\": ", "\"id\": 1", "\"nm", "}}"], &[]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let docs: &[&[u8]] = &[
        br#"{"id": 1, "kind": 2}"#,
        br#"{"abc": 3, "kind": 2, "ab": 1, "a": 0, "id": 12, "nm": 4, "name": 5}"#,
        br#"{"z": 1, "kind": 2, "in": {"pq": 1, "t": 2, "q": 3}, "abd": 4, "id": 5}"#,
        br#"{"y": 1, "x": 2, "b": 3, "id": 4, "nmx": 5, "kind": 6}"#,
        br#"{"in": {"s": 1, "p0": 6, "r": 2}, "id": 1, "kind": 1, "a": 2, "ab": 3, "abc": 4, "b": 5, "x": 6}"#,
    ];
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, docs);
    assert!(checked > 300, "{checked} masks");
    let mut rng = Rng(0x5eed_4041);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..300 {
        // Other entries (known keys but the required ones, or unknown keys), then each
        // required key at a random place (most often), then maybe a known key again.
        let mut seen: Vec<String> = Vec::new();
        for i in 0..rng.below(7) {
            let key = match rng.below(4) {
                0 => format!("o{i}"),
                _ => keys[rng.below(keys.len() as u64) as usize].to_string(),
            };
            if !required.contains(&key.as_str()) {
                seen.push(key);
            }
        }
        for r in required {
            if rng.below(8) != 0 {
                let at = rng.below(seen.len() as u64 + 1) as usize;
                seen.insert(at, r.to_string());
            }
        }
        if rng.below(5) == 0 {
            let at = rng.below(seen.len() as u64 + 1) as usize;
            seen.insert(at, keys[rng.below(keys.len() as u64) as usize].to_string());
        }
        let entries: Vec<String> = seen.iter().enumerate().map(|(i, k)| format!("\"{k}\": {i}")).collect();
        let twice = seen.iter().enumerate().any(|(i, k)| seen[..i].contains(k));
        let ok = !twice && required.iter().all(|r| seen.iter().any(|k| k == r));
        let doc = format!("{{{}}}", entries.join(", "));
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        let got = m.accept_bytes(doc.as_bytes()).unwrap_or(false) && m.is_completed();
        assert_eq!(got, ok, "{doc}");
        if ok {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    assert!(accepted > 20 && refused > 20, "{accepted} accepted, {refused} refused");
    for (doc, ok) in [
        (r#"{"id": 1, "kind": 2, "in": {"p": 1, "q": 2, "pq": 3}}"#, true),
        (r#"{"id": 1, "kind": 2, "in": {"p": 1, "q": 2, "r": 3, "s": 4}}"#, false),
        (r#"{"id": 1, "kind": 2, "in": {"p": 1, "t": 2, "u": 3, "v": 4}}"#, false),
        (r#"{"id": 1, "kind": 2, "in": {"q": 1, "p": 2, "q": 3}}"#, false),
    ] {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        let got = m.accept_bytes(doc.as_bytes()).unwrap_or(false) && m.is_completed();
        assert_eq!(got, ok, "{doc}");
    }
}

/// A string schema whose patterns every string matches (an unanchored `([A-Z0-9]+)?`, as in
/// MaskBench o12409) is the plain counted string: its grammar is the one without the pattern (a
/// `maxLength` past the long-run bound: blocks, not a state per character), its lengths are
/// exact, masks equal the brute force along the string, and a pattern that refuses one character
/// (`^[^é]*$`) still refuses it.
#[test]
fn universal_pattern_strings_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let string = |extra: &str| format!(r#"{{"type": "string", "minLength": 3, "maxLength": 1100{extra}}}"#);
    let with = string(r#", "pattern": "([A-Z0-9]+)?""#);
    assert_eq!(json_schema_to_ebnf(&with, &opts).unwrap(), json_schema_to_ebnf(&string(""), &opts).unwrap());
    let schema = format!(
        r#"{{"type": "object", "properties": {{"u": {with}, "n": {}}}, "required": ["u"]}}"#,
        string(r#", "pattern": "^[^é]*$""#)
    );
    let vocab = ascii_vocab(&["é", "ab", "\\u00e9", "AB1", "\"}", "\\n"], &[0xC3, 0xA9]);
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(&schema), &vocab).unwrap());
    let accepts = |doc: &str| {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        m.accept_bytes(doc.as_bytes()).unwrap() && m.is_completed()
    };
    let text = |n: usize, c: &str| c.repeat(n);
    for (doc, want) in [
        (format!(r#"{{"u": "{}"}}"#, text(1100, "x")), true),
        (format!(r#"{{"u": "{}"}}"#, text(1101, "x")), false),
        (format!(r#"{{"u": "{}"}}"#, text(2, "é")), false),
        (format!(r#"{{"u": "{}"}}"#, text(3, "é")), true),
        (format!(r#"{{"u": "a\nb{}"}}"#, text(1096, "\\u00e9")), true),
        (format!(r#"{{"u": "abc", "n": "{}"}}"#, text(1100, "e")), true),
        (r#"{"u": "abc", "n": "abé"}"#.to_string(), false),
        (r#"{"u": "abc", "n": "ab\u00e9"}"#.to_string(), false),
    ] {
        assert_eq!(accepts(&doc), want, "{}", &doc[..doc.len().min(40)]);
    }
    let docs = [
        format!(r#"{{"u": "{}é", "n": "{}"}}"#, text(549, "aB"), text(1100, "z")),
        format!(r#"{{"u": "ab\"{}"}}"#, text(1097, "\\n")),
    ];
    let docs: Vec<&[u8]> = docs.iter().map(String::as_bytes).collect();
    // Every position of both strings, past the 256-character blocks' ends included.
    assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) > 4400);
}

/// A grammar whose leads and literal leads call two run rules of different classes and bounds
/// (`[ \t]{0,64}` in objects and before `:`, `[\n\r ]*` after `:`, in the array and after the
/// `1` of `[ 1 ]`) takes each rule's own run from the grammar's `lead_run` cache
/// (`CompiledGrammar::lead_run_at`, by rule start): every lead and literal lead kernel equals
/// the plain walk and masks along documents equal brute force, with tokens at the bound and one
/// past it. Fails if the cache answers one rule's run for another's start (checked: a cache that
/// returned its first entry for every start).
#[test]
fn lead_runs_of_several_rules_equal_plain_walks() {
    let mut rng = Rng(0xA409_3822_299F_31D0);
    let text = "root ::= obj | \"[\" nl (obj (nl \",\" nl obj)*)? nl \"]\"\n\
                obj ::= \"{\" ws (kv (ws \",\" ws kv)*)? ws \"}\"\n\
                kv ::= \"\\\"\" [ab]+ \"\\\"\" ws \":\" nl val\n\
                val ::= \"1\" | \"2\" | \"\\\"\" [ab]* \"\\\"\" | obj | \"[\" ws \"1\" nl \"]\"\n\
                ws ::= [ \\t]{0,64}\n\
                nl ::= [\\n\\r ]{0,100}";
    let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
    let pieces: &[&[u8]] = &[
        b" ", b"  ", b"\n", b"\t", b"\r\n", b"\"", b"a", b"b", b"ab", b":", b",", b"{", b"}", b"1", b"2", b"[", b"]",
        b": ", b":\n", b":\t", b", ", b",\n", b"\":", b"\n{", b"[\n", b"[\t", b"1\n", b"1 ", b"1\t",
    ];
    let mut runs = Vec::new();
    for (head, byte, n, tail) in [
        (":", "\n", 3, "1"),
        (":", "\t", 1, "1"),
        (":", " ", 70, "2"),
        ("\"", " ", 64, ":"),
        ("\"", " ", 65, ":"),
        ("\"", "\t", 3, ":"),
        ("1", "\n", 2, "]"),
        ("1", "\t", 2, "]"),
        ("1", " ", 70, "]"),
        ("", " ", 64, "\""),
        ("", " ", 65, "\""),
        ("{", "\t", 64, "}"),
        ("{", "\t", 65, "}"),
        ("{", "\n", 1, "}"),
        ("[", "\n", 100, "{"),
        ("[", "\t", 2, "1"),
        (",", "\n", 100, "{"),
        (",", "\t", 1, "\""),
        ("", "\n", 64, "\""),
    ] {
        runs.push(format!("{head}{}{tail}", byte.repeat(n)).into_bytes());
    }
    let ws64 = format!("{{{}\"b\":2{}}}", " ".repeat(64), "\t".repeat(64));
    let nl = format!("[{}{{\"a\":{}[\t1{}]}}\n]", "\n".repeat(100), " ".repeat(70), "\r\n".repeat(20));
    let docs: &[&[u8]] = &[
        b"{\"a\": 1, \"ab\":2}",
        b"[\n{\"b\" :\r\n\"ab\"},\n\n{ }\n]",
        b"{\t\"a\":[ 1\n]}",
        ws64.as_bytes(),
        nl.as_bytes(),
    ];
    let (mut lead, mut literal) = (0, 0);
    for _ in 0..4 {
        let vocab = pieces_vocab(&mut rng, pieces, 150, runs.clone());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        lead += lead_kernels_equal_plain_walks(&cg, text);
        for s in 0..cg.automata().states().len() {
            let s = grammask_core::compiler::StateId(s as u32);
            if let Some(km) = cg.literal_lead_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} of {text}", s.0);
                literal += 1;
            }
        }
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
    assert!(lead >= 24 && literal >= 8, "only {lead} lead and {literal} literal lead kernels");
}

/// Counted strings read a position's ASCII, short escapes and multi-byte characters in place and
/// call the grammar's kept rule after `\u`: fewer states, the counted-body shortcut at every
/// position, and masks equal to brute force at every byte, under both spellings.
#[test]
fn counted_strings_calling_shared_chars_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    use grammask_core::spelling::Spelling;
    let schema = r#"{"type": "object", "properties": {"a": {"type": "string", "maxLength": 6},
        "b": {"type": "string", "minLength": 2, "maxLength": 1000},
        "c": {"type": "string", "minLength": 3, "maxLength": 1100}, "d": {"type": "string", "minLength": 2}},
        "required": ["a"]}"#;
    let vocab = ascii_vocab(
        &[
            "é",
            "日本",
            "😀",
            "aé",
            "é\"",
            "\\u00e9",
            "\\u00E9x",
            "\\u0041",
            "\\ud83d\\ude00",
            "\\ud83d",
            "\\/",
            "\\n",
            "\\",
            "\"}",
        ],
        &[0xC3, 0xA9, 0xE6, 0x97, 0xA5, 0xF0, 0x9F, 0x98, 0x80],
    );
    let text = |n: usize, c: &str| c.repeat(n);
    for spelling in [Spelling::Canonical, Spelling::Any] {
        let opts = JsonSchemaOptions { strict_mode: false, spelling, ..Default::default() };
        let g = json_schema_to_grammar(schema, &opts).unwrap();
        let u = g.rule_by_name("json_char.u").expect("counted strings call the `\\u` rule");
        assert!(g.kept().contains(&u));
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        // About 10 states a position (`json_char` inlined was ~24: 18 of UTF-8 lead bytes unshared).
        assert!(a.states().len() < 25_000, "{} states", a.states().len());
        // A position reads `\u` into a state that calls the rule.
        let calls_u = |s| a.rule_edges(s).iter().any(|&(r, _)| r == u);
        let positions: Vec<_> = (0..a.states().len() as u32)
            .map(grammask_core::compiler::StateId)
            .filter(|&s| a.step(s, b'\\').and_then(|t| a.step(t, b'u')).is_some_and(calls_u))
            .collect();
        assert!(positions.len() > 1_500, "{} positions", positions.len());
        for &s in &positions {
            assert!(cg.counted_body(s).is_some() || cg.closing_body(s).is_some(), "{s:?} is no counted body");
        }
        let accepts = |doc: &str| {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            m.accept_bytes(doc.as_bytes()).unwrap() && m.is_completed()
        };
        let any = spelling == Spelling::Any;
        for (doc, want) in [
            (r#"{"a": "ab\u00e9\ud83d\ude00é日"}"#.to_string(), true),
            (r#"{"a": "ab\u00e9\ud83d\ude00é日x"}"#.to_string(), false),
            (r#"{"a": "\u0041"}"#.to_string(), any),
            (r#"{"a": "\/"}"#.to_string(), any),
            (r#"{"a": "\ud83d"}"#.to_string(), false),
            (r#"{"a": "\u00"}"#.to_string(), false),
            (format!(r#"{{"a": "", "b": "{}"}}"#, text(1000, "é")), true),
            (format!(r#"{{"a": "", "b": "{}"}}"#, text(1001, "\\u00e9")), false),
            (format!(r#"{{"a": "", "c": "{}😀"}}"#, text(1099, "\\n")), true),
            (format!(r#"{{"a": "", "c": "{}😀"}}"#, text(1100, "x")), false),
            (r#"{"a": "", "d": "é"}"#.to_string(), false),
        ] {
            assert_eq!(accepts(&doc), want, "{spelling:?} {}", &doc[..doc.len().min(40)]);
        }
        let docs = [
            format!(
                r#"{{"a": "\u00E9é😀\\", "b": "{}é\ud83d\ude00", "d": "日本{}"}}"#,
                text(330, "aé\\u00e9"),
                text(5, "é")
            ),
            format!(r#"{{"a": "", "c": "é{}日本"}}"#, text(520, "\\\"é")),
        ];
        let docs: Vec<&[u8]> = docs.iter().map(String::as_bytes).collect();
        assert!(masks_along_docs_match_brute_force(&cg, &vocab, &docs) > 5_000);
    }
}

/// A key start that reads a few bytes itself beside a call of a string-body rule returning to
/// its closing quote (MaskBench `Github_ultra---o65323`'s `"tender": {"`: six pattern keys'
/// first letters beside `key.re`) covers the body slice through the call
/// (`slice::branches_beside_calls`), and its masks equal brute force: where a branch ends the
/// rule inside body text (`k1` after `ab`, `k3` after a recursive callee returns), the tokens
/// that go on with a byte no string body reads (`\x01`) are walked; where a branch reads such a
/// byte itself (`k2`'s `c\x05`), so are they.
#[test]
fn branches_beside_a_quoted_call_match_brute_force() {
    let ebnf = r#"
root ::= "{" (k1 "\x01"? | "!" k2 "\x06"? | "?" k3 "\x01"?) "}"
k1 ::= "ab" | body "\""
k2 ::= "c\x05" | body "\""
k3 ::= "x" sub | body "\""
sub ::= "-" [a-z] sub "." | "0"
body ::= ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4})*
"#;
    let g = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    let vocab = ascii_vocab(
        &[
            "ab\x01", "b\x01", "ab", "\x01", "\x01}", "c\x05", "\x05", "\x05}", "\x06", "\"\x06", "x-", "-a", "0.",
            ".\x01", "0.\x01", "..\x01", "\"}", "\"\x01", "\u{e9}", "\u{e9}\"", "\\n", "\\\"", "\\u00", "a\x02",
        ],
        &[0xC3, 0xA9, 0xFF],
    );
    let docs: [&[u8]; 7] = [
        b"{ab\x01}",
        b"{ab}",
        "{h\u{e9}\\n\\\"ab\"\x01}".as_bytes(),
        b"{!c\x05\x06}",
        b"{!zz\"\x06}",
        b"{?x-a-b0..\x01}",
        b"{?x-q\"}",
    ];
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    // o65323's shape: an open object whose pattern keys (a recursive language tag) begin
    // beside the key pattern's call.
    let schema = r#"{"type": "object", "properties": {"id": {"type": "string"}, "tag": {"type": "integer"}},
        "patternProperties": {"^(title_([a-z]{2}(-[A-Za-z0-9]{2,8})*))$": {"type": "string"},
            "^(desc_x)$": {"type": "integer"}}}"#;
    let g = lax_schema_grammar(schema);
    let vocab = ascii_vocab(
        &[
            "\":", "\": ", "\"}", "\",", "\", \"", "title_", "_en", "-GB", "desc", "\\n", "\u{e9}", "id\":", "\"t",
            "\x01",
        ],
        &[0xC3, 0xA9],
    );
    let docs: [&[u8]; 3] = [
        br#"{"title_en-GB": "a", "id": "x", "desc_x": 1}"#,
        "{\"ti\u{e9}\\n\": 2, \"tag\": 3, \"title_fr\": \"\", \"x\": {}}".as_bytes(),
        br#"{"desc_": [1], "title_e": null, "": 0}"#,
    ];
    let before = grammask_core::slice::branches_beside_calls();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(grammask_core::slice::branches_beside_calls() > before, "no key start covered through its call");
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
}

/// A kernel state that reads a literal key's letters itself beside its call of the string-body
/// rule (the state after a key's opening quote, as in o65323) ends its rule inside body text
/// when the literal key (`ab`, `b-`) is a prefix of text the callee also reads: the tokens that
/// go on past that end with a byte no string body reads (`ab\x01`, `b-\x02}`) are dead in the
/// body slice and must still be walked (`byte_branches_end`'s `may_end`). The states must take
/// the path (`slice::branches_beside_calls`), or the test proves nothing: `body` and the keys
/// are recursive (`~`) so that they are called, not inlined.
#[test]
fn key_branch_ending_inside_body_text_matches_brute_force() {
    let ebnf = r#"
root ::= "{" (key "\x01"? | "!" key2 "\x02"?) "}"
key ::= "\"" ("ab" | body "\"") | "~" key
key2 ::= "\"" ("b" [a-c]? "-" | body "\"") | "~" key2
body ::= ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4}) body | ""
"#;
    let g = grammask_core::ebnf::parse_ebnf(ebnf, "root").unwrap();
    let vocab = ascii_vocab(
        &["ab\x01", "ab\x01}", "abc\x01", "b\x01", "\"ab", "b-\x02}", "bc-\x02", "b-\x01", "\"}", "\u{e9}", "\\n"],
        &[0xC3, 0xA9, 0x01, 0x02],
    );
    let docs: [&[u8]; 5] = [b"{\"ab\x01}", b"{\"ab}", b"{\"abc\"\x01}", b"{!\"bc-\x02}", b"{!\"b-\"}"];
    let before = grammask_core::slice::branches_beside_calls();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    // The callees' searches are the class-body thread's (`BodySlice::search_callees`).
    cg.wait_class_bodies();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(grammask_core::slice::branches_beside_calls() > before, "no key start covered through its call");
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
}

/// Masks equal the brute force on Llama 3 inside strings of a `pattern` with a short
/// `maxLength` (fewer characters left than the longest token), where the bounded search finds
/// the characters every body text of which the state reads (`slice::Bounded::Within`: the
/// tokens past them walked below the boundary nodes) or a body closing after them through the
/// pattern automaton's nested rules (`Bounded::Closing`): before the pattern matched (leading
/// characters outside its class, so the last character left must match), after it, at every
/// position of a 12-character string, near `minLength` and `maxLength`, with escapes and
/// multi-byte characters inside the bound, a loop with an exit (`^[\w /-]+\.[0-9a-z]+$`) and
/// a parity pattern. Both kinds must serve kernels (else the test proves nothing).
#[test]
fn bounded_within_masks_match_brute_force_on_llama3() {
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {
        "h": {"type": "string", "minLength": 12, "maxLength": 12, "pattern": "[0-9a-fA-F]+"},
        "r": {"type": "string", "minLength": 3, "maxLength": 64, "pattern": "[A-z]+"},
        "u": {"type": "string", "maxLength": 9, "pattern": "[^x]+"},
        "f": {"type": "string", "maxLength": 24, "pattern": "^[\\w /-]+\\.[0-9a-z]+$"},
        "o": {"type": "string", "maxLength": 20, "pattern": "^[^ ]* ([^ ]* [^ ]* )*[^ ]*$"}}}"#;
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
    let (within, closing) = grammask_core::slice::bounded_within_found();
    // (property, string body, positions checked).
    let cases: [(&str, String, Vec<usize>); 7] = [
        ("h", "  01234abcd".to_string() + "e", (0..=12).collect()),
        ("h", "0123456789ab".to_string(), vec![0, 1, 2, 3, 6, 11, 12]),
        ("r", " ".repeat(2) + &"Asia".repeat(15) + "As", vec![0, 1, 2, 3, 4, 40, 60, 62, 63, 64]),
        ("r", "Asia".to_string(), vec![1, 4]),
        ("u", "\\n\u{e9}ab\\\"".to_string(), vec![0, 1, 2, 3, 4, 5, 8]),
        ("f", "a b/c-d_e.tgz".to_string(), vec![0, 1, 5, 9, 10, 11, 13]),
        ("o", " ab".to_string(), vec![0, 1, 2]),
    ];
    let checked = string_masks_match_brute_force(&cg, &vocab, &cases);
    assert_eq!(checked, cases.iter().map(|c| c.2.len()).sum::<usize>());
    let (within_now, closing_now) = grammask_core::slice::bounded_within_found();
    let closings = closing_now - closing;
    assert!(within_now - within - closings >= 4, "short bounds walked: {}", within_now - within - closings);
    assert!(closings >= 4, "closing bodies: {closings}");
}

/// Counted strings of unanchored class patterns (exactly 12 characters, one of them hex:
/// MaskBench o10009 / o10013; 4 to 6 of `[xyz]+`) read only text of bounded length: their
/// kernels take no walked-body search (`grammask_core::slice::no_walked_cover`, none can cover),
/// and their short-bound walks step the rows by runs of bytes that step them alike
/// (`grammask_core::mask::row_run_steps`), stepping each boundary node's path only below the
/// nodes it shares with the one before (`grammask_core::mask::within_paths_kept`), between
/// frontier walks (escapes, `é`), and step plain virtual items by their interned transitions
/// (`grammask_core::mask::memo_virtual_items`), on the memo's codes rather than chart frames
/// (`grammask_core::mask::within_lean_walks`). Masks along the strings equal the brute force
/// on Llama 3, Phi-3.5 and a small pieces vocabulary.
#[test]
fn bounded_text_strings_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {
        "h": {"type": "string", "minLength": 12, "maxLength": 12, "pattern": "[0-9a-fA-F]+"},
        "k": {"type": "string", "minLength": 4, "maxLength": 6, "pattern": "[xyz]+"}}}"#;
    let cases: [(&str, String, Vec<usize>); 4] = [
        ("h", "ghijklmnopq0".to_string(), (0..=12).collect()),
        ("h", "0\\u00e9zzzzzzzzzz".to_string(), vec![0, 1, 2, 7, 8, 12, 17]),
        ("h", "  \u{e9}\\\"zzzzzzzA".to_string(), vec![0, 2, 3, 4, 5, 6, 14]),
        ("k", "ab#xy".to_string(), (0..=5).collect()),
    ];
    let positions: usize = cases.iter().map(|c| c.2.len()).sum();
    let mut rng = Rng(0x6865_7836);
    let pieces: Vec<&[u8]> =
        vec![b"0", b"a", b"F", b"g", b"z", b"x", b"y", b" ", b"\\\\", b"\\\"", "\u{e9}".as_bytes(), b"\"", b"#", b"}"];
    let mut vocabs = vec![pieces_vocab(&mut rng, &pieces, 400, vec![b"\"}".to_vec()])];
    vocabs.extend(llama3_vocab());
    vocabs.extend(shared_vocab("phi3.5"));
    for vocab in &vocabs {
        let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), vocab).unwrap());
        let (ruled_out, runs) = (grammask_core::slice::walked_covers_ruled_out(), grammask_core::mask::row_run_steps());
        let (kept, virtuals) = (grammask_core::mask::within_paths_kept(), grammask_core::mask::memo_virtual_items());
        let lean = grammask_core::mask::within_lean_walks();
        assert_eq!(string_masks_match_brute_force(&cg, vocab, &cases), positions);
        if vocab.vocab_size() > 1000 {
            assert!(grammask_core::slice::walked_covers_ruled_out() > ruled_out, "walked searches ruled out");
            assert!(grammask_core::mask::row_run_steps() > runs, "row steps kept for runs");
            assert!(grammask_core::mask::within_lean_walks() > lean, "boundary subtrees walked lean");
            assert!(grammask_core::mask::within_paths_kept() > kept, "boundary paths kept");
            assert!(grammask_core::mask::memo_virtual_items() > virtuals, "virtual items interned");
        }
    }
}

/// For each `(property, string body, byte positions)` case: from `{"property": "`, the mask at
/// each listed position of the body equals [`brute_force`]; the body then closes the object.
/// Returns the masks checked.
fn string_masks_match_brute_force(
    cg: &Arc<CompiledGrammar>,
    vocab: &Vocabulary,
    cases: &[(&str, String, Vec<usize>)],
) -> usize {
    let mut checked = 0;
    for (key, text, at) in cases {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(format!("{{\"{key}\": \"").as_bytes()).unwrap());
        let bytes = text.as_bytes();
        for i in 0..=bytes.len() {
            if at.contains(&i) {
                let mask = m.compute_mask().unwrap().clone();
                for (t, &w) in brute_force(&m, vocab).iter().enumerate() {
                    assert_eq!(mask.get(t), w, "{key} after {i} bytes: token {:?}", vocab.token_bytes(t as u32));
                }
                checked += 1;
            }
            if i < bytes.len() {
                assert!(m.accept_bytes(&bytes[i..=i]).unwrap(), "{key} at {i}");
            }
        }
        assert!(m.accept_bytes(b"\"}").unwrap() && m.is_completed(), "{key}");
    }
    checked
}

/// Masks equal the brute force on Llama 3 (longest token: 128 spaces) inside strings of an
/// unanchored `pattern` with `minLength`/`maxLength` (the converter's product of the pattern's
/// automaton and the length counter), where kernels take the body slice by the bounded cover
/// (`grammask_core::slice::bounded_cover`: every body text up to the longest token is read):
/// before the pattern matched (leading characters outside its class) and after, around
/// `minLength`, where the characters left cross 128 and at the last positions. A search one byte
/// short accepts the 128-space token where its 128th space leaves an even count (`o`).
#[test]
fn bounded_cover_masks_match_brute_force_on_llama3() {
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {
        "n": {"type": "string", "minLength": 3, "maxLength": 255, "pattern": "[a-zA-Z0-9_.-]+"},
        "r": {"type": "string", "minLength": 3, "maxLength": 140, "pattern": "[A-z]+"},
        "h": {"type": "string", "minLength": 12, "maxLength": 12, "pattern": "[0-9a-fA-F]+"},
        "e": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "[a-z]+"},
        "f": {"type": "string", "minLength": 1, "maxLength": 129, "pattern": "[a-z]+"},
        "o": {"type": "string", "maxLength": 128, "pattern": "^[^ ]* ([^ ]* [^ ]* )*[^ ]*$"}}}"#;
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
    let served = grammask_core::slice::bounded_covers_served();
    // (property, string body, positions checked).
    let body = |lead: &str, len: usize| {
        let s: String = lead.chars().chain("ab".repeat(len).chars()).take(len).collect();
        s
    };
    let cases = [
        ("n", body("  !", 255), vec![0, 1, 3, 4, 5, 127, 128, 254, 255]),
        ("r", body(" ", 140), vec![0, 1, 2, 3, 12, 13, 140]),
        ("h", body("  ", 12), vec![0, 2, 3, 12]),
        // The first position after the pattern matched, 127 and 128 characters left.
        ("e", body("", 128), vec![1]),
        ("f", body("", 129), vec![1]),
        // An odd number of spaces: every text of 127 characters goes on, 128 spaces do not.
        ("o", " ab".to_string(), vec![0, 1]),
    ];
    assert_eq!(string_masks_match_brute_force(&cg, &vocab, &cases), 24);
    assert!(grammask_core::slice::bounded_covers_served() - served >= 8, "bounded covers taken");
}

/// Keys of an open object split by `patternProperties` (MaskBench `Github_trivial---o78129`:
/// keys with a run of 32 hex digits take `null`, the others anything) print as one automaton
/// whose final states pick the value: masks along such keys equal brute force on Llama 3, and
/// every position inside a key holds one kernel item (the parts as separate alternatives put one
/// item per part in each key position: at the key start two partial languages, each refusing
/// texts the other reads, were walked token by token, ~5 ms).
#[test]
fn split_key_masks_match_brute_force_on_llama3() {
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {
        "sums": {"patternProperties": {"[0-9a-f]{32}": {"type": "null"}}},
        "tags": {"patternProperties": {"^a": {"type": "integer"}, "b$": {"type": ["integer", "boolean"]}}}}}"#;
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
    let hex = "0123456789abcdef0123456789abcdef";
    let docs = [
        format!(r#"{{"sums": {{"{hex}": null, "x{}": [1]}}}}"#, &hex[..31]),
        r#"{"tags": {"ab": 1, "qb": true, "q": {}}}"#.to_string(),
    ];
    let docs: Vec<&[u8]> = docs.iter().map(String::as_bytes).collect();
    assert_eq!(masks_along_docs_match_brute_force(&cg, &vocab, &docs), docs.iter().map(|d| d.len() + 1).sum::<usize>());
    // Each position of the keys above, and of one outside the ASCII range, from the key start.
    let keys = [format!("\"sums\": {{\"{hex}"), format!("\"sums\": {{\"q\\u00e9{hex}"), "\"tags\": {\"qab".into()];
    for key in keys {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(b"{").unwrap());
        let start = key.find('{').unwrap() + 2;
        for (i, b) in key.bytes().enumerate() {
            assert!(m.accept_bytes(&[b]).unwrap(), "{key} at {i}");
            if i + 1 >= start {
                let items = kernel_items(cg.automata(), m.chart()).len();
                assert_eq!(items, 1, "kernel items after {:?}", &key[..=i]);
            }
        }
    }
}

/// Regex-bodied strings whose body covers fail, the shapes the region DFA serves
/// (`grammask_core::mask::RegionDfa`): a `oneOf` of unanchored keywords (dies only on text
/// holding two of them), `.` (refuses `\n`, `\r`, U+2028 and U+2029, multi-byte), `\s`/`\S`,
/// a URL-like pattern and nested optional groups.
const REGION_SCHEMA: &str = r#"{"type": "object", "properties": {
    "k": {"oneOf": [{"type": "string", "pattern": "NEW"}, {"type": "string", "pattern": "SIGNER"},
                    {"type": "string", "pattern": "ON_APPROVAL"}]},
    "e": {"type": "string", "pattern": "^.*@.*\\..*$"},
    "s": {"type": "string", "pattern": "^\\S+\\s\\S+$"},
    "u": {"type": "string", "pattern": "^https?://[^\\s/$.?#][^\\s]*\\.[a-z]{2,}(/[^\\s]*)?$"},
    "g": {"type": "string", "pattern": "^([A-Z]{2}(-[0-9]{1,3})?)?(_[a-z]+(\\.[a-z]+)?)?$"}}}"#;

/// Documents of [`REGION_SCHEMA`], with escapes and multi-byte characters inside the values.
const REGION_DOCS: [&str; 3] = [
    "{\"k\": \"xNEW\\u2028é SIGNE\", \"e\": \"a b@c\\u00e9.d\", \"s\": \"ab\\tc\u{e9}\"}",
    r#"{"u": "https://a.bc/d?e=1", "g": "AB-12_ab.cd", "k": "ON_APPROVAL then"}"#,
    "{\"g\": \"_x\", \"e\": \"中@x.\", \"k\": \"SIGNER\\\"NE_\", \"s\": \"x\u{2003}y\"}",
];

/// Region kernels equal the plain walk's classification (`classify_kernel_uninterned`): every
/// state of random grammars (recursive, left-recursive, nullable) that the region DFA takes, and
/// of [`REGION_SCHEMA`] on a vocabulary of its pieces; counted, so the test fails if the DFA
/// never serves. Checked to fail with a rule end left out of the walk (`ENDED` never set) and
/// with two byte classes merged (`cut[e.hi + 1]` not set). With the plain-text slice built, the
/// schema's `.*` states take it (counted too).
#[test]
fn region_kernels_equal_plain_walks() {
    let cuts = grammask_core::mask::region_text_cuts();
    let mut rng = Rng(0x5851_F42D_4C95_7F2D);
    let schema = lax_schema_grammar(REGION_SCHEMA);
    let pieces: &[&[u8]] = &[
        b"NEW",
        b"SIGN",
        b"ER",
        b"ON_",
        b"APPROVAL",
        b"\\u20",
        b"28",
        b"\\n",
        b"\\t",
        b"\xC3\xA9",
        b"\xE2\x80\xA8",
        b"\xE2\x80",
        b"\xA8",
        b"@",
        b".",
        b"://",
        b"http",
        b"s",
        b" ",
        b"\"",
        b"\", \"",
        b"\"}",
        b"AB",
        b"-12",
        b"_ab",
        b"x",
        b"\\\"",
        b"\xE4\xB8\xAD",
    ];
    let mut compared = 0;
    for case in 0..200 {
        let (g, vocab) = if case % 4 == 0 {
            (schema.clone(), pieces_vocab(&mut rng, pieces, 60, Vec::new()))
        } else {
            (random_grammar(&mut rng), random_vocab(&mut rng))
        };
        let Ok(cg) = CompiledGrammar::new(&g, &vocab) else {
            continue;
        };
        cg.index().build_text_slice();
        compared += check_region_kernels(&cg, &format!("{g:?}"));
    }
    assert!(compared > 2000, "only {compared} region kernels compared");
    let cuts = grammask_core::mask::region_text_cuts() - cuts;
    assert!(cuts > 20, "only {cuts} region kernels took the plain-text slice");
}

/// Every state's region kernel, where the region DFA serves one, equals the plain walk's
/// classification (`what` names the case in a failure). Returns how many were compared.
fn check_region_kernels(cg: &CompiledGrammar, what: &str) -> usize {
    let mut compared = 0;
    for s in 0..cg.automata().states().len() {
        let s = grammask_core::compiler::StateId(s as u32);
        if let Some(km) = cg.region_kernel(s) {
            assert_eq!(km, cg.classify_uninterned(s).unwrap(), "{what}: state {}", s.0);
            compared += 1;
        }
    }
    compared
}

/// Masks equal the brute force along [`REGION_DOCS`] on a vocabulary of their pieces, and where
/// the region DFA serves kernels in a mask (counted).
#[test]
fn region_masks_match_brute_force() {
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(REGION_SCHEMA), &region_vocab()).unwrap());
    let docs: Vec<&[u8]> = REGION_DOCS.iter().map(|d| d.as_bytes()).collect();
    let checked = masks_along_docs_match_brute_force(&cg, &region_vocab(), &docs);
    assert!(checked > 150);
    // Only kernels whose row reads at least 1/8 of the trie take the region walk.
    assert!(cg.region_kernels_served() >= 3, "{} region kernels", cg.region_kernels_served());
}

/// Region kernels equal the plain walk's classification where a closure holds more than the
/// configurations the region DFA searches linearly (`region::SMALL_CLOSURE`, then hashed): the
/// start of a `oneOf` of 40 unanchored keywords (every alternative's configurations in one
/// closure), on random vocabularies of its pieces; the hashed closures are counted, so the test
/// fails if none is.
#[test]
fn region_kernels_past_small_closures_equal_plain_walks() {
    let words: Vec<String> = (0..40).map(|i| format!("K{i:02}")).collect();
    let alternatives: Vec<String> =
        words.iter().map(|w| format!(r#"{{"type": "string", "pattern": "{w}"}}"#)).collect();
    let schema = format!(r#"{{"type": "object", "properties": {{"k": {{"oneOf": [{}]}}}}}}"#, alternatives.join(", "));
    let g = lax_schema_grammar(&schema);
    let mut rng = Rng(0x636C_6F73_7572_6573);
    let pieces: &[&[u8]] = &[b"K", b"0", b"1", b"3", b"9", b"K1", b"K39", b"x", b"\"", b"\\", b"\"}", b" "];
    let hashed = grammask_core::mask::region_hashed_closures();
    let mut compared = 0;
    for _ in 0..6 {
        let vocab = pieces_vocab(&mut rng, pieces, 60, Vec::new());
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        compared += check_region_kernels(&cg, "");
    }
    assert!(compared > 100, "only {compared} region kernels compared");
    assert!(grammask_core::mask::region_hashed_closures() > hashed, "no closure hashed");
}

/// A union of three objects of 16 optional properties each (the shape of MaskBench
/// clang-format's root and the Snowplow unions).
fn optional_property_union_schema() -> String {
    // 16 optional properties each: past the any-order bound, keys come in schema order. The
    // last object stays open.
    let objects: Vec<String> = (0..3)
        .map(|o| {
            let props: Vec<String> = (0..16)
                .map(|k| {
                    let ty = ["integer", "boolean", "string"][(o + k) % 3];
                    format!(r#""o{o}k{k:02}": {{"type": "{ty}"}}"#)
                })
                .collect();
            let closed = if o < 2 { r#", "additionalProperties": false"# } else { "" };
            format!(r#"{{"type": "object", "properties": {{{}}}{closed}}}"#, props.join(", "))
        })
        .collect();
    format!(r#"{{"anyOf": [{}]}}"#, objects.join(", "))
}

/// Documents of [`optional_property_union_schema`]: keys skipped, whitespace around the
/// separators, an unknown key in the open object.
const UNION_DOCS: [&[u8]; 4] = [
    br#"{"o0k00": 1, "o0k04": true, "o0k05": "s",  "o0k15": 2}"#,
    br#"{"o1k02": 3,"o1k04": "x", "o1k09": false}"#,
    br#"{ "o2k01": 1 , "o2k02" : true, "o2k09":"y" }"#,
    br#"{"o2k01": 1, "zz": 1, "o2k02": false, "o2k15": "w"}"#,
];

/// Pieces of [`UNION_DOCS`] for random vocabularies.
const UNION_PIECES: &[&[u8]] =
    &[b"\"", b", \"", b"\": ", b"o", b"0", b"1", b"3", b"k0", b"k1", b"1,", b"true", b" ", b"  ", b"\"}", b"}", b"{\""];

/// Region kernels of a union of objects with many optional properties in schema order (the
/// shape of MaskBench clang-format's root and the Snowplow unions) equal the plain walk's
/// classification, and masks along documents equal brute force, on random vocabularies of the
/// keys' pieces and on Llama 3: a closure after a value holds the `ws` call of every property
/// still to come, one state under many return stacks, which the region DFA marks at their stacks
/// (`region::Marks`, counted: fails if no configuration is marked there).
#[test]
fn region_closures_of_optional_property_unions_match_brute_force() {
    let schema = optional_property_union_schema();
    let g = lax_schema_grammar(&schema);
    let (docs, pieces) = (UNION_DOCS, UNION_PIECES);
    let (marks, mut compared) = (grammask_core::mask::region_stack_marks(), 0);
    let mut rng = Rng(0x6F70_7469_6F6E_616C);
    for _ in 0..3 {
        let vocab = pieces_vocab(&mut rng, pieces, 80, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        compared += check_region_kernels(&cg, "");
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
        assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    }
    assert!(compared > 100, "only {compared} region kernels compared");
    let marks = grammask_core::mask::region_stack_marks() - marks;
    assert!(marks > 0, "no closure marked a configuration at its stack");
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    for doc in docs {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (i, &b) in doc.iter().enumerate() {
            assert!(m.accept_bytes(&[b]).unwrap(), "{:?}", String::from_utf8_lossy(&doc[..=i]));
            // After each value (the kernels that start the rest of the chain) and after `,`.
            if !matches!(doc.get(i + 1), Some(b',' | b'}')) && b != b',' {
                continue;
            }
            let mask = m.compute_mask().unwrap().clone();
            for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
                let at = String::from_utf8_lossy(&doc[..=i]);
                assert_eq!(mask.get(t), w, "after {at:?}: token {:?}", vocab.token_bytes(t as u32));
            }
        }
        assert!(m.is_completed());
    }
}

/// Byte strings: a vocabulary's pieces or documents.
type Pieces = &'static [&'static [u8]];

/// Region closures are told apart by their size and members, not by their digest: with every
/// configuration's digest term forced (`force_region_digest_term`: 0, every set colliding with the
/// first of its digest; 1, every set with the first of its size), the region kernels of
/// [`optional_property_union_schema`] and of a `oneOf` of 40 keywords (closures past
/// `SMALL_CLOSURE`, their members marked) equal the plain walk's classification, and masks along
/// [`UNION_DOCS`] equal brute force, on random vocabularies of their pieces. The collisions are
/// counted (`region_digest_collisions`). Fails with the size check dropped (term 0: a later closure
/// holding the first set's members matches it) or the member check dropped (term 1).
#[test]
fn region_closures_are_told_apart_under_forced_digest_collisions() {
    let words: Vec<String> = (0..40).map(|i| format!(r#"{{"type": "string", "pattern": "K{i:02}"}}"#)).collect();
    let keywords = format!(r#"{{"type": "object", "properties": {{"k": {{"oneOf": [{}]}}}}}}"#, words.join(", "));
    let keyword_pieces: &[&[u8]] = &[b"K", b"0", b"1", b"3", b"9", b"K1", b"K39", b"x", b"\"", b"\\", b"\"}", b" "];
    // (schema, pieces, documents)
    let cases: [(String, Pieces, Pieces); 2] = [
        (optional_property_union_schema(), UNION_PIECES, &UNION_DOCS),
        (keywords, keyword_pieces, &[br#"{"k": "K07"}"#, br#"{"k": "xK39x K0 K"}"#]),
    ];
    let mut rng = Rng(0x636F_6C6C_6964_6521);
    for term in [0, 1] {
        grammask_core::mask::force_region_digest_term(Some(term));
        let (collisions, mut compared) = (grammask_core::mask::region_digest_collisions(), 0);
        for (schema, pieces, docs) in &cases {
            let g = lax_schema_grammar(schema);
            for _ in 0..3 {
                let vocab = pieces_vocab(&mut rng, pieces, 80, Vec::new());
                let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
                compared += check_region_kernels(&cg, &format!("term {term}"));
                let checked = masks_along_docs_match_brute_force(&cg, &vocab, docs);
                assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
            }
        }
        let collisions = grammask_core::mask::region_digest_collisions() - collisions;
        eprintln!("term {term}: {compared} region kernels compared, {collisions} collisions told apart");
        assert!(compared > 100, "term {term}: only {compared} region kernels compared");
        assert!(collisions > 20, "term {term}: only {collisions} collisions told apart");
    }
    grammask_core::mask::force_region_digest_term(None);
}

/// The pieces of MaskBench o21456's e-mail strings that the e-mail pattern tests' random
/// vocabularies are drawn from (each test adds its own after them).
const EMAIL_PIECES: [&[u8]; 14] =
    [b"test", b"@", b"ex", b"ample", b".", b"gov", b".uk", b"uk", b"a", b"^", b" ", b"\\t", b"\\u00e9", b"\xC3\xA9"];

/// Masks equal the brute force along MaskBench o21456's e-mail string (an unanchored pattern
/// `^[^@^\s]+@[^@^\.^\s]+(\.[^@^\.^\s]*)*.gov.uk` with `maxLength` 254: every position a
/// region walk of the counted pattern's rules) on Llama 3 and a pieces vocabulary; the region
/// DFA serves kernels (counted).
#[test]
fn counted_email_pattern_masks_match_brute_force() {
    let schema = r#"{"type": "object", "properties": {"from": {"type": "string", "minLength": 5,
        "maxLength": 254, "pattern": "^[^@^\\s]+@[^@^\\.^\\s]+(\\.[^@^\\.^\\s]*)*.gov.uk"}}}"#;
    let cases: [(&str, String, Vec<usize>); 2] = [
        ("from", "test@example.gov.uk".to_string(), vec![0, 2, 4, 5, 7, 12, 13, 16, 19]),
        ("from", "a.b\\u00e9c@d\\u00e9.e.gov.uk\\t^x@".to_string(), vec![0, 2, 3, 9, 10, 11, 13, 19, 21, 27, 29, 32]),
    ];
    let positions: usize = cases.iter().map(|c| c.2.len()).sum();
    let mut rng = Rng(0x0002_1456);
    let extra: [&[u8]; 3] = [b"\"", b"\"}", b"x@"];
    let pieces = [&EMAIL_PIECES[..], &extra].concat();
    let mut vocabs = vec![pieces_vocab(&mut rng, &pieces, 300, Vec::new())];
    vocabs.extend(llama3_vocab());
    for vocab in &vocabs {
        let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), vocab).unwrap());
        assert_eq!(string_masks_match_brute_force(&cg, vocab, &cases), positions);
        if vocab.vocab_size() > 1000 {
            assert!(cg.region_kernels_served() > 0, "no region kernel");
        }
    }
}

fn region_vocab() -> Arc<Vocabulary> {
    ascii_vocab(
        &[
            "NEW", "SIGN", "ER", "ON_", "APPROVAL", "\\u20", "28", "\\n", "\\t", "\u{e9}", "\u{2028}", "\u{2003}", "@",
            "://", "http", "https", "\": \"", "\", \"", "\"}", "AB", "-12", "_ab", "\\\"", "\u{4e2d}", "x.", ".d",
            "e\"",
        ],
        &[0xC3, 0xA9, 0xE2, 0x80, 0xA8, 0xE4],
    )
}

/// Masks equal the brute force on Llama 3 at the first positions of each [`REGION_SCHEMA`]
/// value (where the region DFA walks most of the trie) and a few inside it.
#[test]
fn region_masks_match_brute_force_on_llama3() {
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(REGION_SCHEMA), &vocab).unwrap());
    let docs = [
        r#"{"k": "a NEW b", "e": "x@y.z", "s": "ab cd", "u": "https://q.io/a_b", "g": "AB-1_x.y"}"#,
        r#"{"k": "SIGNER", "g": "_b", "u": "http://xx.de"}"#,
    ];
    let mut checked = 0;
    for doc in docs {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        // Positions right after an opening quote of a value, and two bytes on.
        let opens: Vec<usize> = doc.match_indices(": \"").map(|(i, _)| i + 3).collect();
        for (i, &b) in doc.as_bytes().iter().enumerate() {
            if opens.iter().any(|&o| i == o || i == o + 2) {
                let mask = m.compute_mask().unwrap().clone();
                for (t, &w) in brute_force(&m, &vocab).iter().enumerate() {
                    let at = String::from_utf8_lossy(&doc.as_bytes()[..i]);
                    assert_eq!(mask.get(t), w, "after {at:?}: token {:?}", vocab.token_bytes(t as u32));
                }
                checked += 1;
            }
            assert!(m.accept_bytes(&[b]).unwrap());
        }
        assert!(m.is_completed());
    }
    assert_eq!(checked, 16);
    assert!(cg.region_kernels_served() > 0);
}

/// Masks equal the brute force on Llama 3 along URL patterns of MaskBench o71827, whose lazy
/// `.*?` states read every run of `.` but break at each byte that may start the text after it
/// (`a` of `app/`, `.`): the breaks the kernel row reads hold most of the trie, and the region
/// walk is taken before the run index's (`region_before_runs_taken`, checked to rise), with
/// a multi-byte character and an escaped quote inside the runs.
#[test]
fn url_pattern_region_before_runs_matches_brute_force() {
    use grammask_core::mask::region_before_runs_taken;
    let Some(vocab) = llama3_vocab() else { return };
    let schema = r#"{"type": "object", "properties": {"n": {"type": "integer"},
        "itunes": {"type": "string", "pattern": "^https:\\/\\/apps\\.apple\\.com\\/.*?app\\/([^\\/]+\\/)?id[0-9]+$"},
        "source": {"type": "string", "pattern": "^https?:\\/\\/.*?\\..*$"}}, "required": ["n"]}"#;
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &vocab).unwrap());
    let docs = [
        r#"{"n": 1, "itunes": "https://apps.apple.com/us/app/p1/id12"}"#,
        "{\"n\": 2, \"source\": \"http://\u{e9}x.io\", \"itunes\": \"https://apps.apple.com/b\\\"a/app/id3\"}",
    ];
    let before = region_before_runs_taken();
    let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    let taken = region_before_runs_taken() - before;
    assert!(taken >= 3, "{taken} kernels took the region walk before their run index's");
}

/// Runs separated by bytes that lead back into the run (llama.cpp's english.gbnf, a pattern of
/// words and single spaces): the separators' subtrees hold most of the trie, yet the run index
/// serves them again below each separator, so the run index is kept rather than the region walk
/// (`runs_reentered_taken`, checked to rise; it fails with `reenters_run` always false), with
/// masks along documents equal to the brute force on three real vocabularies (the counter on
/// Llama 3 and Qwen 2.5).
#[test]
fn separated_runs_keep_the_run_index_match_brute_force() {
    use grammask_core::mask::runs_reentered_taken;
    let english = grammask_core::ebnf::parse_ebnf(
        "root ::= en-char+ ([ \\t\\n] en-char+)*\nen-char ::= letter | digit | punctuation\n\
         letter ::= [a-zA-Z]\ndigit ::= [0-9]\npunctuation ::= [!\"#$%&'()*+,-./:;<=>?@[\\\\\\]^_`{|}~]",
        "root",
    )
    .unwrap();
    let words = lax_schema_grammar(
        r#"{"type": "object", "properties": {"n": {"type": "integer"},
        "title": {"type": "string", "pattern": "^[A-Za-z0-9]+( [A-Za-z0-9]+)*$"}}, "required": ["n"]}"#,
    );
    let english_docs: &[&[u8]] = &[b"Hello, world! It's 3 o'clock.\nBye\tnow", b"a", b"x(y)\n{z}"];
    let words_docs: &[&[u8]] = &[br#"{"n": 1, "title": "The Quick 2 brown fox"}"#, br#"{"n": 2, "title": "a"}"#];
    for name in ["llama3", "qwen2.5", "phi3.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        for (g, docs) in [(&english, english_docs), (&words, words_docs)] {
            let before = runs_reentered_taken();
            let cg = Arc::new(CompiledGrammar::new(g, &vocab).unwrap());
            cg.wait_class_bodies();
            let checked = masks_along_docs_match_brute_force(&cg, &vocab, docs);
            assert!(checked >= docs.len() * 2, "{name}: {checked} masks checked");
            // Phi 3.5's separators hold too little of its trie for the region walk in any case.
            if name != "phi3.5" {
                assert!(runs_reentered_taken() > before, "{name}: no kernel kept its run index for re-entering breaks");
            }
            for bad in ["a  b", " a", "a\n\tb"] {
                let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                let text = if docs == words_docs { format!("{{\"n\": 1, \"title\": \"{bad}") } else { bad.to_string() };
                assert!(!m.accept_bytes(text.as_bytes()).unwrap_or(false), "{name} {text:?}");
            }
        }
    }
}

/// A small choice of literal leads (`"{" ws obj ws "}" | ...`, MaskBench o3626's `not` value)
/// composes from their literal-lead kernels, equal to the plain walk's; masks along documents
/// (through the choice and an alias of one lead) equal the brute force.
#[test]
fn literal_lead_choices_compose() {
    let g = grammask_core::ebnf::parse_ebnf(
        "root ::= \"[\" ws v ws \"]\" | a | b | d\nv ::= a | b | d\nc ::= d\n\
         a ::= \"{\" ws \"\\\"a\\\"\" ws \":\" ws \"1\" ws \"}\"\n\
         b ::= \"{\" ws \"\\\"b\\\"\" ws \":\" ws (v | c) ws \"}\"\n\
         d ::= \"{\" ws \"\\\"c\\\"\" ws \":\" ws \"2\" ws \"}\"\nws ::= [ \\n]{0,64}",
        "root",
    )
    .unwrap();
    let pieces: &[&[u8]] =
        &[b"[", b"]", b"{", b"}", b"{\"", b"{ ", b"{\n", b"\"a\"", b"\"b", b"\"c\":", b":", b" ", b"\n", b"1", b"2"];
    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
    for _ in 0..8 {
        let vocab = pieces_vocab(&mut rng, pieces, 80, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        let v = (0..a.states().len() as u32).map(grammask_core::compiler::StateId).find(|&s| {
            let r = a.state(s).rule;
            a.rule_start(r) == s && a.rule_name(r) == "v"
        });
        let v = v.expect("rule v kept");
        let km = cg.composed_kernel(v).unwrap().expect("v composed");
        assert_eq!(km, cg.classify_uninterned(v).unwrap());
        let docs: &[&[u8]] = &[b"[{\"a\":1}]", b"[ {\n\"b\" : {\"c\":2} } ]", b"[{ \"b\":{\"b\":{\"a\" :1}}}]"];
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
}

/// A `oneOf` of unanchored words (MaskBench o12278 / o65510's shape), an `anyOf` of pattern
/// strings nested in another with `null`: each choice of pattern strings is written as one string
/// of the union automaton (`items ::= "\"" str_K.re "\""`, `a`'s string alternatives in one),
/// the branches' own automata are left out, and masks along documents equal the brute force.
/// Checked to fail with the choices left as they were (the rule lines), with only the first
/// alternative's automaton kept (the masks) and with every branch kept (the automata count).
#[test]
fn pattern_choices_are_one_string_masks_match_brute_force() {
    use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let schema = r#"{"type": "object", "properties": {
        "k": {"type": "array", "items": {"type": "string",
              "oneOf": [{"pattern": "NEW"}, {"pattern": "SIGN"}, {"pattern": "^ER"}]}},
        "a": {"anyOf": [{"type": "string", "pattern": "^[A-Z]+$"},
                        {"anyOf": [{"type": "string", "pattern": "_ab$"}, {"type": "string", "format": "date"}]},
                        {"type": "null"}]}}}"#;
    let ebnf = json_schema_to_ebnf(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let one_string = |l: &str| l.contains(" ::= \"\\\"\" str_") && l.ends_with(".re \"\\\"\"");
    assert!(ebnf.lines().any(|l| l.starts_with("items ::= ") && one_string(l)), "{ebnf}");
    let a = ebnf.lines().find(|l| l.starts_with("a ::= ")).unwrap();
    assert_eq!(a.matches(" | ").count(), 1, "{a}");
    // The unions of `items`, `a` and `a`'s nested choice; the branches only they referred to are
    // left out with their automata (9 with them kept, 6 on main).
    let automata = ebnf.lines().filter(|l| l.starts_with("str") && l.contains(".re ::= "));
    assert_eq!(automata.count(), 3, "{ebnf}");
    let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &region_vocab()).unwrap());
    let docs: [&[u8]; 4] = [
        br#"{"k": ["xNEW", "SIGN\"x", "ER", "NEW NEW"], "a": "AB"}"#,
        br#"{"a": "x_ab", "k": []}"#,
        "{\"a\": \"2024-01-31\", \"k\": [\"\\u00e9 SIGN\u{e9}\"]}".as_bytes(),
        br#"{"a": null, "k": ["ERR"]}"#,
    ];
    assert!(masks_along_docs_match_brute_force(&cg, &region_vocab(), &docs) > 60);
}

/// A tree of small choices and aliases over literal leads (MaskBench o3626's `not`, five levels
/// deep there; the compiler inlines some levels of this small one) composes into kernels of a few
/// tokens stored as ids, each equal to the plain walk's; masks along documents equal the brute
/// force, so the walks' reused accepted sets (given back cleared when stored as ids) carry no
/// token of an earlier walk.
#[test]
fn composed_literal_lead_trees_keep_few_ids() {
    let g = grammask_core::ebnf::parse_ebnf(
        "root ::= \"[\" ws not ws \"]\" | \"(\" ws c ws \")\" | \"<\" ws f ws \">\"\nnot ::= t1 | t2\nt1 ::= a | b\nt2 ::= c | f\n\
         c ::= d\nf ::= e\ne ::= \"{\" ws \"\\\"e\\\"\" ws \":\" ws \"3\" ws \"}\"\n\
         a ::= \"{\" ws \"\\\"a\\\"\" ws \":\" ws \"1\" ws \"}\"\n\
         b ::= \"{\" ws \"\\\"b\\\"\" ws \":\" ws not ws \"}\"\n\
         d ::= \"{\" ws \"\\\"c\\\"\" ws \":\" ws \"2\" ws \"}\"\nws ::= [ \\n]{0,64}",
        "root",
    )
    .unwrap();
    let pieces: &[&[u8]] = &[
        b"[", b"]", b"(", b")", b"{", b"}", b"{\"", b"{ ", b"{\n", b"\"a\"", b"\"b", b"\"c\":", b"\"e", b":", b" ",
        b"\n", b"1", b"2", b"3", b" {", b"\n{\"",
    ];
    let mut rng = Rng(0x0DDB_1A5E_5C0F_FEE1);
    let mut ids = 0;
    for _ in 0..8 {
        let vocab = pieces_vocab(&mut rng, pieces, 80, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let a = cg.automata();
        for name in ["not", "t1"] {
            let start = (0..a.states().len() as u32).map(grammask_core::compiler::StateId).find(|&s| {
                let r = a.state(s).rule;
                a.rule_start(r) == s && a.rule_name(r) == name
            });
            let start = start.expect("rule kept");
            let km = cg.composed_kernel(start).unwrap().unwrap_or_else(|| panic!("{name} composed"));
            assert_eq!(km, cg.classify_uninterned(start).unwrap(), "{name}");
            ids += usize::from(km.accepted.ids().is_some());
        }
        let docs: &[&[u8]] = &[
            b"[{\"a\":1}]",
            b"[ {\n\"b\" : {\"e\":3} } ]",
            b"({\"c\":2})",
            b"< {\"e\" : 3}>",
            b"[{ \"b\":{\"b\":{\"a\" :1}}}]",
            b"[{\"c\" :2}]",
        ];
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
    assert_eq!(ids, 16);
}

/// A lead (`ws`) before a tree of small choices over literal leads (MaskBench o3626's `ws not`,
/// a nested `oneOf` of objects; here one alternative allows `{}`, so some rests are read from the
/// object's own rows) is composed from the literal leads' parts (`lead_trees`), each lead kernel
/// equal to the plain walk's; masks along documents equal the brute force. Fails with
/// `lead_tree_kernel` answering `None` (no lead composed so).
#[test]
fn leads_before_literal_lead_trees_compose_match_brute_force() {
    let g = grammask_core::ebnf::parse_ebnf(
        "root ::= \"[\" ws not ws \"]\" | \"(\" ws t2 ws \")\"\nnot ::= t1 | t2\nt1 ::= a | b\nt2 ::= c | e\n\
         a ::= \"{\" ws \"\\\"a\\\"\" ws \":\" ws \"1\" ws \"}\"\n\
         b ::= \"{\" ws \"\\\"b\\\"\" ws \":\" ws not ws \"}\"\n\
         c ::= \"{\" ws \"\\\"c\\\"\" ws \":\" ws \"2\" ws \"}\"\n\
         e ::= \"{\" ws (\"\\\"e\\\"\" ws \":\" ws \"3\" ws)? \"}\"\nws ::= [ \\n]{0,64}",
        "root",
    )
    .unwrap();
    let pieces: &[&[u8]] = &[
        b"[",
        b"]",
        b"(",
        b")",
        b"{",
        b"}",
        b"{\"",
        b"{ ",
        b"{\n",
        b"\"a\"",
        b"\"b",
        b"\"c\":",
        b"\"e",
        b":",
        b" ",
        b"\n",
        b"1",
        b"2",
        b"3",
        b" {",
        b"\n{\"",
        b" {}",
        b"  {",
        b" {\"a",
        b"\n{ \"",
        b" {x",
        b"{}]",
        b" {\n\n",
        b"{\"e\":3}",
        b"x",
    ];
    let mut rng = Rng(0x7E57_1EAD_C0DE_0060);
    let (mut leads, mut trees) = (0, 0);
    for _ in 0..8 {
        let vocab = pieces_vocab(&mut rng, pieces, 100, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        for s in (0..cg.automata().states().len() as u32).map(grammask_core::compiler::StateId) {
            if let Some(km) = cg.lead_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {s:?}");
                leads += 1;
            }
        }
        trees += cg.kernel_stats().lead_trees;
        let docs: &[&[u8]] = &[
            b"[{\"a\":1}]",
            b"[ {\n\"b\" : {} } ]",
            b"( {}  )",
            b"[\n{ \"b\":{\"b\":  {\"e\" :3}}}]",
            b"[ {\"c\" :2}\n]",
            b"( {\"e\":3})",
        ];
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
    assert!(leads >= 16, "{leads} lead kernels");
    assert!(trees >= 16, "{trees} leads composed over literal-lead trees");
}

/// A lead before a tree of literal-lead objects (`ws` then a nested choice of `"{" ws obj ws "}"`,
/// MaskBench o3626's `"not":` value): each literal lead's part takes the bytes its object reads
/// first from the literal lead's own classification (`lead_leaves_read_known`, no chart of its
/// own), and its walk reads back only the candidate tokens' bits
/// (`TokenSet::from_spare_bitset_among`). Every lead and literal-lead kernel equals the plain
/// walk's and masks along documents equal brute force, on 8 pieces vocabularies and, after a few
/// prefixes, on Llama 3. Fails with `v_reads` always `None` (the count).
#[test]
fn literal_lead_parts_read_known_bytes_match_brute_force() {
    let g = grammask_core::ebnf::parse_ebnf(
        "root ::= \"[\" ws q ws \"]\"\nq ::= q1 | q2\nq1 ::= a | n\nq2 ::= c | e | o\n\
         a ::= \"{\" ws \"\\\"a\\\"\" ws \":\" ws \"[\" ws (q ws (\",\" ws q ws)*)? \"]\" ws \"}\"\n\
         n ::= \"{\" ws \"\\\"n\\\"\" ws \":\" ws q ws \"}\"\n\
         c ::= \"{\" ws \"\\\"c\\\"\" ws \":\" ws \"1\" ws \"}\"\n\
         e ::= \"{\" ws (\"\\\"e\\\"\" ws \":\" ws \"2\" ws)? \"}\"\n\
         o ::= \"{\" ws \"\\\"o\\\"\" ws \":\" ws (\"{\" ws \"}\" | \"3\") ws \"}\"\nws ::= [ \\n\\t]{0,64}",
        "root",
    )
    .unwrap();
    let pieces: &[&[u8]] = &[
        b"[",
        b"]",
        b"{",
        b"}",
        b"{\"",
        b"{ ",
        b"{\n",
        b"{\t\"",
        b"\"a\"",
        b"\"n",
        b"\"c\":",
        b"\"e",
        b"\"o\": {",
        b":",
        b",",
        b" ",
        b"\n",
        b"\t",
        b"1",
        b"2",
        b"3",
        b" {",
        b"\n{\"",
        b" {}",
        b"  {",
        b" {\"n",
        b"\n{ \"",
        b" {x",
        b"{}]",
        b" {\n\n",
        b"{\"e\":2}",
        b"{\"c\"",
        b"[{",
        b"[ {\"",
        b"}]",
        b"}}",
        b"x",
    ];
    let docs: &[&[u8]] = &[
        b"[{\"a\":[]}]",
        b"[ {\n\"n\" : {} } ]",
        b"[\n{ \"n\":{\"a\":  [{\"e\" :2}, {\"o\": {}}]}}]",
        b"[ {\"c\" :1}\n]",
        b"[{\"o\":3}]",
        b"[\t{\"n\":{\"n\":{\"c\":1}}}]",
    ];
    let mut rng = Rng(0x0001_1762_0062);
    let (mut literal, mut known) = (0, 0);
    for _ in 0..8 {
        let vocab = pieces_vocab(&mut rng, pieces, 100, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        for s in (0..cg.automata().states().len() as u32).map(grammask_core::compiler::StateId) {
            if let Some(km) = cg.lead_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "lead state {s:?}");
            }
            if let Some(km) = cg.literal_lead_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "literal-lead state {s:?}");
                literal += 1;
            }
        }
        known += cg.kernel_stats().lead_leaves_read_known;
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
        // Again from a fresh grammar, the fills classifying the kernels in their own order.
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
        known += cg.kernel_stats().lead_leaves_read_known;
    }
    assert!(literal >= 40, "{literal} literal-lead kernels");
    assert!(known >= 16, "{known} literal-lead parts read with known first bytes");
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    for prefix in ["[", "[ {\"n\":", "[{\"a\": [{\"n\": {\"c\": 1}},", "[{\"o\":"] {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(prefix.as_bytes()).unwrap(), "{prefix:?}");
        let mask = m.compute_mask().unwrap().clone();
        for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
            assert_eq!(mask.get(t), w, "after {prefix:?}: token {:?}", vocab.token_bytes(t as u32));
        }
    }
    // Llama 3's ~60 tokens below `{` are read back as candidates.
    let mut literal = 0;
    for s in (0..cg.automata().states().len() as u32).map(grammask_core::compiler::StateId) {
        if let Some(km) = cg.literal_lead_kernel(s).unwrap() {
            assert_eq!(km, cg.classify_uninterned(s).unwrap(), "Llama 3, literal-lead state {s:?}");
            literal += 1;
        }
    }
    assert!(literal >= 5, "{literal} literal-lead kernels on Llama 3");
}

/// Literal leads alike in what their object reads within the tokens below their byte share one
/// classification (`CompiledGrammar::literal_lead_key`, MaskBench o3626's ~270 objects under
/// `"not":`): on the vocabulary of the pieces alone, whose tokens below `{"` are at most 3 bytes
/// past the `{`, `b` and `c` (keys `"kab"`, `"kb"`, each used twice so neither is inlined, one
/// FOLLOW set) differ at `{"kb`. Every literal lead's cached kernel equals the plain walk and
/// masks along documents equal brute force. Fails without the sharing (`literal_leads_alike`).
#[test]
fn literal_leads_alike_share_kernels_match_brute_force() {
    let g = grammask_core::ebnf::parse_ebnf(
        "root ::= \"[\" ws q ws \"]\" | \"(\" ws r ws \")\" | \"<\" ws t ws \">\"\nq ::= q1 | q2\nq1 ::= a | b\n\
         q2 ::= c | e\nr ::= a | e2\nt ::= b | c | e2\n\
         a ::= \"{\" ws \"\\\"kaa\\\"\" ws \":\" ws \"1\" ws \"}\"\n\
         b ::= \"{\" ws \"\\\"kab\\\"\" ws \":\" ws q ws \"}\"\n\
         c ::= \"{\" ws \"\\\"kb\\\"\" ws \":\" ws \"2\" ws \"}\"\n\
         e ::= \"{\" ws (\"\\\"kaa\\\"\" ws \":\" ws \"3\" ws)? \"}\"\n\
         e2 ::= \"{\" ws (\"\\\"kaa\\\"\" ws \":\" ws \"3\" ws)? \"}\"\nws ::= [ \\n]{0,64}",
        "root",
    )
    .unwrap();
    let pieces: &[&[u8]] = &[
        b"[", b"]", b"(", b")", b"{", b"}", b"{\"", b"{\"k", b"{\"ka", b"{\"kb", b"{ \"k", b"{\n", b"{}", b"{}]",
        b"{})", b"\"kaa\"", b"\"kab\"", b"\"kb\"", b"kaa\"", b"a\"", b"b\"", b"\"", b":", b" ", b"\n", b"1", b"2",
        b"3", b" {", b" {\"k", b"}]", b"})", b"x",
    ];
    let docs: &[&[u8]] = &[
        b"[{\"kaa\":1}]",
        b"[ {\n\"kab\" : {} } ]",
        b"[{\"kab\":{\"kb\":2}}]",
        b"({\"kaa\": 1})",
        b"( {} )",
        b"({\"kaa\":3})",
        b"[{}]",
        b"<{\"kb\":2}>",
        b"< {\"kab\":{}}>",
    ];
    let mut alike = 0;
    for draws in [0, 0, 20] {
        let mut rng = Rng(0x0068_A11C_E000 + draws as u64);
        let vocab = pieces_vocab(&mut rng, pieces, draws, Vec::new());
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut literal = 0;
        for s in (0..cg.automata().states().len() as u32).map(grammask_core::compiler::StateId) {
            if cg.literal_lead_kernel(s).unwrap().is_some() {
                assert_eq!(*cg.kernel(s).unwrap(), cg.classify_uninterned(s).unwrap(), "literal-lead state {s:?}");
                literal += 1;
            }
        }
        assert!(literal >= 6, "{literal} literal leads");
        alike += cg.kernel_stats().literal_leads_alike;
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
        // Again from a fresh grammar, the fills classifying the kernels in their own order.
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
    }
    assert!(alike >= 3, "{alike} literal leads took a kernel alike");
}

/// The literal-lead key's depth, through the JSON Schema path (o3626-like): two objects
/// `{"pab": ..}` and `{"pbb": ..}`, each `$ref`'d twice (not inlined) as values of one object's
/// properties (one FOLLOW set), on a vocabulary whose longest tokens below `{` are `{"pa` and
/// `{"pb`. Their literal leads read alike within `"p` and differ at the third byte of the rest
/// below `{`: a key one byte too shallow shares one kernel between them, and the mask of the
/// second then takes `{"pa` (or `{"pb`); a third, `{"pac": ..}`, shares `{"pab"`'s. Masks along the documents equal brute force, and every
/// literal lead's cached kernel equals `classify_uninterned`.
#[test]
fn literal_lead_keys_read_the_whole_rest_below_the_lead() {
    let obj = |k: &str| {
        format!(
            r#"{{"type": "object", "properties": {{"{k}": {{"type": "integer"}}}}, "required": ["{k}"], "additionalProperties": false}}"#
        )
    };
    let schema = format!(
        r##"{{"type": "object", "properties": {{"x": {{"$ref": "#/$defs/a"}}, "y": {{"$ref": "#/$defs/b"}},
            "u": {{"anyOf": [{{"$ref": "#/$defs/a"}}, {{"type": "integer"}}]}},
            "v": {{"anyOf": [{{"$ref": "#/$defs/b"}}, {{"type": "integer"}}]}},
            "w": {{"$ref": "#/$defs/c"}}, "z": {{"anyOf": [{{"$ref": "#/$defs/c"}}, {{"type": "string"}}]}}}},
            "additionalProperties": false, "$defs": {{"a": {}, "b": {}, "c": {}}}}}"##,
        obj("pab"),
        obj("pbb"),
        obj("pac")
    );
    let g = lax_schema_grammar(&schema);
    let vocab = ascii_vocab(&["{\"pa", "{\"pb", "{\"", "\": ", ", \""], &[]);
    let docs: [&[u8]; 6] = [
        br#"{"x": {"pab": 1}, "y": {"pbb": 2}}"#,
        br#"{"y": {"pbb": 2}, "v": {"pbb": 3}}"#,
        br#"{"u": 4, "v": {"pbb": 5}}"#,
        br#"{"x": {"pab":0},"u": {"pab": 6}}"#,
        br#"{"w": {"pac": 7}, "z": {"pac": 8}}"#,
        br#"{"y": {"pbb": 9}, "w": {"pac": 1}}"#,
    ];
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    masks_along_docs_match_brute_force(&cg, &vocab, &docs);
    assert!(cg.kernel_stats().literal_leads_alike > 0, "no literal lead took a kernel alike");
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let mut literal = 0;
    for s in (0..cg.automata().states().len() as u32).map(grammask_core::compiler::StateId) {
        if cg.literal_lead_kernel(s).unwrap().is_some() {
            assert_eq!(*cg.kernel(s).unwrap(), cg.classify_uninterned(s).unwrap(), "literal-lead state {s:?}");
            literal += 1;
        }
    }
    assert!(literal >= 2, "{literal} literal leads");
}

/// An open object of more optional properties than the any-order bound, so in schema order
/// (`obj.K_0_1 ::= ws "," ws (obj_extra ws "," ws)* "\"" "key_K" "\"" ... | obj.(K+1)_0_1`): a
/// chain of rules that differ only in their literal keys, which no token reads to the closing
/// quote (dropped edges), so each reads the tokens of the chain's last rule
/// (`SiblingEdges::chain_end`, MaskBench markdownlint-config-schema). The small vocabulary's
/// `"p05"` keeps that key, which breaks the chain there; the required `p09` gives its rules
/// another shape; `child` recurses into the object (the chain's end then reaches its own
/// members again). Masks at every byte of the documents equal brute force on the small
/// vocabulary, and after each value on Llama 3; fails as well if no kernel was taken from a
/// chain's end (`chain_kernels`).
#[test]
fn schema_order_chains_match_brute_force() {
    let mut props: Vec<String> = (0..8).map(|k| format!(r#""p{k:02}": {{"type": "integer"}}"#)).collect();
    props.push(r##""child": {"$ref": "#"}"##.into());
    props.extend((8..18).map(|k| match k % 3 {
        0 => format!(r#""p{k:02}": {{"type": "string"}}"#),
        1 => format!(r#""p{k:02}": {{"type": "boolean"}}"#),
        _ => format!(r#""p{k:02}": {{"type": "integer"}}"#),
    }));
    let schema = format!(r#"{{"type": "object", "properties": {{{}}}, "required": ["p09"]}}"#, props.join(", "));
    let g = lax_schema_grammar(&schema);
    let docs: [&[u8]; 5] = [
        br#"{"p00": 1, "p03": 2, "zz": 2, "p05": 3, "p09": "s", "p16": true}"#,
        br#"{"x": 1, "p01": 2, "child": {"p02": 1, "p09": "a", "q": "p10"}, "p09": "b", "p10": true, "y": []}"#,
        br#"{"p05": 0, "p06": 1, "p09": "c","p12": "s","p13": true, "p17": 1}"#,
        br#"{"p09": "d"}"#,
        br#"{"p0": 1, "p000": 2, "p07": 7, "p09": "e", "p11": 1, "p14": 4, "p15": "p16"}"#,
    ];
    let small =
        ascii_vocab(&["\"p05\"", ", \"p05\"", ", \"", "\": ", "\"p1", "p0", "true", ", \"p", "1,", "\"}", "{\""], &[]);
    let before = grammask_core::mask::chain_kernels();
    let cg = Arc::new(CompiledGrammar::new(&g, &small).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &small, &docs);
    assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    assert!(grammask_core::mask::chain_kernels() > before, "no kernel taken from a chain's end");
    let Some(vocab) = llama3_vocab() else { return };
    let before = grammask_core::mask::chain_kernels();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    for doc in docs {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (i, &b) in doc.iter().enumerate() {
            assert!(m.accept_bytes(&[b]).unwrap(), "{:?}", String::from_utf8_lossy(&doc[..=i]));
            // After each value: the positions whose kernels start the rest of the chain.
            if !matches!(doc.get(i + 1), Some(b',' | b'}')) {
                continue;
            }
            let mask = m.compute_mask().unwrap().clone();
            for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
                let at = String::from_utf8_lossy(&doc[..=i]);
                assert_eq!(mask.get(t), w, "after {at:?}: token {:?}", vocab.token_bytes(t as u32));
            }
        }
        assert!(m.is_completed());
    }
    assert!(grammask_core::mask::chain_kernels() > before, "no kernel taken from a chain's end on Llama 3");
}

/// Masks along the keys of open objects whose other keys match a pattern (`patternProperties`
/// `^.+$` beside listed properties: MaskBench JsonSchemaStore samcli's root) equal brute force,
/// on a random pieces vocabulary (escapes, UTF-8 characters and U+2028, which `.` refuses, keys'
/// prefixes and quotes) and on Llama 3: the key start after `"` reads its first character
/// inline (the listed names' trie) and then loops through a call per character, and is shifted
/// from that loop's kernel (`shifted_call_loop`). Fails if the call loop is no shift reference.
#[test]
fn pattern_key_starts_shifted_from_call_loops_match_brute_force() {
    let schemas = [
        r#"{"type": "object", "properties": {"version": {"type": "number"}},
            "patternProperties": {"^.+$": {"type": "integer"}}, "additionalProperties": false}"#,
        r#"{"type": "object", "properties": {"vx": {"type": "integer"}, "vy": {"minimum": 0},
            "ab": {"type": "integer"}}, "patternProperties": {"^.*$": {"type": "integer"}},
            "additionalProperties": false}"#,
    ];
    let docs: [&str; 4] = [
        r#"{"version": 1, "ver": 2, "versions": 3, "v": 4}"#,
        "{\"a\\t\u{e9}\\u00e9\": 5, \"\u{1F600}b\\\"\": 6, \"version\": 2}",
        r#"{"vx": 1, "vxy": 2, "vy": 7, "ab": 8, "abc": 3}"#,
        "{\"\": 1, \"v\\t\": 2, \"\u{e9}\u{e9}\": 3, \"x\u{2027}\": 4}",
    ];
    let pieces: &[&[u8]] = &[
        b"v",
        b"ver",
        b"sion",
        b"version",
        b"x",
        b"y",
        b"a",
        b"b",
        b"\"",
        b"\\",
        b"n",
        b"u",
        b"2028",
        b"2029",
        b"t",
        "\u{e9}".as_bytes(),
        "\u{2028}".as_bytes(),
        "\u{1F600}".as_bytes(),
        b": ",
        b", ",
        b"{",
        b"}",
        b"1",
        b" ",
    ];
    let mut rng = Rng(0x5A3C_0063_E7A0);
    let mut extra: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    extra.extend([&[0xE2u8][..], &[0x80], &[0xA8], &[0xC3], &[0xF0, 0x9F]].map(<[u8]>::to_vec));
    let others = b" 0123456789\":,{}abcxyz";
    for _ in 0..2000 {
        let mut t = vec![others[rng.below(others.len() as u64) as usize]];
        t.extend((0..rng.below(5)).map(|_| b"abcvxy_19 \"\\n"[rng.below(13) as usize]));
        extra.push(t);
    }
    let vocab = pieces_vocab(&mut rng, pieces, 600, extra);
    let mut shifted = 0;
    for (schema, docs) in schemas.iter().zip([&docs[..2], &docs[2..]]) {
        let g = lax_schema_grammar(schema);
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let docs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
        assert!(checked > 80);
        shifted += cg.kernel_stats().shifted_call_loop;
    }
    assert!(shifted >= 2, "no pattern key start shifted from its call loop");
    let Some(vocab) = llama3_vocab() else { return };
    let g = lax_schema_grammar(schemas[0]);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let checked = masks_along_docs_match_brute_force(&cg, &vocab, &[br#"{"ve": 1, "a\u00e9": 2}"#]);
    assert!(checked > 20);
    assert!(cg.kernel_stats().shifted_call_loop > 0, "{:?}", cg.kernel_stats());
}

/// Object variants that share a `pattern` string property followed by different keys
/// (MaskBench `JsonSchemaStore---meta`'s `namespace` and `role_name` in nine `if`/`then`/`else`
/// variants), as `anyOf` alternatives and as `if`/`then`/`else` branches.
const QUOTE_CUT_SCHEMAS: [&str; 2] = [
    r#"{"anyOf": [
        {"type": "object", "additionalProperties": false, "required": ["name", "a"],
         "properties": {"name": {"type": "string", "pattern": "^[a-z][a-z0-9_]+$"}, "a": {"type": "integer"}}},
        {"type": "object", "additionalProperties": false, "required": ["name"],
         "properties": {"name": {"type": "string", "pattern": "^[a-z][a-z0-9_]+$"}, "b": {"type": "string"}}},
        {"type": "object", "additionalProperties": false, "required": ["name"],
         "properties": {"name": {"type": "string", "pattern": "^[a-z][a-z0-9_]+$"}}},
        {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+(-[a-z0-9]+)*$"}}]}"#,
    r#"{"type": "object", "additionalProperties": false,
        "properties": {"on": {"type": "boolean"}, "ns": {"type": "string", "minLength": 2,
            "pattern": "^[a-z][a-z0-9_]+$"}, "tag": {"type": "string"}, "n": {"type": "integer"}},
        "allOf": [{"if": {"properties": {"on": {"const": true}}}, "then": {"required": ["tag"]}},
                  {"if": {"properties": {"on": {"const": false}}}, "then": {"required": ["n"]}}],
        "else": {"required": ["ns"]}}"#,
];

/// The kernel states of `cg` that have a quote form ([`grammask_core::slice::quote_form`]) and
/// a quote-cut kernel, each checked equal to the reference walk; returns how many.
fn quote_cut_kernels_equal_reference(cg: &CompiledGrammar) -> usize {
    let a = cg.automata();
    let mut cut = 0;
    for s in (0..a.states().len() as u32).map(grammask_core::compiler::StateId) {
        if grammask_core::slice::quote_form(a, s).is_none() {
            continue;
        }
        // A form is cut once a second kernel state asks for it: the first ask only notes it.
        let first = cg.quote_cut_kernel(s).unwrap();
        if let Some(km) = first.or_else(|| cg.quote_cut_kernel(s).unwrap()) {
            assert!(km == cg.classify_uninterned(s).unwrap(), "state {s:?} differs from the reference");
            cut += 1;
        }
    }
    cut
}

/// Inside a `pattern` string inlined into several object variants (MaskBench
/// `JsonSchemaStore---meta`: `namespace` and `role_name`, `^[a-z][a-z0-9_]+$`, in nine
/// `if`/`then`/`else` variants of `GalaxyInfoModel`), each kernel takes the vocabulary's quote cut
/// of the body's form (the tokens without a `"` that the body reads) and walks only the tokens
/// that read past the quote into its own variant ([`QuoteCut`]). Each such kernel equals the
/// reference walk: on a small vocabulary whose tokens cross the quote into every continuation
/// (`ab",`, `_1"}`, `x", "`) for hand schemas (`anyOf`, `if`/`then`/`else`), whose masks along
/// documents match brute force too (each form cut from its second state on); and on meta's own schema with Llama 3 and Qwen 2.5 at
/// `"namespace": "`, where the row holds nine such kernels, eight from one cut (the masks along both
/// strings match brute force on Llama 3). Fails without the quote cuts on the counts (the nine
/// kernels walked).
///
/// [`QuoteCut`]: grammask_core::slice::QuoteCut
#[test]
fn quote_cut_kernels_match_brute_force() {
    let docs: [&[&[u8]]; 2] = [
        &[
            br#"{"name": "ab_1", "a": 3}"#,
            br#"{"name":"x9", "b": "q\"r"}"#,
            br#"{ "name" : "zz_top" }"#,
            br#"["ab-c1-x", "q"]"#,
        ],
        &[br#"{"on": true, "ns": "ab_1", "tag": "t"}"#, br#"{"ns":"x_", "on": false, "n": 7}"#],
    ];
    let extra = [
        "ab", "_1", "ab\"", "ab\",", "_1\"}", "x\", \"", "1\"", "\"}", "\", \"", "top\" }", "b\":", "c1-", "-x\"]",
        "1\",", "_\"", "9\", \"b", "ab_", "\"ab", "zz\"", "\":\"", "x_\",",
    ];
    // With tokens of other first bytes, so that the letters' subtrees stay under a quarter of
    // the trie (`QUOTE_CUT_MAX_SHARE`).
    let padding: Vec<String> = (0..400).flat_map(|i| [format!(" {i}w"), format!("{i}.,"), format!("[{i}")]).collect();
    let extra: Vec<&str> = extra.iter().copied().chain(padding.iter().map(String::as_str)).collect();
    let small = ascii_vocab(&extra, &[]);
    for (schema, docs) in QUOTE_CUT_SCHEMAS.iter().zip(docs) {
        let cg = Arc::new(CompiledGrammar::new(&lax_schema_grammar(schema), &small).unwrap());
        let cut = quote_cut_kernels_equal_reference(&cg);
        assert!(cut >= 6, "{cut} quote-cut kernels");
        let checked = masks_along_docs_match_brute_force(&cg, &small, docs);
        assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    }
    let Some(text) = maskbench_file("JsonSchemaStore---meta") else { return };
    let task: serde_json::Value = serde_json::from_str(&text).unwrap();
    let g = lax_schema_grammar(&task["schema"].to_string());
    let before: &[u8] = br#"{"galaxy_info": {"author": "John Doe", "description": "A brief description of the role", "license": "MIT", "min_ansible_version": "2.9", "namespace": ""#;
    let strings: &[u8] = br#"john_doe", "role_name": "example_role", "standalone": true}"#;
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(before).unwrap());
        let a = cg.automata();
        let items = kernel_items(a, m.chart());
        let cut: Vec<_> = items.iter().filter(|it| grammask_core::slice::quote_form(a, it.state).is_some()).collect();
        assert!(cut.len() >= 9, "{name}: {} of {} kernel items with a quote form", cut.len(), items.len());
        for it in &cut {
            assert!(*cg.kernel(it.state).unwrap() == cg.classify_uninterned(it.state).unwrap(), "{name}: {it:?}");
        }
        let stats = cg.kernel_stats();
        assert!(stats.quote_cuts + 1 >= cut.len(), "{name}: {stats:?}");
        if name == "llama3" {
            assert_eq!(walk_masks_match_brute_force(&mut m, &vocab, strings, |_| {}), strings.len() + 1);
        }
    }
}

/// An open object of many listed properties with a pattern key `^x-` beside any other key
/// (MaskBench `JsonSchemaStore---clang-format`: the key start reads `x` beside a call of the key
/// regex, which excludes the names and `x-...`, so its callee alone misreads `x-` and the cover
/// search runs from the key start itself). That search is the class-body thread's
/// (`BodySlice::search_key_starts`): after the thread, the fill after `{"` explores no cover pair
/// of its own; the masks along documents with names, their prefixes and extensions, `x-` keys,
/// `x` keys that are not pattern keys, escapes and multi-byte characters match brute force on a
/// random pieces vocabulary and on Llama 3. Fails if the thread leaves the key start to the fill.
#[test]
fn pattern_key_beside_excluded_names_searched_on_class_body_thread() {
    use grammask_core::slice::cover_pairs_taken;
    let names = [
        "AlignAfterOpenBracket",
        "AlignArrayOfStructures",
        "AlignConsecutiveMacros",
        "AllowShortBlocks",
        "BasedOnStyle",
        "BinPackArguments",
        "BraceWrapping",
        "BreakBeforeBraces",
        "ColumnLimit",
        "CommentPragmas",
        "IndentWidth",
        "Language",
        "MaxEmptyLines",
        "SpaceAfterCast",
        "SpacesInParens",
        "UseTab",
        "xAlign",
    ];
    let props: Vec<String> = names.iter().map(|n| format!("\"{n}\": {{\"type\": \"integer\"}}")).collect();
    let schema = format!(
        r#"{{"type": "object", "properties": {{{}}}, "patternProperties": {{"^x-": {{}}}},
            "additionalProperties": {{}}}}"#,
        props.join(", ")
    );
    let docs: [&[u8]; 3] = [
        br#"{"AlignAfterOpenBracket": 1, "x-a": "b", "Align": 2, "xAlign": 3, "xA": [4]}"#,
        "{\"x-\": 1, \"x\": 2, \"BraceWrappings\": 3, \"\\u00e9\u{e9}\\n\": 4, \"UseTab\": 5}".as_bytes(),
        "{\"\u{1F600}x-\": 1, \"x-\u{2028}\": null, \"Col\\\"umn\": 0}".as_bytes(),
    ];
    let g = lax_schema_grammar(&schema);
    let fill_pairs_after_brace_quote = |cg: &Arc<CompiledGrammar>, vocab: &Vocabulary| {
        let mut checked = 0;
        let mut key_start_pairs = 0;
        for doc in docs {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut at = 0;
            let mut before = 0;
            checked += walk_masks_match_brute_force(&mut m, vocab, doc, |_| {
                if at == 3 {
                    key_start_pairs += cover_pairs_taken() - before;
                }
                before = cover_pairs_taken();
                at += 1;
            });
            assert!(m.is_completed(), "{:?}", String::from_utf8_lossy(doc));
        }
        (checked, key_start_pairs)
    };
    let mut pieces: Vec<&[u8]> = vec![b"x", b"x-", b"-", b"\"", b"\\", b"n", b"u00", b"e9", b": ", b", ", b"{", b"}"];
    pieces.extend([&b"Align"[..], b"After", b"Brace", b"Wrapping", b"Tab", b"Use", b"Col", b"umn", b"s"]);
    pieces.extend(["\u{e9}".as_bytes(), "\u{2028}".as_bytes(), "\u{1F600}".as_bytes(), b"1", b" ", b"null"]);
    let mut rng = Rng(0x5A3C_0064_C1A6);
    let mut extra: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    extra.extend([&[0xE2u8][..], &[0x80], &[0xA8], &[0xC3], &[0xF0, 0x9F]].map(<[u8]>::to_vec));
    extra.extend(names.iter().map(|n| n.as_bytes().to_vec()));
    extra.extend(names.iter().map(|n| n.as_bytes()[..n.len() / 2].to_vec()));
    let vocab = pieces_vocab(&mut rng, &pieces, 800, extra);
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.wait_class_bodies();
    let (checked, pairs) = fill_pairs_after_brace_quote(&cg, &vocab);
    assert!(checked > 150, "{checked}");
    assert_eq!(pairs, 0, "the fills after {{\" explored {pairs} cover pairs (pieces vocabulary)");
    let Some(vocab) = llama3_vocab() else { return };
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    cg.wait_class_bodies();
    let (checked, pairs) = fill_pairs_after_brace_quote(&cg, &vocab);
    assert!(checked > 150, "{checked}");
    assert_eq!(pairs, 0, "the fills after {{\" explored {pairs} cover pairs (Llama 3)");
}

/// MaskBench o68280's `mkv` (comma-separated `key:value` pairs refusing `&`; keys refuse `,`,
/// `:` and whitespace), o3385's two words (`^[\S]+(\s[\S]+)?$`) and o82144's `hostname` (ASCII
/// letters, digits, `-.,` and whitespace): string states that read every plain text alive but
/// the characters beginning with a few first bytes (space, `&`, `,`, `:`, the leads of
/// non-ASCII whitespace).
const REFUSAL_SCHEMA: &str = r#"{"type": "object", "properties": {
    "mkv": {"type": "string", "pattern": "^(\\s*|((\\s*[^,:&\\s]+\\s*:[^,:&]*)(,\\s*[^,:&\\s]+\\s*:[^,:&]*)*))$"},
    "ext": {"type": "string", "pattern": "^[\\S]+(\\s[\\S]+)?$"},
    "host": {"type": "string", "pattern": "^[a-zA-Z0-9\\-.\\s,]*[a-zA-Z0-9\\s\\-,]$"}}}"#;

/// Documents of [`REFUSAL_SCHEMA`] as (prefix, checked text): refused bytes in and out of place,
/// escapes, quotes, non-ASCII letters and whitespace (U+00A0, U+3000).
const REFUSAL_DOCS: [(&str, &str); 5] = [
    (r#"{"mkv": ""#, r#"color:blue,length:350, w\u00e9 : a b\tc,d:"}"#),
    ("{\"mkv\": \" ", "k\u{e9}y\u{a0}:v\u{3000}x \"}"),
    (r#"{"ext": ""#, "ms-python.python \u{e9}\u{4e2d}\\\"q\"}"),
    ("{\"ext\": \"a", "\u{a0}b&c:d\"}"),
    (r#"{"host": ""#, r#"example.com, a-b.c d\t\n e,1"}"#),
];

/// Masks equal the brute force inside regex string bodies whose state reads every plain text
/// alive but the characters beginning with a few refused first bytes ([`REFUSAL_SCHEMA`]): the
/// region walk accepts the other plain-text tokens and walks the text frontier and each path's
/// first refused byte, cutting again below it where its state refuses a few bytes too
/// (`RegionDfa::text_refusals`, `Cut::below`). On a vocabulary of the documents' pieces, Llama 3,
/// Qwen 2.5 and Phi 3.5, at every byte of [`REFUSAL_DOCS`] past their prefixes; each kernel there
/// equals the plain walk's classification. Counted (`region_refusal_cuts`): root cuts on every
/// vocabulary, cuts again below a refused byte on the real ones; without the cut (the whole
/// trie walked, as before) the test fails.
#[test]
fn region_refusal_cut_masks_match_brute_force() {
    let g = lax_schema_grammar(REFUSAL_SCHEMA);
    let mut rng = Rng(0x6828_0338_5821_4465);
    let pieces: &[&[u8]] = &[
        b"color",
        b":",
        b"blue",
        b",",
        b"length",
        b"350",
        b" ",
        b" w",
        b"&",
        b"a",
        b"b",
        b"c",
        b"d",
        b"e",
        b"-",
        b".",
        b"ms",
        b"python",
        b"example",
        b"com",
        b"\\n",
        b"\\t",
        b"\\\"",
        b"\\u00e9",
        b"\xC2\xA0",
        b"\xC3\xA9",
        b"\xE3\x80\x80",
        b"\xE3\x80",
        b"\x80",
        b"\xE4\xB8\xAD",
        b"\"",
        b"\"}",
        b"y",
        b"k",
        b"x",
        b"1",
    ];
    let vocabs = pieces_and_shared_vocabs(&mut rng, pieces, 400, &["llama3", "qwen2.5", "phi3.5"]);
    for (name, vocab) in vocabs {
        let cg = compile_with_text_slice(&g, &vocab, name);
        let before = grammask_core::mask::region_refusal_cuts();
        docs_and_kernels_match_brute_force(name, &cg, &vocab, &REFUSAL_DOCS);
        let after = grammask_core::mask::region_refusal_cuts();
        let (cuts, again) = (after.0 - before.0, after.1 - before.1);
        eprintln!("{name}: {cuts} refusal cuts, {again} cut again");
        assert!(cuts >= 3, "{name}: {cuts} region kernels took the cut less refused bytes");
        if name != "pieces" {
            assert!(again >= 1, "{name}: no refused byte's subtree cut again");
        }
    }
}

/// MaskBench o51168's `requires` (two required names, every other key `^.*$`: the key regex reads
/// any key but the names, through a trie of states until a key leaves them) and o27348's
/// `sources` line (`\S+(\s+(.+\S))?\s*$` after its first words).
const TEXT_CUT_SCHEMA: &str = r#"{"type": "object", "properties": {
    "requires": {"type": "object", "required": ["@qooxdoo/framework", "@qooxdoo/compiler"],
        "patternProperties": {"^.*$": {"type": "string"}}, "additionalProperties": false},
    "src": {"type": "string", "pattern": "^(deb|deb-src)\\s+\\S+\\s+\\S+(\\s+(.+\\S))?\\s*$"}}}"#;

/// Documents of [`TEXT_CUT_SCHEMA`] as (prefix, checked text): keys along and past the names,
/// with escapes, quotes, non-ASCII characters and (for `.+`) non-ASCII spaces.
const TEXT_CUT_DOCS: [(&str, &str); 4] = [
    (r#"{"requires": {""#, r#"@qooxdoo/framework": "^1.0.0", "@qooxdoo/compiler": "1"}}"#),
    (
        "{\"requires\": {\"@qooxdoo/compiler\": \"\", \"",
        "@qoo\u{e9}\\\"x d\": \"1\", \"@qooxdoo/frameworks\": \"3\", \"@qooxdoo/framework\": \"\"}}",
    ),
    (r#"{"src": "deb "#, r#"http://mirror.example.com/debian/ wheezy main contrib"}"#),
    ("{\"src\": \"deb-src ", "a\\tb \u{e9}x\u{a0}y  \\\"q\\\\ \u{4e2d} \"}"),
];

/// Masks equal the brute force inside regex string bodies whose state reads every plain text
/// alive ([`TEXT_CUT_SCHEMA`]), where the region walk takes the vocabulary's plain-text slice and
/// walks its frontier only (`grammask_core::slice::TextSlice`): on a vocabulary of the
/// documents' pieces (with `\n`, U+2028 and a raw newline, which `.` refuses), Llama 3, Qwen 2.5
/// and Phi 3.5, at every byte of [`TEXT_CUT_DOCS`] past their prefixes; each kernel there equals
/// the plain walk's classification. The cut is counted (`region_text_cuts`) on every vocabulary:
/// without it (the whole trie walked, as before) the test fails.
#[test]
fn region_text_cut_masks_match_brute_force() {
    let g = lax_schema_grammar(TEXT_CUT_SCHEMA);
    let mut rng = Rng(0x5108_2734_8000_0001);
    let pieces: &[&[u8]] = &[
        b"@qooxdoo",
        b"/",
        b"framework",
        b"compiler",
        b"@q",
        b"oo",
        b"x",
        b"d",
        b"\\n",
        b"\\t",
        b"\\\"",
        b"\\\\",
        b"\n",
        b"\xE2\x80\xA8",
        b"\xE2\x80",
        b"\xA8",
        b"\xC2\xA0",
        b"\xC3\xA9",
        b"\xE4\xB8\xAD",
        b" ",
        b"\"",
        b"\": \"",
        b"\", \"",
        b"\"}",
        b"deb",
        b"-src",
        b"http",
        b"://",
        b"main",
        b"s",
        b"1",
    ];
    let vocabs = pieces_and_shared_vocabs(&mut rng, pieces, 400, &["llama3", "qwen2.5", "phi3.5"]);
    for (name, vocab) in vocabs {
        let cg = compile_with_text_slice(&g, &vocab, name);
        let before = grammask_core::mask::region_text_cuts();
        docs_and_kernels_match_brute_force(name, &cg, &vocab, &TEXT_CUT_DOCS);
        let cuts = grammask_core::mask::region_text_cuts() - before;
        assert!(cuts >= 8, "{name}: {cuts} region kernels took the plain-text slice");
    }
}

/// llama.cpp's `arithmetic.gbnf`: its first mask reads no run index, so its compile leaves the
/// ASCII-only loop classes `[a-z0-9_]` and `[0-9]` to a thread of their own
/// (`TokenIndex::build_later`): on Llama 3 the compiling thread builds no run index, the thread
/// builds both (elsewhere the compile builds those its first mask reads, the thread the rest), and
/// masks along documents equal the brute force, with the indexes built and (a fresh
/// vocabulary) while the thread may still be building them.
#[test]
fn run_indexes_left_by_the_compile_match_brute_force() {
    use grammask_core::build_counts::{thread_count, Build};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/gbnf/arithmetic.gbnf");
    let g = grammask_core::ebnf::parse_ebnf(&std::fs::read_to_string(path).unwrap(), "root").unwrap();
    let class = |bytes: &[u8]| bytes.iter().fold(0u128, |c, &x| c | 1 << x);
    let ident = class(b"abcdefghijklmnopqrstuvwxyz0123456789_");
    let digits = class(b"0123456789");
    let docs: &[&[u8]] = &[b"x = 1\n", b"a_1 +20*b = (b2 +30)\n(x)=y\n"];
    for name in ["llama3", "qwen2.5"] {
        let Some(vocab) = shared_vocab(name) else { return };
        let before = thread_count(Build::RunIndex);
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let in_compile = thread_count(Build::RunIndex) - before;
        // Qwen 2.5's first mask reads one of them (built by that fill, in the compile).
        if name == "llama3" {
            assert_eq!(in_compile, 0, "{name}: the compile built a run index");
        }
        cg.wait_run_indexes();
        assert_eq!(in_compile as usize + cg.index().run_indexes_built_later(), 2, "{name}");
        for c in [ident, digits] {
            assert!(cg.index().cached_run_index(c, false).is_some(), "{name}: {c:x} not built");
        }
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, docs);
        assert!(checked > 30, "{name}: {checked} masks checked");
        // A fresh vocabulary's fills right after the compile (the thread's builds race them).
        let Some(vocab) = shared_vocab(name) else { return };
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        masks_along_docs_match_brute_force(&cg, &vocab, docs);
        cg.wait_run_indexes();
        for bad in ["1a = 2\n", "x = +1\n", "a_B = 1\n"] {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(!m.accept_bytes(bad.as_bytes()).unwrap_or(false), "{name} {bad:?}");
        }
    }
}

/// Counted `pattern` strings (MaskBench o21456's e-mail within 254 characters, unanchored after
/// `.gov.uk`, and an anchored one): documents as (key, text), with escapes, non-ASCII characters
/// and a long tail past the match that stays inside the string.
const BOUNDED_TEXT_SCHEMA: &str = r#"{"type": "object", "properties": {
    "from": {"type": "string", "minLength": 5, "maxLength": 254,
        "pattern": "^[^@^\\s]+@[^@^\\.^\\s]+(\\.[^@^\\.^\\s]*)*.gov.uk"},
    "to": {"type": "string", "minLength": 5, "maxLength": 40, "pattern": "^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\\.[a-zA-Z0-9-.]+$"}}}"#;
const BOUNDED_TEXT_DOCS: [(&str, &str); 3] = [
    (r#"{"from": ""#, r#"test@example.gov.uk", "to": "test@example.com"}"#),
    (r#"{"from": ""#, "a.b\\u00e9c@d\u{e9}.e.gov.uk and \\\"more\\\" text \u{4e2d} \u{2028}x\"}"),
    (r#"{"to": ""#, r#"a+b@c-d.e.f"}"#),
];

/// Masks equal the brute force inside counted pattern strings ([`BOUNDED_TEXT_SCHEMA`]), whose
/// region walks refuse the plain-text search at once: their starts read texts of bounded length
/// only (no cycle reachable, `RegionDfa::reads_bounded`), so no search can succeed. On a
/// vocabulary of the documents' pieces, Llama 3 and Qwen 2.5, at every byte past each prefix;
/// each kernel there equals the plain walk's classification. The refusals are counted
/// (`region_bounded_refusals`): without the check (the search giving up at its caps) it fails.
#[test]
fn counted_pattern_region_walks_refuse_the_text_search() {
    let g = lax_schema_grammar(BOUNDED_TEXT_SCHEMA);
    let mut rng = Rng(0x0002_1456_0000_0065);
    let extra: &[&[u8]] =
        &[b"\xE4\xB8\xAD", b"\xE2\x80\xA8", b"\\\"", b"\"", b"\", \"", b"\"}", b"x@", b"more", b"+b", b"-d", b".com"];
    let pieces = [&EMAIL_PIECES[..], extra].concat();
    let vocabs = pieces_and_shared_vocabs(&mut rng, &pieces, 300, &["llama3", "qwen2.5"]);
    for (name, vocab) in vocabs {
        let cg = compile_with_text_slice(&g, &vocab, name);
        let before = grammask_core::mask::region_bounded_refusals();
        docs_and_kernels_match_brute_force(name, &cg, &vocab, &BOUNDED_TEXT_DOCS);
        let refused = grammask_core::mask::region_bounded_refusals() - before;
        assert!(refused >= 4, "{name}: {refused} text searches refused as bounded");
        assert!(cg.region_kernels_served() > 0, "{name}: no region kernel");
    }
}

/// A closed object of more optional properties than the any-order bound, with
/// `patternProperties` (MaskBench Snowplow sp_279-281): in schema order, each key's state after
/// `,` is `(obj_extra ws "," ws)* "\"" "key_K" "\"" ...`, its own `"` edge a literal key beside
/// the call of the pattern keys, which only reads bytes. Its kernel is composed from the pattern
/// keys' kernel and the key's tokens read off the trie (`literal_own_kernel`). Every composed
/// kernel of the grammar equals the plain walk, and masks at every byte of the documents equal
/// brute force, on three random vocabularies of the keys' pieces (one with a token holding a
/// whole key and its quote, which the trie part leaves to the walk); then on Llama 3 and Qwen2.5
/// after each `,` and `{`; fails as well if no own part was read off the trie
/// (`literal_own_parts`).
#[test]
fn literal_keys_beside_pattern_keys_match_brute_force() {
    let mut props: Vec<String> =
        (0..9).map(|k| format!(r#""k{k}_{}": {{"type": "integer"}}"#, "ab".repeat(k % 3))).collect();
    props.extend((9..16).map(|k| format!(r#""q{k}": {{"type": "{}"}}"#, ["string", "boolean"][k % 2])));
    let schema = format!(
        r#"{{"type": "object", "additionalProperties": false, "properties": {{{}}},
            "patternProperties": {{"^x_.*": {{"type": "integer"}}, "^ka.*": {{}}}}}}"#,
        props.join(", ")
    );
    let g = lax_schema_grammar(&schema);
    let docs: [&[u8]; 4] = [
        br#"{"k0_": 1, "x_a": 2, "k2_abab": 3, "q9": true, "q10": "s"}"#,
        br#"{"x_": 0, "k1_ab": 1,"kab": [1], "k4_ab": 2, "q14": "k5_"}"#,
        br#"{"k8_abab": 8, "q11": false, "x_q12": 5}"#,
        br#"{"q15": false}"#,
    ];
    let pieces: &[&[u8]] =
        &[b"\"", b"k", b"k1", b"_", b"ab", b"x", b"x_", b"q1", b"\": ", b", ", b",", b" ", b"1", b"2", b"{\"", b"\"}"];
    let mut rng = Rng(0x5EED_0066_C0DE_0279);
    let mut composed = 0;
    for case in 0..3 {
        let extra = if case == 1 { vec![b"\"k1_ab\"".to_vec(), b"\"q1".to_vec()] } else { Vec::new() };
        let vocab = pieces_vocab(&mut rng, pieces, 150, extra);
        let before = grammask_core::mask::literal_own_parts();
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        for s in 0..cg.automata().states().len() {
            let s = grammask_core::compiler::StateId(s as u32);
            if let Some(km) = cg.composed_kernel(s).unwrap() {
                assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {} (case {case})", s.0);
                composed += 1;
            }
        }
        assert!(grammask_core::mask::literal_own_parts() > before, "no own part read off the trie (case {case})");
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let checked = masks_along_docs_match_brute_force(&cg, &vocab, &docs);
        assert_eq!(checked, docs.iter().map(|d| d.len() + 1).sum::<usize>());
    }
    assert!(composed > 30, "only {composed} kernels composed");
    for vocab in [llama3_vocab(), shared_vocab("qwen2.5")].into_iter().flatten() {
        let before = grammask_core::mask::literal_own_parts();
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        for doc in docs {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            for (i, &b) in doc.iter().enumerate() {
                assert!(m.accept_bytes(&[b]).unwrap(), "{:?}", String::from_utf8_lossy(&doc[..=i]));
                if !matches!(b, b',' | b'{') {
                    continue;
                }
                let mask = m.compute_mask().unwrap().clone();
                for (t, w) in brute_force(&m, &vocab).into_iter().enumerate() {
                    let at = String::from_utf8_lossy(&doc[..=i]);
                    assert_eq!(mask.get(t), w, "after {at:?}: token {:?}", vocab.token_bytes(t as u32));
                }
            }
            assert!(m.is_completed());
        }
        assert!(
            grammask_core::mask::literal_own_parts() > before,
            "no own part read off the trie on a real vocabulary"
        );
    }
}
