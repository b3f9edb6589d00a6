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
pub fn normalize_host(text: &str) -> Option<String> {
    let text = text.trim();
    let unbracketed = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(v6) = unbracketed.parse::<Ipv6Addr>() {
        return Some(v6.to_string());
    }
    if unbracketed.len() != text.len() {
        // Brackets hold only an IPv6 address.
        return None;
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (!name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)).then_some(name)
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
            ("*.0.0.1", "127.0.0.1", false),
            ("::1", "::1", true),
            ("[::1]", "::1", true),
            ("0:0:0:0:0:0:0:1", "::1", true),
            ("[2001:DB8::1]", "2001:db8::1", true),
            ("2001:db8::1", "2001:db8::2", false),
        ];
        for (pattern, host, expected) in cases {
            let parsed = HostPattern::parse(pattern);
            if *pattern == "*.0.0.1" {
                // Numbers as a name: a host that is an address never matches `*.`.
                let parsed = parsed.unwrap();
                assert!(!parsed.matches(host));
                continue;
            }
            let parsed = parsed.unwrap_or_else(|e| panic!("{pattern}: {e}"));
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
