#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = grammask_fuzz::targets::run_target("ebnf", data);
});
