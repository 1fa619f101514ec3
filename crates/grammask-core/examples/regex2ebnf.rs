//! Prints the EBNF grammar of regular expressions, one per input line (a bridge for testing
//! against other engines). Usage:
//!   regex2ebnf direct                    # lines: PATTERN -> `regex_to_ebnf` (full match, dot-all)
//!   regex2ebnf dfa full|search raw|json [i][s]   # lines: PATTERN -> `CharDfa::to_ebnf`
//! Output: for each input line, either `OK <n>` followed by n lines of EBNF, or `ERR <message>`.
use std::io::{BufRead, Write};

use grammask_core::regex::{regex_to_ebnf, Anchoring, CharDfa, Regex, RegexFlags, TextMode};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.expect("utf-8 input");
        // Patterns are JSON strings so they can hold any character.
        let pattern: String = serde_json::from_str(&line).expect("each line is a JSON string");
        let result = if args.get(1).map(String::as_str) == Some("dfa") {
            let search = args.get(2).map(String::as_str) == Some("search");
            let json = args.get(3).map(String::as_str) == Some("json");
            let fl = args.get(4).cloned().unwrap_or_default();
            let flags = RegexFlags { ignore_case: fl.contains('i'), dot_all: fl.contains('s') };
            Regex::parse(&pattern, flags)
                .and_then(|re| CharDfa::from_regex(&re, if search { Anchoring::Search } else { Anchoring::FullMatch }))
                .map(|d| d.to_ebnf("root", if json { TextMode::JsonStringBody } else { TextMode::Raw }))
        } else {
            regex_to_ebnf(&pattern, "root")
        };
        match result {
            Ok(ebnf) => {
                let n = ebnf.lines().count();
                writeln!(out, "OK {n}").unwrap();
                out.write_all(ebnf.as_bytes()).unwrap();
            }
            Err(e) => writeln!(out, "ERR {e}").unwrap(),
        }
    }
}
