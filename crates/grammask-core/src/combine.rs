//! Grammar combinators: [`concat`] and [`union`] build a new grammar whose root rule is the
//! sequence or the choice of the given grammars' roots. Rules are copied with
//! [`GrammarBuilder::import`], which renames clashing rules apart (`root` -> `root_1`, ...).

use crate::error::{Error, Result};
use crate::grammar::{Grammar, GrammarBuilder};

/// The grammar matching, in order, one string of each grammar. Its root rule is named `root`.
pub fn concat(grammars: &[Grammar]) -> Result<Grammar> {
    combine(grammars, "concat", true)
}

/// The grammar matching a string of any one of the grammars. Its root rule is named `root`.
pub fn union(grammars: &[Grammar]) -> Result<Grammar> {
    combine(grammars, "union", false)
}

fn combine(grammars: &[Grammar], what: &str, sequence: bool) -> Result<Grammar> {
    if grammars.is_empty() {
        return Err(Error::invalid_argument(format!("{what} needs at least one grammar")));
    }
    let mut b = GrammarBuilder::new();
    b.rule_id("root"); // reserved first, so imported rules named `root` are renamed
    let refs: Vec<_> = grammars
        .iter()
        .map(|g| {
            let r = b.import(g);
            b.rule_ref(r)
        })
        .collect();
    let body = if sequence { b.seq(refs) } else { b.choice(refs) };
    b.define("root", body, None)?;
    b.build("root")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;
    use crate::error::ErrorKind;

    #[test]
    fn concat_and_union_rename_rules_apart() {
        let a = parse_ebnf("root ::= x \"a\"\nx ::= \"1\"", "root").unwrap();
        let b = parse_ebnf("root ::= x+\nx ::= \"2\" (= \"2\")", "root").unwrap();
        let c = concat(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(
            c.to_string(),
            "root ::= root_1 root_2\nroot_1 ::= x \"a\"\nx ::= \"1\"\nroot_2 ::= x_1+\nx_1 ::= \"2\" (= \"2\")\n"
        );
        let u = union(&[a.clone(), b, a]).unwrap();
        assert_eq!(u.rule(u.root()).name, "root");
        assert!(u.to_string().starts_with("root ::= root_1 | root_2 | root_3\n"), "{u}");
        // Printing and parsing the combination gives the same grammar.
        assert_eq!(parse_ebnf(&u.to_string(), "root").unwrap().to_string(), u.to_string());
        assert_eq!(concat(&[]).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(union(&[]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
