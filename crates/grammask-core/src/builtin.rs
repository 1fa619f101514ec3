//! Built-in grammars, written in the EBNF dialect of [`crate::ebnf`] and parsed on first use.
//!
//! [`builtin_json_grammar`] is ECMA-404 JSON restricted like XGrammar's builtin grammar: the
//! document is an object or an array (no bare scalars), with no whitespace before or after it;
//! whitespace inside is `[ \n\r\t]*`. Strings exclude `"`, `\` and U+0000..U+001F unless escaped.

use crate::ebnf::parse_ebnf;
use crate::grammar::Grammar;
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

/// ECMA-404 JSON whose root is an object or an array (see the module doc).
///
/// # Panics
/// Never: [`JSON_EBNF`] is fixed text, and a unit test parses it.
#[must_use]
pub fn builtin_json_grammar() -> Grammar {
    static JSON: OnceLock<Grammar> = OnceLock::new();
    JSON.get_or_init(|| parse_ebnf(JSON_EBNF, "root").expect("the builtin JSON grammar parses")).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_grammar_parses_and_round_trips() {
        let g = builtin_json_grammar();
        assert_eq!(g.rule(g.root()).name, "root");
        assert_eq!(g.rules().len(), 13);
        let printed = g.to_string();
        assert_eq!(parse_ebnf(&printed, "root").unwrap(), g);
    }
}
