//! Tests of the slices: every shortcut classifies kernels exactly like the full walk.
use super::body::*;
use super::class::*;
use super::cover::*;
use super::*;
use crate::compiler::{Automata, StateId};
use crate::ebnf::parse_ebnf;
use crate::mask::classify_kernel;
use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};

/// A raw vocabulary of `toks` (ids in this order) with no stop token.
fn raw_vocab(toks: Vec<Vec<u8>>) -> Vocabulary {
    let n = toks.len();
    let options = VocabularyOptions { stop_token_ids: Some(vec![]), vocab_size: Some(n), ..Default::default() };
    Vocabulary::new(toks, VocabType::Raw, options).unwrap()
}

/// `count` pseudo-random tokens over `alphabet` (xorshift64 from `seed`), each of
/// 1..=`max_len` bytes.
fn xorshift_tokens(alphabet: &[u8], count: usize, max_len: u64, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = crate::test_rng::XorShift(seed);
    (0..count).map(|_| (0..=(rng.0 % max_len)).map(|_| alphabet[rng.index(alphabet.len())]).collect()).collect()
}

/// The shortcut classifies every kernel state exactly like the full walk, on tokens that
/// probe each edge of the body automaton.
#[test]
fn shortcut_equals_full_walk() {
    let toks: Vec<&[u8]> = vec![
        b"a",
        b"ab",
        b"\"",
        b"a\"",
        b"\"}",
        b"a\"}",
        b"\\",
        b"\\\"",
        b"\\u",
        b"\\u00",
        b"\\u0041",
        b"\\ud83d",
        b"\\n",
        b"\\x",
        b"\n",
        b"a\n",
        b"\t",
        b" ",
        b"\x7f",
        "\u{e9}".as_bytes(),
        &[0xC3],
        &[0xA9],
        &[0xA9, b'a'],
        &[0xE2, 0x82],
        &[0x82, 0xAC],
        &[0xF0, 0x9F],
        &[0xED, 0xA0, 0x80],
        &[0xFF],
        b"}",
        b"{\"",
        b"x\"y",
        b"\\\\",
        b"0",
        b"00",
        b"a0",
        b"0a",
        b"000",
        b"0\"",
        b"0a0",
        b"\":",
        b"a\":1",
        b"0a\n",
        b"a\na",
        b"0a\n0",
        b"0\n",
        b"\\/",
        b"a\\/b",
        b"\\/\"",
    ];
    let encoded: Vec<Vec<u8>> = toks.iter().map(|t| t.to_vec()).collect();
    let n = encoded.len();
    let vocab = raw_vocab(encoded);
    let trie = TokenTrie::new(&vocab);
    let body = BodySlice::new(&trie, n);
    // A flat rule too large to be inlined into its several callers (it is called, not
    // copied, so the cover search must follow a call that is not a tail call).
    let mut seed = 12345u32;
    let literals: Vec<String> = (0..150)
        .map(|_| {
            let w: String = (0..6)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    char::from(b'g' + (seed >> 16) as u8 % 20)
                })
                .collect();
            format!("\"{w}\"")
        })
        .collect();
    let flat = format!("c ::= [^\"\\\\0-9\\u0000-\\u001f] | \"\\\\\" [\"\\\\/bfnrt] | {}", literals.join(" | "));
    let jc = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\/bfnrt] | "\\u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}) | "\\u" [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}"#;
    let grammars = [
        format!("root ::= \"\\\"\" json_char* \"\\\"}}\"\n{jc}"),
        format!("root ::= \"\\\"\" (\"ab\" | [^\"a] json_char* | \"a\" ([^\"b] json_char*)?) \"\\\"\"\n{jc}"),
        // A shared rule that can end inside string text, followed by dead bytes or a quote.
        format!("root ::= \"\\\"\" body \"\\n\" | \"}}\" body \"\\\"}}\"\nbody ::= json_char* | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" json_char*\n{jc}"),
        // Regex-like rules that call themselves or another rule last (tail calls), long
        // enough not to be inlined.
        format!("root ::= \"{{\\\"\" k \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\"\nk ::= [^\"\\\\0-9\\u0000-\\u001f]* ([0-9] ([^\"\\\\0-9\\u0000-\\u001f] k | [0-9] ([^\"\\\\0-9\\u0000-\\u001f] k | [0-9] ([^\"\\\\0-9\\u0000-\\u001f] k | [0-9] rest))))\nm ::= [^\"\\\\a\\u0000-\\u001f] rest | \"a\" ([^\"\\\\b\\u0000-\\u001f] rest | \"b\" ([^\"\\\\c\\u0000-\\u001f] rest | \"c\" rest))\nrest ::= json_char*\n{jc}"),
        format!("root ::= \"{{\\\"\" k \"\\\":1}}\" | \"[\\\"\" k \"\\\"]\"\nk ::= c* (\"0\" (c k | \"0\" (c k | \"0\" rest)))?\n{flat}\nrest ::= json_char*\n{jc}"),
        // Calls two deep (`m` calls `e`, which calls the flat `c`, kept a rule by its second caller):
        // all body text stays inside.
        format!("root ::= \"{{\\\"\" m \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\" | \"<\" c \">\"\nm ::= e m | \"\"\ne ::= c | [0-9] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" e\n{flat}"),
        // The same, but `e` may read a dead byte after `c` returns (a final return state with
        // an edge is no tail call): not covered.
        format!("root ::= \"{{\\\"\" m \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\" | \"<\" c \">\"\nm ::= e m | \"\"\ne ::= c \"\\n\"? | [0-9] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" e\n{flat}"),
        // A dead byte read two returns up (after `c` returns into `e`, and `e` into `m`).
        format!("root ::= \"{{\\\"\" m \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\" | \"<\" c \">\"\nm ::= e \"\\n\"? m | \"\"\ne ::= c \"x\"? | [0-9] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" e\n{flat}"),

        // Canonical spelling (the JSON Schema default): no `\/`, fewer `\u` escapes.
        format!("root ::= \"\\\"\" json_char* \"\\\"}}\" | \"[\" json_char* \"]\"\n{CANONICAL_JSON_CHAR}"),
    ];
    let mut covered = 0;
    let mut covered_final = 0;
    let mut covered_nested = 0;
    let mut covered_tail = 0;
    let mut covered_call = 0;
    let mut covered_deep = 0;
    let mut covered_canonical = 0;
    for src in &grammars {
        let g = parse_ebnf(src, "root").unwrap();
        let a = Automata::build(&g).unwrap();
        for s in 0..a.states().len() {
            let s = StateId(s as u32);
            covered += usize::from(BodySlice::covers(&a, s, &CoverMemo::default()).is_some());
            covered_final += usize::from(BodySlice::covers(&a, s, &CoverMemo::default()).is_some_and(|c| c.may_end));
            covered_nested += usize::from(BodySlice::covers(&a, s, &CoverMemo::default()).is_some_and(|c| c.walk_dead));
            covered_tail += usize::from(
                BodySlice::covers(&a, s, &CoverMemo::default()).is_some()
                    && !a.rule_edges(s).is_empty()
                    && tail_calls_only(&a, s),
            );
            covered_call += usize::from(
                BodySlice::covers(&a, s, &CoverMemo::default()).is_some_and(|c| !c.walk_dead)
                    && !tail_calls_only(&a, s),
            );
            let m = a.rule_name(a.state(s).rule) == "m" && !a.rule_edges(s).is_empty();
            covered_deep += usize::from(m && BodySlice::covers(&a, s, &CoverMemo::default()).is_some());
            covered_canonical += usize::from(
                src.contains(CANONICAL_JSON_CHAR) && BodySlice::covers(&a, s, &CoverMemo::default()).is_some(),
            );
            let full = classify_kernel(&a, &trie, n, s, None, None, None).unwrap();
            let fast = classify_kernel(&a, &trie, n, s, Some(&body), None, None).unwrap();
            assert_eq!(full.accepted, fast.accepted, "state {s:?} in {src}");
            let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
                k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
            };
            assert_eq!(spell(&full), spell(&fast), "state {s:?}");
        }
    }
    assert!(covered >= 2, "the shortcut applied to no state");
    assert!(covered_final >= 1, "no covered state could end its rule");
    assert!(covered_nested >= 1, "no covered state reads its token inside a referenced rule");
    assert!(covered_tail >= 1, "the shortcut applied to {covered_tail} states with tail calls");
    assert!(covered_call >= 1, "the shortcut applied to {covered_call} states calling a flat rule");
    assert!(covered_deep >= 1, "the shortcut applied to {covered_deep} states with nested calls");
    assert!(covered_canonical >= 2, "the shortcut applied to {covered_canonical} canonical string states");
}

/// `json_char` as the JSON Schema converter spells it by default (`spelling="canonical"`): no
/// `\/`, `\u` only for characters without a short or raw spelling.
const CANONICAL_JSON_CHAR: &str = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\bfnrt] | "\\u00" ("0" [0-7BEFbef] | "1" [0-9A-Fa-f]) | "\\u" ("007" [Ff] | "00" [89A-Fa-f] [0-9A-Fa-f] | "0" [1-9A-Fa-f] [0-9A-Fa-f]{2} | [1-9A-CEFa-cef] [0-9A-Fa-f]{3} | [Dd] [0-7] [0-9A-Fa-f]{2}) | "\\u" [Dd] [89ABab] [0-9A-Fa-f]{2} "\\u" [Dd] [C-Fc-f] [0-9A-Fa-f]{2}"#;

/// The counted-body shortcut (`json_char{m,n}` positions) classifies every kernel state it
/// applies to exactly like the full walk, with the same FOLLOW sets.
#[test]
fn counted_shortcut_equals_full_walk() {
    use crate::follow::{follow_sets, nullable_states};
    use crate::mask::{classify_kernel_budget, Shortcuts};
    let toks: Vec<&[u8]> = vec![
        b"a",
        b"ab",
        b"abc",
        b"abcd",
        b"abcde",
        b"abcdef",
        b" ",
        b"  ",
        b"    ",
        b"\"",
        b"a\"",
        b"ab\"",
        b"abc\"",
        b"\",",
        b"\"}",
        b"a\"}",
        b"\\",
        b"a\\",
        b"\\n",
        b"a\\n",
        b"\\n\\t",
        b"\\u",
        b"a\\u00",
        b"\\u0041",
        b"\\u0041b",
        b"\\x",
        "\u{e9}".as_bytes(),
        "\u{e9}\u{e9}".as_bytes(),
        "a\u{e9}".as_bytes(),
        "\u{20ac}".as_bytes(),
        "ab\u{20ac}".as_bytes(),
        "\u{1F600}".as_bytes(),
        &[0xC3],
        &[b'a', 0xC3],
        &[b'a', b'b', 0xE2, 0x82],
        &[0xA9],
        &[0xFF],
        b"\n",
        b"a\n",
        b"}",
        b"xyz\",",
        b"1",
        b"\\/",
        b"a\\/b",
        b"\\/\"",
    ];
    let encoded: Vec<Vec<u8>> = toks.iter().map(|t| t.to_vec()).collect();
    let n = encoded.len();
    let vocab = raw_vocab(encoded);
    let trie = TokenTrie::new(&vocab);
    let body = BodySlice::new(&trie, n);
    let jc = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\/bfnrt] | "\\u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}) | "\\u" [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}"#;
    let grammars = [
        format!("root ::= \"{{\" s \"}}\" | \"[\" s \",\" s \"]\"\ns ::= \"\\\"\" json_char{{0,3}} \"\\\"\"\n{jc}"),
        format!("root ::= \"\\\"\" json_char{{2,5}} \"\\\"\" | \"\\\"\" json_char{{0,1}} \"\\\"}}\"\n{jc}"),
        // Longer than any token: every position before the last few accepts the whole slice.
        format!("root ::= \"\\\"\" json_char{{0,12}} \"\\\"\"\n{jc}"),
        // The rule ends inside the string, on a chain shorter than some token: not a counted body.
        format!("root ::= \"\\\"\" t \"\\\"\"\nt ::= json_char{{0,3}}\n{jc}"),
        // Rules that end inside the string on chains longer than any token (a long `maxLength`'s
        // blocks): counted bodies that end, up to the positions within a token of the chain's end.
        format!("root ::= \"\\\"\" b* t \"\\\"\" \"}}\"?\nb ::= json_char{{12}}\nt ::= json_char{{0,11}}\n{jc}"),
        format!("root ::= \"[\\\"\" t \"\\\"]\"\nt ::= json_char{{3,20}}\n{jc}"),
        // As `counted_chars` builds `maxLength` past its long-run bound (blocks of 300 here, too
        // large to be inlined).
        format!("root ::= \"\\\"\" (b{{0,2}} t | b{{3}} json_char{{0,4}}) \"\\\"\"\nb ::= json_char{{300}}\nt ::= json_char{{0,299}}\n{jc}"),
        // A byte no string holds read after the callees end: the frontier's dead nodes are walked.
        format!("root ::= \"\\\"\" b{{0,1}} t \"\\n}}\"\nb ::= json_char{{300}}\nt ::= json_char{{0,299}}\n{jc}"),
        // Canonical spelling: counted positions must take the shortcut too.
        format!("root ::= \"\\\"\" json_char{{1,12}} \"\\\"\"\n{CANONICAL_JSON_CHAR}"),
    ];
    let mut counted = 0;
    let mut counted_canonical = 0;
    let mut ending = 0;
    let mut calling = 0;
    let mut capacities = std::collections::BTreeSet::new();
    for src in &grammars {
        let g = parse_ebnf(src, "root").unwrap();
        let a = Automata::build(&g).unwrap();
        let follow = follow_sets(&a, &nullable_states(&a));
        for s in 0..a.states().len() {
            let s = StateId(s as u32);
            let f = follow[a.state(s).rule.index()];
            let max = trie.max_depth;
            let cap = |r| body_capacity(r, max, |r| body_level(&a, r), |r| a.state(r).is_final);
            let Some(c) = cap(s).or_else(|| counted_calls(&a, s, max, cap)) else {
                continue;
            };
            counted += 1;
            ending += usize::from(c.ends);
            calling += usize::from(c.calls);
            counted_canonical += usize::from(src.contains(CANONICAL_JSON_CHAR));
            capacities.insert(c.chars);
            let mut never = || false;
            let full = Shortcuts { follow: Some(&f), ..Default::default() };
            let full = classify_kernel_budget(&a, &trie, n, s, full, usize::MAX, &mut never).unwrap().unwrap();
            let fast = Shortcuts { body: Some(&body), follow: Some(&f), capacity: Some(c), ..Default::default() };
            let fast = classify_kernel_budget(&a, &trie, n, s, fast, usize::MAX, &mut never).unwrap().unwrap();
            assert_eq!(full.accepted, fast.accepted, "state {s:?} capacity {c:?} in {src}");
            let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
                k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
            };
            assert_eq!(spell(&full), spell(&fast), "state {s:?} capacity {c:?} in {src}");
        }
    }
    assert!(counted >= 12, "the counted shortcut applied to {counted} states");
    assert!(counted_canonical >= 12, "the counted shortcut applied to {counted_canonical} canonical states");
    assert!(ending >= 12, "the counted shortcut applied to {ending} states that may end");
    assert!(calling >= 2, "the counted shortcut applied to {calling} states that call counted bodies");
    assert!(
        capacities.contains(&0) && capacities.contains(&1) && capacities.contains(&trie.max_depth),
        "{capacities:?}"
    );
}

/// `add_within` returns exactly the slice tokens that begin at most `c` characters, past the
/// cumulative sets too.
#[test]
fn tokens_within_capacity() {
    let mut toks: Vec<Vec<u8>> = vec![b"a".to_vec(), b"\\n".to_vec(), "\u{e9}x".as_bytes().to_vec(), vec![b'a', 0xE2]];
    toks.extend((30..45).map(|k| vec![b' '; k]));
    toks.push([b"x".repeat(40), b"\"".to_vec()].concat());
    let n = toks.len();
    let vocab = raw_vocab(toks.clone());
    let trie = TokenTrie::new(&vocab);
    let body = BodySlice::new(&trie, n);
    // Characters begun, counted directly on the bytes (None: not body text).
    let begun = |t: &[u8]| -> Option<u32> {
        let (mut b, mut k) = (0u8, 0u32);
        for &x in t {
            k += u32::from(b == 0);
            match body_step(b, x) {
                Body::To(nb) => b = nb,
                _ => return None,
            }
        }
        Some(k)
    };
    assert_eq!(begun(b"\\n"), Some(1));
    assert_eq!(begun(&[b'a', 0xE2]), Some(2));
    for c in 0..50u32 {
        let mut got = Bitset::new(n);
        body.add_within(c, &mut got);
        for (t, bytes) in toks.iter().enumerate() {
            assert_eq!(got.get(t), begun(bytes).is_some_and(|k| k <= c), "token {t} capacity {c}");
        }
    }
}

/// The free-text class shortcut classifies every kernel state like the full walk.
#[test]
fn class_shortcut_equals_full_walk() {
    let toks: Vec<&[u8]> = vec![
        b"a",
        b"ab",
        b"a b",
        b"|",
        b"a|",
        b"a|b",
        b"|x",
        b"\n",
        b"ab\n",
        b"\n2",
        b"x\n|",
        b"\t",
        b"\x00",
        "\u{e9}".as_bytes(),
        "a\u{e9}b".as_bytes(),
        &[0xC3],
        &[0xA9],
        &[0xA9, b'a'],
        &[0xE2, 0x82],
        &[0xFF],
        b"k=v",
        b" k=",
        b"=",
        b"\"",
        b"a\"",
        b"12",
        b"1-2",
    ];
    let encoded: Vec<Vec<u8>> = toks.iter().map(|t| t.to_vec()).collect();
    let n = encoded.len();
    let vocab = raw_vocab(encoded);
    let trie = TokenTrie::new(&vocab);
    let grammars = [
        "root ::= line+\nline ::= [0-9]+ \" \" msg (\"|\" [a-z]+ \"=\" [^ \\n|]+)? \"\\n\"\nmsg ::= [^\\n|]+",
        "root ::= \"<\" [^\\n]* \"\\n\" | \"{\" text \"|\"\ntext ::= [^|\\u0000-\\u001f]* | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" [a-z]*",
    ];
    let mut covered = 0;
    for src in grammars {
        let g = parse_ebnf(src, "root").unwrap();
        let a = Automata::build(&g).unwrap();
        for s in 0..a.states().len() {
            let s = StateId(s as u32);
            let Some(ascii) = ClassSlice::loop_class(&a, s) else { continue };
            let cs = ClassSlice::new(&trie, n, ascii);
            covered += usize::from(ClassSlice::covers(&a, s, ascii, &CoverMemo::default()));
            let full = classify_kernel(&a, &trie, n, s, None, None, None).unwrap();
            let fast = classify_kernel(&a, &trie, n, s, None, None, Some(&cs)).unwrap();
            assert_eq!(full.accepted, fast.accepted, "state {s:?} in {src}");
            let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
                k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
            };
            assert_eq!(spell(&full), spell(&fast), "state {s:?} in {src}");
        }
    }
    assert!(covered >= 2, "the class shortcut applied to {covered} states");
}

/// A string body inside a larger rule (a structural tag's argument value) is its own next level:
/// its capacity is unbounded after one level, not after following the loop `max_chars` times.
#[test]
fn looping_body_capacity_reads_one_level() {
    let g =
        parse_ebnf(r#"root ::= "{\"q\": \"" ([ !#-\[\]-\U0010FFFF] | "\\" ["\\bfnrt])* "\"}" [ ]*"#, "root").unwrap();
    let a = Automata::build(&g).unwrap();
    let mut looping = 0;
    for s in (0..a.states().len() as u32).map(StateId) {
        let mut calls = 0;
        let cap = body_capacity(
            s,
            256,
            |r| {
                calls += 1;
                body_level(&a, r)
            },
            |r| a.state(r).is_final,
        );
        if body_level(&a, s) == Some(Level::Next(s)) {
            assert_eq!((cap.map(|c| c.chars), calls), (Some(256), 1), "state {}", s.0);
            looping += 1;
        }
    }
    assert_eq!(looping, 1);
}

/// The class slice taken from a run index ([`RunIndex::class_slice`]) equals the one walked for
/// itself ([`ClassSlice::new`]): same tokens, same frontier nodes and paths, on bytes that probe
/// ASCII in and out of the class, UTF-8 sequences cut short or broken, and deep breaks.
#[test]
fn class_slice_from_run_index() {
    let mut toks: Vec<Vec<u8>> = [
        &b"a"[..],
        b"ab",
        b"a b",
        b"|",
        b"a|",
        b"a|b",
        b"|x",
        b"\n",
        b"ab\n",
        b"x\n|",
        b"\x00",
        b"{",
        b"<",
        b"a<b{c",
        b"\"",
        b" \"",
        "\u{e9}".as_bytes(),
        "a\u{e9}b|".as_bytes(),
        "\u{1F600}x".as_bytes(),
        &[0xC3],
        &[0xA9],
        &[0xA9, b'a'],
        &[0xE2, 0x82],
        &[0xE2, 0x82, b'|'],
        &[0xC3, 0x28],
        &[0xFF],
        &[b'a', 0xFF, b'b'],
    ]
    .iter()
    .map(|t| t.to_vec())
    .collect();
    // Pseudo-random tokens over a small alphabet of class and non-class bytes.
    let alphabet = [b'a', b'|', b'\n', b' ', b'<', 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xFF];
    toks.extend(xorshift_tokens(&alphabet[..], 400, 7, 0x2545_F491_4F6C_DD1Du64));
    toks.sort();
    toks.dedup();
    // Tokens of the same bytes share a trie node: the walk writes all of their leads.
    toks.extend([b"a|".to_vec(), b"a|".to_vec(), "a\u{e9}b|".as_bytes().to_vec()]);
    let n = toks.len();
    let vocab = raw_vocab(toks);
    let trie = TokenTrie::new(&vocab);
    assert!(trie.nodes.iter().any(|m| m.tok_end - m.tok_start == 3), "no node of three tokens");
    let all = u128::MAX;
    let not = |bytes: &[u8]| bytes.iter().fold(all, |c, &b| c & !(1u128 << b));
    let mut frontier_nodes = 0;
    let classes = [all, not(b"|"), not(b"\n|"), not(b"<{"), not(b"\" "), not(b"a"), 1 << b'a' | 1 << b' '];
    // Every class alone, then all of them, ASCII-only and UTF-8, in one walk.
    for ascii in classes {
        check_run_indexes(&trie, n, &[(ascii, false)]);
        check_run_indexes(&trie, n, &[(ascii, true)]);
    }
    let mixed: Vec<(u128, bool)> = classes.iter().flat_map(|&a| [(a, true), (a, false)]).collect();
    check_run_indexes(&trie, n, &mixed);
    for ascii in classes {
        let walked = ClassSlice::new(&trie, n, ascii);
        let derived = RunIndex::new(&trie, n, ascii, true).class_slice(&trie);
        assert_eq!(walked.ascii, derived.ascii);
        assert_eq!(walked.slice, derived.slice, "class {ascii:x}");
        let parts = |c: &ClassSlice| -> Vec<(u32, Vec<u8>, bool)> {
            c.frontier.iter().map(|f| (f.node, f.path.to_vec(), f.dead)).collect()
        };
        assert_eq!(parts(&walked), parts(&derived), "class {ascii:x}");
        frontier_nodes += walked.frontier.len();
    }
    assert!(frontier_nodes > 50, "only {frontier_nodes} frontier nodes probed");
}

/// The shared run bases are the run indexes of their own classes (every character, every ASCII
/// byte), and one [`RunBases`] serves every class derived from it (checked against the
/// definitions by `check_run_indexes`), on tokens that break UTF-8 at every place `U`
/// resynchronizes (a lone continuation byte, a sequence cut short by ASCII or by a first byte)
/// and classes that refuse bytes at every depth.
#[test]
fn run_indexes_from_shared_bases() {
    let alphabet = [b'a', b'b', b'|', b' ', b'\n', 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0xFF];
    let mut toks = xorshift_tokens(&alphabet[..], 600, 9, 0x9E37_79B9_7F4A_7C15u64);
    toks.extend(["a\u{e9}|\u{20ac}b".as_bytes().to_vec(), vec![0xA9, 0xA9, b'a'], vec![0xE2, 0xC3, 0xA9, b'|']]);
    toks.sort();
    toks.dedup();
    let n = toks.len();
    let trie = TokenTrie::new(&raw_vocab(toks));
    let bases = RunBases::new(&trie, n);
    for (base, utf8) in [(&bases.utf8, true), (&bases.ascii, false)] {
        let walked = RunIndex::new(&trie, n, u128::MAX, utf8);
        assert_eq!(base.lead, walked.leads(), "base leads, utf8 {utf8}");
        assert_eq!(base.whole, *walked.whole, "base lead-0 tokens, utf8 {utf8}");
        let mut breaks = 0;
        for (m, node) in trie.nodes.iter().enumerate() {
            let got = base.breaks[m / 64] >> (m % 64) & 1 == 1;
            if got {
                breaks += 1;
                let (_, lead, _) = walked.next_break(&trie, m, m + 1).expect("a break of the walked index");
                assert_eq!(usize::from(base.parent_lead[m]), lead, "parent lead of break {m}, utf8 {utf8}");
                let low = base.low_breaks[m / 64] >> (m % 64) & 1 == 1;
                assert_eq!(low, lead < LEAD_LISTS, "low break {m}, utf8 {utf8}");
            } else {
                assert!(walked.next_break(&trie, m, m + 1).is_none(), "break {m}, utf8 {utf8}");
            }
            let parent = node.parent;
            if parent != u32::MAX {
                let p = &trie.nodes[parent as usize];
                let plead = if p.tok_end > p.tok_start { Some(base.lead[p.tok_start as usize]) } else { None };
                if let Some(l) = plead {
                    assert_eq!(base.parent_lead[m], l, "parent lead of node {m}, utf8 {utf8}");
                }
            }
        }
        assert!(breaks > 20, "only {breaks} base breaks, utf8 {utf8}");
    }
    let not = |bytes: &[u8]| bytes.iter().fold(u128::MAX, |c, &b| c & !(1u128 << b));
    let ascii_classes = [u128::MAX, not(b"|"), not(b" \n"), 1 << b'a' | 1 << b'b', 1 << b'|', 0];
    let classes: Vec<(u128, bool)> = ascii_classes.iter().flat_map(|&a| [(a, true), (a, false)]).collect();
    check_run_indexes(&trie, n, &classes);
}

/// Run indexes of a vocabulary with nested large subtrees (every string of `a`, `b`, `|` up to 8
/// bytes, plus some UTF-8): the subtree run sets (each the union of its large children's) and
/// the rest of each index match their definitions.
#[test]
fn run_indexes_of_nested_large_subtrees() {
    let mut toks: Vec<Vec<u8>> = vec![Vec::new()];
    let mut last: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..8 {
        last = last.iter().flat_map(|p| [b'a', b'b', b'|'].map(|x| [&p[..], &[x]].concat())).collect();
        toks.extend(last.iter().cloned());
    }
    toks.remove(0);
    toks.extend(["\u{e9}a".as_bytes().to_vec(), "a\u{e9}".as_bytes().to_vec(), vec![b'a', 0xC3], vec![0xA9, b'b']]);
    let n = toks.len();
    let trie = TokenTrie::new(&raw_vocab(toks));
    let large = super::run_index::large_subtrees(&trie);
    let nested = large.iter().filter(|&&i| large.contains(&(trie.nodes[i].parent as usize))).count();
    assert!(nested >= 6, "{} large subtrees, {nested} below another", large.len());
    let ab = 1u128 << b'a' | 1 << b'b';
    let classes = [(ab, false), (ab, true), (1 << b'a', false), (u128::MAX, false), (!(1u128 << b'|'), true)];
    check_run_indexes(&trie, n, &classes);
}

/// Run indexes of random classes over a random vocabulary with long tokens (leads and parent
/// leads past [`LEAD_LISTS`] and at many depths): every build ([`RunIndex::new`],
/// [`RunIndex::from_bases`], [`RunIndex::from_inside`], and [`RunIndex::of_class`]'s choice)
/// matches the definitions read off each path (`check_run_indexes`).
#[test]
fn run_indexes_of_random_classes() {
    let alphabet = [b'a', b'b', b'c', b'0', b'1', b' ', b'_', b'\n', b'.', 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xBF];
    let mut toks = xorshift_tokens(&alphabet[..], 1500, 14, 0xD1B5_4A32_D192_ED03u64);
    toks.sort();
    toks.dedup();
    let n = toks.len();
    let trie = TokenTrie::new(&raw_vocab(toks));
    assert!(trie.max_depth >= 12, "max depth {}", trie.max_depth);
    let mut rng = crate::test_rng::XorShift(0x2545_F491_4F6C_DD1D);
    let ascii_bytes: Vec<u8> = alphabet.iter().copied().filter(|&x| x < 0x80).collect();
    let classes: Vec<(u128, bool)> = (0..12)
        .map(|k| {
            let picked = ascii_bytes.iter().filter(|_| rng.below(3) > 0).fold(0u128, |c, &x| c | 1 << x);
            // Some classes with bytes outside the alphabet too (nodes of none of them).
            let extra = if k % 3 == 0 { 1u128 << b'z' | 1 << b'9' } else { 0 };
            (picked | extra, k % 2 == 0)
        })
        .collect();
    check_run_indexes(&trie, n, &classes);
    let bases = RunBases::new(&trie, n);
    let chosen: Vec<RunIndex> =
        classes.iter().map(|&(ascii, utf8)| RunIndex::of_class(&trie, n, &bases, ascii, utf8)).collect();
    for (ri, want) in chosen.iter().zip(classes.iter().map(|&(ascii, utf8)| RunIndex::new(&trie, n, ascii, utf8))) {
        assert_eq!(ri.leads(), want.leads(), "leads of class {:x} utf8 {}", want.ascii, want.utf8);
        assert_eq!(*ri.whole, *want.whole);
        for m in 0..trie.nodes.len() {
            assert_eq!(ri.next_break(&trie, m, m + 1), want.next_break(&trie, m, m + 1), "break {m}");
        }
        for l in 0..LEAD_LISTS {
            assert_eq!(ri.breaks_of_lead(l, 0, trie.nodes.len()), want.breaks_of_lead(l, 0, trie.nodes.len()));
        }
    }
}

/// Checks [`RunIndex::new`] for each of `classes` (a walk per class), and
/// [`RunIndex::from_bases`] for each of them (from one [`RunBases`]), against their definitions,
/// read off each path directly: a token's lead is the smallest `k` such that its bytes from `k`
/// on are read from the class start, and a node is a break node iff its path is not read from
/// its parent's lead.
fn check_run_indexes(trie: &TokenTrie, n: usize, classes: &[(u128, bool)]) {
    let mut built: Vec<RunIndex> = classes.iter().map(|&(ascii, utf8)| RunIndex::new(trie, n, ascii, utf8)).collect();
    let bases = RunBases::new(trie, n);
    built.extend(classes.iter().map(|&(ascii, utf8)| RunIndex::from_bases(trie, n, &bases, ascii, utf8)));
    // ASCII-only classes from the nodes of their bytes too (`utf8` classes walked once more).
    built.extend(classes.iter().map(|&(ascii, utf8)| {
        if utf8 {
            RunIndex::new(trie, n, ascii, true)
        } else {
            RunIndex::from_inside(trie, n, &bases, ascii)
        }
    }));
    for (k, (&(ascii, utf8), ri)) in classes.iter().cycle().zip(&built).enumerate() {
        assert_eq!((ri.ascii, ri.utf8), (ascii, utf8));
        let reads = |p: &[u8]| -> bool {
            let mut st = 0u8;
            for &x in p {
                st = match (utf8, class_step(ascii, st, x)) {
                    (false, _) if x < 0x80 && ascii >> x & 1 == 1 => 0,
                    (true, Body::To(next)) => next,
                    _ => return false,
                };
            }
            true
        };
        let lead = |p: &[u8]| (0..=p.len()).find(|&k| reads(&p[k..])).unwrap();
        let path = |i: usize| -> Vec<u8> {
            let mut p = Vec::new();
            let mut m = i as u32;
            while m != u32::MAX {
                p.push(trie.nodes[m as usize].byte);
                m = trie.nodes[m as usize].parent;
            }
            p.reverse();
            p
        };
        let mut breaks = Vec::new();
        let mut whole = Bitset::new(n);
        let mut token_leads = vec![0; trie.tokens.len()];
        for (i, node) in trie.nodes.iter().enumerate() {
            let p = path(i);
            for j in node.tok_start..node.tok_end {
                token_leads[j as usize] = lead(&p);
                assert_eq!(usize::from(ri.leads()[j as usize]), lead(&p), "lead of {p:?}, class {ascii:x} utf8 {utf8}");
                if lead(&p) == 0 {
                    whole.set(trie.tokens[j as usize] as usize);
                }
            }
            let plead = lead(&p[..p.len() - 1]);
            if !reads(&p[plead..]) {
                breaks.push((i, plead, node.byte));
            }
        }
        let mut indexed: Vec<(usize, usize, u8)> = Vec::new();
        while let Some(b) = ri.next_break(trie, indexed.last().map_or(0, |b| b.0 + 1), trie.nodes.len()) {
            indexed.push(b);
        }
        assert_eq!(indexed, breaks, "break nodes of class {ascii:x} utf8 {utf8}");
        let kept = if utf8 { breaks.len() } else { trie.nodes.len() };
        assert_eq!(ri.break_leads_kept(), kept, "parent leads kept, class {ascii:x} utf8 {utf8}");
        // Windows of the node bitset that start and end inside and across its 64-node words.
        let nodes = trie.nodes.len();
        for (start, end) in (0..nodes).step_by(7).map(|s| (s, (s + s % 150).min(nodes))) {
            let want = breaks.iter().find(|b| (start..end).contains(&b.0)).copied();
            assert_eq!(ri.next_break(trie, start, end), want, "next break in {start}..{end}");
        }
        // The lead lists and the root's breaks by byte, each in trie order.
        for l in 0..LEAD_LISTS {
            let want: Vec<(u32, u8)> = breaks.iter().filter(|b| b.1 == l).map(|b| (b.0 as u32, b.2)).collect();
            let (got_nodes, got_bytes) = ri.breaks_of_lead(l, 0, nodes);
            let got: Vec<(u32, u8)> = got_nodes.iter().copied().zip(got_bytes.iter().copied()).collect();
            assert_eq!(got, want, "breaks of lead {l}, class {ascii:x} utf8 {utf8}");
        }
        let mut by_byte: Vec<(u8, Vec<u32>)> = Vec::new();
        for &(m, _, x) in breaks.iter().filter(|b| b.1 == 0) {
            match by_byte.iter_mut().find(|(y, _)| *y == x) {
                Some((_, v)) => v.push(m as u32),
                None => by_byte.push((x, vec![m as u32])),
            }
        }
        by_byte.sort_by_key(|(x, _)| *x);
        let got: Vec<(u8, Vec<u32>)> = ri.root_breaks_by_byte().iter().map(|(x, v)| (*x, v.to_vec())).collect();
        assert_eq!(got, by_byte, "root breaks by byte, class {ascii:x} utf8 {utf8}");
        assert!(!breaks.is_empty());
        assert_eq!(*ri.whole, whole, "lead-0 tokens of class {ascii:x} utf8 {utf8}");
        // The run sets of large subtrees (ASCII classes): the tokens below each node (not on it)
        // whose lead is at most its depth. They are built as walks ask for them: parents first
        // (each from its tokens), or for every other index children first (each from its large
        // children's sets).
        let mut large = super::run_index::large_subtrees(trie);
        if k % 2 == 1 {
            large.reverse();
        }
        for i in large {
            let got = ri.subtree_runs(trie, i);
            if utf8 {
                assert!(got.is_none());
                continue;
            }
            let (d, end) = (trie.nodes[i].depth as usize, trie.nodes[i].subtree_end as usize);
            let mut want = Bitset::new(n);
            let below = trie.first_token[i + 1] as usize..trie.first_token[end] as usize;
            for (&l, &t) in token_leads[below.clone()].iter().zip(&trie.tokens[below]) {
                if l <= d {
                    want.set(t as usize);
                }
            }
            assert_eq!(*got.expect("at most 64 large subtrees"), want, "runs below node {i}, class {ascii:x}");
        }
    }
}

/// [`BodySlice::new`]'s single walk gives the slice and frontier of the generic slice walk
/// ([`build_slice`] with [`body_step`]) and the cumulative sets of the characters each token begins
/// ([`chars_begun`]), on tokens that probe escapes, quotes, UTF-8 and long bodies.
#[test]
fn body_slice_one_walk() {
    let mut toks: Vec<Vec<u8>> = vec![
        b"a".to_vec(),
        b"\\n".to_vec(),
        b"\\u0041".to_vec(),
        b"\\/".to_vec(),
        b"\\x".to_vec(),
        b"\"".to_vec(),
        b"a\"".to_vec(),
        b"a\"}".to_vec(),
        b"\n".to_vec(),
        "\u{e9}x".as_bytes().to_vec(),
        vec![b'a', 0xE2],
        vec![0xE2, 0x82, 0xAC],
        vec![0xC3, 0x28],
        vec![0xFF],
    ];
    toks.extend((1..45).map(|k| vec![b' '; k]));
    toks.extend((30..40).map(|k| [b"x".repeat(k), b"\"".to_vec()].concat()));
    toks.sort();
    toks.dedup();
    let n = toks.len();
    let vocab = raw_vocab(toks);
    let trie = TokenTrie::new(&vocab);
    let body = BodySlice::new(&trie, n);
    let (slice, frontier) = build_slice(&trie, n, body_step);
    assert_eq!(body.slice, slice);
    let parts = |f: &[FrontierNode]| -> Vec<(u32, Vec<u8>, bool)> {
        f.iter().map(|f| (f.node, f.path.to_vec(), f.dead)).collect()
    };
    assert_eq!(parts(&body.frontier), parts(&frontier));
    assert!(frontier.iter().any(|f| f.dead) && frontier.iter().any(|f| !f.dead));
    let counts = chars_begun(&trie);
    for c in 0..50u32 {
        let mut got = Bitset::new(n);
        body.add_within(c, &mut got);
        let mut want = Bitset::new(n);
        for &(t, k) in &counts {
            if k <= c {
                want.set(t as usize);
            }
        }
        assert_eq!(got, want, "capacity {c}");
    }
}

/// Cover searches sharing one memo (as a compiled grammar's do) give every state the verdict a
/// search from scratch gives it, whichever order the states come in: string bodies of regex
/// strings with a length (every position a new state, all meeting the same sets), open-object
/// keys, canonical bodies, calls into a shared flat rule, and free text of one class.
#[test]
fn memoized_cover_searches_equal_fresh_ones() {
    use crate::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let schema = r#"{"type": "object", "properties": {
        "t": {"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{6}", "minLength": 12},
        "d": {"type": "string", "format": "date-time"},
        "m": {"type": "string", "maxLength": 40}}, "required": ["t"]}"#;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let flat =
        "c ::= [^\"\\\\0-9\\u0000-\\u001f] | \"\\\\\" [\"\\\\/bfnrt] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\"";
    let sources = [
        json_schema_to_ebnf(schema, &opts).unwrap(),
        format!("root ::= \"{{\\\"\" m \"\\\":1}}\" | \"[\\\"\" m \"\\\"]\" | \"<\" c \">\"\nm ::= e \"\\n\"? m | \"\"\ne ::= c \"x\"? | [0-9] | \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" e\n{flat}"),
        format!("root ::= \"\\\"\" json_char* \"\\\"}}\" | \"[\" json_char* \"]\"\n{CANONICAL_JSON_CHAR}"),
        "root ::= line+\nline ::= [0-9]+ \" \" msg (\"|\" [a-z]+ \"=\" [^ \\n|]+)? \"\\n\"\nmsg ::= [^\\n|]+".to_string(),
    ];
    let (mut covered, mut reused) = (0, 0);
    for src in &sources {
        let a = Automata::build(&parse_ebnf(src, "root").unwrap()).unwrap();
        let states: Vec<StateId> = (0..a.states().len() as u32).map(StateId).collect();
        for order in [states.clone(), states.iter().rev().copied().collect()] {
            let memo = CoverMemo::default();
            for &s in &order {
                let before = memo.decided_pairs();
                let fresh = BodySlice::covers(&a, s, &CoverMemo::default());
                assert_eq!(BodySlice::covers(&a, s, &memo), fresh, "state {} of\n{src}", s.0);
                reused += usize::from(fresh.is_some() && memo.decided_pairs() == before);
                covered += usize::from(fresh.is_some());
                if let Some(c) = ClassSlice::loop_class(&a, s) {
                    let fresh = ClassSlice::covers(&a, s, c, &CoverMemo::default());
                    assert_eq!(ClassSlice::covers(&a, s, c, &memo), fresh, "state {} class {c:#x}", s.0);
                }
            }
        }
    }
    assert!(covered > 100, "only {covered} states covered");
    assert!(reused > 50, "only {reused} verdicts came from the memo alone");
}

/// A regex string with a length, whose automaton states are rules that tail-call one another
/// (MaskBench `Github_hard---o79409`'s `trace_id`, whose search took ~48 M instructions): its
/// cover searches keep sets only at character boundaries (a character's sets are explored in
/// place of the pair that began it; before, each rule's 8 sets inside characters were pairs of
/// their own) and without configurations that neither read nor end (a state with only calls:
/// each rule's start was a set again under every state that tail-calls it). Verdicts stay those
/// of the full walk, checked on UTF-8 and escapes inside the body (`u` refuses `À`'s second
/// byte only). Fails with every slice state a pair of its own (`transient` empty), without the
/// `retain` in `Explored::close`, or with a character's later bytes not explored (`À` accepted).
#[test]
fn cover_sets_only_at_character_boundaries() {
    use crate::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let schema = r#"{"type": "object", "properties": {
        "t": {"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{4}", "minLength": 10},
        "u": {"type": "string", "pattern": "^[^\u00c0-\u00c5]*$"}}, "required": ["t"]}"#;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let a = Automata::build(&parse_ebnf(&json_schema_to_ebnf(schema, &opts).unwrap(), "root").unwrap()).unwrap();
    let states: Vec<StateId> = (0..a.states().len() as u32).map(StateId).collect();
    let memo = CoverMemo::default();
    let covered = states.iter().filter(|&&s| BodySlice::covers(&a, s, &memo).is_some()).count();
    let (by, idle) = memo.pairs_by_slice_state(&a);
    assert!(covered > 20 && by[0] > 20, "{covered} states covered, {} pairs", by[0]);
    assert_eq!((by[1..].iter().sum::<usize>(), idle), (0, 0), "pairs inside characters, idle configurations");

    let mut toks = xorshift_tokens(b"1-a9fz\\\"n", 2000, 6, 0x0794_0918);
    toks.extend(
        ["\u{e9}", "\u{e9}1", "-\u{4e2d}", "\u{1f600}a", "\\n", "\\\"", "1-\u{e9}", "\u{c0}", "a\u{e0}"]
            .map(|t| t.as_bytes().to_vec()),
    );
    toks.extend([&[0xC3][..], &[0xA9, b'1'], &[0xE4, 0xB8], &[0xAD], &[0xF0, 0x9F]].map(<[u8]>::to_vec));
    toks.sort();
    toks.dedup();
    let n = toks.len();
    let trie = TokenTrie::new(&raw_vocab(toks));
    let body = BodySlice::new(&trie, n);
    for &s in &states {
        let full = classify_kernel(&a, &trie, n, s, None, None, None).unwrap();
        let fast = classify_kernel(&a, &trie, n, s, Some(&body), None, None).unwrap();
        assert_eq!(full, fast, "state {}", s.0);
    }
}

/// The large subtrees found from the root down are exactly the nodes with at least
/// `SUBTREE_RUNS_MIN_TOKENS` tokens below them, in trie order.
#[test]
fn large_subtrees_from_the_root_down() {
    use super::run_index::{large_subtrees, SUBTREE_RUNS_MIN_TOKENS};
    // Pseudo-random tokens over a skewed alphabet: large subtrees at several depths, with
    // small siblings between them.
    let alphabet = b"aaaaaaaaaabbbcd ";
    let mut toks = xorshift_tokens(&alphabet[..], 60_000, 11, 0x9E37_79B9_7F4A_7C15u64);
    toks.sort();
    toks.dedup();
    let vocab = raw_vocab(toks);
    let trie = TokenTrie::new(&vocab);
    let expected: Vec<usize> = (0..trie.nodes.len())
        .filter(|&i| {
            let end = trie.nodes[i].subtree_end as usize;
            (trie.first_token[end] - trie.first_token[i]) as usize >= SUBTREE_RUNS_MIN_TOKENS
        })
        .collect();
    let depths: std::collections::BTreeSet<u32> = expected.iter().map(|&i| trie.nodes[i].depth).collect();
    assert!(expected.len() > 10 && depths.len() > 2, "{} large subtrees at depths {depths:?}", expected.len());
    assert_eq!(large_subtrees(&trie), expected);
}

/// Open-object keys (an optional property per rule, each calling the shared pattern of the
/// other keys, whose return state reads only `"`): the cover sets of the pattern are shared by
/// every property instead of explored again under each one's return state, and every state
/// classifies like the full walk, also where a pattern can end after a backslash or inside a
/// UTF-8 sequence (the abstract search is refused there and redone with the real states).
#[test]
fn inert_returns_share_cover_sets() {
    use std::fmt::Write as _;
    let jc = r#"json_char ::= [^"\\\u0000-\u001f] | "\\" ["\\/bfnrt]"#;
    // A key pattern too large to be inlined into its callers.
    let words: Vec<String> = xorshift_tokens(b"abcdefghij", 150, 8, 0x2545_F491_4F6C_DD1D)
        .into_iter()
        .map(|w| format!("\"{}\"", String::from_utf8(w).unwrap()))
        .collect();
    let pattern = |tail: &str| format!("k ::= json_char* {tail} | {}\n{jc}", words.join(" | "));
    let props_then = |n: usize, after: &str| -> String {
        let mut g = String::from("root ::= \"{\" o0 \"}\"\n");
        for i in 0..n {
            let next = i + 1;
            writeln!(g, "o{i} ::= \"\\\"\" (\"p{i}q\" | k) \"\\\"{after}:1,\" o{next} | o{next}").unwrap();
        }
        g + &format!("o{n} ::= \"\"\n")
    };
    let props = |n: usize| props_then(n, "");
    let keys = props(24) + &pattern("");
    let a = Automata::build(&parse_ebnf(&keys, "root").unwrap()).unwrap();
    let memo = CoverMemo::default();
    // Pairs newly decided by each key state that calls the pattern.
    let mut added = Vec::new();
    for s in (0..a.states().len() as u32).map(StateId) {
        let before = memo.decided_pairs();
        let fresh = BodySlice::covers(&a, s, &CoverMemo::default());
        assert_eq!(BodySlice::covers(&a, s, &memo), fresh, "state {}", s.0);
        if fresh.is_some() && a.rule_name(a.state(s).rule).starts_with('o') && !a.rule_edges(s).is_empty() {
            added.push(memo.decided_pairs() - before);
        }
    }
    assert!(added.len() >= 20, "only {} key states covered", added.len());
    // Its literal's own sets and a few more (12-15 each under their own return state).
    assert!(added.iter().all(|&n| n <= 8), "pairs decided per key state: {added:?}");

    let mut toks = xorshift_tokens(b"\"\\pq0123:,abj{}\n", 3000, 6, 0x9E37_79B9_7F4A_7C15);
    toks.extend([&b"\xC3"[..], b"\xA9", b"p1\xC3", b"\xA9\"", b"\\\"", b"a\\"].map(<[u8]>::to_vec));
    let n = toks.len();
    let trie = TokenTrie::new(&raw_vocab(toks));
    let body = BodySlice::new(&trie, n);
    // The same keys with a pattern that can end after a backslash, its return state reading
    // `"` (an escape's second byte there) and then a byte no string holds.
    for src in [props(3) + &pattern(""), props_then(3, "\\n") + &pattern("\"\\\\\"?")] {
        let a = Automata::build(&parse_ebnf(&src, "root").unwrap()).unwrap();
        for s in (0..a.states().len() as u32).map(StateId) {
            let full = classify_kernel(&a, &trie, n, s, None, None, None).unwrap();
            let fast = classify_kernel(&a, &trie, n, s, Some(&body), None, None).unwrap();
            assert_eq!(full, fast, "state {} of\n{src}", s.0);
        }
    }
}

/// A JSON Schema's automata and FOLLOW sets over a vocabulary of printable ASCII bytes, `count`
/// random tokens of up to `max_len` bytes over `alphabet` (seeded by `seed`) and `extra`, with
/// its trie, body slice and first-occurrence index: the walked-body tests' set-up.
struct WalkedFixture {
    a: Automata,
    follow: Vec<crate::follow::ByteSet>,
    trie: crate::trie::TokenTrie,
    n: usize,
    body: BodySlice,
    firsts: FirstChars,
}

fn walked_fixture(
    schema: &str,
    alphabet: &[u8],
    count: usize,
    max_len: u64,
    seed: u64,
    extra: &[&str],
) -> WalkedFixture {
    use crate::follow::{follow_sets, nullable_states};
    use crate::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let g = parse_ebnf(&json_schema_to_ebnf(schema, &opts).unwrap(), "root").unwrap();
    let a = Automata::build(&g).unwrap();
    let follow = follow_sets(&a, &nullable_states(&a));
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    toks.extend(xorshift_tokens(alphabet, count, max_len, seed));
    toks.extend(extra.iter().map(|t| t.as_bytes().to_vec()));
    toks.sort();
    toks.dedup();
    let vocab = raw_vocab(toks);
    let n = vocab.vocab_size();
    let trie = crate::trie::TokenTrie::new(&vocab);
    let (body, firsts) = (BodySlice::new(&trie, n), FirstChars::new(&trie));
    WalkedFixture { a, follow, trie, n, body, firsts }
}

/// String bodies that refuse some text of a few ASCII characters (key and value patterns such as
/// `^(/[^/]+)+$`, MaskBench `Github_hard---o12499`) take the body slice with those characters
/// walked ([`walked_cover`], [`WalkedBody`]) and classify every state exactly like the full walk;
/// every state gets the same walked verdict from a memo shared across states, asked once in
/// state order and again in reverse (then from the per-state walked memo). Fails if the walked
/// characters' subtrees stay in the slice (`//` tokens are then accepted after `/`), or their
/// first nodes are left out of the frontier (`/b` is refused), or the walked memo stores another
/// verdict than it returned (`None`: state 351 asked again), or the root pruning of
/// `walked_cover` drops a state that covers (`> 0` characters: no state walks `.` and `,`).
#[test]
fn walked_body_kernels_equal_full_walks() {
    use crate::mask::{classify_kernel_budget, Shortcuts};
    let schema = r#"{"type": "object", "properties": {
        "p": {"type": "string", "pattern": "^[^.,]+(\\.[^.,]+)*$"},
        "s": {"type": "string", "pattern": "^[^;]*;[^;]*$"},
        "d": {"type": "string", "pattern": "^a[^a]*$"}},
        "patternProperties": {"^(/[^/]+)+$": {"type": "string"}}, "additionalProperties": false}"#;
    let extra = ["\u{e9}/", "/\u{e9}", "\\/", "\\u002f", "\\\"/", "/\"", "a//b\"", "\n/"];
    let WalkedFixture { a, follow, trie, n, body, firsts } =
        walked_fixture(schema, b"/./,;aab\"\\ ", 3000, 6, 0x5EED_1818, &extra);
    let walkable = |x: u8| firsts.walkable(x);
    let bodies = |w: Walked| walked_body(&trie, &body, &firsts, &StringIndex::new(&trie), w);
    let memo = CoverMemo::default();
    let mut walked = std::collections::BTreeSet::new();
    let walked_from = |s: StateId, memo: &CoverMemo| {
        let unwalkable = |x: u8| !firsts.walkable(x);
        BodySlice::covers_or_misread(&a, s, memo).err().and_then(|m| walked_cover(&a, s, m, walkable, unwalkable, memo))
    };
    let mut fresh_all = Vec::new();
    for s in (0..a.states().len() as u32).map(StateId) {
        let fresh = walked_from(s, &CoverMemo::default());
        fresh_all.push(fresh);
        assert_eq!(walked_from(s, &memo), fresh, "state {}", s.0);
        let Some((Walked::Chars(chars), _)) = fresh else { continue };
        walked.insert(chars);
        let f = follow[a.state(s).rule.index()];
        let mut never = || false;
        let full = Shortcuts { follow: Some(&f), ..Default::default() };
        let full = classify_kernel_budget(&a, &trie, n, s, full, usize::MAX, &mut never).unwrap().unwrap();
        let fast = Shortcuts {
            body: Some(&body),
            follow: Some(&f),
            walked: Some((&walkable, &bodies)),
            unwalkable: Some(&|x: u8| !walkable(x)),
            ..Default::default()
        };
        let fast = classify_kernel_budget(&a, &trie, n, s, fast, usize::MAX, &mut never).unwrap().unwrap();
        assert_eq!(full.accepted, fast.accepted, "state {} walking {chars:#x}", s.0);
        let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
            k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
        };
        assert_eq!(spell(&full), spell(&fast), "state {} walking {chars:#x}", s.0);
    }
    // Asked again, in the other order, the shared memo answers from its per-state walked verdicts.
    for (i, fresh) in fresh_all.iter().enumerate().rev() {
        assert_eq!(walked_from(StateId(i as u32), &memo), *fresh, "state {i}, asked again");
    }
    let bit = |c: u8| 1u128 << c;
    for want in [bit(b'/'), bit(b'.') | bit(b','), bit(b';'), bit(b'a')] {
        assert!(walked.contains(&want), "no state walks {want:#x}: {walked:x?}");
    }
}

/// The walked body of `w`, as the token index builds it.
fn walked_body(
    trie: &crate::trie::TokenTrie,
    body: &BodySlice,
    firsts: &FirstChars,
    index: &StringIndex,
    w: Walked,
) -> Option<std::sync::Arc<WalkedBody>> {
    match w {
        Walked::Chars(chars) => WalkedBody::new(trie, body, firsts, chars),
        Walked::Strings(strings) => WalkedBody::with_strings(trie, body, || firsts, index, strings),
        Walked::StartRun { strings, run, stop, inside } => {
            WalkedBody::with_start_run(trie, body, || firsts, index, strings, run, stop, inside)
        }
    }
    .map(std::sync::Arc::new)
}

/// Every state of `fx` whose cover is walked strings ([`Walked::Strings`]) classifies exactly like
/// the full walk; those that walk only strings (no unigram) do it within a quarter of the trie's
/// nodes, where the full walk gives up. Returns the strings walked (packed little-endian) and how
/// many states walked only strings.
fn walked_strings_equal_full_walks(fx: &WalkedFixture) -> (std::collections::BTreeSet<u32>, usize) {
    use crate::mask::{classify_kernel_budget, Shortcuts};
    let WalkedFixture { a, follow, trie, n, body, firsts } = fx;
    let (a, trie, n) = (a, trie, *n);
    let index = StringIndex::new(trie);
    let walkable = |x: u8| firsts.walkable(x);
    let bodies = |w: Walked| walked_body(trie, body, firsts, &index, w);
    let memo = CoverMemo::default();
    let (mut strings, mut strings_only) = (std::collections::BTreeSet::new(), 0);
    for s in (0..a.states().len() as u32).map(StateId) {
        let unwalkable = |x: u8| !firsts.walkable(x);
        let found = BodySlice::covers_or_misread(a, s, &memo)
            .err()
            .and_then(|m| walked_cover(a, s, m, walkable, unwalkable, &memo));
        let Some((Walked::Strings(w), _)) = found else { continue };
        strings.extend(w.into_iter().filter(|&w| w != 0));
        let f = follow[a.state(s).rule.index()];
        let mut never = || false;
        let full = Shortcuts { follow: Some(&f), ..Default::default() };
        let full = classify_kernel_budget(a, trie, n, s, full, usize::MAX, &mut never).unwrap().unwrap();
        let fast = || Shortcuts {
            body: Some(body),
            follow: Some(&f),
            walked: Some((&walkable, &bodies)),
            unwalkable: Some(&unwalkable),
            cover: Some(&memo),
            ..Default::default()
        };
        let fast_mask = classify_kernel_budget(a, trie, n, s, fast(), usize::MAX, &mut never).unwrap().unwrap();
        assert_eq!(full.accepted, fast_mask.accepted, "state {} walking {w:x?}", s.0);
        let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
            k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
        };
        assert_eq!(spell(&full), spell(&fast_mask), "state {} walking {w:x?}", s.0);
        // Work: trie nodes visited (and uncertain tokens recorded), see `classify_kernel_budget`;
        // a state inside a word walks its last character (a unigram), wherever it begins.
        if w.iter().any(|&w| w != 0 && w < 0x100) {
            continue;
        }
        strings_only += 1;
        let quarter = trie.nodes.len() / 4;
        let mut give_up = || true;
        let plain = Shortcuts { follow: Some(&f), ..Default::default() };
        assert!(classify_kernel_budget(a, trie, n, s, plain, quarter, &mut give_up).unwrap().is_none());
        let fast_mask = classify_kernel_budget(a, trie, n, s, fast(), quarter, &mut give_up).unwrap();
        assert!(fast_mask.is_some(), "state {} walking {w:x?} visits over {quarter} nodes", s.0);
    }
    (strings, strings_only)
}

/// A string of up to three ASCII characters as [`Walked::Strings`] packs it.
fn pack(w: &[u8]) -> u32 {
    w.iter().rev().fold(0u32, |p, &c| p << 8 | u32::from(c))
}

/// A string that holds exactly one of a few words (`oneOf` unanchored patterns: MaskBench
/// `Github_easy---o65510`'s `scopes`) refuses text holding two, at the last character of the
/// second; those characters (`r`, `n`) begin too many nodes to be walked, so each string start
/// walked the whole trie. With the words' last three characters walked (`ker`, `min`, `tor`:
/// [`Walked::Strings`]), such states classify exactly like the full walk while visiting fewer than
/// a quarter of the trie's nodes (the full walk, given that budget, gives up). Fails without
/// walked strings (no state walks them), if the string index misses nodes (`makermin` tokens are
/// accepted), or if the prefix states lose the text before a word (`tor` after `to` is missed).
#[test]
fn walked_string_kernels_equal_full_walks() {
    let schema = r#"{"type": "object", "properties": {"s": {"type": "string",
        "oneOf": [{"pattern": "maker"}, {"pattern": "admin"}, {"pattern": "tor"}]}},
        "additionalProperties": false}"#;
    let extra = [
        "makeradmin",
        "adminmaker",
        "torker",
        "kermin",
        "tomaker",
        "\\u0072",
        "\u{e9}r",
        "a\\\"tor",
        "t\"or",
        "\u{e9}tor",
    ];
    let fx = walked_fixture(schema, b"makerdinot ", 120_000, 9, 0x0A55_1818, &extra);
    assert!(!fx.firsts.walkable(b'r') && !fx.firsts.walkable(b'n'), "the fixture must not walk `r` or `n`");
    let (strings, walks_strings_only) = walked_strings_equal_full_walks(&fx);
    for want in [&b"ker"[..], b"min", b"tor"] {
        assert!(strings.contains(&pack(want)), "no state walks {:?}: {strings:x?}", String::from_utf8_lossy(want));
    }
    assert!(walks_strings_only >= 3, "{walks_strings_only} states walk only strings");
}

/// Five `oneOf` words (MaskBench `Github_easy---o65510`'s `scopes`): a word's string start
/// refuses text holding another word at its last character, so `customer`'s walks `ker`, `tor`,
/// `min` and `ner` (8 proper prefixes). With 16 slice states (7 prefix states) no such set fit:
/// each start ran rounds of other strings, and no seed served the five (`o65510` token 69:
/// 88 M instructions, 53 M with room for the prefixes). Every state classifies exactly like the
/// full walk, and some state walks four three-character strings with more than 7 prefixes.
/// Fails with 16 slice states.
#[test]
fn five_word_string_sets_fit() {
    let schema = r#"{"type": "object", "properties": {"s": {"type": "string", "oneOf": [{"pattern": "customer"},
        {"pattern": "maker"}, {"pattern": "operator"}, {"pattern": "admin"}, {"pattern": "designer"}]}},
        "additionalProperties": false}"#;
    let extra = ["customermaker", "adminoperator", "designeradmin", "\\u0072", "t\"or", "\u{e9}ner"];
    let fx = walked_fixture(schema, b"customerakpdign ", 120_000, 9, 0x0A55_1835, &extra);
    assert!(!fx.firsts.walkable(b'r') && !fx.firsts.walkable(b'n'), "the fixture must not walk `r` or `n`");
    let (strings, _) = walked_strings_equal_full_walks(&fx);
    for want in [&b"ker"[..], b"tor", b"min", b"ner", b"mer"] {
        assert!(strings.contains(&pack(want)), "no state walks {:?}: {strings:x?}", String::from_utf8_lossy(want));
    }
    let memo = CoverMemo::default();
    let wide = (0..fx.a.states().len() as u32).map(StateId).any(|s| {
        let found = BodySlice::covers_or_misread(&fx.a, s, &memo)
            .err()
            .and_then(|m| walked_cover(&fx.a, s, m, |x| fx.firsts.walkable(x), |x| !fx.firsts.walkable(x), &memo));
        let Some((Walked::Strings(w), _)) = found else { return false };
        let three: Vec<u32> = w.into_iter().filter(|&v| v > 0xFFFF).collect();
        let mut prefixes: Vec<u32> = three.iter().flat_map(|&v| [v & 0xFF, v & 0xFFFF]).collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        three.len() >= 4 && prefixes.len() > 7
    });
    assert!(wide, "no state walks four strings with more than 7 prefixes");
}

/// Under a tiny per-state cover budget ([`with_cover_budget`]), every state classifies exactly
/// like the full walk (the kernels the masks are made of: the full walk is checked against brute
/// force in `tests/mask_bruteforce.rs`), while some states that cover the body slice no longer
/// find it (the budget bites). Patterns whose refutation lies a few characters in (`p` after a
/// digit, `/` after `/`), a regex string with `minLength` between quotes (the callee-start
/// searches of `covers_through_quoted_calls`), a walked body and a counted one. Shown to fail by
/// making a search that runs out of budget answer "covers" (state 8 at budget 0 then accepts
/// tokens the full walk refuses).
#[test]
fn tiny_cover_budgets_classify_like_full_walks() {
    use crate::mask::{classify_kernel_budget, Shortcuts};
    let schema = r#"{"type": "object", "properties": {
        "t": {"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{3}", "minLength": 9},
        "p": {"type": "string", "pattern": "^[^0-9]*[0-9]{2}[a-z]*$"},
        "k": {"type": "string", "pattern": "^(/[^/]+)+$"},
        "m": {"type": "string", "maxLength": 5}}, "additionalProperties": false}"#;
    let extra = ["\u{e9}/", "1-", "0a", "//", "\\n", "\\u0041"];
    let WalkedFixture { a, follow, trie, n, body, firsts } =
        walked_fixture(schema, b"/1-a9fz\"\\ ", 2000, 5, 0x7A11_1818, &extra);
    let walkable = |x: u8| firsts.walkable(x);
    let bodies = |w: Walked| walked_body(&trie, &body, &firsts, &StringIndex::new(&trie), w);
    let spell = |k: &crate::mask::KernelMask| -> Vec<(u32, Vec<u8>)> {
        k.uncertain.iter().map(|&(t, i)| (t, k.suffixes[i as usize].to_vec())).collect()
    };
    let states: Vec<StateId> = (0..a.states().len() as u32).map(StateId).collect();
    let covered = |budget: usize| {
        let memo = CoverMemo::default();
        states.iter().filter(|&&s| with_cover_budget(budget, || BodySlice::covers(&a, s, &memo)).is_some()).count()
    };
    let all = covered(usize::MAX);
    for budget in [0, 1, 4, 30] {
        let memo = CoverMemo::default();
        for &s in &states {
            let f = follow[a.state(s).rule.index()];
            let mut never = || false;
            let full = Shortcuts { follow: Some(&f), ..Default::default() };
            let full = classify_kernel_budget(&a, &trie, n, s, full, usize::MAX, &mut never).unwrap().unwrap();
            let fast = Shortcuts {
                body: Some(&body),
                follow: Some(&f),
                walked: Some((&walkable, &bodies)),
                unwalkable: Some(&|x: u8| !walkable(x)),
                cover: Some(&memo),
                ..Default::default()
            };
            let fast =
                with_cover_budget(budget, || classify_kernel_budget(&a, &trie, n, s, fast, usize::MAX, &mut never));
            let fast = fast.unwrap().unwrap();
            assert_eq!(full.accepted, fast.accepted, "state {} budget {budget}", s.0);
            assert_eq!(spell(&full), spell(&fast), "state {} budget {budget}", s.0);
        }
        assert!(covered(budget) < all, "budget {budget} decides every cover ({all})");
    }
}

/// Keys that must not match unanchored patterns refused after a class (MaskBench
/// `Github_medium---o83286`'s `devices`: `netdrv_([a-z]+)` refuses any letter after `netdrv_`,
/// `net_[a-z]+[0-9]+` any digit after `net_` and letters, `netdir_(projects|...)` the last letter
/// of each word). One walked string per refused letter never covered (`v_a`, `v_b`, ... past
/// [`super::walked::MAX_WALKED_STRINGS`]), so each key start walked the whole trie. The strings are
/// now cut before the class (`rv_`) or at the text misreads share (`et_` for `net_r0` and
/// `net_t0`, `ir_` for `netdir_work` and `netdir_share`): every such state classifies exactly like
/// the full walk, within a quarter of the trie's nodes (where the full walk gives up). Fails with
/// the cuts undone (no state walks `rv_`, `et_` or `ir_`). (`zz` listed keeps the parts separate
/// alternatives, as they were in o83286 before open objects' parts were joined.)
#[test]
fn class_misread_kernels_equal_full_walks() {
    let schema = r#"{"type": "object", "properties": {"devices": {"type": "object",
        "properties": {"zz": {"type": "integer"}}, "patternProperties": {"netdir_(projects|work|scratch|share)": {"type": "integer"},
        "netdrv_([a-z]+)": {"type": "integer"}, "net_[a-z]+[0-9]+": {"type": "integer"}}}},
        "additionalProperties": false}"#;
    let extra = ["netdrv_a", "net_ab1", "netdir_work", "netdir_projects", "rv_x", "et_ab", "v_", "_a1", "r_w"];
    let fx = walked_fixture(schema, b"netdrvi_0a1wokpsjc ", 120_000, 9, 0x0C1A_5518, &extra);
    assert!(!fx.firsts.walkable(b'_') && !fx.firsts.walkable(b'a'), "the fixture must not walk `_` or `a`");
    let (strings, bounded) = walked_strings_equal_full_walks(&fx);
    for want in [&b"rv_"[..], b"et_", b"ir_"] {
        assert!(strings.contains(&pack(want)), "no state walks {:?}: {strings:x?}", String::from_utf8_lossy(want));
    }
    assert!(bounded >= 3, "{bounded} states walk only strings within a quarter of the trie");
}

/// An open object's key start (a state that only calls the excluded-key rule, then reads the
/// closing quote) is searched as a call of the string-body rule (`CoverMemo::with_substitutes`):
/// once the body rule's own search is decided, the key starts of every object (keys that are
/// prefixes of others, an empty key, a non-ASCII key) explore no new pair, and every state's
/// verdict equals a search without substitutes. Fails without the substitution (each key start
/// explores its own excluded-key automaton).
#[test]
fn excluded_key_starts_search_the_body_rule() {
    use crate::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
    let schema = r#"{"type": "object", "properties": {
        "date_range": {"type": "object", "properties": {"end_date": {"type": "string"}, "start_date": {"type": "string"}}},
        "keywords": {"type": "array", "items": {"type": "string"}}, "": {"type": "integer"},
        "source": {"type": "string"}, "sourceX": {"type": "integer"},
        "meta": {"type": "object", "properties": {"a": {}, "ab": {"type": "object", "properties": {"x y": {}}}}}}}"#;
    let g = json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let a = Automata::build(&g).unwrap();
    let substitutes = crate::compiled::excluded_substitutes(&g, &a);
    assert!(substitutes.len() >= 3, "{} excluded-key rules", substitutes.len());
    let memo = CoverMemo::with_substitutes(substitutes.clone());
    let body = a.rule_start(g.excluded_words().unwrap().any);
    assert!(BodySlice::covers(&a, body, &memo).is_some());
    let states: Vec<StateId> = (0..a.states().len() as u32).map(StateId).collect();
    let key_start = |&&s: &&StateId| {
        let calls = a.rule_edges(s);
        a.byte_edges(s).is_empty()
            && !calls.is_empty()
            && calls.iter().all(|&(r, _)| substitutes.contains_key(&a.callee_start(s, r)))
    };
    let key_starts: Vec<StateId> = states.iter().filter(key_start).copied().collect();
    assert!(key_starts.len() >= 3, "{} key starts", key_starts.len());
    let before = memo.decided_pairs();
    for &s in &key_starts {
        assert!(BodySlice::covers(&a, s, &memo).is_some(), "state {}", s.0);
    }
    assert_eq!(memo.decided_pairs(), before, "pairs explored by the key starts");
    for &s in &states {
        assert_eq!(BodySlice::covers(&a, s, &memo), BodySlice::covers(&a, s, &CoverMemo::default()), "state {}", s.0);
    }
}

/// [`body_step`]'s table equals the step by cases in every state (past 8 as 8), and it walks the
/// UTF-8 bytes of every non-ASCII scalar value from a boundary back to a boundary.
#[test]
fn body_step_table_equals_the_cases() {
    for b in 0..=255u8 {
        for x in 0..=255u8 {
            assert_eq!(body_step(b, x), body_step_of(b.min(8), x), "state {b}, byte {x:#x}");
        }
    }
    let mut buf = [0u8; 4];
    for c in (0x80..=0x10_FFFF_u32).filter_map(char::from_u32) {
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        let end = bytes.iter().try_fold(0u8, |st, &x| match body_step(st, x) {
            Body::To(n) => Some(n),
            _ => None,
        });
        assert_eq!(end, Some(0), "U+{:04X}", u32::from(c));
    }
}

/// The class-body thread's searches of the string starts that read their text inline
/// ([`inline_string_starts`], [`search_string_starts`]: MaskBench `Github_medium---o23177` t110)
/// leave a fill classifying one little to search: asked again, each start's walked cover takes
/// no new cover pair and its body cover none, or fewer than a fresh search (a refuted root's path
/// to the decided misreading pair), both answer as a fresh memo's searches do, and a start the
/// body slice refutes reports where its search met the misread whenever a fresh search does (a
/// fill otherwise runs the bounded search the first one spared, [`bounded_short`]: 7.3 M
/// instructions at o23177 t110). Fails if the walked covers are not searched there, or if the
/// misread place of a decided pair met again is not reported.
#[test]
fn string_starts_searched_off_the_fill_path() {
    let schema = r#"{"type": "object", "properties": {
        "s": {"type": "string", "oneOf": [{"pattern": "maker"}, {"pattern": "admin"}, {"pattern": "tor"}]},
        "p": {"type": "string", "pattern": "^[^.,]+(\\.[^.,]+)*$"},
        "w": {"type": "string", "pattern": "swagger"}}, "additionalProperties": false}"#;
    let fx = walked_fixture(schema, b"makerdinotswg/.,", 3000, 6, 0x0C0E_6969, &["makeradmin", "a..b", "\\u0072"]);
    let starts = inline_string_starts(&fx.a);
    let walkable = |x: u8| fx.firsts.walkable(x);
    let unwalkable = |x: u8| !fx.firsts.walkable(x);
    let memo = CoverMemo::default();
    search_string_starts(&fx.a, &starts, &memo, usize::MAX, walkable, unwalkable);
    let (mut refuted_at, mut walked) = (0, 0);
    for &s in &starts {
        let fresh_memo = CoverMemo::default();
        let walked_from =
            |r: Refutation, memo: &CoverMemo| walked_cover(&fx.a, s, r.misread, walkable, unwalkable, memo);
        let taken = cover_pairs_taken();
        let fresh = BodySlice::covers_or_refuted(&fx.a, s, &fresh_memo);
        let fresh_pairs = cover_pairs_taken() - taken;
        let fresh_walked = fresh.err().map(|r| walked_from(r, &fresh_memo));
        let taken = cover_pairs_taken();
        let asked = BodySlice::covers_or_refuted(&fx.a, s, &memo);
        // A refuted root is not marked itself: its path to the decided misreading pair is met again.
        let asked_pairs = cover_pairs_taken() - taken;
        assert!(asked_pairs == 0 || asked_pairs < fresh_pairs, "state {}: searched again", s.0);
        let taken = cover_pairs_taken();
        let asked_walked = asked.err().map(|r| walked_from(r, &memo));
        assert_eq!(cover_pairs_taken(), taken, "state {}: walked searches run again", s.0);
        assert_eq!(asked.is_ok(), fresh.is_ok(), "state {}", s.0);
        if let (Err(fresh), Err(asked)) = (fresh, asked) {
            assert_eq!(asked.at.is_some(), fresh.at.is_some(), "state {}: where the misread was met", s.0);
            refuted_at += usize::from(asked.at.is_some());
        }
        let (found, fresh) = (asked_walked.flatten(), fresh_walked.flatten());
        assert_eq!(found.is_some(), fresh.is_some(), "state {}", s.0);
        walked += usize::from(found.is_some());
    }
    assert!(refuted_at >= 2 && walked >= 2, "{} starts, {refuted_at} refuted, {walked} walked", starts.len());
}
