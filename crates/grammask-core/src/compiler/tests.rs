//! Tests of DFA minimization (`minimize.rs`, `scc.rs`, `refine.rs`) against Moore's reference
//! partition.
use super::determinize::SeqTable;
use super::dfa::{ByteEdgeLocal, Dfa};
use super::minimize::{minimize, push_signature, quotient, refine_partition};
use super::scc::{scc_partition, scc_partition_with, SccScratch};
use crate::grammar::RuleId;
use std::collections::HashMap;

/// Buffers of [`moore_partition`].
#[derive(Default)]
struct MooreScratch {
    class: Vec<u32>,
    next: Vec<u32>,
    sig: Vec<u32>,
    span: Vec<(u32, u32)>,
    slots: Vec<u32>,
}

/// The coarsest partition of `dfa`'s states into `sc.class` (class ids in first-seen state
/// order), by rounds: a state's signature is its class, its byte ranges with their target
/// classes (adjacent ranges with the same class merged) and its rule edges with their target
/// classes. A round only splits classes (the old class is part of the signature), so an equal
/// class count means the partition is stable. Returns the number of classes; `None` past
/// `max_rounds`. The reference for [`minimize`] and [`refine_partition`].
fn moore_partition(dfa: &Dfa, sc: &mut MooreScratch, max_rounds: usize) -> Option<usize> {
    let n = dfa.len();
    let MooreScratch { class, next, sig, span, slots } = sc;
    class.clear();
    class.extend(dfa.finals.iter().map(|&f| u32::from(f)));
    let mut count = 0usize;
    let size = (2 * n).next_power_of_two();
    for _ in 0..max_rounds {
        sig.clear();
        span.clear();
        for s in 0..n {
            let start = sig.len() as u32;
            sig.push(class[s]);
            push_signature(dfa, s, class, sig);
            span.push((start, sig.len() as u32));
        }
        // Open addressing over representatives (state + 1; 0 is empty).
        slots.clear();
        slots.resize(size, 0);
        next.clear();
        let mut ids = 0u32;
        let of = |s: usize| &sig[span[s].0 as usize..span[s].1 as usize];
        for s in 0..n {
            let mut i = (SeqTable::hash(of(s)) as usize) & (size - 1);
            let id = loop {
                match slots[i] {
                    0 => {
                        slots[i] = s as u32 + 1;
                        ids += 1;
                        break ids - 1;
                    }
                    rep if of(rep as usize - 1) == of(s) => break next[rep as usize - 1],
                    _ => i = (i + 1) & (size - 1),
                }
            };
            next.push(id);
        }
        std::mem::swap(class, next);
        if ids as usize == count {
            return Some(count);
        }
        count = ids as usize;
    }
    None
}

/// A state's class, byte ranges and rule edges with the classes of their targets.
type MooreSig = (u32, Vec<(u8, u8, u32)>, Vec<(RuleId, u32)>);

/// Moore's refinement, the reference for [`minimize`]: classes of states.
fn moore_classes(dfa: &Dfa) -> Vec<u32> {
    let n = dfa.len();
    let mut class: Vec<u32> = dfa.finals.iter().map(|&f| u32::from(f)).collect();
    let mut count = 0;
    loop {
        let mut ids: HashMap<MooreSig, u32> = HashMap::new();
        let mut next = vec![0; n];
        for s in 0..n {
            let mut bytes: Vec<(u8, u8, u32)> = Vec::new();
            for e in dfa.bytes_of(s) {
                let c = class[e.target as usize];
                match bytes.last_mut() {
                    Some(l) if l.2 == c && u16::from(l.1) + 1 == u16::from(e.lo) => l.1 = e.hi,
                    _ => bytes.push((e.lo, e.hi, c)),
                }
            }
            let rules = dfa.rules_of(s).iter().map(|&(r, t)| (r, class[t as usize])).collect();
            let len = ids.len() as u32;
            next[s] = *ids.entry((class[s], bytes, rules)).or_insert(len);
        }
        class = next;
        if ids.len() == count {
            return class;
        }
        count = ids.len();
    }
}

/// Random DFAs over a few bytes and rules; with `twin`, every state has an equivalent copy.
fn random_dfa(next: &mut impl FnMut(usize) -> usize, twin: bool) -> Dfa {
    // Per state: finality, byte edges, rule edges.
    type Shape = (bool, Vec<(u8, u8, usize)>, Vec<(u32, usize)>);
    let k = 1 + next(12);
    let n = if twin { 2 * k } else { k };
    let mut dfa = Dfa::default();
    let mut shapes: Vec<Shape> = Vec::new();
    for _ in 0..k {
        let mut bytes = Vec::new();
        let mut lo = 0u8;
        while lo < 8 {
            let hi = lo + next(3) as u8;
            if next(3) > 0 {
                bytes.push((lo, hi, next(k)));
            }
            lo = hi + 1;
        }
        let mut rules = Vec::new();
        for r in 0..3 {
            if next(4) == 0 {
                rules.push((r, next(k)));
            }
        }
        shapes.push((next(3) == 0, bytes, rules));
    }
    for s in 0..n {
        let (fin, bytes, rules) = &shapes[s % k];
        let first = dfa.bytes.len();
        for &(lo, hi, t) in bytes {
            let t = if twin && next(2) == 0 { t + k } else { t };
            dfa.push_byte(first, ByteEdgeLocal { lo, hi, target: t as u32 });
        }
        dfa.rules
            .extend(rules.iter().map(|&(r, t)| (RuleId(r), (if twin && next(2) == 0 { t + k } else { t }) as u32)));
        dfa.end_state(*fin);
    }
    dfa
}

#[test]
fn minimize_matches_moore() {
    let mut rng = crate::test_rng::XorShift(0x9E37_79B9_7F4A_7C15);
    let mut next = |n: usize| rng.index(n);
    for i in 0..3000 {
        let dfa = random_dfa(&mut next, i % 2 == 0);
        let classes = moore_classes(&dfa);
        let want = classes.iter().copied().collect::<std::collections::HashSet<_>>().len();
        let mut sc = MooreScratch::default();
        let moore = moore_partition(&dfa, &mut sc, usize::MAX).expect("rounds are unbounded here");
        let (class, refined) = refine_partition(&dfa);
        assert_eq!((moore, refined), (want, want), "case {i}");
        let flat = |d: &Dfa| {
            let bytes: Vec<(u8, u8, u32)> = d.bytes.iter().map(|e| (e.lo, e.hi, e.target)).collect();
            (d.finals.clone(), d.byte_end.clone(), bytes, d.rule_end.clone(), d.rules.clone())
        };
        assert_eq!(flat(&quotient(&dfa, &class, refined)), flat(&quotient(&dfa, &sc.class, moore)), "case {i}");
        // The component-wise partition: only equivalent states share a class, and every
        // class is found when at most one component is cyclic (no twin loops).
        let mut ss = SccScratch::default();
        let Some(k) = scc_partition(&dfa, &mut ss) else { panic!("case {i}: components are small here") };
        let mut used = vec![false; k];
        for a in 0..dfa.len() {
            used[ss.class[a] as usize] = true;
            for b in 0..dfa.len() {
                if ss.class[a] == ss.class[b] {
                    assert_eq!(classes[a], classes[b], "case {i}: states {a} and {b} merged");
                }
            }
        }
        assert!(used.iter().all(|&u| u), "case {i}: class ids are dense");
        if ss.cyclic < 2 {
            assert_eq!(k, want, "case {i}");
        }
        let out = minimize(dfa.clone(), &mut ss);
        assert_eq!(out.len(), want, "case {i}");
        assert!(bisimilar(&dfa, &out), "case {i}");
    }
}

/// Whether `a` and `b` agree on every word of up to `len` symbols: bytes `0..8` and rule edges
/// `0..3` (the symbols of [`random_dfa`]), a word accepted when its path ends at a final state.
fn same_words(a: &Dfa, b: &Dfa, len: usize) -> bool {
    let step = |d: &Dfa, s: usize, sym: usize| -> Option<usize> {
        if sym < 9 {
            let x = sym as u8;
            d.bytes_of(s).iter().find(|e| e.lo <= x && x <= e.hi).map(|e| e.target as usize)
        } else {
            d.rules_of(s).iter().find(|&&(r, _)| r.0 as usize == sym - 9).map(|&(_, t)| t as usize)
        }
    };
    let mut work = vec![(Some(0usize), Some(0usize), 0usize)];
    while let Some((p, q, depth)) = work.pop() {
        if p.is_some_and(|p| a.finals[p]) != q.is_some_and(|q| b.finals[q]) {
            return false;
        }
        if depth < len && (p.is_some() || q.is_some()) {
            for sym in 0..12 {
                work.push((p.and_then(|p| step(a, p, sym)), q.and_then(|q| step(b, q, sym)), depth + 1));
            }
        }
    }
    true
}

/// The component pass with large components kept apart (what [`minimize`] runs on large
/// automata), every cyclic component made "large" here: only equivalent states merge, and the
/// quotient accepts the same words as the automaton.
#[test]
fn components_kept_apart_keep_the_language() {
    let mut rng = crate::test_rng::XorShift(0x2545_F491_4F6C_DD1D);
    let mut next = |n: usize| rng.index(n);
    let (mut merged, mut wrong_caught) = (0, 0);
    for i in 0..600 {
        let dfa = random_dfa(&mut next, i % 2 == 0);
        let classes = moore_classes(&dfa);
        let mut ss = SccScratch::default();
        let k = scc_partition_with(&dfa, &mut ss, 1, true).expect("large components are kept apart");
        let q = quotient(&dfa, &ss.class, k);
        assert!(same_words(&dfa, &q, 4), "case {i}");
        assert!(bisimilar(&dfa, &q), "case {i}");
        for a in 0..dfa.len() {
            for b in 0..dfa.len() {
                if ss.class[a] == ss.class[b] {
                    assert_eq!(classes[a], classes[b], "case {i}: states {a} and {b} merged");
                }
            }
        }
        merged += dfa.len() - k;
        // The word check sees a wrong merge: every state in one class.
        if classes.iter().any(|&c| c != classes[0]) {
            wrong_caught += usize::from(!same_words(&dfa, &quotient(&dfa, &vec![0; dfa.len()], 1), 4));
        }
    }
    assert!(merged > 0, "some states merge");
    assert!(wrong_caught > 100, "the word check sees wrong merges ({wrong_caught})");
}

/// An automaton above the refinement bound (250 equal branches of five states, a loop in each,
/// and a ring of 200 states that the component pass keeps apart) is still merged, keeping its
/// language.
#[test]
fn large_automaton_is_merged_by_components() {
    let mut dfa = Dfa::default();
    let (branches, depth, ring) = (250u32, 5u32, 200u32);
    let ring_start = 1 + branches * depth;
    // State 0: byte 0 to the ring, byte `b + 1` to branch `b`'s first state.
    let first = dfa.bytes.len();
    dfa.push_byte(first, ByteEdgeLocal { lo: 0, hi: 0, target: ring_start });
    for b in 0..branches {
        dfa.push_byte(first, ByteEdgeLocal { lo: b as u8 + 1, hi: b as u8 + 1, target: 1 + b * depth });
    }
    dfa.end_state(false);
    for _ in 0..branches {
        let base = dfa.len() as u32;
        for d in 0..depth {
            let first = dfa.bytes.len();
            if d + 1 < depth {
                dfa.push_byte(first, ByteEdgeLocal { lo: 1, hi: 1, target: base + d + 1 });
            }
            if d == 2 {
                dfa.push_byte(first, ByteEdgeLocal { lo: 2, hi: 2, target: base + d });
            }
            dfa.end_state(d + 1 == depth);
        }
    }
    for r in 0..ring {
        let first = dfa.bytes.len();
        dfa.push_byte(first, ByteEdgeLocal { lo: 3, hi: 3, target: ring_start + (r + 1) % ring });
        dfa.end_state(r % 2 == 0);
    }
    let n = dfa.len();
    let out = minimize(dfa.clone(), &mut SccScratch::default());
    // The branches merge into one chain; the ring's states stay apart.
    assert_eq!(out.len(), 1 + depth as usize + ring as usize, "from {n} states");
    assert!(bisimilar(&dfa, &out));
}

/// Whether two DFAs (rule edges included) accept the same language from their starts.
fn bisimilar(a: &Dfa, b: &Dfa) -> bool {
    let step = |d: &Dfa, s: usize, x: u8| d.bytes_of(s).iter().find(|e| e.lo <= x && x <= e.hi).map(|e| e.target);
    let mut seen = std::collections::HashSet::from([(0u32, 0u32)]);
    let mut work = vec![(0u32, 0u32)];
    while let Some((p, q)) = work.pop() {
        let (p, q) = (p as usize, q as usize);
        if a.finals[p] != b.finals[q] || a.rules_of(p).len() != b.rules_of(q).len() {
            return false;
        }
        let mut next: Vec<(u32, u32)> = Vec::new();
        for (&(r, t), &(r2, t2)) in a.rules_of(p).iter().zip(b.rules_of(q)) {
            if r != r2 {
                return false;
            }
            next.push((t, t2));
        }
        for x in 0..=255u8 {
            match (step(a, p, x), step(b, q, x)) {
                (Some(t), Some(t2)) => next.push((t, t2)),
                (None, None) => {}
                _ => return false,
            }
        }
        for pair in next {
            if seen.insert(pair) {
                work.push(pair);
            }
        }
    }
    true
}

#[test]
fn loop_joins_an_equal_self_loop() {
    // 0 -a-> 1 (self-loop on a); 0 -b-> 2 <-a-> 3: states 1, 2 and 3 all accept a*, and the
    // component {2, 3} is decided after state 1.
    let mut dfa = Dfa::default();
    let states = [
        (false, vec![(b'a', 1u32), (b'b', 2)]),
        (true, vec![(b'a', 1)]),
        (true, vec![(b'a', 3)]),
        (true, vec![(b'a', 2)]),
    ];
    for (fin, edges) in states {
        let first = dfa.bytes.len();
        for (b, t) in edges {
            dfa.push_byte(first, ByteEdgeLocal { lo: b, hi: b, target: t });
        }
        dfa.end_state(fin);
    }
    let mut ss = SccScratch::default();
    assert_eq!(scc_partition(&dfa, &mut ss), Some(2));
}

/// Whether the root rule's automaton (every rule inlined) accepts `s`.
fn accepts(a: &super::Automata, s: &[u8]) -> bool {
    let mut at = a.rule_start(a.root());
    for &b in s {
        match a.byte_edges(at).iter().find(|e| e.lo <= b && b <= e.hi) {
            Some(e) => at = e.target,
            None => return false,
        }
    }
    a.state(at).is_final
}

/// Subset construction keeps every byte edge, in both of its paths (one NFA state with
/// disjoint ordered edges, taken as they are; several, swept by interval): every string of up
/// to two bytes is accepted exactly when it is in the language.
#[test]
fn determinize_keeps_every_byte_edge() {
    let in_class = |b: u8| matches!(b, b'a'..=b'c' | b'x'..=b'z' | b'0'..=b'2' | b'%');
    type Lang<'a> = &'a dyn Fn(&[u8]) -> bool;
    let cases: [(&str, Lang); 3] = [
        // One NFA state with four disjoint ranges, then one with three.
        (
            "root ::= [a-cx-z0-2%] [k-mp-q!]",
            &|s| matches!(s, [x, y] if in_class(*x) && matches!(y, b'k'..=b'm' | b'p'..=b'q' | b'!')),
        ),
        // Overlapping alternatives: the sweep.
        (
            r#"root ::= [a-cx-z0-2%] "1" | [b-y] [0-9]"#,
            &|s| matches!(s, [x, y] if (in_class(*x) && *y == b'1') || ((b'b'..=b'y').contains(x) && y.is_ascii_digit())),
        ),
        ("root ::= [a-cx-z0-2%]? [^a]", &|s| match s {
            [y] => *y != b'a' && *y < 0x80,
            // Or one two-byte character.
            [x, y] => {
                (in_class(*x) && *y != b'a' && *y < 0x80) || ((0xC2..=0xDF).contains(x) && (0x80..=0xBF).contains(y))
            }
            _ => false,
        }),
    ];
    for (src, lang) in cases {
        let g = crate::ebnf::parse_ebnf(src, "root").unwrap();
        let a = super::Automata::build(&g).unwrap();
        for x in 0..=255u8 {
            assert_eq!(accepts(&a, &[x]), lang(&[x]), "{src}: {x:?}");
            for y in 0..=255u8 {
                assert_eq!(accepts(&a, &[x, y]), lang(&[x, y]), "{src}: {:?}", [x, y]);
            }
        }
    }
}

/// An inlined rule used by three rules is copied into them as its own minimized automaton
/// (`Nfa::splice_inlined`): the language is that of the rule expanded in place, with a loop
/// back into the copy's start, a repeated copy, and copies followed by more text or by nothing.
#[test]
fn spliced_inlined_rule_keeps_the_language() {
    let w = r#"([ab] [ab]? | "c"*)"#;
    let spliced =
        format!("root ::= a | b | c\na ::= \"x\" w \"1\"\nb ::= \"y\" w \"2\" w\nc ::= \"z\" (w \"3\")*\nw ::= {w}\n");
    let expanded = format!("root ::= \"x\" {w} \"1\" | \"y\" {w} \"2\" {w} | \"z\" ({w} \"3\")*\n");
    let build = |src: &str| super::Automata::build(&crate::ebnf::parse_ebnf(src, "root").unwrap()).unwrap();
    let (a, b) = (build(&spliced), build(&expanded));
    let alphabet = b"xyz123abc";
    let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
    let mut accepted = 0;
    for _ in 0..5 {
        let mut longer = Vec::new();
        for s in &strings {
            assert_eq!(accepts(&a, s), accepts(&b, s), "{:?}", String::from_utf8_lossy(s));
            accepted += usize::from(accepts(&b, s));
            for &c in alphabet {
                longer.push([&s[..], &[c]].concat());
            }
        }
        strings = longer;
    }
    // The walk reaches into each copy: strings through every rule are accepted.
    assert!(accepted > 30, "{accepted}");
}

/// Pruning (`Automata::live_states`, a worklist) keeps exactly the live states: productivity
/// flows through several levels of rule references, and a recursion with no exit (`dead`) makes
/// every path through it dead, also two rules away (`dead2`). Fed byte by byte, a matcher takes
/// exactly the prefixes of the language.
#[test]
fn prune_drops_dead_paths_through_nested_rules() {
    use crate::matcher::{CompiledGrammar, Matcher, MatcherOptions};
    use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
    use std::sync::Arc;
    let src = r#"root ::= "(" b ")" root | "x" dead | "z" d | ""
b ::= "[" c "]" | "{" dead2 "}"
c ::= "y" | "y" c
dead ::= "q" dead
d ::= "m" | "k" dead2
dead2 ::= "r" dead "r"
"#;
    let toks: Vec<Vec<u8>> = b"()[]{}xyzqmkr".iter().map(|&c| vec![c]).chain([b"</s>".to_vec()]).collect();
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let cg = Arc::new(CompiledGrammar::new(&crate::ebnf::parse_ebnf(src, "root").unwrap(), &vocab).unwrap());
    let run = |s: &str| {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        let taken = s.bytes().take_while(|&b| m.accept_bytes(&[b]).unwrap()).count();
        (taken, m.is_completed())
    };
    for ok in ["", "([y])", "([yy])([y])", "zm", "([y])zm"] {
        assert_eq!(run(ok), (ok.len(), true), "{ok}");
    }
    // The byte that leads only into dead states is refused.
    for (bad, at) in [("x", 0), ("zk", 1), ("([y])x", 5), ("({", 1), ("(]", 1)] {
        assert_eq!(run(bad).0, at, "{bad}");
    }
}

/// Subset construction keeps its buffers from one rule to the next (`Scratch`): every rule's DFA
/// equals the one built with fresh buffers, whatever rules came before it. Fails when the `single`
/// entries a rule set are not reset for the next, or when a reset index keeps occupied slots.
#[test]
fn determinize_with_reused_buffers_equals_fresh_buffers() {
    use super::determinize::{determinize, Scratch};
    use super::nfa::Nfa;
    use std::fmt::Write;
    // Rules of different shapes and sizes (one grows the index past 64 slots), in an order where
    // small ones follow large ones.
    let bodies = [
        r#"[a-z]{1,40} "." [0-9]{1,3}"#,
        r#""ab" | "ac" | [x-z]"#,
        r#"("k" | "l" [m-n])* "q""#,
        r#""x" "y"? "z""#,
        r#"[0-9]{1,30} | "-" [0-9]+"#,
        r#""p" ([a-c] "q")+"#,
        r#""a""#,
        r#"[a-f0-9]{2,6} ("," [a-f0-9]{2,6})*"#,
    ];
    let mut src = String::from("root ::= r0\n");
    for (i, b) in bodies.iter().enumerate() {
        writeln!(src, "r{i} ::= {b}").unwrap();
    }
    let g = crate::ebnf::parse_ebnf(&src, "root").unwrap();
    let dfa_of = |i: usize, sc: &mut Scratch| {
        let r = g.rules().iter().position(|r| r.name == format!("r{i}")).unwrap();
        let mut nfa = Nfa { inline_all: true, ..Nfa::default() };
        let mut budget = usize::MAX;
        let (start, end) = nfa.build(&g, g.rules()[r].body, &mut budget).unwrap();
        nfa.freeze();
        format!("{:?}", determinize(&nfa, start, end, &mut budget, sc).unwrap())
    };
    let mut reused = Scratch::default();
    for round in 0..3 {
        for i in (0..bodies.len()).rev().chain(0..bodies.len()) {
            assert_eq!(dfa_of(i, &mut reused), dfa_of(i, &mut Scratch::default()), "rule r{i}, round {round}");
        }
    }
}

/// A reset index is empty: after a large table, a small one and a reset (sparse: only occupied
/// slots are cleared) every slot is free and new sequences get ids from 0 again.
#[test]
fn reset_seq_table_frees_every_slot() {
    let mut t = SeqTable::default();
    for i in 0..1500u32 {
        t.intern(&[i, i * 7]);
    }
    t.reset();
    for i in 0..20u32 {
        assert_eq!(t.intern(&[i]), (i, true));
    }
    assert!(t.slots.len() >= 1024 && t.len() * 8 < t.slots.len(), "the next reset is a sparse one");
    t.reset();
    assert!(t.slots.iter().all(|&s| s == 0));
    for i in 0..20u32 {
        assert_eq!(t.intern(&[i + 1, 5]), (i, true));
        assert_eq!(t.intern(&[i + 1, 5]), (i, false));
    }
}
