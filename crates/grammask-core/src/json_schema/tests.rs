//! Structural and error-path tests for the JSON Schema converter.
use super::*;

fn conv(s: &str) -> Result<String> {
    json_schema_to_ebnf(s, &JsonSchemaOptions::default())
}

#[test]
fn bad_json_and_bad_schema() {
    assert_eq!(conv("{").unwrap_err().kind(), ErrorKind::InvalidJson);
    assert_eq!(conv(r#"{"type":"foo"}"#).unwrap_err().kind(), ErrorKind::InvalidSchema);
    assert_eq!(conv("false").unwrap_err().kind(), ErrorKind::InvalidSchema);
    assert_eq!(conv(r#"{"enum":[]}"#).unwrap_err().kind(), ErrorKind::InvalidSchema);
}

#[test]
fn unsupported_names_pointer() {
    let e = conv(r#"{"properties":{"a":{"type":"array","contains":{"type":"string"}}}}"#).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(e.location(), Some(&crate::error::Location::Pointer("/properties/a/contains".into())));
    let e = conv(r#"{"not":{"minimum":3}}"#).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

#[test]
fn root_rule_and_recursion() {
    let g = conv(r##"{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##).unwrap();
    assert!(g.contains("root ::= "), "{g}");
    assert!(g.lines().filter(|l| l.starts_with("root ::=")).count() == 1);
}

#[test]
fn remote_ref_refused() {
    assert_eq!(conv(r#"{"$ref":"http://example.com/x.json"}"#).unwrap_err().kind(), ErrorKind::Unsupported);
}
