//! JSON values inside schemas (`const`, `enum`): JSON Schema equality (numbers by value, objects
//! ignoring key order) and a canonical text used as a hash key.

use serde_json::Value;

use super::numeric::Dec;

/// JSON Schema equality: numbers compare by mathematical value, objects ignore key order.
/// Recursion is bounded by the value's nesting, which serde_json caps at 128.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (Dec::from_number(x), Dec::from_number(y)) {
            (Some(p), Some(q)) => p == q,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Canonical text of a value: sorted keys, numbers as exact decimals.
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    push_canonical(v, &mut out);
    out
}

fn push_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Number(n) => match Dec::from_number(n) {
            Some(d) => {
                if d.neg {
                    out.push('-');
                }
                if d.int.is_empty() {
                    out.push('0');
                }
                out.extend(d.int.iter().map(|x| char::from(b'0' + x)));
                if !d.frac.is_empty() {
                    out.push('.');
                    out.extend(d.frac.iter().map(|x| char::from(b'0' + x)));
                }
            }
            None => out.push_str(&n.to_string()),
        },
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_canonical(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                push_canonical(&m[*k], out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equality_by_value() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!({"a":1,"b":[2]}), &json!({"b":[2.0],"a":1})));
        assert!(!json_eq(&json!(false), &json!(0)));
        assert_eq!(canonical(&json!({"b":1.50,"a":-0.0})), "{\"a\":0,\"b\":1.5}");
    }
}
