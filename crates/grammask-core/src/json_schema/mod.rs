//! JSON Schema to grammar. Owned by the JSON Schema work; until it lands, every schema is refused
//! with a clear error.
use crate::error::{Error, ErrorKind, Result};

/// Output-shape options, mirroring `Grammar.from_json_schema`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonSchemaOptions {
    pub any_whitespace: bool,
    pub indent: Option<u32>,
    pub separators: Option<(String, String)>,
    pub strict_mode: bool,
    pub max_whitespace_cnt: Option<u32>,
    pub any_order: bool,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            any_whitespace: true,
            indent: None,
            separators: None,
            strict_mode: true,
            max_whitespace_cnt: None,
            any_order: false,
        }
    }
}

/// Converts a JSON Schema document (text) into EBNF whose root rule is `root`.
pub fn json_schema_to_ebnf(schema: &str, options: &JsonSchemaOptions) -> Result<String> {
    let _ = (schema, options);
    Err(Error::new(ErrorKind::Unsupported, "JSON Schema is not supported yet"))
}
