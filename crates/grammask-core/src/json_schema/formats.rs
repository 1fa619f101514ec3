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
pub const KNOWN_UNSUPPORTED: &[&str] = &["iri", "iri-reference", "uri-template", "idn-email", "idn-hostname", "regex"];

/// RFC 3986 pieces (regex sources). `host` is `IP-literal | reg-name`: `IPv4address` is a subset of
/// `reg-name`.
const H16: &str = "[0-9A-Fa-f]{1,4}";
const IPV4: &str = r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}";
const UNRESERVED_SUB: &str = r"A-Za-z0-9\-._~!$&'()*+,;=";

fn ipv6() -> String {
    let h = H16;
    let ls32 = format!("({h}:{h}|{IPV4})");
    let alts = [
        format!("({h}:){{6}}{ls32}"),
        format!("::({h}:){{5}}{ls32}"),
        format!("({h})?::({h}:){{4}}{ls32}"),
        format!("(({h}:){{0,1}}{h})?::({h}:){{3}}{ls32}"),
        format!("(({h}:){{0,2}}{h})?::({h}:){{2}}{ls32}"),
        format!("(({h}:){{0,3}}{h})?::{h}:{ls32}"),
        format!("(({h}:){{0,4}}{h})?::{ls32}"),
        format!("(({h}:){{0,5}}{h})?::{h}"),
        format!("(({h}:){{0,6}}{h})?::"),
    ];
    format!("({})", alts.join("|"))
}

/// (absolute URI, relative reference) regexes of RFC 3986.
fn uri_parts() -> (String, String) {
    let pct = "%[0-9A-Fa-f]{2}";
    let pchar = format!("([{UNRESERVED_SUB}:@]|{pct})");
    let seg = format!("{pchar}*");
    let seg_nz = format!("{pchar}+");
    let seg_nz_nc = format!("([{UNRESERVED_SUB}@]|{pct})+");
    let ip_literal = format!(r"\[({}|v[0-9A-Fa-f]+\.[{UNRESERVED_SUB}:]+)\]", ipv6());
    let reg_name = format!("([{UNRESERVED_SUB}]|{pct})*");
    let userinfo = format!("([{UNRESERVED_SUB}:]|{pct})*");
    let authority = format!("({userinfo}@)?({ip_literal}|{reg_name})(:[0-9]*)?");
    let abempty = format!("(/{seg})*");
    let absolute = format!("/({seg_nz}(/{seg})*)?");
    let rootless = format!("{seg_nz}(/{seg})*");
    let noscheme = format!("{seg_nz_nc}(/{seg})*");
    let qf = format!(r"(\?({pchar}|[/?])*)?(#({pchar}|[/?])*)?");
    let uri = format!("[A-Za-z][A-Za-z0-9+\\-.]*:(//{authority}{abempty}|{absolute}|{rootless})?{qf}");
    let rel = format!("(//{authority}{abempty}|{absolute}|{noscheme})?{qf}");
    (uri, rel)
}

/// The regex (ECMA syntax, full match) for a supported format.
pub fn regex_for(format: &str) -> Option<&'static str> {
    use std::sync::OnceLock;
    static DATE: OnceLock<String> = OnceLock::new();
    static DATE_TIME: OnceLock<String> = OnceLock::new();
    static IPV6: OnceLock<String> = OnceLock::new();
    static URI: OnceLock<String> = OnceLock::new();
    static URI_REF: OnceLock<String> = OnceLock::new();
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
        "hostname" => {
            r"([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,43}[A-Za-z0-9])(\.([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,43}[A-Za-z0-9])){0,4}"
        }
        "email" => {
            r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+)*@([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,58}[A-Za-z0-9])(\.([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-][A-Za-z0-9\-][A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]([A-Za-z0-9][A-Za-z0-9\-]|\-[A-Za-z0-9])[A-Za-z0-9\-]{0,58}[A-Za-z0-9]))*"
        }
        "ipv6" => IPV6.get_or_init(ipv6).as_str(),
        "uri" => URI.get_or_init(|| uri_parts().0).as_str(),
        "uri-reference" => URI_REF
            .get_or_init(|| {
                let (u, r) = uri_parts();
                format!("({u})|({r})")
            })
            .as_str(),
        // RFC 3339 appendix A.
        "duration" => {
            r"P(\d+D|\d+M(\d+D)?|\d+Y(\d+M(\d+D)?)?)(T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S))?|PT(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)|P\d+W"
        }
        // RFC 6901 and draft-handrews-relative-json-pointer.
        "json-pointer" => "(/([^~/]|~[01])*)*",
        "relative-json-pointer" => "(0|[1-9][0-9]*)(#|(/([^~/]|~[01])*)*)",
        _ => return None,
    })
}
