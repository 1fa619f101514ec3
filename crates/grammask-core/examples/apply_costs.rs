//! Times `apply::mask_row` on one 151,936-token row (Qwen2.5's vocabulary) per float format and
//! mask kind (`sparse`: 10 mixed words then zeros; `dense`: all ones; `mixed`: random words).
//! `cargo run --release -p grammask-core --example apply_costs [REPS] [KIND] [FORMAT]`
//! Prints the fastest and the median time per row; KIND/FORMAT restrict the cells (for callgrind).
use grammask_core::apply::{mask_row, Bf16, NegInf, F16};
use std::hint::black_box;
use std::time::Instant;

const VOCAB: usize = 151_936;

fn mask(kind: &str) -> Vec<u32> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut random = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    };
    let words = VOCAB.div_ceil(32);
    match kind {
        "dense" => vec![u32::MAX; words],
        "mixed" => (0..words).map(|_| random()).collect(),
        _ => (0..words).map(|i| if i < 10 { random() } else { 0 }).collect(),
    }
}

fn time<T: NegInf>(fmt: &str, kind: &str, reps: usize, one: T) {
    let m = mask(kind);
    let mut row: Vec<T> = std::iter::repeat_n(one, VOCAB).collect();
    let mut ns: Vec<u128> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            mask_row(black_box(&mut row[..]), black_box(&m[..]));
            t.elapsed().as_nanos()
        })
        .collect();
    ns.sort_unstable();
    println!("{kind:6} {fmt:8} min {:7.2} us  p50 {:7.2} us", ns[0] as f64 / 1e3, ns[reps / 2] as f64 / 1e3);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(1).map_or(200, |s| s.parse().unwrap());
    let want = |i: usize, s: &str| args.get(i).is_none_or(|a| a == s);
    for kind in ["sparse", "dense", "mixed"] {
        if !want(2, kind) {
            continue;
        }
        if want(3, "float32") {
            time("float32", kind, reps, 0x3F80_0000u32);
        }
        if want(3, "float16") {
            time("float16", kind, reps, F16(0x3C00));
        }
        if want(3, "bfloat16") {
            time("bfloat16", kind, reps, Bf16(0x3F80));
        }
        if want(3, "float64") {
            time("float64", kind, reps, 0x3FF0_0000_0000_0000u64);
        }
    }
}
