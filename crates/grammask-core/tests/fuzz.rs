//! The fuzz targets of `fuzz/` on the stable toolchain.
//!
//! - `fuzz_regressions_replay` (always runs): every input under `fuzz/regressions/<target>/` and
//!   every seed under `fuzz/seeds/<target>/` passes its target. A crash or disagreement found by a
//!   fuzzer is kept there as a file.
//! - `fuzz_driver` (`#[ignore]`d): a mutational fuzzer over the seeds for a time budget, for when
//!   cargo-fuzz (nightly, libFuzzer) is not at hand. `GRAMMASK_FUZZ_TARGET` (one name, default
//!   all), `GRAMMASK_FUZZ_SECONDS` (per target, default 10), `GRAMMASK_FUZZ_SEED`. A failing input
//!   is written to `fuzz/regressions/<target>/crash-<hash>` before the test fails.
//!   `cargo test --profile ci -p grammask-core --test fuzz -- --ignored --nocapture`; `.ci/fuzz`.

#[path = "../../../fuzz/src/targets.rs"]
#[allow(dead_code)]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn fuzz_regressions_replay() {
    let mut replayed = 0;
    for &t in targets::TARGETS {
        for kind in ["regressions", "seeds"] {
            for f in files(&fuzz_dir().join(kind).join(t)) {
                let data = std::fs::read(&f).unwrap();
                let r = catch_unwind(AssertUnwindSafe(|| targets::run_target(t, &data)));
                assert!(r.is_ok(), "{t}: {} fails", f.display());
                replayed += 1;
            }
        }
    }
    assert!(replayed >= targets::TARGETS.len(), "only {replayed} inputs replayed");
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens that the mutator splices in: syntax of the three front ends.
const DICT: &[&str] = &[
    "::=",
    "root",
    " | ",
    "(",
    ")",
    "*",
    "+",
    "?",
    "{2,3}",
    "{0,}",
    "[a-z]",
    "[^\\n]",
    "\"",
    "\\",
    "\\x7f",
    "\\u00e9",
    "(=",
    "\n",
    "#",
    "\"type\"",
    "\"object\"",
    "\"string\"",
    "\"integer\"",
    "\"properties\"",
    "\"required\"",
    "\"$ref\"",
    "\"#/$defs/a\"",
    "\"$defs\"",
    "\"anyOf\"",
    "\"enum\"",
    "\"pattern\"",
    "\"minimum\"",
    "\"maxLength\"",
    "\"items\"",
    "\"additionalProperties\"",
    "\"format\"",
    "\"const\"",
    "{",
    "}",
    ":",
    ",",
    "[",
    "]",
    "true",
    "null",
    "1e3",
    "-0.5",
    "\\d",
    "\\w",
    "\\s",
    "\\b",
    ".",
    "^",
    "$",
    "(?:",
    "(?i)",
    "\\p{L}",
    "[[:alpha:]]",
    "é",
    "日",
    "\u{10FFFF}",
];

fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..=rng.below(4) {
        let pos = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            1 if !v.is_empty() => {
                let end = (pos + 1 + rng.below(8)).min(v.len());
                v.drain(pos.min(end)..end);
            }
            2 => {
                let d = DICT[rng.below(DICT.len())].as_bytes();
                v.splice(pos..pos, d.iter().copied());
            }
            3 if !v.is_empty() => {
                let a = rng.below(v.len());
                let b = (a + 1 + rng.below(16)).min(v.len());
                let chunk = v[a..b].to_vec();
                v.splice(pos..pos, chunk);
            }
            4 => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + 1 + rng.below(32)).min(other.len());
                    v.splice(pos..pos, other[a..b].iter().copied());
                }
            }
            5 => v.insert(pos, b"0123456789"[rng.below(10)]),
            _ => v.insert(pos, rng.next() as u8),
        }
    }
    v.truncate(4096);
    v
}

/// FNV-1a, for crash file names.
fn hash(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn fuzz_one(target: &str, budget: Duration, seed: u64) {
    let mut corpus: Vec<Vec<u8>> = files(&fuzz_dir().join("seeds").join(target))
        .into_iter()
        .chain(files(&fuzz_dir().join("regressions").join(target)))
        .map(|f| std::fs::read(f).unwrap())
        .collect();
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let mut rng = Rng(seed | 1);
    let start = Instant::now();
    let (mut execs, mut deep_execs, mut slowest, mut slow_input) = (0u64, 0u64, Duration::ZERO, Vec::new());
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    while start.elapsed() < budget {
        let base = corpus[rng.below(corpus.len())].clone();
        let input = mutate(&mut rng, &base, &corpus);
        let t0 = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| targets::run_target(target, &input)));
        let dt = t0.elapsed();
        execs += 1;
        if dt > slowest {
            slowest = dt;
            slow_input.clone_from(&input);
        }
        if dt > Duration::from_secs(2) {
            // Not a failure (limits bound the work), but kept for the performance work.
            let dir = fuzz_dir().join("slow").join(target);
            std::fs::create_dir_all(&dir).unwrap();
            let name = format!("slow-{:016x}-{}ms", hash(&input), dt.as_millis());
            std::fs::write(dir.join(name), &input).unwrap();
        }
        if let Err(p) = &r {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            let dir = fuzz_dir().join("regressions").join(target);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("crash-{:016x}", hash(&input)));
            std::fs::write(&path, &input).unwrap();
            failure = Some(format!("{target}: {} -> {msg}", path.display()));
            break;
        }
        // Corpus growth without coverage feedback: keep some inputs that got past the front end
        // (compiled and masked), rarely one that did not.
        let deep = r.unwrap_or(false);
        if deep {
            deep_execs += 1;
        }
        if corpus.len() < 4096 && rng.below(if deep { 8 } else { 256 }) == 0 {
            corpus.push(input);
        }
    }
    std::panic::set_hook(prev);
    eprintln!(
        "fuzz {target}: {execs} execs ({deep_execs} past the front end) in {:.1} s, corpus {}, slowest input {:.3} s ({} bytes)",
        start.elapsed().as_secs_f64(),
        corpus.len(),
        slowest.as_secs_f64(),
        slow_input.len()
    );
    if let Some(f) = failure {
        panic!("{f}");
    }
}

#[test]
#[ignore = "a time-budgeted fuzzer; run by .ci/fuzz"]
fn fuzz_driver() {
    let secs: u64 = std::env::var("GRAMMASK_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let seed: u64 = std::env::var("GRAMMASK_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("fuzz seed {seed}");
    let only = std::env::var("GRAMMASK_FUZZ_TARGET").ok();
    for &t in targets::TARGETS {
        if only.as_deref().is_some_and(|o| o != t) {
            continue;
        }
        fuzz_one(t, Duration::from_secs(secs), seed);
    }
}

/// Times each file of `GRAMMASK_FUZZ_FILES` (paths separated by `:`) under `GRAMMASK_FUZZ_TARGET`,
/// for taking apart the inputs the driver keeps under `fuzz/slow/`.
#[test]
#[ignore = "a tool: times given inputs"]
fn fuzz_time_files() {
    let target = std::env::var("GRAMMASK_FUZZ_TARGET").expect("GRAMMASK_FUZZ_TARGET");
    let paths = std::env::var("GRAMMASK_FUZZ_FILES").expect("GRAMMASK_FUZZ_FILES");
    for p in paths.split(':') {
        let data = std::fs::read(p).unwrap();
        let t0 = Instant::now();
        let deep = targets::run_target(&target, &data);
        eprintln!("{p}: {:.3} s (past the front end: {deep})", t0.elapsed().as_secs_f64());
    }
}
