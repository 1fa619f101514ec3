//! Regular expressions (ECMA-262 / Python `re` common subset) to grammar. Owned by the regex work;
//! until it lands, every pattern is refused with a clear error.
use crate::error::{Error, ErrorKind, Result};

/// Converts `pattern` (full-match semantics) into EBNF rules whose entry rule is `rule_name`.
pub fn regex_to_ebnf(pattern: &str, rule_name: &str) -> Result<String> {
    let _ = (pattern, rule_name);
    Err(Error::new(ErrorKind::Unsupported, "regular expressions are not supported yet"))
}
