//! Built-in grammars, written in the EBNF dialect of [`crate::ebnf`] and parsed on first use.
//!
//! [`builtin_json_grammar`] is ECMA-404 JSON restricted like XGrammar's builtin grammar: the
//! document is an object or an array (no bare scalars), with no whitespace before or after it;
//! whitespace inside is `[ \n\r\t]*`. Strings exclude `"`, `\` and U+0000..U+001F unless escaped.
//! That exact language is [`Spelling::Any`]; [`builtin_json_grammar`] uses the default
//! [`Spelling::Canonical`] (see [`crate::spelling`]: serializer spellings of strings, finite
//! numbers, whitespace runs of at most [`crate::spelling::DEFAULT_MAX_WHITESPACE`] characters).

use crate::ebnf::parse_ebnf;
use crate::grammar::Grammar;
use crate::spelling::{Spelling, CHAR_CANONICAL_BODY, NUMBER_CANONICAL};
use std::fmt::Write as _;
use std::sync::OnceLock;

/// The text of the builtin JSON grammar (root rule `root`).
pub const JSON_EBNF: &str = r#"# ECMA-404 JSON; the document is an object or an array.
root ::= object | array
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws (member (ws "," ws member)* ws)? "}"
member ::= string ws ":" ws value
array ::= "[" ws (value (ws "," ws value)* ws)? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" escape
escape ::= ["\\/bfnrt] | "u" [0-9A-Fa-f]{4}
number ::= "-"? integer fraction? exponent?
integer ::= "0" | [1-9] [0-9]*
fraction ::= "." [0-9]+
exponent ::= [eE] [+\-]? [0-9]+
ws ::= [ \n\r\t]*
"#;

/// The text of the builtin JSON grammar under `spelling`, with whitespace runs of at most
/// `max_whitespace` characters (`None`: the spelling's default, see
/// [`Spelling::whitespace_bound`]). `(Spelling::Any, None)` gives [`JSON_EBNF`].
#[must_use]
pub fn json_ebnf(spelling: Spelling, max_whitespace: Option<u32>) -> String {
    let ws = match spelling.whitespace_bound(max_whitespace) {
        Some(n) => format!("ws ::= [ \\n\\r\\t]{{0,{n}}}\n"),
        None => "ws ::= [ \\n\\r\\t]*\n".to_string(),
    };
    let text = match spelling {
        Spelling::Any => JSON_EBNF.to_string(),
        Spelling::Canonical => {
            // The same rules with `char` and `number` spelled canonically (see `crate::spelling`).
            let keep: Vec<&str> = JSON_EBNF
                .lines()
                .filter(|l| {
                    !["char ::=", "escape ::=", "number ::=", "integer ::=", "fraction ::=", "exponent ::="]
                        .iter()
                        .any(|p| l.starts_with(p))
                })
                .collect();
            let mut t = keep.join("\n");
            t.push('\n');
            let _ = writeln!(t, "char ::= {CHAR_CANONICAL_BODY}\nnumber ::= {NUMBER_CANONICAL}");
            t
        }
    };
    text.replace("ws ::= [ \\n\\r\\t]*\n", &ws)
}

/// ECMA-404 JSON whose root is an object or an array, in the default canonical spelling (see the
/// module doc); [`builtin_json_grammar_with`] chooses the spelling.
///
/// # Panics
/// Never: the text is fixed, and a unit test parses it.
#[must_use]
pub fn builtin_json_grammar() -> Grammar {
    static JSON: OnceLock<Grammar> = OnceLock::new();
    JSON.get_or_init(|| builtin_json_grammar_with(Spelling::Canonical, None).expect("the builtin JSON grammar parses"))
        .clone()
}

/// The builtin JSON grammar under `spelling` with whitespace runs of at most `max_whitespace`.
///
/// # Errors
/// Never for the fixed text; a bound above the EBNF repetition limit is a `LimitExceeded` error.
pub fn builtin_json_grammar_with(spelling: Spelling, max_whitespace: Option<u32>) -> crate::error::Result<Grammar> {
    parse_ebnf(&json_ebnf(spelling, max_whitespace), "root")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_grammar_parses_and_round_trips() {
        let g = builtin_json_grammar_with(Spelling::Any, None).unwrap();
        assert_eq!(json_ebnf(Spelling::Any, None), JSON_EBNF);
        assert_eq!(g.rule(g.root()).name, "root");
        assert_eq!(g.rules().len(), 13);
        let canon = json_ebnf(Spelling::Canonical, None);
        assert!(!canon.contains("escape") && !canon.contains("exponent") && canon.contains("{0,64}"), "{canon}");
        assert_eq!(builtin_json_grammar().rules().len(), 9);
        let printed = g.to_string();
        assert_eq!(parse_ebnf(&printed, "root").unwrap(), g);
    }
}
