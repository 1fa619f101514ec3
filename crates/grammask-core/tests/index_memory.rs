//! The per-vocabulary memory figure ([`TokenIndex::memory_parts`]) counts every part the index
//! holds: a counting global allocator measures the heap bytes each part keeps alive when it is
//! built, and the part's reported bytes must agree with them.
//!
//! Eager parts (built with the index) are measured by building the same structure on its own;
//! lazy parts by the live bytes the index gains when they are built. Estimates count lengths, not
//! capacities, and hash-table slots roughly, hence the tolerance.
#![allow(unsafe_code)]

mod common;

use grammask_core::builtin::builtin_json_grammar_with;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::slice::{BodySlice, RunBases};
use grammask_core::spelling::Spelling;
use grammask_core::token_index::TokenIndex;
use grammask_core::trie::TokenTrie;
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

struct Counting;

// Per thread (tests run on parallel threads): bytes allocated minus bytes freed.
thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|l| l.set(l.get() + delta));
}

fn live() -> isize {
    LIVE.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size().cast_signed());
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-layout.size().cast_signed());
        System.dealloc(ptr, layout);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size.cast_signed() - layout.size().cast_signed());
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A vocabulary of ~20k tokens: bytes, letter pairs, pseudo-random words with spaces, quotes,
/// digits and two- and three-byte UTF-8 characters (so that every slice has work).
fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    for a in b'a'..=b'z' {
        for b in b'a'..=b'z' {
            toks.push(vec![a, b]);
        }
    }
    let pieces: [&[u8]; 8] = [b" ", b"\"", b"1", "é".as_bytes(), "中".as_bytes(), b"\\", b"_", b":"];
    let mut seed = 0x2545_f491_u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    while toks.len() < 20_000 {
        let len = 2 + next() % 7;
        let mut t = Vec::new();
        for _ in 0..len {
            let r = next() % 40;
            if r < 8 {
                t.extend_from_slice(pieces[r as usize]);
            } else {
                t.push(b'a' + (r % 26) as u8);
            }
        }
        toks.push(t);
    }
    common::raw_vocab_with_stop(toks)
}

/// Heap bytes `make`'s result keeps alive (allocated while making it, minus what was freed).
fn held<T>(make: impl FnOnce() -> T) -> (T, usize) {
    let before = live();
    let value = make();
    (value, usize::try_from(live() - before).unwrap_or(0))
}

fn part(index: &TokenIndex, name: &str) -> usize {
    let parts = index.memory_parts();
    parts.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no part {name} in {parts:?}")).1
}

/// `reported` is within 15% of `measured` (plus 4 KB for small parts).
fn agree(name: &str, reported: usize, measured: usize) {
    eprintln!("{name}: reported {reported} B, measured {measured} B");
    let (r, m) = (reported as f64, measured as f64);
    assert!(
        r >= 0.85 * m - 4096.0 && r <= 1.15 * m + 4096.0,
        "{name}: reported {reported} B, but building it keeps {measured} B alive"
    );
}

#[test]
fn every_part_of_the_token_index_is_counted() {
    let v = vocab();
    let index = TokenIndex::for_vocab(&v);

    // Eager parts: the same structures built on their own.
    let words = v.vocab_size();
    let (copy, bytes) = held(|| {
        let toks: Vec<Vec<u8>> = (0..v.num_encoded() as u32).map(|t| v.encoded_token(t).to_vec()).collect();
        let opts =
            VocabularyOptions { stop_token_ids: Some(v.stop_token_ids().to_vec()), ..VocabularyOptions::default() };
        Vocabulary::new(toks, VocabType::Raw, opts).unwrap()
    });
    agree("vocabulary", part(&index, "vocabulary"), bytes);
    drop(copy);
    let (trie, bytes) = held(|| TokenTrie::new(&v));
    agree("trie", part(&index, "trie"), bytes);
    // With its boundary nodes, which the index builds with it.
    let (body, bytes) = held(|| {
        let b = BodySlice::new(&trie, words);
        b.prepare_boundaries(&trie);
        b
    });
    agree("body_slice", part(&index, "body_slice"), bytes);
    drop(body);
    let (bases, bytes) = held(|| RunBases::new(&trie, words));
    agree("run_bases", part(&index, "run_bases"), bytes);
    drop((bases, trie));

    // Lazy parts: what the index gains when each is built.
    let grows = |name: &str, build: &dyn Fn()| {
        let before = part(&index, name);
        let ((), bytes) = held(build);
        agree(name, part(&index, name) - before, bytes);
    };
    let letters: u128 = (u128::from(b'a')..=u128::from(b'z')).map(|x| 1u128 << x).sum();
    let printable: u128 = (0x20u128..0x7f).map(|x| 1u128 << x).sum::<u128>() & !(1 << b'"') & !(1 << b'\\');
    grows("run_indexes", &|| {
        // With the run indexes the class slices below are taken from.
        index.build_run_indexes(&[
            (letters, false),
            (printable, true),
            (letters | 1 << b' ', true),
            (1 << b' ', false),
        ]);
    });
    grows("wide_run_indexes", &|| {
        // A loop on letters that refuses U+00A0 (a call loop's or plain loop's wide index).
        index.run_index_less_off_fill(letters, &[vec![0xC2, 0xA0].into_boxed_slice()]).unwrap();
    });
    grows("class_slices", &|| {
        index.class_slice(printable).unwrap();
        index.class_slice(letters | 1 << b' ').unwrap();
    });
    grows("first_chars", &|| {
        index.first_chars();
    });
    grows("string_index", &|| {
        index.string_index();
    });
    grows("text_slice", &|| {
        index.build_text_slice();
    });
    grows("walked_bodies", &|| {
        use grammask_core::slice::Walked;
        index.walked_body(Walked::Chars(1 << b':')).unwrap();
        index.walked_body(Walked::Chars(1 << b'_')).unwrap();
        // `e_` (packed, first character low).
        index.walked_body(Walked::Strings([u32::from(b'e') | u32::from(b'_') << 8, 0, 0, 0, 0, 0])).unwrap();
    });
    // The form of a `pattern` string's first position, `[a-z][a-z0-9_]*` up to its quote.
    let schema = r#"{"type": "object", "properties": {"p": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}}}"#;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let cg = CompiledGrammar::new(&json_schema_to_grammar(schema, &opts).unwrap(), &v).unwrap();
    let a = cg.automata();
    let form = (0..a.states().len() as u32)
        .find_map(|s| grammask_core::slice::quote_form(a, grammask_core::compiler::StateId(s)))
        .expect("the pattern's body has a quote form");
    grows("quote_cuts", &|| {
        index.quote_cut(form.clone());
    });
    grows("quote_forms_seen", &|| {
        // Another form, asked for once: noted, not cut.
        assert!(index.quote_cut_if_seen([&form[..], &form[..]].concat()).is_none());
    });
    cg.wait_class_bodies();
    drop(cg);
    grows("quote_ends", &|| {
        index.quote_ends();
    });
    grows("class_body_slices", &|| {
        // The form of one character of `[a-z]` (pair 0, one run to the boundary).
        index.class_body_slice(&[0, 1, u32::from(b'a'), u32::from(b'z'), 0]);
    });
    // A compile leaves in the index what its states take (loop classes seen; costly kernels,
    // shared) once the grammar is dropped: the parts grow by what it leaves.
    let total = index.memory_size();
    let ((), bytes) = held(|| {
        let json = builtin_json_grammar_with(Spelling::Any, None).unwrap();
        // Each compile's class-body thread writes into the index: waited for, so that none is
        // still building (its temporaries live, its part not yet counted) when `held` measures.
        let cg = CompiledGrammar::new(&json, &v).unwrap();
        cg.wait_class_bodies();
        drop(cg);
        // An open object's first key start leaves the sorted string-body kernel (`body_ends`).
        let schema = r#"{"type": "object", "properties": {"ab": {"type": "integer"}}}"#;
        let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
        let cg = Arc::new(CompiledGrammar::new(&json_schema_to_grammar(schema, &opts).unwrap(), &v).unwrap());
        cg.wait_class_bodies();
        let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(b"{\"").unwrap());
        m.compute_mask().unwrap();
    });
    agree("what a compile leaves in the index", index.memory_size() - total, bytes);

    // Shared kernels come only from costly walks, which this vocabulary does not reach.
    let parts = index.memory_parts();
    let empty: Vec<_> = parts.iter().filter(|&&(name, n)| n == 0 && name != "shared_kernels").collect();
    assert!(empty.is_empty(), "parts empty after building everything: {empty:?}");
    assert_eq!(index.memory_size(), parts.iter().map(|p| p.1).sum::<usize>());
}
