//! Token edges (`Token(...)`, `ExcludeToken(...)`, `TokenTagDispatch(...)`): masks against a
//! brute-force reference (every token fed to a copy of the matcher), accept/rollback sequences,
//! text never matching a token element, budgets, jump-forward, printing and serialization, errors.

use grammask_core::ebnf::parse_ebnf;
use grammask_core::error::ErrorKind;
use grammask_core::grammar::Grammar;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

mod common;
use common::Rng;

/// Ids: 0..=255 single bytes; then multi-byte tokens; `<|a|>` (256+N) and `<tool>` (special);
/// `<stop>` (stop). See `ids()`.
const MULTI: [&str; 8] = ["ab", "abc", "<tool>", "x1", "1", "\"", "{\"a\"", "<|a|>"];

struct Ids {
    special_a: u32,
    special_tool: u32,
    text_tool: u32,
    stop: u32,
}

fn vocab() -> (Arc<Vocabulary>, Ids) {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in MULTI {
        toks.push(t.as_bytes().to_vec());
    }
    let special_a = toks.len() as u32;
    toks.push(b"<|a|>".to_vec());
    let special_tool = toks.len() as u32;
    toks.push(b"<tool>".to_vec());
    let stop = toks.len() as u32;
    toks.push(b"<stop>".to_vec());
    let text_tool = 256 + 2;
    let opts = VocabularyOptions {
        stop_token_ids: Some(vec![stop]),
        special_token_ids: Some(vec![special_a, special_tool]),
        vocab_size: Some(toks.len() + 3), // three padding ids
        ..Default::default()
    };
    (Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap()), Ids { special_a, special_tool, text_tool, stop })
}

fn compile(text: &str) -> (Arc<CompiledGrammar>, Ids) {
    let (v, ids) = vocab();
    let g = parse_ebnf(text, "root").unwrap_or_else(|e| panic!("{text}: {e}"));
    (Arc::new(CompiledGrammar::new(&g, &v).unwrap_or_else(|e| panic!("{text}: {e}"))), ids)
}

fn matcher(c: &Arc<CompiledGrammar>, max_tokens: Option<usize>) -> Matcher {
    Matcher::new(c.clone(), MatcherOptions { max_tokens, ..Default::default() }).unwrap()
}

/// The mask must equal "accept_token succeeds on a copy", token by token.
fn check_mask(m: &mut Matcher, what: &str) {
    let n = m.compiled().vocab().vocab_size();
    let mask = m.compute_mask().unwrap().clone();
    for t in 0..n as u32 {
        let mut copy = m.clone();
        let ok = copy.accept_token(t).unwrap();
        assert_eq!(
            mask.get(t as usize),
            ok,
            "{what}: token {t} ({:?})",
            String::from_utf8_lossy(m.compiled().vocab().token_bytes(t))
        );
    }
}

fn grammars(ids: &Ids) -> Vec<String> {
    let (a, tool) = (ids.special_a, ids.special_tool);
    vec![
        format!("root ::= Token({a})"),
        format!("root ::= \"x\" Token({a}, {tool}) \"y\""),
        format!("root ::= (\"ab\" | Token({a})) \"c\"*"),
        format!("root ::= item*\nitem ::= Token({tool}) [a-z]+ Token({a}) | [0-9]"),
        format!("root ::= ExcludeToken(120, 121, 122) Token({a})?"),
        format!("root ::= ExcludeToken({a})* \"z\""),
        format!("root ::= Token({}, 97) \"b\"", ids.text_tool),
        format!("root ::= TokenTagDispatch(({a}, call), ({tool}, call2), excludes=(98, 99))\ncall ::= \"(\" [a-z]* \")\"\ncall2 ::= \"[\" \"]\""),
        format!("root ::= TokenTagDispatch(({a}, call), loop_after_dispatch=false)\ncall ::= \"!\""),
        format!("root ::= x Token({a}) | \"q\"\nx ::= \"a\"?"),
        format!("root ::= s Token({a})\ns ::= [a-z]+ (= [ <])"),
        format!("root ::= e\ne ::= e \"+\" t | t\nt ::= Token({a}) | [0-9]+"),
        // Token edges inside `max_tokens` rules: on the exhausted twin's shortest ways or dropped.
        format!("root ::= \"s\" a \"!\"\na[max_tokens=2] ::= [a-z]* Token({a}) [a-z]*"),
        format!("root ::= a \"!\"\na[max_tokens=1] ::= [a-z]+ (Token({a}) [a-z]*)?"),
        format!("root ::= (a \";\")+\na[max_tokens=2] ::= ([a-c] | Token({a}, {tool}))+"),
        // Token edges inside `lazy`/`max_chars` rules: one character each on the counter.
        format!("root ::= \"s\" a \"!\"\na[lazy] ::= [a-z]* Token({a})"),
        format!("root ::= (a \";\")+\na[max_chars=3] ::= ([a-c] | Token({a}, {tool}))+"),
        format!("root ::= a \"!\"\na[max_chars=4] ::= [a-c]* ExcludeToken(33, 120) [a-c]*"),
        format!("root ::= \"s\" a \"!\"\na[max_tokens=2, max_chars=3] ::= [a-z]* Token({a}) [a-z]*"),
        format!("root ::= a \";\" a\na[lazy] ::= b Token({tool})?\nb ::= [a-c]+ Token({a})"),
        // Token edges inside recursive and nested `max_tokens` rules (each token row built again
        // at the new token count).
        format!("root ::= a\na[max_tokens=3] ::= \"(\" a \")\" | Token({a}) | \"xy\""),
        format!("root ::= \"s\" a \"!\"\na[max_tokens=3] ::= b \".\" b | Token({tool})\nb[max_tokens=1] ::= [a-c]+ Token({a})?"),
    ]
}

#[test]
fn masks_match_brute_force_on_random_walks() {
    let (_, ids) = vocab();
    for text in grammars(&ids) {
        let (c, _) = compile(&text);
        let mut rng = Rng(0x9E37_79B9 ^ text.len() as u64);
        for walk in 0..12 {
            let mut m = matcher(&c, None);
            for step in 0..10 {
                let what = format!("{text:?} walk {walk} step {step}");
                check_mask(&mut m, &what);
                let mask = m.last_mask().clone();
                let allowed: Vec<usize> = mask.iter_ones().filter(|&t| t as u32 != ids.stop).collect();
                if allowed.is_empty() {
                    break;
                }
                // Prefer token-edge tokens (ids above 255) half of the time.
                let special: Vec<usize> = allowed.iter().copied().filter(|&t| t > 255).collect();
                let pick = if !special.is_empty() && rng.below(2) == 0 {
                    special[rng.below(special.len() as u64) as usize]
                } else {
                    allowed[rng.below(allowed.len() as u64) as usize]
                };
                let before = mask.clone();
                assert!(m.accept_token(pick as u32).unwrap(), "{what}: pick {pick}");
                if rng.below(4) == 0 {
                    m.rollback(1).unwrap();
                    assert_eq!(m.compute_mask().unwrap(), &before, "{what}: rollback restores the mask");
                    assert!(m.accept_token(pick as u32).unwrap());
                }
            }
        }
    }
}

#[test]
fn accept_sequences_and_rollback() {
    let (c, ids) = compile("root ::= \"x\" Token(264, 265) \"y\"");
    assert_eq!((ids.special_a, ids.special_tool), (264, 265));
    let mut m = matcher(&c, None);
    assert!(!m.accept_token(ids.special_a).unwrap(), "a token element is not first");
    assert!(m.accept_token(u32::from(b'x')).unwrap());
    assert!(!m.accept_token(u32::from(b'y')).unwrap());
    assert!(!m.accept_token(ids.text_tool).unwrap(), "the text token <tool> is not the token 265");
    assert!(m.accept_token(ids.special_tool).unwrap());
    assert!(!m.is_completed());
    assert!(m.accept_token(u32::from(b'y')).unwrap());
    assert!(m.is_completed());
    assert!(m.accept_token(ids.stop).unwrap());
    assert!(m.is_terminated());
    m.rollback(3).unwrap();
    assert!(m.accept_token(ids.special_a).unwrap());
    assert!(m.accept_token(u32::from(b'y')).unwrap());
    assert!(m.is_completed());
}

#[test]
fn text_never_matches_a_token_element() {
    let (c, ids) = compile("root ::= \"x\" Token(264)");
    let mut m = matcher(&c, None);
    assert!(m.accept_bytes(b"x").unwrap());
    assert!(!m.accept_bytes(b"<|a|>").unwrap(), "accept_string does not read a token element");
    assert!(m.find_jump_forward_bytes().unwrap().is_empty());
    assert!(m.accept_token(ids.special_a).unwrap());
    // Jump-forward stops before a token edge even when text is forced as well.
    let (c, _) = compile("root ::= \"ab\" (Token(264) | \"cd\")");
    let mut m = matcher(&c, None);
    assert_eq!(m.find_jump_forward_bytes().unwrap(), b"ab");
}

#[test]
fn a_token_read_both_ways_merges_its_rows() {
    // Token 97 ("a") is a token element and also text of the other branch.
    let (c, _) = compile("root ::= Token(97) \"1\" | \"a\" \"2\"");
    let mut m = matcher(&c, None);
    assert!(m.accept_token(97).unwrap());
    let mask = m.compute_mask().unwrap().clone();
    assert!(mask.get(usize::from(b'1')) && mask.get(usize::from(b'2')));
    let mut m2 = m.clone();
    assert!(m.accept_token(u32::from(b'1')).unwrap() && m.is_completed());
    assert!(m2.accept_token(u32::from(b'2')).unwrap() && m2.is_completed());
}

#[test]
fn exclude_token_allows_text_tokens_only() {
    let (c, ids) = compile("root ::= ExcludeToken(97)");
    let mut m = matcher(&c, None);
    let mask = m.compute_mask().unwrap().clone();
    assert!(!mask.get(97) && mask.get(98) && mask.get(ids.text_tool as usize));
    assert!(!mask.get(ids.special_a as usize) && !mask.get(ids.stop as usize));
    let n = c.vocab().vocab_size();
    assert!(!mask.get(n - 1), "padding ids are never allowed");
    assert!(m.accept_token(98).unwrap() && m.is_completed());
}

#[test]
fn out_of_range_ids_are_a_typed_error() {
    let (v, _) = vocab();
    let g = parse_ebnf("root ::= Token(1000000)", "root").unwrap();
    let e = CompiledGrammar::new(&g, &v).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrammar, "{e}");
    assert!(e.message().contains("1000000"), "{e}");
    let g = parse_ebnf("root ::= ExcludeToken(5, 99999999)", "root").unwrap();
    assert_eq!(CompiledGrammar::new(&g, &v).unwrap_err().kind(), ErrorKind::InvalidGrammar);
    let e = parse_ebnf("root ::= Token(99999999999)", "root").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrammar, "{e}");
    let e = parse_ebnf("root ::= Token()", "root").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EbnfSyntax, "{e}");
    let e = parse_ebnf("root ::= TokenTagDispatch((1, nope))", "root").unwrap_err();
    assert!(e.message().contains("nope"), "{e}");
}

#[test]
fn token_in_lookahead_is_unsupported() {
    let (v, _) = vocab();
    let g = parse_ebnf("root ::= s Token(264)\ns ::= \"a\" (= Token(264))", "root").unwrap();
    let e = CompiledGrammar::new(&g, &v).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
}

/// Accepts `seq` (token ids) on a fresh matcher; `false` when one is refused.
fn accepts(c: &Arc<CompiledGrammar>, seq: &[u32]) -> bool {
    let mut m = matcher(c, None);
    seq.iter().all(|&t| m.accept_token(t).unwrap())
}

#[test]
fn tokens_inside_lazy_and_max_chars_rules_count_one_character() {
    let (_, ids) = vocab();
    let (a, tool) = (ids.special_a, ids.special_tool);
    let b = |s: &str| s.bytes().map(u32::from).collect::<Vec<u32>>();
    // Lazy: the rule ends at the token edge that first completes it.
    let (c, _) = compile(&format!("root ::= \"s\" x \"!\"\nx[lazy] ::= [a-z]* Token({a}) [a-z]?"));
    assert!(accepts(&c, &[b("sab"), vec![a], b("!")].concat()));
    assert!(!accepts(&c, &[b("sab"), vec![a], b("c")].concat()));
    // max_chars=3: the token counts one, the rule ends at its first end from the third.
    let (c, _) = compile(&format!("root ::= x \"!\"\nx[max_chars=3] ::= ([a-c] | Token({a}, {tool}))+"));
    assert!(accepts(&c, &[vec![a], b("ab"), b("!")].concat()));
    assert!(accepts(&c, &[b("a"), vec![tool, a], b("!")].concat()));
    assert!(!accepts(&c, &[b("ab"), vec![tool], b("a")].concat()));
    assert!(!accepts(&c, &[vec![a, a, a, tool]].concat()));
    // Spent where it cannot end: anything on to the first end (XGrammar's relaxation).
    let (c, _) = compile(&format!("root ::= x \"!\"\nx[max_chars=2] ::= [a-c]* Token({a}) [a-c]*"));
    assert!(accepts(&c, &[b("abcab"), vec![a], b("!")].concat()));
    assert!(!accepts(&c, &[b("abcab"), vec![a], b("a")].concat()));
    assert!(accepts(&c, &[vec![a], b("a!")].concat()));
    assert!(!accepts(&c, &[vec![a], b("ab")].concat()));
}

/// Inside a recursive `max_chars` rule a token edge counts its token's characters (UTF-8 lead
/// bytes, as XGrammar 0.2.8 counts decoded characters: `<|a|>` five, a lone lead byte one, a
/// lone continuation byte none), whether its row is made by its bytes too or by its completions
/// alone; once the occurrence has read its budget and can end, no token edge inside reads. The
/// same with recursive `max_tokens` budgets on the chart too (beside it, or on the rule itself,
/// out of reach): items then carry pairs of spend points and occurrence numbers, and a token's
/// row is built again at each new token count.
#[test]
fn tokens_inside_recursive_max_chars_rules_count_their_characters() {
    let (_, ids) = vocab();
    let (a, tool) = (ids.special_a, ids.text_tool);
    let b = |s: &str| s.bytes().map(u32::from).collect::<Vec<u32>>();
    for template in [
        "root ::= x \"!\"\nx[max_chars={n}] ::= ([a-c<] | Token({a}, {tool}, 195, 169)) x?",
        "root ::= x \"!\" | f\nx[max_chars={n}] ::= ([a-c<] | Token({a}, {tool}, 195, 169)) x?\n\
         f[max_tokens=1] ::= \"(\" f \")\" | \"y\"",
        "root ::= x \"!\"\nx[max_chars={n}, max_tokens=9] ::= ([a-c<] | Token({a}, {tool}, 195, 169)) x?",
    ] {
        let g = |n: u32| {
            template.replace("{n}", &n.to_string()).replace("{a}", &a.to_string()).replace("{tool}", &tool.to_string())
        };
        count_characters_along_walks(&g, &b, a, tool);
    }
}

fn count_characters_along_walks(g: &dyn Fn(u32) -> String, b: &dyn Fn(&str) -> Vec<u32>, a: u32, tool: u32) {
    let walks: [(u32, Vec<u32>, bool); 9] = [
        (5, vec![a], false),
        (6, vec![a], true),
        (6, [vec![a], b("a")].concat(), false),
        (6, vec![tool], false),
        (7, vec![tool], true),
        (1, vec![195], false),
        (1, vec![169, 169], true),
        (2, vec![195, 169, 195], false),
        (3, [b("a"), vec![169, 195]].concat(), true),
    ];
    let bang = u32::from(b'!');
    for (n, walk, more) in walks {
        let (c, _) = compile(&g(n));
        let mut m = matcher(&c, None);
        for &t in &walk {
            assert!(m.accept_token(t).unwrap(), "max_chars={n}: {walk:?} at {t}");
        }
        check_mask(&mut m, &format!("max_chars={n} after {walk:?}"));
        let mask = m.compute_mask().unwrap().clone();
        assert!(mask.get(bang as usize), "max_chars={n} after {walk:?}: it can end");
        for t in [u32::from(b'a'), a, tool, 195] {
            assert_eq!(mask.get(t as usize), more, "max_chars={n} after {walk:?}: token {t}");
        }
    }
}

#[test]
fn print_parse_and_json_round_trip() {
    for text in [
        "root ::= Token(1, 2, 3) ExcludeToken(7)",
        "root ::= (Token(5) | \"a\")* ExcludeToken()",
        "root ::= TokenTagDispatch((3, r), excludes=(4))\nr ::= \"x\"",
    ] {
        let g = parse_ebnf(text, "root").unwrap();
        let printed = g.to_string();
        let g2 = parse_ebnf(&printed, "root").unwrap();
        assert_eq!(g2.to_string(), printed, "{text}");
        let json = g.to_json();
        assert!(json.contains("\"grammask-2\""), "{json}");
        let g3 = Grammar::from_json(&json).unwrap();
        assert_eq!(g3, g, "{text}");
    }
    // Token ids are printed in order, deduplicated.
    let g = parse_ebnf("root ::= Token(3, 1, 3)", "root").unwrap();
    assert!(g.to_string().contains("Token(1, 3)"));
    // A bad token list in JSON is a deserialization error.
    let bad = r#"{"__VERSION__": "grammask-2", "rules": [{"name": "root", "body": 0}], "exprs": [["token", [3, 1]]], "root": 0}"#;
    assert_eq!(Grammar::from_json(bad).unwrap_err().kind(), ErrorKind::Deserialize);
    // Version 1 is still read.
    let old = r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["bytes", "61"]], "root": 0}"#;
    assert!(Grammar::from_json(old).is_ok());
}

#[test]
fn budgets_count_a_token_edge_as_one_token() {
    let (_, ids) = vocab();
    for text in grammars(&ids) {
        let (c, _) = compile(&text);
        for max in [3usize, 5, 8] {
            let Ok(mut m) = Matcher::new(c.clone(), MatcherOptions { max_tokens: Some(max), ..Default::default() })
            else {
                continue;
            };
            let mut rng = Rng(max as u64 * 7919 + text.len() as u64);
            let mut n = 0;
            loop {
                let mask = m.compute_mask().unwrap().clone();
                let allowed: Vec<usize> = mask.iter_ones().collect();
                assert!(!allowed.is_empty(), "{text:?} max {max}: empty mask after {n}");
                let t = allowed[rng.below(allowed.len() as u64) as usize] as u32;
                assert!(m.accept_token(t).unwrap(), "{text:?}: {t}");
                n += 1;
                if m.is_terminated() {
                    break;
                }
                assert!(n < max, "{text:?}: budget {max} exceeded");
            }
        }
    }
}

#[test]
fn lark_special_tokens_are_token_elements() {
    use grammask_core::lark::{lark_to_grammar, lark_to_grammar_with_vocab};
    let g = lark_to_grammar("start: <[5]> <[1,3-4]> <[^7]> <[*]>").unwrap();
    let text = g.to_string();
    assert!(text.contains("Token(5) Token(1, 3, 4) ExcludeToken(7) ExcludeToken()"), "{text}");
    let (v, ids) = vocab();
    let e = lark_to_grammar("start: <|a|>").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrammar, "{e}");
    let g = lark_to_grammar_with_vocab("start: \"x\" <|a|> <tool>?", &v);
    assert!(g.is_err(), "<tool> is not a special-token form");
    let g = lark_to_grammar_with_vocab("start: \"x\" <|a|>", &v).unwrap();
    assert!(g.to_string().contains(&format!("Token({})", ids.special_a)), "{g}");
    // Outside a lowering with a vocabulary the names are unknown again.
    assert!(lark_to_grammar("start: <|a|>").is_err());
    let c = Arc::new(CompiledGrammar::new(&g, &v).unwrap());
    let mut m = matcher(&c, None);
    assert!(m.accept_bytes(b"x").unwrap());
    assert!(!m.accept_bytes(b"<|a|>").unwrap());
    assert!(m.accept_token(ids.special_a).unwrap() && m.is_completed());
}

/// `<|name|>` names the special token with that text first, then an ordinary one, a stop token
/// last; the lowest id among equals. Texts not of the `<|...|>` form are never names.
#[test]
fn lark_special_token_names_resolve_by_class_then_id() {
    use grammask_core::lark::lark_to_grammar_with_vocab;
    // ids: 0 "<|s|>" stop, 1 "<|s|>" text, 2 "<|p|>" text, 3 "<|p|>" special, 4 "<|p|>" special,
    // 5 "<|q|>" stop, 6 "<|q|>" stop, 7 "x".
    let toks: Vec<Vec<u8>> = ["<|s|>", "<|s|>", "<|p|>", "<|p|>", "<|p|>", "<|q|>", "<|q|>", "x"]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect();
    let opts = VocabularyOptions {
        stop_token_ids: Some(vec![0, 5, 6]),
        special_token_ids: Some(vec![3, 4]),
        ..Default::default()
    };
    let v = Vocabulary::new(toks, VocabType::Raw, opts).unwrap();
    for (name, id) in [("<|s|>", 1), ("<|p|>", 3), ("<|q|>", 5)] {
        let g = lark_to_grammar_with_vocab(&format!("start: {name}"), &v).unwrap();
        assert!(g.to_string().contains(&format!("Token({id})")), "{name}: {g}");
    }
    assert!(lark_to_grammar_with_vocab("start: <|x|>", &v).is_err());
}

#[test]
fn tag_dispatch_is_free_text_until_a_trigger_then_the_rule() {
    let accepts = |g: &str, s: &str| -> bool {
        let (c, _) = compile(g);
        let mut m = matcher(&c, None);
        m.accept_bytes(s.as_bytes()).unwrap() && m.is_completed()
    };
    let g = "root ::= TagDispatch((\"<a>\", x), (\"<b-\", y), excludes=(\"\\n\\n\"))\nx ::= \"1\" \ny ::= \"2\"";
    assert!(accepts(g, ""));
    assert!(accepts(g, "hello <a1 x"));
    assert!(accepts(g, "hello <a>1 more <b-2 end <"));
    assert!(!accepts(g, "<a>3"));
    assert!(!accepts(g, "<a>"), "a trigger must be followed by its rule");
    assert!(!accepts(g, "one\n\ntwo"), "excluded strings never appear in free text");
    assert!(accepts(g, "one\ntwo"));
    let g1 = "root ::= TagDispatch((\"<a>\", x), loop_after_dispatch=false)\nx ::= \"1\"";
    assert!(accepts(g1, "hi <a>1"));
    assert!(!accepts(g1, "hi <a>1 more"));
    // Masks agree with accept_token on a random walk.
    let (c, _) = compile(g);
    let mut m = matcher(&c, None);
    for &b in b"hello <a>1 <b" {
        check_mask(&mut m, "TagDispatch");
        assert!(m.accept_token(u32::from(b)).unwrap());
    }
    let e = parse_ebnf("root ::= TagDispatch((\"<a>\", x), excludes=(\"<\"))\nx ::= \"1\"", "root").unwrap_err();
    assert!(e.message().contains("prefix"), "{e}");
    let e = parse_ebnf("root ::= TagDispatch((\"\", x))\nx ::= \"1\"", "root").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrammar, "{e}");
    let g = parse_ebnf("root ::= TagDispatch((\"<a>\", x))\nx ::= \"1\"", "root").unwrap();
    let printed = g.to_string();
    assert_eq!(parse_ebnf(&printed, "root").unwrap().to_string(), printed);
}

/// A token edge with a pending lookahead obligation allows only the tokens whose text pays it
/// (here none of `Token(264, 97)` but "a"): the mask equals `accept_token`, with and without a
/// recursive budget (fails when `TokenMasks::or_into` ORs the whole set).
#[test]
fn token_edges_with_pending_obligations_allow_only_tokens_that_pay_them() {
    for text in [
        "root ::= x Token(264, 97) | x \"!\"\nx ::= \"x\" (= (\"a\" | \"!\"))",
        "root ::= e\ne[max_tokens=3] ::= \"(\" e \")\" | x Token(264, 97) | x \"!\"\nx ::= \"x\" (= (\"a\" | \"!\"))",
    ] {
        let (c, ids) = compile(text);
        let mut m = matcher(&c, None);
        assert!(m.accept_bytes(b"x").unwrap());
        let mask = m.compute_mask().unwrap().clone();
        assert!(mask.get(97) && !mask.get(ids.special_a as usize), "{text}");
        check_mask(&mut m, text);
    }
}
