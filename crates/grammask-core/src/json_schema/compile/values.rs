//! Values: the spelling of one JSON value (`enum`/`const`) in the output layout.
//!
//! Pipeline place: used by the writers when a goal's values are a finite list.
use super::*;

impl Conv<'_> {
    /// EBNF for every spelling of the JSON value `v` under the layout at `depth`.
    pub(super) fn spell_value(&mut self, v: &Value, depth: u32) -> Result<String> {
        Ok(match v {
            Value::Null => "\"null\"".into(),
            Value::Bool(b) => format!("\"{b}\""),
            Value::Number(n) => {
                let d = Dec::from_number(n).ok_or_else(|| invalid("", "number out of range"))?;
                let int: String =
                    if d.int.is_empty() { "0".into() } else { d.int.iter().map(|x| char::from(b'0' + x)).collect() };
                let frac: String = d.frac.iter().map(|x| char::from(b'0' + x)).collect();
                let body = if self.opts.spelling == Spelling::Canonical {
                    // Canonical spelling: the shortest decimal, no `-0` (`crate::spelling`); an
                    // integer value also as Python writes the float (`1.0`).
                    if frac.is_empty() {
                        format!("{} \".0\"?", emit::lit(&int))
                    } else {
                        emit::lit(&format!("{int}.{frac}"))
                    }
                } else if frac.is_empty() {
                    format!("{} (\".\" \"0\"+)?", emit::lit(&int))
                } else {
                    format!("{} \"0\"*", emit::lit(&format!("{int}.{frac}")))
                };
                if d.is_zero() && self.opts.spelling == Spelling::Canonical {
                    body
                } else if d.is_zero() {
                    format!("\"-\"? {body}")
                } else if d.neg {
                    format!("\"-\" {body}")
                } else {
                    body
                }
            }
            Value::String(s) => format!("(\"\\\"\" {} \"\\\"\")", jstr::spell_str_in(self.opts.spelling, s)),
            Value::Array(a) => {
                if a.is_empty() {
                    self.empty('[', ']')
                } else {
                    let mut parts = Vec::new();
                    for x in a {
                        parts.push(self.spell_value(x, self.child_depth(depth))?);
                    }
                    let sep = self.sep_item(depth);
                    format!(
                        "({} {} {})",
                        self.open('[', depth),
                        parts.join(&format!(" {sep} ")),
                        self.close(']', depth)
                    )
                }
            }
            Value::Object(o) => {
                if o.is_empty() {
                    self.empty('{', '}')
                } else {
                    if o.len() > MAX_CONST_OBJECT_KEYS {
                        return Err(unsupported(
                            "",
                            format!("enum/const object with more than {MAX_CONST_OBJECT_KEYS} keys (key order is free in JSON)"),
                        ));
                    }
                    let kv = self.sep_kv();
                    let mut entries = Vec::new();
                    for (k, x) in o {
                        entries.push(format!(
                            "\"\\\"\" {} \"\\\"\" {kv} {}",
                            jstr::spell_str_in(self.opts.spelling, k),
                            self.spell_value(x, self.child_depth(depth))?
                        ));
                    }
                    let sep = self.sep_item(depth);
                    let mut alts = Vec::new();
                    permutations(entries.len(), &mut |perm| {
                        let parts: Vec<&str> = perm.iter().map(|&i| entries[i].as_str()).collect();
                        alts.push(parts.join(&format!(" {sep} ")));
                    });
                    format!("({} {} {})", self.open('{', depth), emit::alt(&alts), self.close('}', depth))
                }
            }
        })
    }
}
