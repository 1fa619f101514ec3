//! `format` values with a regular definition, as regexes (full match) over the decoded string.
//! Formats listed in [`KNOWN_UNSUPPORTED`] are refused; any other unknown format is an annotation
//! and is ignored, as the JSON Schema specification says for unknown formats.
//! Hostname labels with `--` in positions 3-4 (reserved, e.g. punycode `xn--`) are refused, since
//! checking A-labels is not regular; leap seconds and quoted e-mail local parts are refused too.
//! Host names must not exceed 253 characters; counting that beside label lengths needs too many
//! automaton states, so `hostname` takes at most 5 labels of at most 48 characters (at most 244
//! characters: narrower than the format, never wider).

const LEAP: &str = r"(\d\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)";

/// Formats with a known meaning that this converter cannot enforce yet.
pub const KNOWN_UNSUPPORTED: &[&str] = &[
    "uri", "uri-reference", "iri", "iri-reference", "uri-template", "idn-email", "idn-hostname", "ipv6",
    "duration", "json-pointer", "relative-json-pointer", "regex",
];

/// The regex (ECMA syntax, full match) for a supported format.
pub fn regex_for(format: &str) -> Option<&'static str> {
    use std::sync::OnceLock;
    static DATE: OnceLock<String> = OnceLock::new();
    static DATE_TIME: OnceLock<String> = OnceLock::new();
    let date = || {
        DATE.get_or_init(|| {
            format!(
                r"(\d{{4}}-(0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|\d{{4}}-(0[469]|11)-(0[1-9]|[12]\d|30)|\d{{4}}-02-(0[1-9]|1\d|2[0-8])|{LEAP}-02-29)"
            )
        })
    };
    const TIME: &str = r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([zZ]|[+\-]([01]\d|2[0-3]):[0-5]\d)";
    Some(match format {
        "date" => date().as_str(),
        "time" => TIME,
        "date-time" => DATE_TIME.get_or_init(|| format!("{}[tT]{TIME}", date())).as_str(),
        "uuid" => r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        "ipv4" => r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}",
        "hostname" => r"([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,43}[A-Za-z0-9])(\.([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,43}[A-Za-z0-9])){0,4}",
        "email" => r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+)*@([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,58}[A-Za-z0-9])(\.([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,58}[A-Za-z0-9]))*",
        _ => return None,
    })
}
