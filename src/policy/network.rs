//! Hosts as the policy judges calls of the tool `network` (E10): a host pattern of a rule
//! (`index.crates.io`, `*.crates.io`, `10.0.0.1`, `::1`), and an `[exec.sandbox.network]`
//! `allow`/`deny` entry (`HOST`, `HOST:PORT`, `[V6]:PORT`), parsed once into types so the
//! judge never reads strings back.
//!
//! Hosts are compared in one form: lower-case, without a trailing dot, an IPv6 address
//! without brackets and in its shortest spelling (`0:0::1` is `::1`).

use std::net::{IpAddr, Ipv6Addr};

/// What a rule's `host` matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// That host (a name or an IP address) and nothing else.
    Exact(String),
    /// `*.SUFFIX`: every name under SUFFIX (`a.SUFFIX`, `a.b.SUFFIX`), not SUFFIX itself.
    Subdomains(String),
}

impl HostPattern {
    /// Reads `HOST` or `*.SUFFIX` (case-insensitive, a trailing dot ignored, an IPv6
    /// address bare or in brackets).
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let shown = text;
        let text = text.trim();
        if let Some(suffix) = text.strip_prefix("*.") {
            let suffix = normalize_host(suffix)
                .ok_or_else(|| format!("`{shown}`: `*.` must be followed by a host name"))?;
            if suffix.parse::<IpAddr>().is_ok() {
                return Err(format!(
                    "`{shown}`: an IP address has no subdomains; write the address alone"
                ));
            }
            return Ok(HostPattern::Subdomains(suffix));
        }
        if text == "*" {
            return Err(format!(
                "`{shown}`: for every host, leave `host` out of the rule"
            ));
        }
        normalize_host(text).map(HostPattern::Exact).ok_or_else(|| {
            format!("`{shown}` is not a host name, an IP address or `*.` followed by a host name")
        })
    }

    /// Whether `host` (in the form [`normalize_host`] gives) is one this pattern names.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(exact) => exact == host,
            HostPattern::Subdomains(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                    && host.parse::<IpAddr>().is_err()
            }
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Exact(host) => f.write_str(host),
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}"),
        }
    }
}

/// `text` as a host in the one form hosts are compared in, or `None` when it is not a
/// host name (labels of letters, digits, `-` and `_`, each 1 to 63 long, 253 in all) nor
/// an IP address.
///
/// An address is judged as the address it is, however it is spelt: the other forms the
/// C resolver accepts for IPv4 (`2130706433`, `0x7f.1`, `0177.0.0.1`) and an IPv4-mapped
/// IPv6 address (`::ffff:127.0.0.1`) are its dotted IPv4 form, so a rule on `127.0.0.1`
/// cannot be walked around by spelling. A name whose last label is a number that is not
/// such an address is no host (no top-level domain is numeric).
pub fn normalize_host(text: &str) -> Option<String> {
    let text = text.trim();
    let unbracketed = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(v6) = unbracketed.parse::<Ipv6Addr>() {
        return Some(match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        });
    }
    if unbracketed.len() != text.len() {
        // Brackets hold only an IPv6 address.
        return None;
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    let last = name.rsplit('.').next().unwrap_or_default();
    if last.starts_with(|c: char| c.is_ascii_digit()) {
        return numeric_ipv4(&name).map(|v4| v4.to_string());
    }
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (!name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)).then_some(name)
}

/// An IPv4 address in any form `inet_aton` reads: one to four parts, each decimal, octal
/// (a leading `0`) or hexadecimal (`0x`), the last filling the bytes left.
fn numeric_ipv4(name: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<u64> = name
        .split('.')
        .map(|part| {
            let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
                (hex, 16)
            } else if part.len() > 1 && part.starts_with('0') {
                (&part[1..], 8)
            } else {
                (part, 10)
            };
            if digits.is_empty() && radix != 8 {
                return None;
            }
            if digits.is_empty() {
                return Some(0);
            }
            u64::from_str_radix(digits, radix)
                .ok()
                .filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .collect::<Option<_>>()?;
    let (last, leading) = parts.split_last()?;
    if leading.len() > 3 || leading.iter().any(|p| *p > 255) {
        return None;
    }
    let room = 8 * (4 - leading.len() as u32);
    if *last >= 1u64 << room {
        return None;
    }
    let mut value = *last;
    for (i, part) in leading.iter().enumerate() {
        value |= part << (24 - 8 * i as u32);
    }
    u32::try_from(value).ok().map(std::net::Ipv4Addr::from)
}

/// `host:port` as a person reads it (an IPv6 address in brackets).
pub fn target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// One `[exec.sandbox.network]` `allow` or `deny` entry: a host pattern and, if it names
/// one, a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    pub host: HostPattern,
    pub port: Option<u16>,
}

impl HostEntry {
    /// Reads `HOST`, `HOST:PORT`, `[V6]`, `[V6]:PORT` or a bare IPv6 address (no port:
    /// its colons are the address's).
    pub fn parse(text: &str) -> Result<HostEntry, String> {
        let trimmed = text.trim();
        let (host, port) = if let Some(rest) = trimmed.strip_prefix('[') {
            match rest.split_once(']') {
                Some((v6, "")) => (format!("[{v6}]"), None),
                Some((v6, tail)) => match tail.strip_prefix(':') {
                    Some(port) => (format!("[{v6}]"), Some(port)),
                    None => return Err(format!("`{text}`: after `]` only `:PORT` may follow")),
                },
                None => return Err(format!("`{text}`: `[` without `]`")),
            }
        } else if trimmed.matches(':').count() > 1 {
            (trimmed.to_owned(), None)
        } else {
            match trimmed.split_once(':') {
                Some((host, port)) => (host.to_owned(), Some(port)),
                None => (trimmed.to_owned(), None),
            }
        };
        let port =
            match port {
                None => None,
                Some(port) => Some(parse_port(port).ok_or_else(|| {
                    format!("`{text}`: the port must be a number from 1 to 65535")
                })?),
            };
        Ok(HostEntry {
            host: HostPattern::parse(&host)?,
            port,
        })
    }
}

/// A port from 1 to 65535.
pub fn parse_port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// The arguments of a `network` call to `text`, `HOST[:PORT]` (port 443 when it names
/// none; an IPv6 address in brackets when it has a port), as `dsh policy explain --tool
/// network` judges it: the same shape the proxy gives the waterfall.
pub fn explain_arguments(text: &str) -> Result<serde_json::Value, String> {
    let entry = HostEntry::parse(text)?;
    let HostPattern::Exact(host) = entry.host else {
        return Err(format!(
            "`{text}` is a pattern; a connection goes to one host"
        ));
    };
    let port = entry.port.unwrap_or(443);
    Ok(serde_json::json!({
        "host": host,
        "port": port,
        "scheme": if port == 443 { "https" } else { "http" },
        "command": "",
    }))
}

/// Whether a (normalised) host is this machine: `localhost`, a `*.localhost` name,
/// or a loopback, unspecified or own interface address in any spelling. From inside
/// the sandbox it means the host's own services, outside the sandbox: what a
/// question must say.
pub fn is_this_machine(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(crate::exec::netproxy::local::is_this_machine)
}

/// Whether a (normalised) host is what no default lets through unasked (E10): this
/// machine ([`is_this_machine`]) or a non-public address (private, shared, link-local,
/// unique-local, multicast, broadcast, ...: `netproxy::local`). Only a rule naming
/// it allows it. A name is judged as a name; where it leads is checked after DNS.
pub fn is_local(host: &str) -> bool {
    is_this_machine(host)
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(crate::exec::netproxy::local::is_local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e10_host_patterns_match_the_host_or_its_subdomains_only() {
        let cases: &[(&str, &str, bool)] = &[
            ("index.crates.io", "index.crates.io", true),
            ("index.crates.io", "crates.io", false),
            ("index.crates.io", "xindex.crates.io", false),
            ("Index.Crates.IO.", "index.crates.io", true),
            ("*.crates.io", "index.crates.io", true),
            ("*.crates.io", "a.b.crates.io", true),
            ("*.crates.io", "crates.io", false),
            ("*.crates.io", "evilcrates.io", false),
            ("*.crates.io", "crates.io.evil.com", false),
            ("*.CRATES.io.", "static.crates.io", true),
            ("10.0.0.1", "10.0.0.1", true),
            ("10.0.0.1", "10.0.0.10", false),
            ("2130706433", "127.0.0.1", true),
            ("::1", "::1", true),
            ("[::1]", "::1", true),
            ("0:0:0:0:0:0:0:1", "::1", true),
            ("[2001:DB8::1]", "2001:db8::1", true),
            ("2001:db8::1", "2001:db8::2", false),
        ];
        for (pattern, host, expected) in cases {
            let parsed = HostPattern::parse(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert_eq!(parsed.matches(host), *expected, "{pattern} against {host}");
        }
    }

    #[test]
    fn e10_bad_host_patterns_are_refused_with_a_reason() {
        for bad in [
            "",
            "*",
            "*.",
            "a b",
            "crates..io",
            "*.*.io",
            "a*.io",
            "https://crates.io",
            "crates.io/path",
            "[crates.io]",
            "*.10.0.0.1",
            "*.0.0.1",
            "*.example.123",
            "*.[::1]",
            &"a".repeat(64),
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let err = HostPattern::parse("*").unwrap_err();
        assert!(err.contains("leave `host` out"), "{err}");
    }

    #[test]
    fn e10_hosts_are_compared_in_one_form() {
        assert_eq!(
            normalize_host("Example.COM.").as_deref(),
            Some("example.com")
        );
        assert_eq!(normalize_host("[::FFFF:1]").as_deref(), Some("::ffff:1"));
        assert_eq!(normalize_host("127.0.0.1").as_deref(), Some("127.0.0.1"));
        assert_eq!(
            normalize_host("a_b.example").as_deref(),
            Some("a_b.example")
        );
        assert_eq!(normalize_host("host:80"), None);
        // An address is the address however it is spelt.
        for spelling in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "0x7f.1",
            "127.1",
            "0177.0.0.1",
            "127.0.1",
            "::ffff:127.0.0.1",
            "[::ffff:7f00:1]",
        ] {
            assert_eq!(
                normalize_host(spelling).as_deref(),
                Some("127.0.0.1"),
                "{spelling}"
            );
        }
        for not_a_host in [
            "256.0.0.1",
            "1.2.3.4.5",
            "08.1.1.1",
            "4294967296",
            "1.0x",
            "example.123",
        ] {
            assert_eq!(normalize_host(not_a_host), None, "{not_a_host}");
        }
        assert_eq!(normalize_host("1e100.net").as_deref(), Some("1e100.net"));
        assert_eq!(normalize_host("0.0.0.0").as_deref(), Some("0.0.0.0"));
        assert_eq!(normalize_host("."), None);
        assert_eq!(target("::1", 443), "[::1]:443");
        assert_eq!(target("crates.io", 80), "crates.io:80");
        assert_eq!(
            HostPattern::parse("*.Crates.io").unwrap().to_string(),
            "*.crates.io"
        );
    }

    #[test]
    fn e10_sugar_entries_read_host_port_and_bracketed_v6() {
        let entry = |text| HostEntry::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let exact = |h: &str| HostPattern::Exact(h.into());
        let cases: &[(&str, HostPattern, Option<u16>)] = &[
            ("crates.io", exact("crates.io"), None),
            ("crates.io:443", exact("crates.io"), Some(443)),
            (
                "*.crates.io:443",
                HostPattern::Subdomains("crates.io".into()),
                Some(443),
            ),
            ("10.0.0.1:8080", exact("10.0.0.1"), Some(8080)),
            ("[::1]:8080", exact("::1"), Some(8080)),
            ("[::1]", exact("::1"), None),
            ("2001:db8::1", exact("2001:db8::1"), None),
            (" GitHub.com. ", exact("github.com"), None),
        ];
        for (text, host, port) in cases {
            assert_eq!(
                entry(text),
                HostEntry {
                    host: host.clone(),
                    port: *port
                },
                "{text}"
            );
        }
        for bad in [
            "crates.io:0",
            "crates.io:65536",
            "crates.io:https",
            "crates.io:",
            "[::1]8080",
            "[::1",
            "[crates.io]:443",
            ":443",
            "*",
        ] {
            assert!(HostEntry::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
