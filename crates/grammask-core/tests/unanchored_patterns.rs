//! String values and keys under unanchored `pattern`s (search semantics: "contains a word"),
//! MaskBench `Github_easy---o65510` (`oneOf` of five words) and `Github_medium---o83286`
//! (`patternProperties`): the regex DFA prints as one rule per state, each "other character" a
//! long JSON spelling copied into the states that read it. The rules are one tail group, merged
//! into one automaton (`compiler/tail.rs`) now that the inline estimate counts `x?` as one copy
//! of `x` (it doubled per nested optional) and a group may hold 32,768 estimated states: the
//! string's positions then take the shifted kernel of the state they loop in instead of a walk of
//! the whole vocabulary per alive branch. Masks along documents equal a brute-force reference.

use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::mask::kernel_items;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

mod common;
use common::{llama3_vocab, raw_vocab_with_stop};

fn grammar() -> grammask_core::grammar::Grammar {
    let schema = r#"{"type": "object", "properties": {
        "scopes": {"type": "array", "items": {"type": "string", "oneOf": [{"pattern": "customer"},
            {"pattern": "maker"}, {"pattern": "operator"}, {"pattern": "admin"}, {"pattern": "designer"}]}},
        "devices": {"type": "object", "patternProperties": {"netdir_(projects|work|scratch)": {"type": "integer"},
            "net_[a-z]+[0-9]+": {"type": "boolean"}}, "additionalProperties": false}},
        "additionalProperties": false}"#;
    json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap()
}

/// Printable ASCII, the words and pieces of them, escapes, quotes and a two-byte character.
fn small_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    toks.extend(
        [
            "custom",
            "customer",
            "er",
            "mak",
            "maker",
            "oper",
            "ator",
            "admin",
            "design",
            "\\n",
            "\\u0063",
            "\\\"",
            "\"]",
            "\", \"",
            "é",
            "éc",
            "net",
            "dir_",
            "netdir_work",
            "_work\"",
            "\": ",
            "s\": 1",
            "_a1\": true",
        ]
        .map(|t| t.as_bytes().to_vec()),
    );
    raw_vocab_with_stop(toks)
}

fn docs() -> [&'static str; 3] {
    [
        r#"{"scopes": ["the customer", "maker é\n"], "devices": {"netdir_work": 1, "net_ab12": true}}"#,
        r#"{"scopes": ["xadminx", "\"designer\\"]}"#,
        r#"{"devices": {"my_netdir_scratch_x": 2, "a net_b2": false}}"#,
    ]
}

/// Fails with the nested-optional estimate or the tail-group bound undone: the states along the
/// strings (plain, no rule edges) would be rules calling each other, one more chart item per
/// character, and no position would take the shifted kernel.
#[test]
fn unanchored_pattern_positions_take_the_shifted_kernel() {
    let vocab = small_vocab();
    let cg = Arc::new(CompiledGrammar::new(&grammar(), &vocab).unwrap());
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let doc = r#"{"scopes": ["the customer of an old custom mill, cast in copper and iron, made by hand"]}"#;
    let start = doc.find("the").unwrap();
    assert!(m.accept_bytes(&doc.as_bytes()[..start]).unwrap());
    let items = |m: &Matcher| m.chart().row(m.chart().last_row_index()).len();
    let (first, mut plain, mut shifted, mut states) = (items(&m), 0, 0, 0);
    for &b in &doc.as_bytes()[start..doc.len() - 3] {
        assert!(m.accept_bytes(&[b]).unwrap());
        // The branches' choice is one union automaton (`json_schema::compile`, `define_choices`):
        // one item until a word is read, then at most 4 (the states after it nest), never more.
        assert!(items(&m) <= first.max(4), "chart rows grow along the string: {} > {first}", items(&m));
        for it in kernel_items(cg.automata(), m.chart()) {
            states += 1;
            plain += usize::from(cg.automata().rule_edges(it.state).is_empty());
            shifted += usize::from(cg.shifted_kernel(it.state).unwrap().is_some());
        }
    }
    eprintln!("{plain} plain and {shifted} shifted of {states} kernel states");
    // Each branch's kernel is plain but where a word ends (a call into the branch's second
    // group); most positions of a branch shift the kernel of its loop state.
    assert!(states > 0 && plain * 10 >= states * 9, "{plain} of {states} kernel states are plain");
    // After the word, the union's states take fewer shifts (26 of 197 with the union, against at
    // least a fifth with one automaton per branch): those rows are 3 plain kernels, cached.
    assert!(shifted * 10 >= states, "{shifted} of {states} kernel states take the shifted kernel");
}

/// Masks at every byte of the documents equal the brute force (every token accepted by a copy of
/// the matcher), on the small vocabulary and on Llama 3 (first document only).
#[test]
fn unanchored_pattern_masks_match_brute_force() {
    let docs = docs();
    let mut vocabs = vec![(small_vocab(), &docs[..])];
    vocabs.extend(llama3_vocab().map(|v| (v, &docs[..1])));
    for (vocab, docs) in vocabs {
        let cg = Arc::new(CompiledGrammar::new(&grammar(), &vocab).unwrap());
        for doc in docs {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            for (i, &b) in doc.as_bytes().iter().enumerate() {
                let mask = m.compute_mask().unwrap().clone();
                for t in 0..vocab.vocab_size() as u32 {
                    let want = m.clone().accept_token(t).unwrap();
                    let at = String::from_utf8_lossy(&doc.as_bytes()[..i]);
                    assert_eq!(mask.get(t as usize), want, "after {at:?}: token {:?}", vocab.token_bytes(t));
                }
                assert!(m.accept_bytes(&[b]).unwrap(), "byte {i} of {doc}");
            }
            assert!(m.is_completed(), "{doc}");
        }
    }
}
