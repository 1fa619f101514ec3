//! Token budgets against brute force: at states along random paths, the budgeted mask is exactly
//! the set of tokens after which the shortest completion (found by breadth-first search over
//! single-byte tokens, independently of `crate::budget`) and the stop token fit in the remaining
//! budget, for every remaining budget from the tightest up.

use grammask_core::budget::with_exit_levels_after;
use grammask_core::ebnf::parse_ebnf;
use grammask_core::grammar::Grammar;
use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

mod common;
use common::Rng;

/// Every byte, multi-byte tokens that open and close structures or cross rule ends, a stop token.
fn vocab() -> (Arc<Vocabulary>, u32) {
    vocab_with(&[])
}

/// The test vocabulary plus `extra` tokens (the stop token stays last).
fn vocab_with(extra: &[&str]) -> (Arc<Vocabulary>, u32) {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in [
        "{\"",
        "\": ",
        "\", \"",
        "[[",
        "[[[[",
        "]]",
        "}}",
        "[{\"",
        "\"}",
        "\"]",
        ", ",
        "true",
        "null",
        "1234",
        "abc",
        "\"a\": \"",
        "-0",
        "1e5",
        "0.",
        "\\u00",
        "\\n",
        "\"}]",
        "a\"",
        "é",
        "\u{4e2d}",
        "))",
        "((a",
        "a+",
    ] {
        toks.push(t.as_bytes().to_vec());
    }
    // Partial UTF-8 sequences (byte-level vocabularies have them).
    toks.push(vec![0xe4, 0xb8]);
    toks.extend(extra.iter().map(|t| t.as_bytes().to_vec()));
    toks.push(b"<stop>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
    (Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap()), stop)
}

fn schema(s: &str) -> Grammar {
    let text = json_schema_to_ebnf(s, &JsonSchemaOptions { strict_mode: true, ..Default::default() }).unwrap();
    parse_ebnf(&text, "root").unwrap()
}

fn grammars() -> Vec<(&'static str, Grammar)> {
    vec![
        (
            "object",
            schema(
                r#"{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":4},"b":{"type":"array","items":{"type":"integer"}}},"required":["a"]}"#,
            ),
        ),
        ("nested", schema(r##"{"type":"array","items":{"anyOf":[{"$ref":"#"},{"type":"boolean"}]},"maxItems":2}"##)),
        ("string", schema(r#"{"type":"string","minLength":3,"maxLength":6}"#)),
        ("expr", parse_ebnf("root ::= e\ne ::= t (\"+\" t)*\nt ::= \"((\" e \"))\" | [a-z]+", "root").unwrap()),
        // Keys of an open object: the key rule's states are final (its closing quote is the
        // parent's), so exact walks read them on the automaton and leave on the completion's bytes.
        (
            "open_object",
            schema(
                r#"{"type":"object","properties":{"abx":{"type":"integer"},"b":{"type":"boolean"}},"additionalProperties":{"type":"integer"}}"#,
            ),
        ),
        ("ambiguous", parse_ebnf("root ::= x | y\nx ::= \"a\"+ \"bcd\"\ny ::= \"a\"* \"\\\"}]\"", "root").unwrap()),
    ]
}

/// Each allowed token but `stop`, with the fewest bytes completing the input after it
/// ([`shortest`], capped at 64).
fn costs_after(
    m: &Matcher,
    allowed: &[u32],
    stop: u32,
    memo: &mut HashMap<u128, Option<u32>>,
) -> Vec<(u32, Option<u32>)> {
    allowed
        .iter()
        .filter(|&&t| t != stop)
        .map(|&t| {
            let mut y = m.clone();
            assert!(y.accept_token(t).unwrap());
            (t, shortest(&y, memo, 64))
        })
        .collect()
}

/// The tokens of `costs` a budget of `remaining` tokens allows: each whose completion after it
/// (`k` bytes, at most `k` tokens) leaves room for the token itself and the stop token.
fn fitting(costs: &[(u32, Option<u32>)], remaining: usize) -> impl Iterator<Item = u32> + '_ {
    costs.iter().filter(move |c| c.1.is_some_and(|k| k as usize + 2 <= remaining)).map(|c| c.0)
}

/// The fewest single bytes completing `m`'s input (0 when complete), by breadth-first search
/// over chart signatures, or `None` beyond `cap`.
fn shortest(m: &Matcher, memo: &mut HashMap<u128, Option<u32>>, cap: u32) -> Option<u32> {
    let sig = m.chart().last_signature();
    if let Some(&c) = memo.get(&sig) {
        return c;
    }
    let mut level = vec![(m.clone(), Vec::<u8>::new())];
    let mut seen: HashSet<u128> = HashSet::from([sig]);
    let mut found = None;
    'bfs: for d in 0..=cap {
        let mut next = Vec::new();
        for (x, p) in &level {
            if x.is_completed() {
                found = Some(d);
                if std::env::var_os("BFS_DEBUG").is_some() {
                    eprintln!("bfs {d}: {:?}", String::from_utf8_lossy(p));
                }
                break 'bfs;
            }
            for b in 0..=255u8 {
                let mut y = x.clone();
                if y.accept_bytes(&[b]).unwrap() && seen.insert(y.chart().last_signature()) {
                    let mut q = p.clone();
                    q.push(b);
                    next.push((y, q));
                }
            }
        }
        level = next;
    }
    memo.insert(sig, found);
    found
}

/// Tokens a path of grammar `name` starts with (then random ones).
fn forced(name: &str, path: usize) -> &'static [&'static str] {
    match (name, path) {
        ("open_object", 0) => &["{\"", "a"],
        ("open_object", _) => &["{\"", "q"],
        ("open_required", _) => &["{", "\""],
        ("any_of_copies", _) => &["{", "\"", "q", "\"", ":", "\""],
        _ => &[],
    }
}

#[test]
fn budgeted_masks_equal_brute_force() {
    let (vocab, stop) = vocab();
    check_brute_force(&vocab, stop, grammars(), 0x0DDB_1A5E_5BAD_5EED, 2, 8);
}

/// Along `paths` random paths of `steps` tokens of each grammar, the budgeted masks at every
/// remaining budget equal the breadth-first definition.
fn check_brute_force(
    vocab: &Arc<Vocabulary>,
    stop: u32,
    grammars: Vec<(&str, Grammar)>,
    seed: u64,
    paths: usize,
    steps: usize,
) {
    let mut rng = Rng(seed);
    for (name, g) in grammars {
        if std::env::var("ONLY").is_ok_and(|o| o != name) {
            continue;
        }
        let cg = Arc::new(CompiledGrammar::new(&g, vocab).unwrap());
        let mut memo = HashMap::new();
        for path in 0..paths {
            let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut taken: Vec<u32> = Vec::new();
            for step in 0..steps {
                let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                let now = shortest(&free, &mut memo, 64).expect("a completion");
                // The exact cost after every allowed token.
                let costs = costs_after(&free, &allowed, stop, &mut memo);
                let complete = free.is_completed();
                // Remaining budgets from the tightest the matcher takes to past every cost.
                let most = costs.iter().filter_map(|c| c.1).max().unwrap_or(0) + 3;
                for remaining in (now as usize + 1)..=(most as usize) {
                    let n = taken.len() + remaining;
                    // (A budget below the start's shortest completion is refused, though multi-byte
                    // tokens taken so far may have made it enough.)
                    let Ok(mut m) =
                        Matcher::new(cg.clone(), MatcherOptions { max_tokens: Some(n), ..Default::default() })
                    else {
                        continue;
                    };
                    for &t in &taken {
                        assert!(m.accept_token(t).unwrap());
                    }
                    let got: HashSet<u32> = m.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                    let mut want: HashSet<u32> = fitting(&costs, remaining).collect();
                    if complete {
                        want.insert(stop);
                    }
                    assert_eq!(
                        got,
                        want,
                        "{name} path {path} step {step} remaining {remaining} (now {now}) after {:?}",
                        String::from_utf8_lossy(
                            &taken.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect::<Vec<u8>>()
                        )
                    );
                }
                // Go on with a forced or random allowed non-stop token (or stop the path).
                let forced_token = forced(name, path)
                    .get(step)
                    .map(|s| (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap());
                let Some(&(t, _)) = (match forced_token {
                    Some(t) => costs.iter().find(|c| c.0 == t),
                    None => costs.get(rng.below(costs.len().max(1) as u64) as usize),
                }) else {
                    break;
                };
                assert!(free.accept_token(t).unwrap());
                taken.push(t);
            }
        }
    }
}

/// Every byte, and 1,500 random tokens of 2 to 9 bytes of ASCII letters, quotes, escapes,
/// 2-, 3- and 4-byte characters and pieces of them (byte-level vocabularies hold partial
/// characters, which are no whole tokens).
fn utf8_vocab() -> (Arc<Vocabulary>, u32) {
    const PIECES: &[&[u8]] = &[
        b"a",
        b"q",
        b"\"",
        b"\\",
        b"n",
        b",",
        b"}",
        "é".as_bytes(),
        "中".as_bytes(),
        "文".as_bytes(),
        "𝄞".as_bytes(),
        b"\xe4\xb8",
        b"\xad",
        b"\xf0\x9d",
        b"\x84\x9e",
    ];
    random_vocab(0x07F8_C4A2_5000_0013, PIECES, 1500, 8)
}

/// Every byte, then `extra` distinct random tokens of `pieces` (2 to `lens + 1` bytes, the last
/// piece cut to fit), then a stop token.
fn random_vocab(rng_seed: u64, pieces: &[&[u8]], extra: usize, lens: u64) -> (Arc<Vocabulary>, u32) {
    let mut rng = Rng(rng_seed);
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut seen: HashSet<Vec<u8>> = toks.iter().cloned().collect();
    while toks.len() < 256 + extra {
        let len = 2 + rng.below(lens) as usize;
        let t: Vec<u8> =
            (0..len).flat_map(|_| pieces[rng.below(pieces.len() as u64) as usize].iter().copied()).take(len).collect();
        if seen.insert(t.clone()) {
            toks.push(t);
        }
    }
    toks.push(b"<stop>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
    (Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap()), stop)
}

/// Fit walks skip subtrees of whole tokens (valid UTF-8) that keep an item in its char stay
/// home: multi-byte characters pass through states that cost more (string contents) and come
/// back, or die (a pattern's class holds some of them only). In bounded strings a token of
/// many characters crosses the bound; partial characters cost the rest of their character.
/// Against the breadth-first definition at every remaining budget.
#[test]
fn char_stays_mask_equal_brute_force() {
    let (vocab, stop) = utf8_vocab();
    let grammars = vec![
        ("string", schema(r#"{"type":"string"}"#)),
        ("bounded", schema(r#"{"type":"string","minLength":1,"maxLength":5}"#)),
        ("pattern", schema(r#"{"type":"string","pattern":"^[a-zé]{1,6}$"}"#)),
        ("object", schema(r#"{"type":"object","properties":{"s":{"type":"string","maxLength":3}},"required":["s"]}"#)),
        // Past 4 characters only the 8-character branch lives: a token of one character more than
        // a position's way out costs more.
        ("two_lengths", parse_ebnf("root ::= \"\\\"\" ([a-zé中𝄞]{0,4} | [a-zé中𝄞]{8}) \"\\\"\"", "root").unwrap()),
    ];
    check_brute_force(&vocab, stop, grammars, 0xC4A2_57A4, 2, 6);
}

/// Every byte, and 4,000 random tokens of 2 to 8 bytes over JSON's structural bytes, string
/// bytes, escapes and UTF-8, so that trie subtrees stay inside string contents or leave them.
fn large_vocab() -> (Arc<Vocabulary>, u32) {
    const PIECES: &[&str] =
        &["\"", "\\", "a", "b", "q", "Z", " ", ":", ",", "{", "}", "[", "]", "0", "7", "é", "\n", "u", "-", "."];
    let pieces: Vec<&[u8]> = PIECES.iter().map(|p| p.as_bytes()).collect();
    random_vocab(0x05EE_D0F1_A26E, &pieces, 4000, 7)
}

/// The grammars limit walks are checked on.
fn limit_walk_grammars() -> Vec<(&'static str, Grammar)> {
    let mut g = grammars();
    g.push((
        "pattern",
        schema(r#"{"type":"object","properties":{"p":{"type":"string","pattern":"^[a-q]{2,6}(-[0-9]+)?$"},"s":{"type":"string","maxLength":5}},"required":["p","s"]}"#),
    ));
    g.push(("builtin_json", grammask_core::builtin::builtin_json_grammar()));
    // An open object's keys with a required key left: a token that starts an unknown key raises
    // the shortest completion by more than `FIT_SLACK` (its `":{"x":0},`).
    g.push((
        "open_required",
        schema(
            r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}"#,
        ),
    ));
    // A string property in each branch of an `anyOf`: its copies have the same future, and the
    // branches' items in them differ in `U` (what each branch has left to close), so limit walks
    // cost the string by its cheapest copy (the others are dominated).
    g.push((
        "any_of_copies",
        schema(
            r#"{"anyOf":[{"type":"object","properties":{"q":{"type":"string"},"a":{"type":"integer"}},"required":["q","a"]},{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},{"type":"object","properties":{"q":{"type":"string"},"b":{"type":"array","items":{"type":"integer"},"minItems":3}},"required":["q","b"]}]}"#,
        ),
    ));
    g
}

/// At states along random paths of each grammar, for every remaining budget from 1 to 24
/// (`descending`: from 24 down, so that memo entries of higher limits meet lower ones), the
/// masks of matchers whose fit walks list at most `cap` tokens (`None`: the default; each cap
/// on a compilation of its own) equal those of walks that cost every token.
fn check_limit_walks(caps: &[Option<usize>], descending: bool) {
    let (vocab, stop) = large_vocab();
    let mut rng = Rng(0xB0D6_E7F1_A500_0001);
    for (name, g) in limit_walk_grammars() {
        if std::env::var("ONLY").is_ok_and(|o| o != name) {
            continue;
        }
        let exact = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let fast: Vec<Arc<CompiledGrammar>> =
            caps.iter().map(|_| Arc::new(CompiledGrammar::new(&g, &vocab).unwrap())).collect();
        let mut compared = 0;
        for path in 0..3 {
            let mut free = Matcher::new(exact.clone(), MatcherOptions::default()).unwrap();
            let mut taken: Vec<u32> = Vec::new();
            for step in 0..10 {
                let mut budgets: Vec<usize> = (1..=24).collect();
                if descending {
                    budgets.reverse();
                }
                for remaining in budgets {
                    let opts = MatcherOptions { max_tokens: Some(taken.len() + remaining), ..Default::default() };
                    let Ok(mut x) = Matcher::new(exact.clone(), opts.clone()) else {
                        continue;
                    };
                    x.set_exact_budget_walks(true);
                    for &t in &taken {
                        assert!(x.accept_token(t).unwrap());
                    }
                    let want: Vec<usize> = x.compute_mask().unwrap().iter_ones().collect();
                    let text = String::from_utf8_lossy(
                        &taken.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect::<Vec<u8>>(),
                    )
                    .into_owned();
                    for (cap, g) in caps.iter().zip(&fast) {
                        let mut m = Matcher::new(g.clone(), opts.clone()).unwrap();
                        if let Some(c) = cap {
                            m.set_budget_fit_list_cap(*c);
                        }
                        for &t in &taken {
                            assert!(m.accept_token(t).unwrap());
                        }
                        let got: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
                        assert_eq!(
                            got, want,
                            "fit list cap {cap:?}: {name} path {path} step {step} remaining {remaining} after {text:?}"
                        );
                    }
                    compared += 1;
                }
                let allowed: Vec<u32> =
                    free.compute_mask().unwrap().iter_ones().map(|t| t as u32).filter(|&t| t != stop).collect();
                if allowed.is_empty() {
                    break;
                }
                // (Forced tokens this vocabulary lacks, or the path does not allow, are left to
                // chance.)
                let forced_token = forced(name, path)
                    .get(step)
                    .and_then(|s| allowed.iter().copied().find(|&t| vocab.token_bytes(t) == s.as_bytes()));
                let t = forced_token.unwrap_or_else(|| allowed[rng.below(allowed.len() as u64) as usize]);
                assert!(free.accept_token(t).unwrap());
                taken.push(t);
            }
        }
        assert!(compared > 0, "{name}: nothing compared");
    }
}

/// Limit walks (which skip trie subtrees whose tokens their items' regions, or homes, place on
/// one side of the limit: string contents with escapes and UTF-8 in the tokens) against walks
/// that cost every token, on a large vocabulary. Also over walks alone (a fit walk's list
/// capped at 0 tokens), which list the tokens that fit at limits from `now` up too.
#[test]
fn limit_walks_equal_exact_walks() {
    check_limit_walks(&[None, Some(0)], false);
}

/// Fit walks at the limit itself (far from `now`, after a fit walk near `now` listed more than
/// the cap), whose entries answer only that limit and those above it, and states met again
/// after a capped fit walk (which skip it): limits from the highest down.
#[test]
fn capped_fit_walks_equal_exact_walks_from_high_limits_down() {
    check_limit_walks(&[Some(0), Some(3)], true);
}

/// A fit walk near `now` capped in one array element (`{"` of an open object with a required
/// key: most tokens start an unknown key) is skipped at the same place in the next ones, whose
/// rows key alike (`Budget::near_cap_key`): byte by byte along the array, at every remaining
/// budget, the masks equal those of walks that cost every token, and skips happened.
#[test]
fn capped_fit_walks_are_predicted_in_later_elements() {
    let (vocab, _) = large_vocab();
    let g = schema(
        r#"{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":{"type":"integer"}}}"#,
    );
    let text = br#"[{"name":"a","b":1},{"name":"b","c":2},{"name":"c"}]"#;
    let (fast, _) = masks_equal_exact_walks(&g, &vocab, text, Some(3), 24);
    let skips = fast.completion().walk_stats().near_cap_skips;
    assert!(skips > 0, "no fit walk near now skipped on an earlier element's cap");
}

/// An open object's first key start (`{"`) and its later ones (`,"`) are different states of one
/// rule: their row keys differ, their rules do not (`Budget::near_rule_key`), so a fit walk
/// capped at the first is skipped at the second. Byte by byte along the object, at every
/// remaining budget, the masks equal those of walks that cost every token, and walks were skipped
/// on the rules alone.
#[test]
fn capped_fit_walks_are_predicted_by_rules_at_later_keys() {
    let (vocab, _) = large_vocab();
    let text = json_schema_to_ebnf(
        r#"{"type":"object","additionalProperties":{"type":"integer"}}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    let g = parse_ebnf(&text, "root").unwrap();
    let (fast, _) = masks_equal_exact_walks(&g, &vocab, br#"{"ab":1,"cd":2,"ef":3}"#, Some(3), 24);
    let st = fast.completion().walk_stats();
    let skips = st.near_rule_skips;
    assert!(skips > 0, "no fit walk skipped on an earlier key start's rules ({} on row keys)", st.near_cap_skips);
}

/// In an open object's keys near the end of the budget, most tokens start an unknown key, whose
/// cost passes the limit by more than its bytes can shed (descent): a fit walk counts those
/// subtrees' tokens without reading them and, past its cap, gives way on the count
/// (`Completion::deferred_caps`); under the cap it reads them in a second pass. With the default
/// cap (`out` and the count together stay under it on this vocabulary) it gives way on the count
/// alone past a quarter of the cap (`DEFERRED_CAP_DIVISOR`). Byte by byte along the object, at
/// every remaining budget, the masks equal those of walks that cost every token, with a cap the
/// counts pass and with the default one, and walks gave way under both.
#[test]
fn fit_walks_count_deferred_subtrees_before_reading_them() {
    let (vocab, _) = large_vocab();
    // Keys in any order: an unknown key may come before the required ones.
    let text = json_schema_to_ebnf(
        r#"{"type":"object","properties":{"name":{"type":"string"},"id":{"type":"integer"}},"required":["name","id"],"additionalProperties":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    let g = parse_ebnf(&text, "root").unwrap();
    let text = br#"{"b":{"x":1},"name":"a","c":{"x":2},"id":3}"#;
    let mut compared = 0;
    for cap in [Some(40), None] {
        let (fast, n) = masks_equal_exact_walks(&g, &vocab, text, cap, 40);
        compared += n;
        let caps = fast.completion().walk_stats().deferred_caps;
        assert!(caps > 0, "cap {cap:?}: no fit walk gave way on its deferred subtrees' count");
    }
    assert!(compared > 300, "{compared} masks compared");
}

/// Long letter tokens (up to 12 bytes) in counted blocks with inline class bodies: near a block's
/// end (40 characters) a long token crosses it, a short one not. (This path never reuses a
/// merged memo key: its matchers' caps differ. `merged_keys_with_long_tokens_mask_equal_brute_force`
/// does, and fails when merged keys look less far than the longest token.)
#[test]
fn counted_repetition_with_long_tokens_masks_equal_brute_force() {
    let (vocab, stop) = vocab_with(&["abcdefgh", "abcdefghijkl", "qq", "abcde"]);
    check_counted_repetition(&vocab, stop, &["q", "q", "qq", "abc", "abcde", "abcdefgh"], 0x5EED_0013, 70, true);
}

/// The string `c (b{0,3} s | b{4})` of `c`s, with `c` a rule (`inline`: the blocks' bodies are
/// character classes, leaves without rule edges, whose positions merged budget keys compare).
const COUNTED: &str = "root ::= \"{\\\"m\\\":\\\"\" c (b{0,3} s | b{4}) \"\\\"\" (\",\\\"n\\\":\" \"1234\")? \"}\"\n\
     b ::= c{40}\ns ::= c{0,25}\nc ::= [a-z] | \"\\\\\" [n\"]";

fn check_counted_repetition(vocab: &Arc<Vocabulary>, stop: u32, picks: &[&str], seed: u64, steps: usize, inline: bool) {
    let text = if inline {
        COUNTED.replace("c{40}", "([a-z] | \"\\\\\" [n\"]){40}").replace("c{0,25}", "([a-z] | \"\\\\\" [n\"]){0,25}")
    } else {
        COUNTED.to_string()
    };
    let g = parse_ebnf(&text, "root").unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab).unwrap());
    let find = |s: &str| (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap();
    let mut memo = HashMap::new();
    let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let mut taken: Vec<u32> = Vec::new();
    for b in ["{\"", "m", "\"", ":", "\""] {
        let t = find(b);
        assert!(free.accept_token(t).unwrap());
        taken.push(t);
    }
    let mut rng = Rng(seed);
    let mut compared = 0;
    for step in 0..steps {
        let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
        let now = shortest(&free, &mut memo, 64).expect("a completion");
        let costs = costs_after(&free, &allowed, stop, &mut memo);
        let most = costs.iter().filter_map(|c| c.1).max().unwrap_or(0) + 2;
        for remaining in (now as usize + 1)..=(most as usize) {
            let n = taken.len() + remaining;
            // (A budget below the start's shortest completion is refused.)
            let Ok(mut m) = Matcher::new(cg.clone(), MatcherOptions { max_tokens: Some(n), ..Default::default() })
            else {
                continue;
            };
            for &t in &taken {
                assert!(m.accept_token(t).unwrap());
            }
            let got: HashSet<u32> = m.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
            let want: HashSet<u32> = fitting(&costs, remaining).collect();
            assert_eq!(got, want, "step {step} remaining {remaining} (now {now})");
            compared += 1;
        }
        let pick = find(picks[rng.below(picks.len() as u64) as usize]);
        let t = if allowed.contains(&pick) { pick } else { find("q") };
        if !allowed.contains(&t) {
            break;
        }
        assert!(free.accept_token(t).unwrap());
        taken.push(t);
    }
    assert!(compared > 100, "compared {compared}");
}

/// Merged memo keys against brute force, with a token (16 letters) much longer than the rest,
/// in `"\"" (s "\"1234567" | b "\"")`: `s` a block of up to 60 letters, `b` of exactly 40.
/// Positions where `b` has at least 7 letters left beyond the longest token cost like `s`'s (the
/// quote that ends `s` costs 7 more to finish) after every token, and their rows share a merged
/// key. A position with fewer left is keyed apart: the longest token takes `b` within 7 of its
/// end, below the cost of every row the merged key covers, so a key that looked less far than
/// the longest token drops it from the mask at tight budgets. With `s` and `b` inlined into one
/// automaton (a position's `Completion::ball` sees `b`'s end), and as rules of their own, defined
/// in either order (`b`'s item dominated by `s`'s, before or after it in the row). Paths start with tokens of 1 to 8 letters, so that the same
/// number of accepted tokens (the same budget left) meets different positions, and go on letter
/// by letter; one matcher per `max_tokens` (the memo key's cap) runs along each path, with limit
/// walks and with exact walks.
#[test]
fn merged_keys_with_long_tokens_mask_equal_brute_force() {
    let (vocab, stop) = vocab_with(&["abcdefghijklmnop", "abcdefgh", "abcd", "ab"]);
    let root = "root ::= \"\\\"\" (s \"\\\"1234567\" | b \"\\\"\")";
    let text = format!("{root}\ns ::= [a-z]{{0,60}}\nb ::= [a-z]{{40}}");
    // Recursion keeps `s` and `b` from being inlined; defined first, `b`'s items come ahead of
    // their dominators in the row.
    let rules = format!("{root}\ns ::= [a-z]{{0,60}} | \"(\" s \")\"\nb ::= [a-z]{{40}} | \"(\" b \")\"");
    let b_first = format!("{root}\nb ::= [a-z]{{40}} | \"(\" b \")\"\ns ::= [a-z]{{0,60}} | \"(\" s \")\"");
    let find = |s: &str| (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap();
    for (name, text) in [("one automaton", text), ("rules", rules), ("rules, b first", b_first)] {
        if std::env::var("ONLY").is_ok_and(|o| o != name) {
            continue;
        }
        let g = parse_ebnf(&text, "root").unwrap();
        let mut memo = HashMap::new();
        for exact in [false, true] {
            let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
            for first in ["q", "ab", "abcd", "abcdefgh"] {
                let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                let mut budgeted: Vec<(usize, Matcher)> = (8..=56)
                    .filter_map(|n| {
                        let opts = MatcherOptions { max_tokens: Some(n), ..Default::default() };
                        let mut m = Matcher::new(cg.clone(), opts).ok()?;
                        m.set_exact_budget_walks(exact);
                        Some((n, m))
                    })
                    .collect();
                let path = ["\"", first].into_iter().chain(std::iter::repeat("q"));
                for (taken, tok) in path.take(36).enumerate() {
                    let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                    let costs = costs_after(&free, &allowed, stop, &mut memo);
                    for (n, m) in &mut budgeted {
                        let remaining = *n - taken.min(*n);
                        let got: HashSet<u32> = m.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                        let want: HashSet<u32> = fitting(&costs, remaining).collect();
                        assert_eq!(
                            got, want,
                            "{name}, exact walks {exact}, first {first:?}, {taken} taken, max_tokens {n}"
                        );
                    }
                    let t = find(tok);
                    assert!(free.accept_token(t).unwrap());
                    for (_, m) in &mut budgeted {
                        assert!(m.accept_token(t).unwrap());
                    }
                }
            }
            let st = cg.completion().walk_stats();
            let (lookups, hits) = (st.merged_lookups, st.merged_hits);
            assert!(hits > 0, "{name}, exact walks {exact}: {hits} merged-key hits of {lookups} lookups");
        }
    }
}

/// A fit walk may skip a subtree whose tokens keep one cheap item alive in its home, but only
/// when that one item takes every byte: here `l`'s strings keep to letters and `d`'s to digits,
/// while `x`, costing ten more, takes both. The token `a1` ends `l` and `d` and leaves only `x`:
/// it costs 11, though each of its bytes keeps some cheap item home. At every state along the
/// paths and every remaining budget, limit walks mask as walks that cost every token.
#[test]
fn one_item_must_stay_home_for_every_byte() {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    toks.extend(["a1", "1a", "ab", "12", "ab12"].iter().map(|t| t.as_bytes().to_vec()));
    toks.push(b"<stop>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    // Recursion keeps `l`, `d` and `x` from being inlined: their items are apart in the row.
    let text = "root ::= \"\\\"\" (l | d | x \"0123456789\")\n\
                l ::= [a-z]* \"\\\"\" | \"(\" l \")\"\n\
                d ::= [0-9]* \"\\\"\" | \"(\" d \")\"\n\
                x ::= [a-z0-9]* \"\\\"\" | \"(\" x \")\"";
    let g = parse_ebnf(text, "root").unwrap();
    let find = |s: &str| (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap();
    let mut compared = 0;
    for path in [&["\""][..], &["\"", "a"], &["\"", "1"], &["\"", "ab"]] {
        for remaining in 1..=16 {
            let opts = MatcherOptions { max_tokens: Some(path.len() + remaining), ..Default::default() };
            let mut masks = Vec::new();
            for exact in [true, false] {
                let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
                let Ok(mut m) = Matcher::new(cg, opts.clone()) else { continue };
                m.set_exact_budget_walks(exact);
                for t in path {
                    assert!(m.accept_token(find(t)).unwrap());
                }
                masks.push(m.compute_mask().unwrap().iter_ones().collect::<Vec<usize>>());
            }
            if let [want, got] = &masks[..] {
                assert_eq!(got, want, "after {path:?}, remaining {remaining}");
                compared += 1;
            }
        }
    }
    assert!(compared > 40, "compared {compared}");
}

/// Fit walks skip a plain level's subtree when one item keeps every token below it in its stay
/// home; a level's items' stay classes together (`Exits::stay`) first rule that out for the
/// subtrees with a class no item's stay holds, without trying each item. On strings of letters,
/// digits, escapes and UTF-8 (large vocabulary), and on `l`/`d`/`x` (where each byte of `a7`
/// keeps some cheap item home, but no one item takes both: the union of the stays holds its
/// classes, yet the token costs more), at every state along the paths and every remaining
/// budget, limit walks mask as walks that cost every token, and the union ruled nodes out.
#[test]
fn stay_classes_of_a_level_rule_out_items_exactly() {
    let (vocab, _) = large_vocab();
    let object = json_schema_to_ebnf(
        r#"{"type":"object","properties":{"s":{"type":"string","maxLength":9},"n":{"type":"integer"},"t":{"type":"string"}},"required":["s","n","t"]}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    let letters = "root ::= \"\\\"\" (l | d | x \"0123456789\")\n\
                   l ::= [a-z]* \"\\\"\" | \"(\" l \")\"\n\
                   d ::= [0-9]* \"\\\"\" | \"(\" d \")\"\n\
                   x ::= [a-z0-9]* \"\\\"\" | \"(\" x \")\"";
    let cases: [(&str, &[u8]); 3] = [
        (&object, "{\"s\":\"ab\\u00e9q\u{e9}Z\",\"n\":-70,\"t\":\"q b\"}".as_bytes()),
        (letters, b"\"ab7"),
        (letters, b"\"(70a"),
    ];
    let mut misses = 0;
    for (text, path) in cases {
        let g = parse_ebnf(text, "root").unwrap();
        let (fast, compared) = masks_equal_exact_walks(&g, &vocab, path, None, 18);
        assert!(compared > 40, "{compared} masks compared");
        misses += fast.completion().walk_stats().stay_union_misses;
    }
    assert!(misses > 0, "no level's stay classes ruled a node out");
}

/// A memoized mask is served as without a budget when the state's memoized bound (the most any
/// allowed token costs) fits the limit, with no walk and no row tables (`Budget::leaves_mask`,
/// and the same test first in `Budget::restrict`). Along random paths, once a matcher at the
/// largest budget has costed a state (exact walks: the bound is the top cost itself, so a
/// bound read one token too loosely lets the top-cost tokens through one budget too low),
/// matchers at every remaining budget from the tightest up fill their row (from the memo where
/// they can) and compute their mask, both equal to brute force; some fills come from the memo
/// and some, below the bound, do not.
#[test]
fn memoized_fills_keep_the_budget_bound_exactly() {
    let (vocab, stop) = vocab();
    let mut rng = Rng(0xB0B0_13C0_FFEE_1234);
    let (mut served, mut walked) = (0, 0);
    let words = vocab.vocab_size().div_ceil(32);
    for (name, g) in grammars() {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut memo = HashMap::new();
        for path in 0..2 {
            let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut taken: Vec<u32> = Vec::new();
            for step in 0..8 {
                let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                let now = shortest(&free, &mut memo, 64).expect("a completion");
                let costs = costs_after(&free, &allowed, stop, &mut memo);
                let most = costs.iter().filter_map(|c| c.1).max().unwrap_or(0) as usize + 3;
                let matcher = |remaining: usize| {
                    let opts = MatcherOptions { max_tokens: Some(taken.len() + remaining), ..Default::default() };
                    let mut m = Matcher::new(cg.clone(), opts).ok()?;
                    m.set_exact_budget_walks(true);
                    for &t in &taken {
                        assert!(m.accept_token(t).unwrap());
                    }
                    Some(m)
                };
                // Cost the state once, at the largest budget.
                if let Some(mut m) = matcher(most) {
                    m.compute_mask().unwrap();
                }
                for remaining in (now as usize + 1)..=most {
                    let Some(mut m) = matcher(remaining) else { continue };
                    let mut want: Vec<usize> = fitting(&costs, remaining).map(|t| t as usize).collect();
                    if free.is_completed() {
                        want.push(stop as usize);
                    }
                    want.sort_unstable();
                    let mut row = vec![0u32; words];
                    if m.fill_memoized(&mut row).is_some() {
                        served += 1;
                    } else {
                        walked += 1;
                        m.fill_next_token_bitmask(&mut row).unwrap();
                    }
                    let got: Vec<usize> =
                        (0..vocab.vocab_size()).filter(|&t| row[t / 32] >> (t % 32) & 1 == 1).collect();
                    let at = format!("{name} path {path} step {step} remaining {remaining} (now {now})");
                    assert_eq!(got, want, "fill, {at}");
                    let mut m = matcher(remaining).unwrap();
                    let got: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
                    assert_eq!(got, want, "compute_mask, {at}");
                }
                let Some(&(t, _)) = costs.get(rng.below(costs.len().max(1) as u64) as usize) else { break };
                assert!(free.accept_token(t).unwrap());
                taken.push(t);
            }
        }
    }
    assert!(served > 100 && walked > 100, "{served} fills from the memo, {walked} not");
}

/// Over walks list the tokens that fit at their limit, and fills of the same state at lower
/// limits take that list (`under`, kept in the walk's order), filtered by cost. With a fit-walk
/// cap of 0 a fit walk that lists a token gives way to an over walk; along random paths each
/// state is filled from the highest budget down, and the masks equal brute force, some of them
/// restricted so. With the filter by cost dropped it fails.
#[test]
fn over_walk_lists_serve_lower_limits_equal_brute_force() {
    let (vocab, stop) = vocab();
    let mut rng = Rng(0x0DE5_CE4D_1157_5EED);
    let words = vocab.vocab_size().div_ceil(32);
    let (mut listed, mut fresh, mut stale) = (0, 0, 0);
    for (name, g) in grammars() {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut memo = HashMap::new();
        for path in 0..2 {
            let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut taken: Vec<u32> = Vec::new();
            for step in 0..8 {
                let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                let now = shortest(&free, &mut memo, 64).expect("a completion");
                let costs = costs_after(&free, &allowed, stop, &mut memo);
                let most = costs.iter().filter_map(|c| c.1).max().unwrap_or(0) as usize + 3;
                for remaining in ((now as usize + 1)..=most).rev() {
                    let opts = MatcherOptions { max_tokens: Some(taken.len() + remaining), ..Default::default() };
                    let Ok(mut m) = Matcher::new(cg.clone(), opts) else { continue };
                    m.set_budget_fit_list_cap(0);
                    for &t in &taken {
                        assert!(m.accept_token(t).unwrap());
                    }
                    let mut want: Vec<usize> = fitting(&costs, remaining).map(|t| t as usize).collect();
                    if free.is_completed() {
                        want.push(stop as usize);
                    }
                    want.sort_unstable();
                    let mut row = vec![0u32; words];
                    m.fill_next_token_bitmask(&mut row).unwrap();
                    let got: Vec<usize> =
                        (0..vocab.vocab_size()).filter(|&t| row[t / 32] >> (t % 32) & 1 == 1).collect();
                    assert_eq!(got, want, "{name} path {path} step {step} remaining {remaining} (now {now})");
                }
                let Some(&(t, _)) = costs.get(rng.below(costs.len().max(1) as u64) as usize) else { break };
                assert!(free.accept_token(t).unwrap());
                taken.push(t);
            }
        }
        let st = cg.completion().walk_stats();
        listed += st.under_listings;
        (fresh, stale) = (fresh + st.fresh_walks, stale + st.stale_walks);
    }
    assert!(listed > 0, "no mask was restricted to an over walk's list at a lower limit");
    // Walks from the highest budget down: a state's first walk finds no entry, and a fit walk's
    // entry answers no limit below its own, so a later one walks the state again.
    assert!(fresh > 0 && stale > 0, "{fresh} walks of new states, {stale} of entries that did not answer");
}

/// Inside strings near the end of the budget on Llama 3 (string values, and the keys of an open
/// object, whose first byte leaves for the chart), limit walks that list the string-body
/// slice's tokens by their body state and walk only its frontier give the masks of walks that
/// cost every token, at every remaining budget from 1 to 14.
#[test]
fn body_slice_shortcut_masks_equal_exact_walks_on_llama3() {
    let Some(vocab) = common::llama3_vocab() else {
        eprintln!("skipped: no Llama 3 vocabulary");
        return;
    };
    let schema =
        r#"{"type":"object","properties":{"a":{"type":"string"},"n":{"type":"integer"}},"required":["a","n"]}"#;
    // `None`: a random body-text token (or `\n` escape); `Some`: that text's token.
    let plan: &[Option<&str>] = &[
        Some("{\""),
        Some("a"),
        Some("\":\""),
        None,
        None,
        Some("\\n"),
        None,
        None,
        Some("\",\""),
        None,
        None,
        None,
        Some("\":\""),
        None,
        None,
    ];
    let fast = limit_walks_along_plan(&vocab, &schema_ebnf(schema), plan, 0x0B0D_5C1C_E000_0029, 14);
    assert!(fast.completion().walk_stats().body_shortcuts > 0, "no walk took the body-slice shortcut");
}

/// An open object whose known keys share a prefix and cost more to finish than unknown ones
/// (their values are longer).
const OPEN_KEYS_SCHEMA: &str = r#"{"type":"object","properties":{"check-in":{"type":"string","minLength":4},
    "check-out":{"type":"string","minLength":4},"cat":{"type":"string","minLength":5},
    "location":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}"#;

/// In the keys of an open object with known keys sharing a prefix, near the end of the budget on
/// Llama 3: limit walks that list a chart exit's subtree from the row its kernel reached before
/// (`Walk::exit_memo`) and body-frontier subtrees from one of equal shape read from the same
/// items (`Walk::front_memo`) give the masks of walks that cost every token.
#[test]
fn exit_and_frontier_memos_mask_equal_exact_walks_on_llama3() {
    let Some(vocab) = common::llama3_vocab() else {
        eprintln!("skipped: no Llama 3 vocabulary");
        return;
    };
    let schema = OPEN_KEYS_SCHEMA;
    let plan: &[Option<&str>] = &[
        Some("{\""),
        Some("c"),
        None,
        None,
        Some("\":\""),
        None,
        Some("\",\""),
        Some("c"),
        None,
        Some("\":\""),
        None,
        Some("\",\""),
        None,
        None,
    ];
    let fast = limit_walks_along_plan(&vocab, &schema_ebnf(schema), plan, 0x0B0D_5C1C_E000_0030, 16);
    let st = fast.completion().walk_stats();
    let (exits, fronts) = (st.exit_listings, st.front_listings);
    assert!(exits > 0 && fronts > 0, "{exits} exits and {fronts} frontier subtrees listed from the memos");
}

/// Follows `plan` on `schema`'s grammar (strict_mode=false) on Llama 3, `None` taking a random
/// body-text token (printable ASCII but `"` and `\`, or whole UTF-8 characters) allowed without a
/// budget; before each step, at every remaining budget 1..=`max_remaining`, the budgeted masks
/// (and what each accepts along the path) equal those of limit walks that cost every token.
/// Returns the fast walks' grammar, for their counters.
/// The EBNF of `schema` as budget walks' tests compile it (`strict_mode` off).
fn schema_ebnf(schema: &str) -> String {
    json_schema_to_ebnf(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap()
}

fn limit_walks_along_plan(
    vocab: &Arc<Vocabulary>,
    text: &str,
    plan: &[Option<&str>],
    seed: u64,
    max_remaining: usize,
) -> Arc<CompiledGrammar> {
    let g = parse_ebnf(text, "root").unwrap();
    let exact = Arc::new(CompiledGrammar::new(&g, vocab).unwrap());
    let fast = Arc::new(CompiledGrammar::new(&g, vocab).unwrap());
    let by_bytes: HashMap<Vec<u8>, u32> =
        (0..vocab.vocab_size() as u32).map(|t| (vocab.token_bytes(t).to_vec(), t)).collect();
    let body = |t: u32| {
        let b = vocab.token_bytes(t);
        !b.is_empty()
            && std::str::from_utf8(b).is_ok_and(|s| s.chars().all(|c| c >= ' ' && c != '"' && c != '\\' && c != '\x7f'))
    };
    let mut rng = Rng(seed);
    let mut taken: Vec<u32> = Vec::new();
    let mut compared = 0;
    for (step, p) in plan.iter().enumerate() {
        'budgets: for remaining in 1..=max_remaining {
            let opts = MatcherOptions { max_tokens: Some(taken.len() + remaining), ..Default::default() };
            let Ok(mut x) = Matcher::new(exact.clone(), opts.clone()) else { continue };
            x.set_exact_budget_walks(true);
            let mut m = Matcher::new(fast.clone(), opts).unwrap();
            for &t in &taken {
                // A small budget may refuse a token of the path (a key that costs more to finish).
                let ok = x.accept_token(t).unwrap();
                assert_eq!(ok, m.accept_token(t).unwrap(), "step {step} remaining {remaining}: token {t}");
                if !ok {
                    continue 'budgets;
                }
            }
            let want: HashSet<usize> = x.compute_mask().unwrap().iter_ones().collect();
            let got: HashSet<usize> = m.compute_mask().unwrap().iter_ones().collect();
            let text: Vec<u8> = taken.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
            let diff: Vec<String> = got
                .symmetric_difference(&want)
                .take(8)
                .map(|&t| format!("{:?} {}", String::from_utf8_lossy(vocab.token_bytes(t as u32)), got.contains(&t)))
                .collect();
            assert!(
                diff.is_empty(),
                "step {step} remaining {remaining} after {:?}: tokens (allowed by the fast walks) {diff:?}",
                String::from_utf8_lossy(&text)
            );
            compared += 1;
        }
        let mut free = Matcher::new(exact.clone(), MatcherOptions::default()).unwrap();
        for &t in &taken {
            assert!(free.accept_token(t).unwrap());
        }
        let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
        let t = match p {
            Some(s) => by_bytes[s.as_bytes()],
            None => {
                let body: Vec<u32> = allowed.iter().copied().filter(|&t| body(t)).collect();
                body[rng.below(body.len() as u64) as usize]
            }
        };
        assert!(allowed.contains(&t), "step {step}: {:?} not allowed", String::from_utf8_lossy(vocab.token_bytes(t)));
        taken.push(t);
    }
    assert!(compared > 100, "only {compared} masks compared");
    fast
}

/// Body-text rules `c2` and `c1` (JSON string characters, each its own rule) open in that order
/// at the same origin: after `\x01` with equal `U`, after `\x04` with different `U` (`c1`'s
/// parent `h` must be followed by five more quotes). Walks share the string body's item shapes
/// (`BodyShape`) across chart states by their items' states *and* which items share an origin,
/// lookahead and `U`; a shape keyed by states alone would cost `\x04`'s `c2` text as its `c1`
/// text. Along both paths on one compilation, at every remaining budget from 24 down to 1, the
/// masks equal those of walks that cost every token.
#[test]
fn body_shapes_keep_items_of_other_origins_apart() {
    let (vocab, _) = large_vocab();
    let ch = r#"([^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])"#;
    let text = format!(
        "root ::= \"\\x01\" d | \"\\x04\" f\nd ::= c2 \"\\\"\" | c1 \"\\\"\"\nf ::= c2 \"\\\"\" | h \"\\\"\\\"\\\"\\\"\\\"\"\nh ::= c1 \"\\\"\"\nc1 ::= {ch}+ | \"\\x02\" c1\nc2 ::= {ch}+ | \"\\x03\" c2"
    );
    let g = parse_ebnf(&text, "root").unwrap();
    let exact = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let fast = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let tok = |s: &str| (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap();
    for path in [["\x01", "a", "b", "a"], ["\x04", "a", "b", "a"], ["\x01", "b", "a", "b"]] {
        let taken: Vec<u32> = path.iter().map(|s| tok(s)).collect();
        for k in 1..=taken.len() {
            for remaining in (1..=24).rev() {
                let opts = MatcherOptions { max_tokens: Some(k + remaining), ..Default::default() };
                let Ok(mut x) = Matcher::new(exact.clone(), opts.clone()) else { continue };
                x.set_exact_budget_walks(true);
                let mut m = Matcher::new(fast.clone(), opts).unwrap();
                for &t in &taken[..k] {
                    assert!(x.accept_token(t).unwrap());
                    assert!(m.accept_token(t).unwrap());
                }
                let want: Vec<usize> = x.compute_mask().unwrap().iter_ones().collect();
                let got: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
                assert_eq!(got, want, "{:?} remaining {remaining}", &path[..k]);
            }
        }
    }
    assert!(fast.completion().walk_stats().body_shortcuts > 0, "no walk took the body-slice shortcut");
}

/// Along `text` (read byte by byte: the first 256 tokens are the bytes), at every prefix the
/// exact walks accept and every remaining budget `1..=remaining`, masks of a matcher whose fit
/// walks list at most `cap` tokens (the default cap: `None`) equal those of walks that cost every
/// token. Returns the fast side's grammar (its `completion()` counts the walks skipped) and the
/// number of masks compared.
fn masks_equal_exact_walks(
    g: &Grammar,
    vocab: &Arc<Vocabulary>,
    text: &[u8],
    cap: Option<usize>,
    remaining: usize,
) -> (Arc<CompiledGrammar>, usize) {
    let exact = Arc::new(CompiledGrammar::new(g, vocab).unwrap());
    let fast = Arc::new(CompiledGrammar::new(g, vocab).unwrap());
    let path: Vec<u32> = text.iter().map(|&b| u32::from(b)).collect();
    let mut compared = 0;
    for taken in 0..path.len() {
        for remaining in 1..=remaining {
            let opts = MatcherOptions { max_tokens: Some(taken + remaining), ..Default::default() };
            let Ok(mut x) = Matcher::new(exact.clone(), opts.clone()) else {
                continue;
            };
            x.set_exact_budget_walks(true);
            let mut m = Matcher::new(fast.clone(), opts).unwrap();
            if let Some(c) = cap {
                m.set_budget_fit_list_cap(c);
            }
            // (A path the budget refuses, e.g. where unknown keys raise the shortest completion,
            // is left out.)
            if !path[..taken].iter().all(|&t| x.accept_token(t).unwrap()) {
                continue;
            }
            for &t in &path[..taken] {
                assert!(m.accept_token(t).unwrap());
            }
            let want: Vec<usize> = x.compute_mask().unwrap().iter_ones().collect();
            let got: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
            assert_eq!(got, want, "cap {cap:?}: {taken} bytes taken, remaining {remaining}");
            compared += 1;
        }
    }
    (fast, compared)
}

/// A pattern's bounded `.*` (`^(\d+\.\d+.*)$` with `maxLength`) is a chain of rules
/// (`(str.re_1 str.re_k)?`, Snowplow `sp_336`'s `version`): its rows have rule edges and every
/// character completes a rule, so walks read it on the chart, an Earley row per trie node. Only
/// a quote lowers `C` there: over walks (one below `C(now)`) skip every subtree without one,
/// found by searching the items a byte string may lead to (`Walk::over_exits`). Byte by byte
/// along the string, at every remaining budget, the masks equal those of walks that cost every
/// token, and the walks pushed fewer rows (~25k; ~43k without the search, whose over walks read
/// every subtree on the chart; fit walks push most of the rest).
#[test]
fn over_walks_skip_chains_of_rules_by_their_exits() {
    let (vocab, _) = large_vocab();
    let text = json_schema_to_ebnf(
        r#"{"type":"object","properties":{"v":{"type":"string","pattern":"^(\\d+\\.\\d+.*)$","maxLength":14}},"required":["v"]}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    assert!(text.contains("str.re_2 ::= (str.re_1 str.re_"), "not a chain of rules:\n{text}");
    let g = parse_ebnf(&text, "root").unwrap();
    let (fast, compared) = masks_equal_exact_walks(&g, &vocab, br#"{"v":"1.2abZ q-"}"#, None, 22);
    assert!(compared > 200, "{compared} masks compared");
    let rows = fast.completion().walk_stats().walk_rows;
    assert!(rows < 32_000, "limit walks pushed {rows} rows");
}

/// In a string of counted blocks (`maxLength: 10000` compiles to `json_char.block{0,8}
/// json_char.short`, Snowplow `sp_97`), every token that crosses a block's end leaves for the
/// chart at the byte that crosses it, and reaches one of a few rows (the next block's start);
/// a trie node whose byte reaches a level met before, which skips all its children (here by the
/// next block's stay home), is taken without a row (`Walk::exit_levels`). Byte by byte along the
/// string, across two block ends, at every remaining budget, the masks equal those of walks that
/// cost every token, nodes took known levels, and the walks pushed fewer rows (~440; ~870
/// without the levels). (Walks key levels only after `EXIT_LEVELS_AFTER_ROWS` rows, 128: the
/// test's walks are shorter, so it keys them from the first.)
#[test]
fn crossings_of_counted_blocks_take_known_exit_levels() {
    let (vocab, _) = large_vocab();
    // Recursion keeps `b` and `s` rules of their own.
    let text = "root ::= \"\\\"\" (b{0,3} s | b{4}) \"\\\"\"\nb ::= [a-z]{12} | \"(\" b \")\"\ns ::= [a-z]{0,11} | \"(\" s \")\"";
    let g = parse_ebnf(text, "root").unwrap();
    let doc = br#""abqzbaqbbaqzbaqbqazbbqbabqa"#;
    // This vocabulary's walks are short: levels are keyed from their first row read on the chart.
    let (fast, compared) = with_exit_levels_after(0, || masks_equal_exact_walks(&g, &vocab, doc, None, 40));
    assert!(compared > 400, "{compared} masks compared");
    let c = fast.completion();
    let st = c.walk_stats();
    let (skips, rows) = (st.exit_level_skips, st.walk_rows);
    assert!(skips > 0 && rows < 600, "{skips} nodes took known exit levels, limit walks pushed {rows} rows");
}

/// In the keys of an open object near the end of the budget on Llama 3 (its key trie spelled
/// without rule edges), a byte leaving a plain level below the root (a known key's prefix, an
/// unknown key's next byte) for the chart is listed from the row it reached before, by the
/// level's items and rows (`Walk::plain_exits`), without pushing the items' row again: the masks
/// equal those of walks that cost every token, exits were listed so (~17k), and the walks pushed
/// fewer item rows (~3.9k; ~21k without).
#[test]
fn plain_level_exits_list_without_item_rows_on_llama3() {
    let Some(vocab) = common::llama3_vocab() else {
        eprintln!("skipped: no Llama 3 vocabulary");
        return;
    };
    // The converter's key trie calls `json_char.key_non_ascii` from every node (rule edges);
    // spelled in each node's class instead, as before session 35, its states are plain.
    let text = schema_ebnf(OPEN_KEYS_SCHEMA)
        .replace(" | json_char.key_non_ascii", "")
        .replace("\\x1f\\u0080-\\U0010FFFF", "\\x1f");
    let plan: &[Option<&str>] =
        &[Some("{\""), Some("c"), None, Some("\":\""), None, Some("\",\""), Some("c"), None, Some("\":\""), None];
    let fast = limit_walks_along_plan(&vocab, &text, plan, 0x0B0D_5C1C_E000_0035, 16);
    let st = fast.completion().walk_stats();
    let (listed, rows) = (st.plain_exit_listings, st.item_rows);
    assert!(listed > 0 && rows < 8_000, "{listed} plain-level exits listed without a row, {rows} item rows pushed");
}

/// Rows of one leaf item whose masks an earlier position's walk bounds (`Completion::covers`),
/// against brute force: positions of a counted string within the longest token of its end
/// (each a row of its own, whose tokens cost no more than an earlier position's), and letters
/// whose later positions cost more though they read no byte an earlier one does not
/// (`[a-z]{0,5} "!"` then `"!"* "}"`, or `[a-z]{6,8}` and eight `!` first), where an earlier
/// position's bound is below a later one's costs and must not be taken. Paths go letter by
/// letter from several first tokens; one matcher per `max_tokens` runs along each, with limit
/// walks and with exact walks.
#[test]
fn covered_rows_mask_equal_brute_force() {
    let (vocab, stop) = vocab_with(&["abcd", "ab"]);
    let find = |s: &str| (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap();
    let grammars = [
        ("counted", "root ::= \"{\\\"m\\\":\\\"\" [a-z]{0,20} \"\\\"\" (\",\\\"n\\\":\" \"1234\")? \"}\"", 24),
        ("rising", "root ::= \"\\\"\" ([a-z]{0,5} \"!\" | [a-z]{6,8} \"!!!!!!!!\") \"!\"* \"}\"", 9),
    ];
    let mut hits = 0;
    for (name, text, len) in grammars {
        let g = parse_ebnf(text, "root").unwrap();
        let mut memo = HashMap::new();
        for exact in [false, true] {
            let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
            for first in ["q", "ab", "abcd"] {
                let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                let mut budgeted: Vec<(usize, Matcher)> = (4..=40)
                    .filter_map(|n| {
                        let opts = MatcherOptions { max_tokens: Some(n), ..Default::default() };
                        let mut m = Matcher::new(cg.clone(), opts).ok()?;
                        m.set_exact_budget_walks(exact);
                        Some((n, m))
                    })
                    .collect();
                let open: &[&str] = if name == "counted" { &["{\"", "m", "\"", ":", "\""] } else { &["\""] };
                let path = open.iter().copied().chain([first]).chain(std::iter::repeat("q"));
                for (taken, tok) in path.take(open.len() + len).enumerate() {
                    let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                    let costs = costs_after(&free, &allowed, stop, &mut memo);
                    for (n, m) in &mut budgeted {
                        let remaining = *n - taken.min(*n);
                        let got: HashSet<u32> = m.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                        let want: HashSet<u32> = fitting(&costs, remaining).collect();
                        assert_eq!(
                            got, want,
                            "{name}, exact walks {exact}, first {first:?}, {taken} taken, max_tokens {n}"
                        );
                    }
                    let t = find(tok);
                    if !allowed.contains(&t) {
                        break;
                    }
                    assert!(free.accept_token(t).unwrap());
                    for (_, m) in &mut budgeted {
                        assert!(m.accept_token(t).unwrap());
                    }
                }
            }
            hits += cg.completion().walk_stats().cover_hits;
        }
    }
    assert!(hits > 0, "no mask was left as it is by a covering row");
}

/// Walks share the bytes read after a rule's completion across walks, keyed by the rule and its
/// origin row's signature (`Completion::follows`): strings end into `,`/`}` as a property and
/// into `,`/`]` as an array element, so that bytes remembered for one context would place the
/// tokens leaving a string in another on the wrong side of the limit. Several random paths on
/// one compiled grammar (its walks share what they found). With the memo keyed by the rule
/// alone it fails (`shared_follows path 2 step 6`).
#[test]
fn completion_bytes_shared_across_walks_mask_equal_brute_force() {
    let (vocab, stop) = vocab_with(&["a\"", "a\"]", "a\"}", "a\",", "\"]}"]);
    let g = schema(
        r#"{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"array","items":{"type":"string","maxLength":2}}},"required":["a","b"]}"#,
    );
    check_brute_force(&vocab, stop, vec![("shared_follows", g)], 0x5EED_F011_0B17_E5A5, 4, 12);
}

/// A walk meets the same chart row again by other trie paths (an open object's key bytes read
/// on the chart, where many reach the key body's row; the letters of a counted string's block,
/// up to the byte that crosses its end) and at other region depths (the tokens left below a
/// node differ in length): `Walk::level_of_row` takes a level it made before for the row only
/// at the same depth and with the same plain items (`Walk::row_levels`). Byte by byte along the
/// texts, at every remaining budget, with the default fit-walk cap and a cap of 3 (fit walks
/// near the limit), the masks equal those of walks that cost every token, and levels were taken
/// so. With the depth left out of the key it fails on the open keys (`cap None: 0 bytes taken,
/// remaining 4`).
#[test]
fn row_levels_met_again_mask_equal_exact_walks() {
    let (vocab, _) = large_vocab();
    let open = json_schema_to_ebnf(
        r#"{"type":"object","additionalProperties":{"type":"integer"}}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    let counted = "root ::= \"\\\"\" (b{0,3} s | b{4}) \"\\\"\" \",\" [a-z]{0,30} \"}\"\nb ::= [a-z]{6} | \"(\" b \")\"\ns ::= [a-z]{0,5} | \"(\" s \")\"";
    let cases: [(&str, &str, &[u8]); 2] = [
        ("open keys", &open, br#"{"ab":1,"cd":2,"ef":3}"#),
        ("counted", counted, br#""abqzbaqbbaqzbaqbq",abqzbaqbbaqz}"#),
    ];
    let mut hits = 0;
    for (name, text, doc) in cases {
        let g = parse_ebnf(text, "root").unwrap();
        for cap in [None, Some(3)] {
            let (fast, compared) = masks_equal_exact_walks(&g, &vocab, doc, cap, 24);
            assert!(compared > 100, "{name}: {compared} masks compared");
            hits += fast.completion().walk_stats().row_level_hits;
        }
    }
    assert!(hits > 0, "no level was taken from a row met before");
}

/// Limit walks close a row once per kernel on top of one row and copy it when the kernel comes
/// again on top of that row (`CloseMemo`, per walk; a copied row takes the identity of the row
/// it copies): an open object's key bytes and values (rows of nested rules completed inside a
/// token: `1},"`, `:[0`), generic JSON arrays of objects, a counted string's blocks, and a
/// pattern's chain of rules (`str.re_2 ::= (str.re_1 str.re_k)?`: each character completes a
/// rule begun a row before, so rows at one index on two trie paths have equal signatures but
/// items of other origins). Byte by byte along the texts, at every remaining budget, with the
/// default fit-walk cap and a cap of 3, the masks equal those of walks that cost every token
/// (which close every row), and rows were copied so. With the rows keyed by the row below's
/// signature instead of its identity it fails (`chain`).
#[test]
fn closed_rows_met_again_mask_equal_exact_walks() {
    let (vocab, _) = large_vocab();
    let open = json_schema_to_ebnf(
        r#"{"type":"object","additionalProperties":{"type":"object","properties":{"x":{"type":"array","items":{"type":"integer"}}}}}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    let chain = json_schema_to_ebnf(
        r#"{"type":"object","properties":{"v":{"type":"string","pattern":"^(\\d+\\.\\d+.*)$","maxLength":14}},"required":["v"]}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    let json = grammask_core::builtin::builtin_json_grammar();
    let counted = "root ::= \"\\\"\" (b{0,3} s | b{4}) \"\\\"\" \",\" [a-z]{0,30} \"}\"\nb ::= [a-z]{6} | \"(\" b \")\"\ns ::= [a-z]{0,5} | \"(\" s \")\"";
    let cases: [(&str, Grammar, &[u8]); 4] = [
        ("chain", parse_ebnf(&chain, "root").unwrap(), br#"{"v":"1.2abZ q-"}"#),
        ("open keys", parse_ebnf(&open, "root").unwrap(), br#"{"ab":{"x":[1,2]},"cd":{},"e":{"x":[]}}"#),
        ("json", json, br#"[{"a":[0,{"b":"q"}]},[7,-0.5],{"z":{}}]"#),
        ("counted", parse_ebnf(counted, "root").unwrap(), br#""abqzbaqbbaqzbaqbq",abqzbaqbbaqz}"#),
    ];
    let mut hits = 0;
    for (name, g, doc) in cases {
        for cap in [None, Some(3)] {
            let (fast, compared) = masks_equal_exact_walks(&g, &vocab, doc, cap, 24);
            assert!(compared > 100, "{name}: {compared} masks compared");
            hits += fast.completion().walk_stats().closed_row_hits;
        }
    }
    assert!(hits > 0, "no row was copied from a walk's memo");
}

/// A walk keeps its body-frontier lists (`Walk::front_memo`) and its exit levels' stays
/// (`Walk::exit_levels`) in arenas of its own, emptied at the next walk and kept on the thread:
/// an entry is a range of its arena. Many walks on one thread (an open object's keys, a counted
/// string's block ends, with levels keyed from each walk's first row and the default fit-walk
/// cap and one of 3), byte by byte along the texts, at every remaining budget: the masks equal
/// those of walks that cost every token, and frontier subtrees and nodes were taken from the
/// arenas so.
#[test]
fn front_lists_and_exit_levels_from_walk_arenas_equal_exact_walks() {
    let (vocab, _) = large_vocab();
    let open = json_schema_to_ebnf(
        r#"{"type":"object","properties":{"check-in":{"type":"string"},"check-out":{"type":"string"}},"additionalProperties":{"type":"string"}}"#,
        &JsonSchemaOptions { strict_mode: false, ..Default::default() },
    )
    .unwrap();
    let counted = "root ::= \"\\\"\" (b{0,3} s | b{4}) \"\\\"\"\nb ::= [a-z]{12} | \"(\" b \")\"\ns ::= [a-z]{0,11} | \"(\" s \")\"";
    let cases: [(&str, &str, &[u8]); 2] = [
        ("open keys", &open, br#"{"check-in":"ab","chx":"c","check-out":"d","q":""}"#),
        ("counted", counted, br#""abqzbaqbbaqzbaqbqazbbqbabqa"#),
    ];
    let (mut fronts, mut skips) = (0, 0);
    for (name, text, doc) in cases {
        let g = parse_ebnf(text, "root").unwrap();
        for cap in [None, Some(3)] {
            let (fast, compared) = with_exit_levels_after(0, || masks_equal_exact_walks(&g, &vocab, doc, cap, 24));
            assert!(compared > 100, "{name}: {compared} masks compared");
            let st = fast.completion().walk_stats();
            fronts += st.front_listings;
            skips += st.exit_level_skips;
        }
    }
    assert!(fronts > 0 && skips > 0, "{fronts} frontier subtrees listed, {skips} nodes took known exit levels");
}

/// A grammar without recursion has a cost ceiling (`Completion::ceiling`): no row costs more, so
/// at a limit at or above it `Budget::restrict` leaves the mask as it is without a walk. Along
/// random paths, every cost after a token is at most the ceiling, and at every remaining budget
/// up to past the ceiling the masks equal the breadth-first definition; limits above it took
/// that path (`budget::ceiling_skips`). In `rise` the token `a` costs the ceiling (the callee's
/// start), so a ceiling one too low fails there. Recursive grammars (`nested`, `expr`) have none.
#[test]
fn limits_at_the_cost_ceiling_mask_equal_brute_force() {
    let (vocab, stop) = vocab();
    let mut rng = Rng(0xCE11_1A65_0000_5EED);
    let skips = grammask_core::budget::ceiling_skips();
    let rise = ("rise", parse_ebnf("root ::= \"a\" x | \"b\"\nx ::= \"cccccccc\" \"d\"?", "root").unwrap());
    for (name, g) in grammars().into_iter().chain([rise]) {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let ceiling = cg.completion().ceiling();
        if matches!(name, "nested" | "expr") {
            assert_eq!(ceiling, grammask_core::budget::INF, "{name}");
            continue;
        }
        if !matches!(name, "object" | "string" | "rise") {
            continue;
        }
        assert!(ceiling < 64, "{name}: ceiling {ceiling}");
        let mut memo = HashMap::new();
        let mut at_ceiling = false;
        for _ in 0..3 {
            let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut taken: Vec<u32> = Vec::new();
            for step in 0..10 {
                let allowed: Vec<u32> = free.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                let now = shortest(&free, &mut memo, 64).expect("a completion");
                let costs = costs_after(&free, &allowed, stop, &mut memo);
                assert!(costs.iter().all(|c| c.1.is_some_and(|k| k <= ceiling)), "{name} step {step}: {costs:?}");
                at_ceiling |= costs.iter().any(|c| c.1 == Some(ceiling));
                for remaining in (now as usize + 1)..=(ceiling as usize + 4) {
                    let Ok(mut m) = Matcher::new(
                        cg.clone(),
                        MatcherOptions { max_tokens: Some(taken.len() + remaining), ..Default::default() },
                    ) else {
                        continue;
                    };
                    for &t in &taken {
                        assert!(m.accept_token(t).unwrap());
                    }
                    let got: HashSet<u32> = m.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect();
                    let mut want: HashSet<u32> = fitting(&costs, remaining).collect();
                    if free.is_completed() {
                        want.insert(stop);
                    }
                    assert_eq!(got, want, "{name} step {step} remaining {remaining} (now {now}, ceiling {ceiling})");
                }
                let Some(&(t, _)) = costs.get(rng.below(costs.len().max(1) as u64) as usize) else {
                    break;
                };
                assert!(free.accept_token(t).unwrap());
                taken.push(t);
            }
        }
        assert!(name != "rise" || at_ceiling, "no token of rise cost its ceiling {ceiling}");
    }
    assert!(grammask_core::budget::ceiling_skips() > skips, "no mask was left as it is at the ceiling");
}
