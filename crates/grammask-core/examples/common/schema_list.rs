//! Schema lists for the examples, shared through `#[path]`.

/// The schemas of a list file (one path per line, blank lines skipped): `(path, schema text)`,
/// the schema being a MaskBench file's `schema` field when it has one.
pub fn schema_list(list: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(list).expect("readable list");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|path| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).expect("readable schema")).expect("JSON");
            (path.to_owned(), v.get("schema").cloned().unwrap_or(v).to_string())
        })
        .collect()
}
