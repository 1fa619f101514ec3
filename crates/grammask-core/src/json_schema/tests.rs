//! Structural and error-path tests for the JSON Schema converter.
use super::*;

fn conv(s: &str) -> Result<String> {
    json_schema_to_ebnf(s, &JsonSchemaOptions::default())
}

#[test]
fn bad_json_and_bad_schema() {
    assert_eq!(conv("{").unwrap_err().kind(), ErrorKind::InvalidJson);
    assert_eq!(conv(r#"{"type":"foo"}"#).unwrap_err().kind(), ErrorKind::InvalidSchema);
    assert_eq!(conv("false").unwrap_err().kind(), ErrorKind::InvalidSchema);
    assert_eq!(conv(r#"{"enum":[]}"#).unwrap_err().kind(), ErrorKind::InvalidSchema);
}

#[test]
fn unsupported_names_pointer() {
    let e = conv(r#"{"properties":{"a":{"type":"array","contains":{"type":"string"},"maxItems":4}}}"#).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(e.location(), Some(&crate::error::Location::Pointer("/properties/a/contains".into())));
    let e = conv(r#"{"not":{"multipleOf":3}}"#).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

#[test]
fn root_rule_and_recursion() {
    let g =
        conv(r##"{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##)
            .unwrap();
    assert!(g.contains("root ::= "), "{g}");
    assert!(g.lines().filter(|l| l.starts_with("root ::=")).count() == 1);
}

#[test]
fn remote_ref_refused() {
    assert_eq!(conv(r#"{"$ref":"http://example.com/x.json"}"#).unwrap_err().kind(), ErrorKind::Unsupported);
}

fn conv_with(s: &str, f: impl FnOnce(&mut JsonSchemaOptions)) -> Result<String> {
    let mut o = JsonSchemaOptions::default();
    f(&mut o);
    json_schema_to_ebnf(s, &o)
}

#[test]
fn any_order_bounded() {
    let props: Vec<String> = (0..13).map(|i| format!(r#""p{i}":{{}}"#)).collect();
    let big = format!(r#"{{"type":"object","properties":{{{}}}}}"#, props.join(","));
    // any_order beyond the key-set bound is refused; strict_mode=false falls back to schema order.
    let e = conv_with(&big, |o| o.any_order = true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(conv_with(&big, |o| o.strict_mode = false).is_ok());
    let small = r#"{"type":"object","properties":{"a":{},"b":{}},"required":["a"]}"#;
    assert!(conv_with(small, |o| o.any_order = true).is_ok());
}

/// Objects past the always-free bound take any order while the schema's state budget lasts.
#[test]
fn any_order_budget() {
    // k distinct 12-key objects (4096 key-set states each) as properties of a root object.
    let nested = |k: usize| {
        let subs: Vec<String> = (0..k)
            .map(|i| {
                let mut props: Vec<String> = (0..11).map(|j| format!(r#""p{j}":{{}}"#)).collect();
                props.push(format!(r#""x{i}":{{}}"#));
                format!(r#""o{i}":{{"type":"object","properties":{{{}}}}}"#, props.join(","))
            })
            .collect();
        format!(r#"{{"type":"object","properties":{{{}}}}}"#, subs.join(","))
    };
    // Cost of one: 4096 states x half of (p0..p9: 10 x 6 bytes, p10: 7, x{i}: 6) = 4096 x 73 / 2.
    assert_eq!(compile::MAX_LARGE_ANY_ORDER_STATES, 4096);
    let fit = (compile::ANY_ORDER_KEY_BUDGET / (4096 * 73 / 2)) as usize;
    assert!((2..10).contains(&fit));
    assert!(conv_with(&nested(fit), |o| o.any_order = true).is_ok());
    let e = conv_with(&nested(fit + 1), |o| o.any_order = true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    // strict_mode=false: the object past the budget falls back to schema order.
    assert!(conv_with(&nested(fit + 1), |o| o.strict_mode = false).is_ok());
}

#[test]
fn dependent_required_needs_free_order() {
    let s = r#"{"type":"object","properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}}"#;
    assert!(conv_with(s, |o| o.strict_mode = false).is_ok());
    let e = conv(s).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(e.location(), Some(&crate::error::Location::Pointer("/dependentRequired".into())));
    assert!(conv_with(r#"{"dependentSchemas":{"a":{"required":["b"]}}}"#, |o| o.strict_mode = false).is_ok());
}

#[test]
fn regular_formats_convert() {
    for f in ["uri", "uri-reference", "ipv6", "duration", "json-pointer", "relative-json-pointer", "hostname"] {
        assert!(conv(&format!(r#"{{"type":"string","format":"{f}"}}"#)).is_ok(), "{f}");
    }
    assert_eq!(conv(r#"{"type":"string","format":"iri"}"#).unwrap_err().kind(), ErrorKind::Unsupported);
}

/// Canonical spelling: integer ranges (capped one-sided ones included) accept exactly the
/// canonical spellings, and a schema without numbers still compiles with the shared numeric rules.
#[test]
fn canonical_integer_ranges() {
    use crate::matcher::{CompiledGrammar, Matcher, MatcherOptions};
    use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
    let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let opts = VocabularyOptions { stop_token_ids: Some(vec![]), ..Default::default() };
    let vocab = std::sync::Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let accepts = |schema: &str, text: &str| {
        let g = crate::ebnf::parse_ebnf(&conv(schema).unwrap(), "root").unwrap();
        let cg = std::sync::Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
        m.accept_bytes(text.as_bytes()).unwrap() && m.is_completed()
    };
    let big = "9".repeat(308);
    let cases: &[(&str, &[&str], &[&str])] = &[
        (r#"{"type":"integer","minimum":0}"#, &["0", "7", "10", &big], &["-0", "-1", "1.0", "01"]),
        (r#"{"type":"integer","minimum":-12}"#, &["-12", "-1", "0", "5", "123"], &["-13", "-0", "-100"]),
        (r#"{"type":"integer","exclusiveMinimum":95}"#, &["96", "99", "100", "1000"], &["95", "9", "0"]),
        (r#"{"type":"integer","maximum":-3}"#, &["-3", "-10", "-99999"], &["-2", "0", "3"]),
        (r#"{"type":"integer","maximum":20}"#, &["20", "0", "-1", "-5000"], &["21", "-0", "100"]),
        (r#"{"type":"string"}"#, &["\"x\""], &["1"]),
    ];
    for (schema, yes, no) in cases {
        for t in *yes {
            assert!(accepts(schema, t), "{schema} should accept {t}");
        }
        for t in *no {
            assert!(!accepts(schema, t), "{schema} should reject {t}");
        }
    }
    assert!(!accepts(r#"{"type":"integer","minimum":0}"#, &"9".repeat(309)));
    // Open objects: other keys in canonical spelling, listed keys never twice.
    let open =
        r#"{"type":"object","properties":{"ab":{"type":"integer"},"a":{"type":"string"}},"additionalProperties":true}"#;
    for t in [
        r#"{"ab":1,"a":"x"}"#,
        r#"{"abc":1}"#,
        r#"{"b":1,"":2}"#,
        r#"{"\u00e9":1,"x\ny":2}"#,
        r#"{"a\"":1}"#,
        "{\"\u{e9}\":1}",
    ] {
        assert!(accepts(open, t), "{t}");
    }
    for t in [r#"{"ab":1,"ab":2}"#, r#"{"\u0061":1}"#, r#"{"a\/":1}"#, r#"{"ab":"x"}"#] {
        assert!(!accepts(open, t), "{t}");
    }
}

/// Whether the grammar of `schema` (lax, `spelling`) accepts `text` (an Earley recognizer).
fn schema_accepts(schema: &str, spelling: Spelling, text: &str) -> bool {
    let g = json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, spelling, ..Default::default() })
        .unwrap();
    let a = crate::compiler::Automata::build(&g).unwrap();
    let mut chart = crate::earley::Chart::new(&a);
    text.bytes().all(|b| chart.push_byte(&a, b).unwrap()) && chart.is_complete(&a)
}

#[test]
fn long_string_bounds_are_blocks() {
    // Bounds past 1024 characters are built from shared 256-character blocks, every length once:
    // lengths around the head (256), block multiples and the bounds.
    let cases = [(0u64, 5000u64), (5000, 9300), (1, 4097), (2048, 2048 + 4096), (0, 4096), (255, 1300), (256, 1025)];
    for (lo, hi) in cases {
        let schema = format!(r#"{{"type":"string","minLength":{lo},"maxLength":{hi}}}"#);
        let g = conv_with(&schema, |o| o.strict_mode = false).unwrap();
        assert!(g.contains("json_char.block"), "{g}");
        for sp in [Spelling::Canonical, Spelling::Any] {
            let near = [lo.saturating_sub(1), lo, lo + 1, 255, 256, 257, 511, 512, 513, 767, 768, 1023, 1024, 1025];
            for n in near.into_iter().chain([1279, 1280, 1281, 4096, 4352, hi - 257, hi - 256, hi - 1, hi, hi + 1]) {
                let body: String = (0..n).map(|i| if i % 3 == 0 { 'é' } else { 'a' }).collect();
                let want = lo <= n && n <= hi;
                assert_eq!(schema_accepts(&schema, sp, &format!("\"{body}\"")), want, "{lo}..{hi}: {n}");
            }
        }
    }
}

#[test]
fn long_string_bounds_build_few_states() {
    // `maxLength: 4096` unrolled was 4096 copies of the character automaton (~176k states);
    // blocks make about four times the block length's copies, the shared blocks included (~18k).
    for spelling in [Spelling::Canonical, Spelling::Any] {
        let schema = r#"{"type":"string","maxLength":4096}"#;
        let opts = JsonSchemaOptions { strict_mode: false, spelling, ..Default::default() };
        let g = json_schema_to_grammar(schema, &opts).unwrap();
        let states = crate::compiler::Automata::build(&g).unwrap().states().len();
        assert!(states < 30_000, "{spelling:?}: {states} states");
    }
}

/// An open object's excluded-key trie (canonical spelling) reads non-ASCII characters through
/// one shared rule (`json_char.key_non_ascii`): no trie state reads a byte of U+0080.. itself,
/// and its automata have about one state per trie node. Spelled in every node's class, those
/// characters' UTF-8 sequences made ~10 states of subset construction per node (merged again by
/// minimization; over half the states a band schema determinized).
#[test]
fn key_trie_nodes_read_no_non_ascii_byte() {
    let keys = ["abcdefghijklmnop", "abcdefghijXYZ", "qrstuvwxyz0123", "q_r"];
    let props: Vec<String> = keys.iter().map(|k| format!(r#""{k}":{{"type":"integer"}}"#)).collect();
    let schema = format!(r#"{{"type":"object","properties":{{{}}}}}"#, props.join(","));
    let g = json_schema_to_grammar(&schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let a = crate::compiler::Automata::build(&g).unwrap();
    let (mut trie_states, mut non_ascii, mut rules) = (0, 0, std::collections::BTreeSet::new());
    for s in (0..a.states().len() as u32).map(crate::compiler::StateId) {
        let r = a.state(s).rule;
        if a.rule_name(r).starts_with("key_not_in") {
            trie_states += 1;
            rules.insert(r);
            non_ascii += a.byte_edges(s).iter().filter(|e| e.hi >= 0x80).count();
        }
    }
    // 36 trie nodes (the root and one per key byte but the shared prefixes), each a state; a
    // rule's states after a deviation are shared by its nodes.
    let bound = 36 + 5 * rules.len();
    assert!(!rules.is_empty() && trie_states <= bound, "{trie_states} states in {} trie rules", rules.len());
    assert_eq!(non_ascii, 0, "byte edges on U+0080.. in the key trie's rules");
    for (t, want) in [("{\"abcdefghijklmnoé\":1}", true), ("{\"qé\":1}", true), ("{\"q_r\":\"x\"}", false)] {
        assert_eq!(schema_accepts(&schema, Spelling::Canonical, t), want, "{t}");
    }
}

#[test]
fn equal_string_rules_share_one_automaton() {
    // Ten properties of one counted string type: one rule, nine aliases.
    let props: Vec<String> = (0..10).map(|i| format!(r#""p{i}":{{"type":"string","maxLength":300}}"#)).collect();
    let g = conv_with(&format!(r#"{{"properties":{{{}}}}}"#, props.join(",")), |o| o.strict_mode = false).unwrap();
    assert_eq!(g.matches("{0,300}").count(), 1, "{g}");
}

/// String automata are built once per set of constraints: properties that differ in one
/// constraint each keep their own language.
#[test]
fn string_automata_differ_by_every_constraint() {
    let schema = r#"{"type":"object","additionalProperties":false,"properties":{
        "a":{"type":"string","pattern":"^x+$","maxLength":3},
        "b":{"type":"string","pattern":"^x+$","maxLength":5},
        "c":{"type":"string","pattern":"^x+$","minLength":4},
        "d":{"type":"string","pattern":"^x+$","not":{"enum":["xx"]}},
        "e":{"type":"string","pattern":"^x+$","format":"email"},
        "f":{"type":"string","pattern":"^x+$","maxLength":3}}}"#;
    for (text, want) in [
        (r#"{"a":"xxx"}"#, true),
        (r#"{"a":"xxxx"}"#, false),
        (r#"{"b":"xxxx"}"#, true),
        (r#"{"c":"xxx"}"#, false),
        (r#"{"c":"xxxx"}"#, true),
        (r#"{"d":"xx"}"#, false),
        (r#"{"d":"xxx"}"#, true),
        (r#"{"e":"xxx"}"#, false),
        (r#"{"f":"xxx"}"#, true),
        (r#"{"f":"xxxx"}"#, false),
    ] {
        assert_eq!(schema_accepts(schema, Spelling::Canonical, text), want, "{text}");
    }
}

/// Additional-key languages are built once per (listed keys, patterns, propertyNames): objects
/// that differ from `a` in one of these each keep their own key languages.
#[test]
fn key_languages_differ_by_every_component() {
    let obj = |props: &str, pat: &str, more: &str| {
        format!(
            r#"{{"type":"object","properties":{{"{props}":{{"type":"null"}}}},
            "patternProperties":{{"{pat}":{{"type":"integer"}}}},{more}}}"#
        )
    };
    let open = r#""additionalProperties":{"type":"string"}"#;
    let schema = format!(
        r#"{{"type":"object","additionalProperties":false,"properties":{{"a":{},"b":{},"c":{},"d":{}}}}}"#,
        obj("p", "^x", open),
        obj("q", "^x", open),
        obj("p", "^y", open),
        obj("p", "^x", &format!(r#"{open},"propertyNames":{{"maxLength":3}}"#)),
    );
    for (text, want) in [
        (r#"{"a":{"q":"s","x1":1,"y1":"s","long":"s"}}"#, true),
        (r#"{"a":{"p":"s"}}"#, false),
        (r#"{"b":{"p":"s"}}"#, true),
        (r#"{"b":{"q":"s"}}"#, false),
        (r#"{"c":{"y1":1,"x1":"s"}}"#, true),
        (r#"{"c":{"x1":1}}"#, false),
        (r#"{"d":{"zz":"s","x1":1}}"#, true),
        (r#"{"d":{"long":"s"}}"#, false),
    ] {
        assert_eq!(schema_accepts(&schema, Spelling::Canonical, text), want, "{text}");
    }
}

#[test]
fn equal_key_sets_share_one_excluded_key_rule() {
    // Two object types with the key set {a, ab} (values differ): one rule for "any other key",
    // in either spelling, and each object still refuses its listed keys as additional ones.
    let s = r#"{"properties":{"x":{"properties":{"a":{"type":"integer"},"ab":{"type":"null"}}},
                              "y":{"properties":{"a":{"type":"string"},"ab":{"type":"null"}}}}}"#;
    for sp in [Spelling::Canonical, Spelling::Any] {
        let g = conv_with(s, |o| {
            o.strict_mode = false;
            o.spelling = sp;
        })
        .unwrap();
        // The trie's step on "a" (canonical) or the exclusion (any spelling) is written once.
        let first_steps = g
            .lines()
            .filter(|l| l.starts_with("key_not_in") && (l.contains("\"a\" (") || l.contains("(\"a\", \"ab\")")));
        assert_eq!(first_steps.count(), 1, "{sp:?}: {g}");
        let ok = |text: &str| schema_accepts(s, sp, text);
        assert!(ok(r#"{"x":{"a":1,"b":"z"},"y":{"ab":null,"a":"s","abc":2}}"#), "{sp:?}");
        assert!(!ok(r#"{"x":{"a":"s"}}"#) && !ok(r#"{"y":{"a":1}}"#), "{sp:?}");
    }
}

#[test]
fn bare_references_to_one_definition_share_its_rule() {
    // Three properties name one object definition (one with a description, one through a second
    // bare reference): its key "inner" is written once, not once per property.
    let s = r##"{"definitions":{"o":{"properties":{"inner":{"type":"integer"}},"additionalProperties":false},
                                  "alias":{"$ref":"#/definitions/o"}},
                 "properties":{"p":{"$ref":"#/definitions/o"},"q":{"$ref":"#/definitions/o","description":"d"},
                               "r":{"$ref":"#/definitions/alias"},"s":{"$ref":"#/definitions/o","type":"object"}}}"##;
    let g = conv_with(s, |o| o.strict_mode = false).unwrap();
    // `s` has a keyword besides its reference: a goal of its own.
    assert_eq!(g.matches("\"inner\"").count(), 2, "{g}");
    let ok = |text: &str| schema_accepts(s, Spelling::Canonical, text);
    assert!(ok(r#"{"p":{"inner":1},"q":{},"r":{"inner":2},"s":{"inner":3}}"#));
    assert!(!ok(r#"{"r":{"inner":"x"}}"#) && !ok(r#"{"q":{"other":1}}"#) && !ok(r#"{"s":{"inner":null}}"#));
}

#[test]
fn one_of_closed_objects_disjoint_by_keys() {
    let lax = |s: &str| conv_with(s, |o| o.strict_mode = false);
    // Key patterns that cannot meet (closed objects that need a key).
    let s = r#"{"oneOf":[{"type":"object","patternProperties":{"^[0-9]+x$":{}},"additionalProperties":false,"minProperties":1},
                         {"type":"object","patternProperties":{"^[a-z]{2}$":{}},"additionalProperties":false,"minProperties":1}]}"#;
    lax(s).unwrap();
    let ok = |text: &str| schema_accepts(s, Spelling::Canonical, text);
    assert!(ok(r#"{"2x":1}"#) && ok(r#"{"en":1}"#) && !ok(r#"{"en":1,"2x":2}"#) && !ok("{}"));
    // A required key the other branch's patterns do not allow, and one its `not` forbids.
    lax(r#"{"oneOf":[{"type":"object","required":["ios"]},{"type":"object","patternProperties":{"^[0-9]":{}},"additionalProperties":false}]}"#)
        .unwrap();
    lax(r#"{"oneOf":[{"type":"object","required":["ios"]},{"type":"object","patternProperties":{"^i":{}},"additionalProperties":false,"not":{"required":["ios"]}}]}"#)
        .unwrap();
    // Overlapping keys still need the negation of a closed object: refused.
    let e = lax(
        r#"{"oneOf":[{"type":"object","required":["ios"]},{"type":"object","patternProperties":{"^i":{}},"additionalProperties":false}]}"#,
    );
    assert_eq!(e.unwrap_err().kind(), ErrorKind::Unsupported);
}

#[test]
fn multiple_of_with_bounds() {
    let lax = |s: &str| conv_with(s, |o| o.strict_mode = false);
    // Few multiples in a closed range: listed.
    let s = r#"{"type":"integer","minimum":16,"maximum":100,"multipleOf":4}"#;
    lax(s).unwrap();
    for (v, want) in [("16", true), ("20", true), ("100", true), ("12", false), ("18", false), ("104", false)] {
        assert_eq!(schema_accepts(s, Spelling::Canonical, v), want, "{v}");
    }
    // A divisor of 1: the integers of the range (numbers also with a zero fraction).
    let s = r#"{"type":"number","minimum":1,"exclusiveMaximum":5,"multipleOf":1}"#;
    for (v, want) in [("1", true), ("4.0", true), ("5", false), ("1.5", false), ("0", false)] {
        assert_eq!(schema_accepts(s, Spelling::Canonical, v), want, "{v}");
    }
    // Too many multiples: refused.
    let e = lax(r#"{"type":"number","multipleOf":0.01,"minimum":0,"maximum":1000000}"#).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

/// `dependentRequired` past the any-order bound: schema order, dependency-named keys tracked.
#[test]
fn dependent_required_past_any_order_bound() {
    // 13 keys: past MAX_LARGE_ANY_ORDER_STATES, so schema order.
    let props: Vec<String> = (0..13).map(|i| format!(r#""k{i}":{{"type":"integer"}}"#)).collect();
    let s =
        format!(r#"{{"type":"object","properties":{{{}}},"dependentRequired":{{"k7":["k1","k3"]}}}}"#, props.join(","));
    let sp = Spelling::Canonical;
    assert!(schema_accepts(&s, sp, r#"{"k0":1,"k8":2}"#));
    assert!(schema_accepts(&s, sp, r#"{"k1":1,"k3":2,"k7":3}"#));
    assert!(schema_accepts(&s, sp, r#"{"k1":1,"k3":2}"#));
    assert!(schema_accepts(&s, sp, "{}"));
    assert!(!schema_accepts(&s, sp, r#"{"k1":1,"k7":3}"#));
    assert!(!schema_accepts(&s, sp, r#"{"k7":3}"#));
    assert!(!schema_accepts(&s, sp, r#"{"k3":1,"k7":3,"k8":1}"#));
    // A dependency on a key that cannot appear forbids its trigger.
    let never = r#"{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{},"h":{},"i":{},"j":{},"k":{},"l":{},"m":{},"x":false},"dependentRequired":{"a":["x"]}}"#;
    assert!(schema_accepts(never, sp, r#"{"b":1}"#));
    assert!(!schema_accepts(never, sp, r#"{"a":1}"#));
    // More than 64 properties: only the dependency-named keys take mask bits.
    let props: Vec<String> = (0..70).map(|i| format!(r#""k{i}":{{"type":"integer"}}"#)).collect();
    let wide =
        format!(r#"{{"type":"object","properties":{{{}}},"dependentRequired":{{"k66":["k65"]}}}}"#, props.join(","));
    assert!(schema_accepts(&wide, sp, r#"{"k0":1,"k65":2,"k66":3,"k69":4}"#));
    assert!(schema_accepts(&wide, sp, r#"{"k65":2}"#));
    assert!(!schema_accepts(&wide, sp, r#"{"k0":1,"k66":3,"k69":4}"#));
    // Still refused under strict mode (schema order is not free there).
    assert_eq!(conv(&s).unwrap_err().kind(), ErrorKind::Unsupported);
}

#[test]
fn schema_registry_documents_resolve() {
    let s = r#"{"$id":"http://e.com/a.json","properties":{"x":{"$ref":"b.json#/$defs/n"}}}"#;
    let b = r#"{"$defs":{"n":{"type":"integer"}}}"#;
    assert_eq!(conv(s).unwrap_err().kind(), ErrorKind::Unsupported);
    let g = conv_with(s, |o| o.schema_registry = vec![("http://e.com/b.json#".into(), b.into())]).unwrap();
    assert!(g.contains("root ::= "), "{g}");
    let bad = conv_with(s, |o| o.schema_registry = vec![("http://e.com/b.json".into(), "{".into())]).unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidJson);
}

#[test]
fn negations_of_applicators_and_arrays_compile() {
    for s in [
        r#"{"not":{"anyOf":[{"type":"string"},{"type":"null"}]}}"#,
        r#"{"not":{"oneOf":[{"type":"integer"},{"type":"string"}]}}"#,
        r#"{"not":{"type":"array","items":{"type":"integer"},"minItems":1}}"#,
        r#"{"not":{"contains":{"type":"string"}}}"#,
    ] {
        assert!(conv_with(s, |o| o.strict_mode = false).is_ok(), "{s}");
    }
    let nine: Vec<String> = (0..9).map(|i| format!(r#"{{"const":{i}}}"#)).collect();
    let wide = format!(r#"{{"not":{{"oneOf":[{}]}}}}"#, nine.join(","));
    assert_eq!(conv(&wide).unwrap_err().kind(), ErrorKind::Unsupported);
    assert_eq!(conv(r#"{"not":{"prefixItems":[{}]}}"#).unwrap_err().kind(), ErrorKind::Unsupported);
}

/// Long enums (past `ENUM_SET_MIN`) are checked through canonical texts: membership and
/// duplicates follow JSON equality (`1` and `1.0` are one value; key order does not matter).
#[test]
fn long_enums_follow_json_equality() {
    let many: Vec<String> = (0..40).map(|i| i.to_string()).chain([r#"{"a":1,"b":2}"#.to_string()]).collect();
    let schema = format!(
        r#"{{"allOf":[{{"enum":[{}]}},{{"enum":[1.0,1,2.5,"x",{{"b":2,"a":1}},39,39.0,{}]}}]}}"#,
        many.join(","),
        (100..140).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    );
    let accepts = |t: &str| schema_accepts(&schema, Spelling::Any, t);
    for ok in ["1", "1.0", "39", r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#] {
        assert!(accepts(ok), "{ok}");
    }
    for bad in ["2.5", "\"x\"", "100", "0", "40"] {
        assert!(!accepts(bad), "{bad}");
    }
    // Each kept value is spelled once: `1` and `1.0` (and `39`, `39.0`) are one alternative.
    let ebnf = conv(&schema).unwrap();
    let root = ebnf.lines().find(|l| l.starts_with("schema ::=")).unwrap();
    assert!(root.starts_with(r#"schema ::= "1" ".0"? | "39" ".0"? | ("{""#), "{root}");
    assert_eq!(root.matches(r#""39""#).count(), 1, "{root}");
    let dup = conv(r#"{"enum":[1,1.0,2,{"a":1,"b":2},{"b":2,"a":1},1e0]}"#).unwrap();
    let root = dup.lines().find(|l| l.starts_with("schema ::=")).unwrap();
    assert!(root.starts_with(r#"schema ::= "1" ".0"? | "2" ".0"? | ("{""#), "{root}");
}

/// `e` of `g` as text, rules by name (children in order, node kinds kept).
fn expr_shape(g: &crate::grammar::Grammar, e: crate::grammar::ExprId, out: &mut String) {
    use crate::grammar::Expr;
    use std::fmt::Write as _;
    match g.expr(e) {
        Expr::RuleRef(r) => {
            let _ = write!(out, "<{}>", g.rule(*r).name);
        }
        Expr::Seq(xs) | Expr::Choice(xs) => {
            out.push_str(if matches!(g.expr(e), Expr::Seq(_)) { "S(" } else { "C(" });
            for &x in xs {
                expr_shape(g, x, out);
                out.push(',');
            }
            out.push(')');
        }
        Expr::Repeat { expr, min, max } => {
            let _ = write!(out, "R{min},{max:?}(");
            expr_shape(g, *expr, out);
            out.push(')');
        }
        other => {
            let _ = write!(out, "{other:?}");
        }
    }
}

/// Every form of key-set state: required keys, additional entries, counted entries,
/// dependencies, nested objects.
const KEY_SET_SCHEMAS: [&str; 5] = [
    r#"{"type":"object","properties":{"a":{},"b":{"type":"integer"},"c":{"type":"string"}},"required":["b"]}"#,
    r#"{"type":"object","properties":{"a":{},"b":{}},"additionalProperties":{"type":"integer"}}"#,
    r#"{"type":"object","properties":{"a":{},"b":{},"c":{}},"minProperties":2,"maxProperties":3}"#,
    r#"{"type":"object","properties":{"a":{},"b":{},"c":{}},"additionalProperties":false,"dependentRequired":{"a":["c"]}}"#,
    r#"{"type":"object","properties":{"a":{"type":"object","properties":{"x":{},"y":{}},"required":["y"]},"b":{}},"maxProperties":1}"#,
];

/// Every separator layout of key-set rules (`any_order`, strict, last).
const KEY_SET_LAYOUTS: [fn(&mut JsonSchemaOptions); 5] = [
    |o| o.strict_mode = false,
    |o| {
        o.strict_mode = false;
        o.any_whitespace = false;
    },
    |o| {
        o.strict_mode = false;
        o.any_whitespace = false;
        o.indent = Some(2);
    },
    |o| {
        o.strict_mode = false;
        o.any_whitespace = false;
        o.separators = Some((";".into(), " :: ".into()));
    },
    |o| o.any_order = true,
];

#[test]
fn key_set_rules_as_ir_equal_the_parsed_text() {
    key_sets::BUILT.with(|n| n.set(0));
    for s in KEY_SET_SCHEMAS {
        for (k, f) in KEY_SET_LAYOUTS.iter().enumerate() {
            let mut o = JsonSchemaOptions::default();
            f(&mut o);
            let text = json_schema_to_ebnf(s, &o).unwrap();
            let parsed = crate::ebnf::parse_ebnf(&text, "root").unwrap();
            let direct = json_schema_to_grammar(s, &o).unwrap();
            assert_eq!(parsed.rules().len(), direct.rules().len(), "{s}, options {k}");
            for r in parsed.rules() {
                let d = direct.rule_by_name(&r.name).unwrap_or_else(|| panic!("{} missing", r.name));
                let (mut a, mut b) = (String::new(), String::new());
                expr_shape(&parsed, r.body, &mut a);
                expr_shape(&direct, direct.rule(d).body, &mut b);
                assert_eq!(a, b, "rule {} of {s}, options {k}", r.name);
            }
            assert_eq!(parsed.root(), parsed.rule_by_name("root").unwrap());
            assert_eq!(direct.rule(direct.root()).name, "root");
        }
    }
    assert!(key_sets::BUILT.with(std::cell::Cell::get) > 100);
}

/// Open objects (`strict_mode=false`) whose excluded-key tries take every node shape: keys that
/// are prefixes of others, shared prefixes, one-character keys, space and `~`, one key set
/// twice (one trie), nested objects, keys past one rule's 32 trie levels (one ending there).
const KEY_TRIE_SCHEMAS: [&str; 5] = [
    r#"{"type":"object","properties":{"a":{},"ab":{},"abc":{},"b":{},"ba":{}}}"#,
    r#"{"type":"object","properties":{"x y":{},"x~":{},"name":{"type":"object","properties":{"name":{},"names":{}}},"other":{"type":"object","properties":{"x y":{},"x~":{},"name":{},"other":{}}}}}"#,
    r#"{"type":"object","properties":{"first_name":{"type":"string"},"last_name":{"type":"string"},"age":{"type":"integer"}},"required":["age"]}"#,
    r#"{"type":"object","properties":{"q":{}},"additionalProperties":{"type":"object","properties":{"qq":{},"r":{}}}}"#,
    r#"{"type":"object","properties":{"spec_template_metadata_annotations_kubernetes_io_last_applied_configuration":{},"spec_template_metadata_annotatioX":{},"spec_template_metadata_annotatio":{},"spec_template_metadata_annotations":{},"s":{}}}"#,
];

#[test]
fn key_trie_rules_as_ir_equal_the_parsed_text() {
    jstr::TRIES_BUILT.with(|n| n.set(0));
    for s in KEY_TRIE_SCHEMAS.iter().chain(&KEY_SET_SCHEMAS) {
        for any_order in [false, true] {
            let o = JsonSchemaOptions { strict_mode: false, any_order, ..JsonSchemaOptions::default() };
            let text = json_schema_to_ebnf(s, &o).unwrap();
            let parsed = crate::ebnf::parse_ebnf(&text, "root").unwrap();
            let direct = json_schema_to_grammar(s, &o).unwrap();
            assert_eq!(parsed.rules().len(), direct.rules().len(), "{s}");
            for r in parsed.rules() {
                let d = direct.rule_by_name(&r.name).unwrap_or_else(|| panic!("{} missing", r.name));
                let (mut a, mut b) = (String::new(), String::new());
                expr_shape(&parsed, r.body, &mut a);
                expr_shape(&direct, direct.rule(d).body, &mut b);
                assert_eq!(a, b, "rule {} of {s}", r.name);
            }
            // The excluded words name the same rules.
            let words = |g: &crate::grammar::Grammar| {
                let w = g.excluded_words().expect("open objects exclude their keys");
                let mut v: Vec<(String, Vec<Box<[u8]>>)> =
                    w.rules.iter().map(|(r, ws)| (g.rule(*r).name.clone(), ws.clone())).collect();
                v.sort();
                (g.rule(w.any).name.clone(), v)
            };
            assert_eq!(words(&parsed_with_words(s, &o)), words(&direct), "{s}");
        }
    }
    assert!(jstr::TRIES_BUILT.with(std::cell::Cell::get) > 100);
}

/// The grammar of `json_schema_to_ebnf`'s text with its excluded words, as
/// `json_schema_to_grammar` attaches them.
fn parsed_with_words(s: &str, o: &JsonSchemaOptions) -> crate::grammar::Grammar {
    let (text, excluded, _) = json_schema_to_ebnf_parts(s, o, false).unwrap();
    let g = crate::ebnf::parse_ebnf(&text, "root").unwrap();
    let id = |n: &str| g.rule_by_name(n).unwrap();
    let any = id(excluded.any.as_deref().unwrap());
    let rules = excluded.rules.into_iter().map(|(n, w)| (id(&n), w)).collect();
    g.with_excluded_words(crate::grammar::ExcludedWords { any, rules })
}

#[test]
fn key_trie_lengths_counted_in_ir_mode_equal_the_written_text() {
    let take = || jstr::TRIE_BYTES.with(|v| std::mem::take(&mut *v.borrow_mut()));
    let mut tries = 0;
    for s in KEY_TRIE_SCHEMAS.iter().chain(&KEY_SET_SCHEMAS) {
        let o = JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() };
        take();
        json_schema_to_ebnf(s, &o).unwrap();
        let written = take();
        json_schema_to_grammar(s, &o).unwrap();
        assert_eq!(written, take(), "{s}");
        tries += written.len();
    }
    assert!(tries >= 10, "{tries}");
}

#[test]
fn key_set_rule_lengths_counted_in_ir_mode_equal_the_written_text() {
    // IR mode counts each key-set rule's text against `MAX_OUTPUT_BYTES` without writing it:
    // the counted lengths must be the text's, rule by rule (names past one hex digit and
    // counts past one decimal digit, every separator layout, additional entries, counts).
    let props = |k: usize| (0..k).map(|j| format!(r#""p{j}":{{}}"#)).collect::<Vec<_>>().join(",");
    let schemas = KEY_SET_SCHEMAS.map(String::from).into_iter().chain([
        format!(r#"{{"type":"object","properties":{{{}}},"required":["p3"]}}"#, props(9)),
        format!(r#"{{"type":"object","properties":{{{}}},"minProperties":11,"maxProperties":12}}"#, props(6)),
        format!(r#"{{"type":"object","properties":{{{}}},"additionalProperties":{{"type":"integer"}}}}"#, props(6)),
    ]);
    let take = || key_sets::RULE_BYTES.with(|v| std::mem::take(&mut *v.borrow_mut()));
    let mut rules = 0;
    for s in schemas {
        for (k, f) in KEY_SET_LAYOUTS.iter().enumerate() {
            let mut o = JsonSchemaOptions::default();
            f(&mut o);
            take();
            if json_schema_to_ebnf(&s, &o).is_err() {
                // Past the any-order state bound under strict_mode: refused alike.
                assert!(json_schema_to_grammar(&s, &o).is_err() && k == 4, "{s}, options {k}");
                continue;
            }
            let written = take();
            json_schema_to_grammar(&s, &o).unwrap();
            let counted = take();
            assert_eq!(written, counted, "{s}, options {k}");
            rules += written.len();
        }
    }
    assert!(rules > 3_000, "{rules}");
}

#[test]
fn key_set_rules_of_a_12_key_object_skip_the_text() {
    // The 4,096 key-set rules come from the converter as IR, not as text to parse.
    let props: Vec<String> = (0..12).map(|j| format!(r#""p{j}":{{}}"#)).collect();
    let s = format!(r#"{{"type":"object","properties":{{{}}}}}"#, props.join(","));
    let o = JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() };
    key_sets::BUILT.with(|n| n.set(0));
    let g = json_schema_to_grammar(&s, &o).unwrap();
    assert!(g.rules().len() > 4096);
    assert!(key_sets::BUILT.with(std::cell::Cell::get) >= 4096);
}

/// Schemas of the MaskBench compile band's shapes (two band schemas verbatim) and of the
/// converter's scalar rules: every fixed rule (`fixed_rules.rs`) is used by some.
const FIXED_RULE_SCHEMAS: [&str; 6] = [
    r#"{"properties":{"measurements":{"properties":{"base":{"description":"The base of the triangle","type":"number"},"height":{"description":"The height of the triangle","type":"number"},"length":{"description":"The length of the rectangle","type":"number"},"radius":{"description":"The radius of the circle","type":"number"},"width":{"description":"The width of the rectangle","type":"number"}},"type":"object"},"shape":{"description":"The shape for which the area will be calculated","enum":["circle","rectangle","triangle"],"type":"string"}},"type":"object"}"#,
    r#"{"additionalProperties":true,"description":"Schema for an Optimizely experiment context (http://developers.optimizely.com/javascript/reference/#experiments)","properties":{"code":{"type":["string","null"]},"conditional":{"type":["boolean","null"]},"id":{"type":["string","null"]},"manual":{"type":["boolean","null"]},"name":{"type":["string","null"]},"variationIds":{"items":{"type":["string","null"]},"type":"array"}},"self":{"format":"jsonschema","name":"experiment","vendor":"com.optimizely","version":"1-0-0"},"type":"object"}"#,
    r#"{"type":"array","items":{"type":"integer"},"minItems":1}"#,
    r#"{"type":"object","properties":{"s":{"type":"string","maxLength":8},"n":{"type":"number","minimum":0},"i":{"type":"integer","maximum":99}},"required":["s"]}"#,
    r#"{"type":"string"}"#,
    "{}",
];

/// Asserts that `json_schema_to_grammar` makes, rule by rule (by name), the expression trees
/// and lookaheads of the parsed `json_schema_to_ebnf` text, the same root and excluded words.
fn assert_ir_equals_parsed_text(s: &str, o: &JsonSchemaOptions, what: &str) {
    let text = json_schema_to_ebnf(s, o);
    let direct = json_schema_to_grammar(s, o);
    let (text, direct) = match (text, direct) {
        (Ok(t), Ok(d)) => (t, d),
        (Err(a), Err(b)) => return assert_eq!(a.kind(), b.kind(), "{what}"),
        (a, b) => panic!("{what}: text {:?}, grammar {:?}", a.err(), b.err()),
    };
    let parsed = crate::ebnf::parse_ebnf(&text, "root").unwrap();
    assert_eq!(parsed.rules().len(), direct.rules().len(), "{what}");
    for r in parsed.rules() {
        let d = direct.rule_by_name(&r.name).unwrap_or_else(|| panic!("{what}: {} missing", r.name));
        let shape = |g: &crate::grammar::Grammar, rule: &crate::grammar::Rule| {
            let mut out = String::new();
            expr_shape(g, rule.body, &mut out);
            if let Some(l) = rule.lookahead {
                out.push_str(" (= ");
                expr_shape(g, l, &mut out);
            }
            out
        };
        assert_eq!(shape(&parsed, r), shape(&direct, direct.rule(d)), "rule {} of {what}", r.name);
    }
    assert_eq!(direct.rule(direct.root()).name, "root", "{what}");
    let words = |g: &crate::grammar::Grammar| {
        g.excluded_words().map(|w| {
            let mut v: Vec<(String, Vec<Box<[u8]>>)> =
                w.rules.iter().map(|(r, ws)| (g.rule(*r).name.clone(), ws.clone())).collect();
            v.sort();
            (g.rule(w.any).name.clone(), v)
        })
    };
    if direct.excluded_words().is_some() {
        assert_eq!(words(&parsed_with_words(s, o)), words(&direct), "{what}");
    }
}

#[test]
fn fixed_rules_as_ir_equal_the_parsed_text() {
    fixed_rules::BUILT.with(|n| n.set(0));
    let schemas = FIXED_RULE_SCHEMAS.iter().chain(&KEY_TRIE_SCHEMAS).chain(&KEY_SET_SCHEMAS);
    for (i, s) in schemas.enumerate() {
        for (k, f) in KEY_SET_LAYOUTS.iter().enumerate() {
            for spelling in [Spelling::Canonical, Spelling::Any] {
                for strict_mode in [true, false] {
                    let mut o = JsonSchemaOptions { strict_mode, spelling, ..JsonSchemaOptions::default() };
                    f(&mut o);
                    assert_ir_equals_parsed_text(
                        s,
                        &o,
                        &format!("schema {i}, layout {k}, {spelling:?}, {strict_mode}"),
                    );
                }
            }
        }
    }
    // Every schema defines `json_char` (and, canonical, the number rules) from the kept parse.
    assert!(fixed_rules::BUILT.with(std::cell::Cell::get) > 15 * 4 * 3, "fixed rules not built as IR");
}

/// The same on MaskBench's schemas (the first 400 by file name) when `GRAMMASK_SHARED` names
/// the shared data, with MaskBench's options (`strict_mode=false`).
#[test]
fn maskbench_schemas_as_ir_equal_the_parsed_text() {
    let Some(root) = std::env::var_os("GRAMMASK_SHARED").map(std::path::PathBuf::from) else {
        eprintln!("skipping: GRAMMASK_SHARED not set");
        return;
    };
    let Ok(dir) = std::fs::read_dir(root.join("maskbench/data")) else {
        eprintln!("skipping: no maskbench/data");
        return;
    };
    let mut files: Vec<_> = dir.filter_map(|e| Some(e.ok()?.path())).collect();
    files.sort();
    let o = JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() };
    for f in files.iter().take(400) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let s = match &v["schema"] {
            serde_json::Value::String(t) => t.clone(),
            other => other.to_string(),
        };
        assert_ir_equals_parsed_text(&s, &o, &f.display().to_string());
    }
}

#[test]
fn key_set_state_names_are_formatted() {
    for (mask, c, s) in
        [(0, 0, false), (1, 9, true), (0xabc, 10, false), (u64::MAX, u64::MAX, true), (0x10, 12345, true)]
    {
        let mut out = String::from("x");
        key_sets::push_state_name(&mut out, "obj.1", (mask, c, s));
        assert_eq!(out, format!("xobj.1.{mask:x}_{c}_{}", u8::from(s)));
        assert_eq!(out.len() - 1, key_sets::state_name_len("obj.1".len(), (mask, c, s)));
    }
}

/// `if`/`then`/`else`: `then` holds where `if` does and `else` where it fails; a missing branch
/// always holds; nested, referenced and negated `if`s too. Instances labelled by the JSON
/// Schema specification (checked with Python's `jsonschema` 4.26, draft 2020-12).
#[test]
fn if_branches_follow_their_keywords() {
    let cases: [(&str, &[&str], &[&str]); 8] = [
        (
            r#"{"if":{"type":"integer"},"then":{"minimum":10},"else":{"type":"string"}}"#,
            &["10", "11", r#""a""#],
            &["3", "null", "true", "1.5"],
        ),
        // `then` only: whatever fails `if` is valid.
        (r#"{"if":{"type":"string"},"then":{"maxLength":2}}"#, &[r#""ab""#, r#""""#, "1", "null", "[]"], &[r#""abc""#]),
        // `else` only: whatever passes `if` is valid.
        (r#"{"if":{"type":"string"},"else":{"type":"boolean"}}"#, &[r#""abc""#, "true"], &["1", "null", "{}"]),
        // An `if` in `then` and one in `else`.
        (
            r#"{"if":{"type":"integer"},"then":{"if":{"minimum":0},"then":{"multipleOf":2},"else":{"maximum":-10}},
               "else":{"if":{"type":"string"},"then":{"minLength":2},"else":{"type":"null"}}}"#,
            &["0", "4", "-10", "-11", r#""ab""#, "null"],
            &["3", "-1", "-9", r#""a""#, "true", "1.5"],
        ),
        // `if`, `then` and `else` through `$ref`.
        (
            r##"{"$defs":{"int":{"type":"integer"},"big":{"minimum":100},"s":{"type":"string"}},
                "if":{"$ref":"#/$defs/int"},"then":{"$ref":"#/$defs/big"},"else":{"$ref":"#/$defs/s"}}"##,
            &["100", r#""x""#],
            &["5", "null", "2.5"],
        ),
        // Negated: (if ∧ ¬then) ∨ (¬if ∧ ¬else).
        (
            r#"{"not":{"if":{"type":"integer"},"then":{"minimum":10},"else":{"type":"string"}}}"#,
            &["3", "null", "true"],
            &["10", r#""a""#],
        ),
        // Negated with `then` only: ¬if never fails the missing `else`.
        (r#"{"not":{"if":{"type":"string"},"then":{"maxLength":2}}}"#, &[r#""abc""#], &[r#""ab""#, "1", "null"]),
        // On an object's property.
        (
            r#"{"type":"object","properties":{"k":{"enum":["a","b"]},"v":{}},"required":["k","v"],
               "if":{"properties":{"k":{"const":"a"}}},"then":{"properties":{"v":{"type":"integer"}}},
               "else":{"properties":{"v":{"type":"string"}}}}"#,
            &[r#"{"k":"a","v":1}"#, r#"{"k":"b","v":"x"}"#],
            &[r#"{"k":"a","v":"x"}"#, r#"{"k":"b","v":1}"#],
        ),
    ];
    for (schema, valid, invalid) in cases {
        for (texts, want) in [(valid, true), (invalid, false)] {
            for t in texts {
                assert_eq!(schema_accepts(schema, Spelling::Canonical, t), want, "{schema} {t}");
            }
        }
    }
}

/// The key-set rules the converter marks (`Grammar::own_class`) are the grammar's key-set rules
/// (`{object}.{mask}_{count}_{0|1}`), not the builder's ids of them: the parser numbers rules
/// anew in definition order. With builder ids, other rules took the key-set hints (a pattern
/// string's rule walked as a key-set choice: MaskBench o76546's `mediatype`, ~20 ms a fill).
#[test]
fn key_set_hints_name_the_key_set_rules() {
    let schema = r#"{"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$"},
        "mediatype": {"type": "string", "pattern": "^(.+)/(.+)$"},
        "size": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "format": "email"}},
        "meta": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}},
                 "additionalProperties": false},
        "hash": {"type": "string", "pattern": "^([^:]+:[a-fA-F0-9]+|[a-fA-F0-9]{32}|)$"}
    }}"#;
    let g = json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    let is_key_set = |name: &str| {
        let Some((_, tail)) = name.rsplit_once('.') else { return false };
        let parts: Vec<&str> = tail.split('_').collect();
        parts.len() == 3
            && parts[0].chars().all(|c| c.is_ascii_hexdigit())
            && parts[1].chars().all(|c| c.is_ascii_digit())
            && matches!(parts[2], "0" | "1")
    };
    assert!(!g.own_class().is_empty());
    for r in g.own_class() {
        let name = &g.rules()[r.index()].name;
        assert!(is_key_set(name), "rule '{name}' is marked as a key-set rule");
    }
}

/// MaskBench files of session 58's 20-100 ms TTFM band (25 schemas, `docs/benchmarks.md`).
const TTFM_BAND: [&str; 25] = [
    "Github_hard---o82811",
    "Kubernetes---kb_743_Normalized",
    "Github_ultra---o58926",
    "Github_medium---o65678",
    "Github_medium---o9875",
    "Kubernetes---kb_225_Normalized",
    "Kubernetes---kb_684_Normalized",
    "Kubernetes---kb_1112_Normalized",
    "Github_hard---o80324",
    "Github_hard---o16058",
    "Kubernetes---kb_709_Normalized",
    "Github_hard---o48425",
    "WashingtonPost---wp_94_Normalized",
    "Github_medium---o39166",
    "Github_hard---o23230",
    "Github_medium---o9792",
    "Github_hard---o8487",
    "Github_ultra---o61647",
    "Github_ultra---o53885",
    "JsonSchemaStore---database.beef-5",
    "Github_hard---o82746",
    "Kubernetes---kb_490_Normalized",
    "Kubernetes---kb_145_Normalized",
    "Github_hard---o83016",
    "Github_ultra---o81125",
];

/// A random object schema with 3-9 properties (names prefixes of each other too), some
/// required, some nested, with or without counts, `additionalProperties` and
/// `dependentRequired`.
fn random_key_set_schema(rng: &mut crate::test_rng::XorShift) -> String {
    use std::fmt::Write as _;
    const NAMES: [&str; 12] = ["a", "ab", "abc", "b", "id", "name", "names", "kind", "x y", "z", "meta", "spec"];
    const VALUES: [&str; 5] = [
        "{}",
        r#"{"type":"integer"}"#,
        r#"{"type":"string"}"#,
        r#"{"type":"boolean"}"#,
        r#"{"type":"object","properties":{"p":{},"q":{"type":"string"},"r":{}}}"#,
    ];
    let n = 3 + rng.index(7);
    let mut names: Vec<&str> = Vec::new();
    while names.len() < n {
        let name = NAMES[rng.index(NAMES.len())];
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let props: Vec<String> = names.iter().map(|k| format!("\"{k}\":{}", VALUES[rng.index(VALUES.len())])).collect();
    let mut s = format!(r#"{{"type":"object","properties":{{{}}}"#, props.join(","));
    let required: Vec<String> = names.iter().filter(|_| rng.index(4) == 0).map(|k| format!("\"{k}\"")).collect();
    if !required.is_empty() {
        let _ = write!(s, r#","required":[{}]"#, required.join(","));
    }
    match rng.index(3) {
        0 => s += r#","additionalProperties":false"#,
        1 => s += r#","additionalProperties":{"type":"integer"}"#,
        _ => {}
    }
    if rng.index(3) == 0 {
        let min = rng.index(3);
        let _ = write!(s, r#","minProperties":{min},"maxProperties":{}"#, min + 1 + rng.index(n));
    }
    if rng.index(4) == 0 {
        let _ = write!(s, r#","dependentRequired":{{"{}":["{}"]}}"#, names[0], names[1]);
    }
    s + "}"
}

/// Schemas with any-order objects: the key-set schemas in every layout, 60 random objects in a
/// random layout, and the TTFM band (with `GRAMMASK_SHARED`).
fn key_set_cases() -> Vec<(String, JsonSchemaOptions)> {
    let mut cases: Vec<(String, JsonSchemaOptions)> = Vec::new();
    let layout = |k: usize| {
        let mut o = JsonSchemaOptions::default();
        KEY_SET_LAYOUTS[k](&mut o);
        o
    };
    for s in KEY_SET_SCHEMAS {
        cases.extend((0..KEY_SET_LAYOUTS.len()).map(|k| (s.to_string(), layout(k))));
    }
    let mut rng = crate::test_rng::XorShift(0x5959_1818);
    for _ in 0..60 {
        let s = random_key_set_schema(&mut rng);
        cases.push((s, layout(rng.index(KEY_SET_LAYOUTS.len()))));
    }
    if let Some(root) = std::env::var_os("GRAMMASK_SHARED").map(std::path::PathBuf::from) {
        for stem in TTFM_BAND {
            let f = root.join("maskbench/data").join(format!("{stem}.json"));
            let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            cases.push((
                v["schema"].to_string(),
                JsonSchemaOptions { strict_mode: false, ..JsonSchemaOptions::default() },
            ));
        }
    } else {
        eprintln!("GRAMMASK_SHARED not set: the TTFM band skipped");
    }
    cases
}

/// The direct writer (`compiler/key_set_dfa.rs`) gives the automata of the generic path (NFA,
/// subset construction, minimization) and charges the state budget as it does, on the cases of
/// the closed-form test; it writes most key-set rules (none written: the test fails).
#[test]
fn key_set_direct_automata_equal_generic_ones() {
    use crate::compiler::{BUDGET_USED, DIRECT_WRITES, NO_DIRECT};
    use std::cell::Cell;
    let (mut direct, mut key_set) = (0, 0);
    for (i, (s, o)) in key_set_cases().iter().enumerate() {
        let Ok(g) = json_schema_to_grammar(s, o) else { continue };
        let build = |generic: bool| {
            NO_DIRECT.with(|n| n.set(generic));
            let before = DIRECT_WRITES.with(Cell::get);
            let a = crate::compiler::Automata::build_on(&g, 1);
            NO_DIRECT.with(|n| n.set(false));
            let a = a.map(|a| format!("{a:?}")).map_err(|e| e.to_string());
            (a, BUDGET_USED.with(Cell::get), DIRECT_WRITES.with(Cell::get) - before)
        };
        let (generic, generic_used, none) = build(true);
        let (written, used, n) = build(false);
        assert_eq!(none, 0, "case {i}: written with the writer off");
        assert!(written == generic, "case {i}: the automata differ");
        if generic.is_ok() {
            assert_eq!(used, generic_used, "case {i}: the state budget charged");
        }
        direct += n;
        key_set += g.own_class().len();
    }
    assert!(direct > 1000 && 2 * direct > key_set, "{direct} of {key_set} key-set rules written directly");
}

/// No key-set rule but an object's start is inlined (`json_schema_to_grammar` keeps the
/// others; the starts are left to the inline plan, and some are copied into their bodies), and
/// every key-set rule not inlined into which no entry is inlined has [`key_sets::KeySetObject::automaton_states`] states (the
/// closed form a build on first prediction reserves ids by; one with an inlined entry has at
/// least as many): the key-set schemas in every layout, 60 random objects, and the TTFM band's 25
/// MaskBench schemas when `GRAMMASK_SHARED` names the shared data.
#[test]
fn key_set_automata_have_the_closed_form_state_count() {
    let cases = key_set_cases();
    // Key-set rules with the closed-form count; with an inlined entry (and more states).
    let (mut plain, mut with_entry, mut inlined_starts) = (0, 0, 0);
    for (s, o) in &cases {
        // A random object past the any-order budget is refused (`any_order_budget`).
        let Ok((_, _, apart)) = json_schema_to_ebnf_parts(s, o, true) else { continue };
        let g = json_schema_to_grammar(s, o).unwrap();
        // So is one whose counts and required keys contradict (no document).
        let Ok(a) = crate::compiler::Automata::build_on(&g, 1) else { continue };
        let (inline, _, _) = crate::compiler::inline_plan(&g);
        let mut states = vec![0usize; g.rules().len()];
        for st in a.states() {
            states[st.rule.index()] += 1;
        }
        let ids: std::collections::HashMap<&str, usize> =
            g.rules().iter().enumerate().map(|(i, r)| (r.name.as_str(), i)).collect();
        let mut name = String::new();
        for obj in &apart.key_sets {
            for st in &obj.states {
                name.clear();
                key_sets::push_state_name(&mut name, &obj.base, (st.mask, st.c, st.s));
                let r = ids[name.as_str()];
                if st.is_start() && inline[r] {
                    inlined_starts += 1;
                    continue;
                }
                assert!(!inline[r], "key-set rule {name} of {s} inlined");
                let closed = obj.automaton_states(st);
                if st.next.is_some() && obj.offered(st).any(|e| inline[ids[e]]) {
                    // An inlined entry adds its states (none when it only calls another rule).
                    assert!(states[r] >= closed, "rule {name} of {s}: {} states, closed form {closed}", states[r]);
                    with_entry += usize::from(states[r] > closed);
                } else {
                    assert_eq!(states[r], closed, "rule {name} of {s}");
                    plain += 1;
                }
            }
        }
    }
    assert!(plain > 1000 && with_entry > 100, "{plain} key-set rules with the closed form, {with_entry} with an entry");
    // The starts are not kept: small ones are read inlined in their bodies (o3626's leads).
    assert!(inlined_starts > 100, "{inlined_starts} object starts inlined into their bodies");
}
