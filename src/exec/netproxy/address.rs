//! Where a proxied connection goes: a normalised [`Host`] and a port.
//!
//! The layer above judges connections by host, so two spellings of one place
//! must reach it as one value: `Index.Crates.IO.` and `index.crates.io` are the
//! same host, `[::1]` and `::1` the same address. Anything the resolver could
//! read in a way the judge did not (a zone id, `127.1`, `0x7f.0.0.1`, an
//! IPv4-mapped IPv6 address) is either refused or turned into the address it
//! means before anyone judges it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The longest host name DNS can carry, in bytes, without the trailing dot.
const MAX_NAME_LEN: usize = 253;
/// The longest label DNS can carry.
const MAX_LABEL_LEN: usize = 63;

/// Why a host or an authority was refused. Each one becomes a protocol-level
/// error for the client (HTTP 400, a SOCKS failure reply); none reaches the
/// judge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("empty host")]
    Empty,
    #[error("host longer than {MAX_NAME_LEN} bytes")]
    TooLong,
    #[error("host is not ASCII (send its punycode form)")]
    NotAscii,
    #[error("host has an empty label")]
    EmptyLabel,
    #[error("host label longer than {MAX_LABEL_LEN} bytes")]
    LabelTooLong,
    #[error("host label has a character a host name cannot have")]
    BadCharacter,
    #[error("host label starts or ends with '-'")]
    BadHyphen,
    #[error("host looks numeric but is not a dotted-quad IPv4 address")]
    AmbiguousNumeric,
    #[error("bad IPv6 literal")]
    BadIpv6,
    #[error("missing port")]
    MissingPort,
    #[error("bad port")]
    BadPort,
}

/// A DNS name already normalised: lower-case ASCII, no trailing dot, labels of
/// letters, digits, `-` and `_`. Only [`Host::parse`] makes one, so holding a
/// `HostName` means the checks ran.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostName(String);

impl HostName {
    /// The name as the judge and the resolver see it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A host a sandboxed command asked to reach, in the one form it is judged by.
///
/// An enum rather than a string because the two cases are reached differently:
/// a name is resolved (only here, after it was allowed), an address is not.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    Name(HostName),
    Ip(IpAddr),
}

impl Host {
    /// Normalise what a client sent as a host: lower-case, one trailing dot
    /// removed, `[v6]` and bare `v6` both accepted, an IPv4-mapped IPv6 address
    /// turned into the IPv4 address it is.
    pub fn parse(input: &str) -> Result<Host, AddressError> {
        if let Some(inner) = input.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or(AddressError::BadIpv6)?;
            return parse_ipv6(inner);
        }
        if input.contains(':') {
            return parse_ipv6(input);
        }
        let name = input.strip_suffix('.').unwrap_or(input);
        if name.is_empty() {
            return Err(AddressError::Empty);
        }
        if name.len() > MAX_NAME_LEN {
            return Err(AddressError::TooLong);
        }
        if !name.is_ascii() {
            return Err(AddressError::NotAscii);
        }
        if let Ok(v4) = name.parse::<Ipv4Addr>() {
            return Ok(Host::Ip(IpAddr::V4(v4)));
        }
        let name = name.to_ascii_lowercase();
        check_labels(&name)?;
        Ok(Host::Name(HostName(name)))
    }
}

/// The normalised form: a name as is, an IPv6 address without brackets (the
/// form rules are written in).
impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name.as_str()),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A zone id (`fe80::1%eth0`) is refused: it names an interface of the host,
/// which is not the sandbox's to choose.
fn parse_ipv6(input: &str) -> Result<Host, AddressError> {
    let v6: Ipv6Addr = input.parse().map_err(|_| AddressError::BadIpv6)?;
    Ok(Host::from(IpAddr::V6(v6)))
}

/// An address as a host: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
/// becomes the IPv4 address it reaches, so a rule about `127.0.0.1` is not
/// stepped around by writing it the other way.
impl From<IpAddr> for Host {
    fn from(ip: IpAddr) -> Host {
        match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Host::Ip(IpAddr::V4(v4)),
                None => Host::Ip(ip),
            },
            IpAddr::V4(_) => Host::Ip(ip),
        }
    }
}

fn check_labels(name: &str) -> Result<(), AddressError> {
    let mut last = "";
    for label in name.split('.') {
        check_label(label)?;
        last = label;
    }
    // getaddrinfo reads `127.1`, `2130706433` and `0x7f.0.0.1` as addresses
    // (inet_aton). The judge would see a name and the connection would go to
    // an address, so a name that ends like a number is refused (as the URL
    // standard does); the dotted-quad form above is the one way to write v4.
    if looks_numeric(last) {
        return Err(AddressError::AmbiguousNumeric);
    }
    Ok(())
}

fn check_label(label: &str) -> Result<(), AddressError> {
    if label.is_empty() {
        return Err(AddressError::EmptyLabel);
    }
    if label.len() > MAX_LABEL_LEN {
        return Err(AddressError::LabelTooLong);
    }
    // `_` is not in the host-name grammar, but real names carry it (service
    // records, some CDNs), and it changes nothing about where a name resolves.
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if !label.bytes().all(allowed) {
        return Err(AddressError::BadCharacter);
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(AddressError::BadHyphen);
    }
    Ok(())
}

fn looks_numeric(label: &str) -> bool {
    let hex = label
        .strip_prefix("0x")
        .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || label.bytes().all(|b| b.is_ascii_digit())
}

/// A host and a port: what one judged connection reaches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Destination {
    pub host: Host,
    pub port: u16,
}

impl Destination {
    /// Read an authority (`host:port`, `[v6]:port`) as in a CONNECT line or a
    /// Host header. `default_port` is used when the port is left out; `None`
    /// (CONNECT) makes the port required. Port 0 is refused: nothing listens
    /// there.
    pub fn parse_authority(
        input: &str,
        default_port: Option<u16>,
    ) -> Result<Destination, AddressError> {
        let (host, port) = split_authority(input)?;
        let port = match port {
            Some(port) => parse_port(port)?,
            None => default_port.ok_or(AddressError::MissingPort)?,
        };
        Ok(Destination {
            host: Host::parse(host)?,
            port,
        })
    }

    /// The Host header a request forwarded here carries: the port only when
    /// it is not the scheme's default (80, plain HTTP is the one forwarded).
    pub fn host_header(&self) -> String {
        match (&self.host, self.port) {
            (Host::Ip(IpAddr::V6(v6)), 80) => format!("[{v6}]"),
            (host, 80) => host.to_string(),
            _ => self.to_string(),
        }
    }
}

/// `host:port`, with brackets around an IPv6 address (an authority).
impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Ip(IpAddr::V6(v6)) => write!(f, "[{v6}]:{}", self.port),
            host => write!(f, "{host}:{}", self.port),
        }
    }
}

/// Splits off the port; the host keeps its brackets for [`Host::parse`]. A bare
/// IPv6 address (colons without brackets) is refused: its last group could be
/// read as a port.
fn split_authority(input: &str) -> Result<(&str, Option<&str>), AddressError> {
    if input.starts_with('[') {
        let end = input.find(']').ok_or(AddressError::BadIpv6)?;
        let (host, rest) = input.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => rest
                .strip_prefix(':')
                .map(|port| (host, Some(port)))
                .ok_or(AddressError::BadPort),
        };
    }
    match input.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Err(AddressError::BadIpv6),
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((input, None)),
    }
}

/// Digits only (no sign, no spaces), 1 to 65535.
fn parse_port(input: &str) -> Result<u16, AddressError> {
    if input.is_empty() || input.len() > 5 || !input.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddressError::BadPort);
    }
    match input.parse::<u16>() {
        Ok(0) | Err(_) => Err(AddressError::BadPort),
        Ok(port) => Ok(port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Host {
        Host::Name(HostName(s.into()))
    }

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().unwrap())
    }

    #[test]
    fn hosts_are_normalised() {
        let cases: &[(&str, Host)] = &[
            ("example.com", name("example.com")),
            ("Index.Crates.IO.", name("index.crates.io")),
            ("EXAMPLE.com.", name("example.com")),
            ("localhost", name("localhost")),
            ("_dmarc.example.com", name("_dmarc.example.com")),
            ("xn--bcher-kva.example", name("xn--bcher-kva.example")),
            ("a-b.c1", name("a-b.c1")),
            ("127.0.0.1", ip("127.0.0.1")),
            ("127.0.0.1.", ip("127.0.0.1")),
            ("[::1]", ip("::1")),
            ("::1", ip("::1")),
            ("[2001:DB8::1]", ip("2001:db8::1")),
            ("[::ffff:127.0.0.1]", ip("127.0.0.1")),
        ];
        for (input, want) in cases {
            assert_eq!(Host::parse(input).as_ref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn bad_hosts_are_refused() {
        use AddressError::*;
        let long_label = "a".repeat(64);
        let long_name = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(62),
        ]
        .join(".");
        let cases: &[(&str, AddressError)] = &[
            ("", Empty),
            (".", Empty),
            ("example.com..", EmptyLabel),
            ("a..b", EmptyLabel),
            (".a", EmptyLabel),
            ("exa mple.com", BadCharacter),
            ("exa\u{7}mple.com", BadCharacter),
            ("exa\tmple", BadCharacter),
            ("a/b", BadCharacter),
            ("user@host", BadCharacter),
            ("bücher.example", NotAscii),
            ("-a.com", BadHyphen),
            ("a-.com", BadHyphen),
            (&long_label, LabelTooLong),
            (&long_name, TooLong),
            ("127.1", AmbiguousNumeric),
            ("2130706433", AmbiguousNumeric),
            ("0x7f.0.0.1", AmbiguousNumeric),
            ("127.0.0.01", AmbiguousNumeric),
            ("1.2.3.256", AmbiguousNumeric),
            ("[::1", BadIpv6),
            ("[example.com]", BadIpv6),
            ("fe80::1%eth0", BadIpv6),
            ("[fe80::1%25eth0]", BadIpv6),
            (":::", BadIpv6),
        ];
        for (input, want) in cases {
            assert_eq!(Host::parse(input).as_ref(), Err(want), "{input:?}");
        }
        // 253 bytes is the limit, a trailing dot not counted.
        let at_limit = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(at_limit.len(), 253);
        assert!(Host::parse(&at_limit).is_ok());
        assert!(Host::parse(&format!("{at_limit}.")).is_ok());
    }

    #[test]
    fn authorities_are_read() {
        let dest = |host: Host, port| Ok(Destination { host, port });
        let cases: &[(&str, Option<u16>, Result<Destination, AddressError>)] = &[
            ("example.com:443", None, dest(name("example.com"), 443)),
            ("Example.COM.:8080", None, dest(name("example.com"), 8080)),
            ("[::1]:443", None, dest(ip("::1"), 443)),
            ("127.0.0.1:1", None, dest(ip("127.0.0.1"), 1)),
            ("example.com", Some(80), dest(name("example.com"), 80)),
            ("[::1]", Some(80), dest(ip("::1"), 80)),
            ("example.com", None, Err(AddressError::MissingPort)),
            ("example.com:", None, Err(AddressError::BadPort)),
            ("example.com:0", None, Err(AddressError::BadPort)),
            ("example.com:65536", None, Err(AddressError::BadPort)),
            ("example.com:+80", None, Err(AddressError::BadPort)),
            ("example.com:080080", None, Err(AddressError::BadPort)),
            ("example.com: 80", None, Err(AddressError::BadPort)),
            ("[::1]x", None, Err(AddressError::BadPort)),
            ("::1:443", None, Err(AddressError::BadIpv6)),
            (":443", None, Err(AddressError::Empty)),
            ("exa mple.com:443", None, Err(AddressError::BadCharacter)),
        ];
        for (input, default, want) in cases {
            assert_eq!(
                &Destination::parse_authority(input, *default),
                want,
                "{input:?}"
            );
        }
    }

    #[test]
    fn destinations_print_as_authorities() {
        let v6 = Destination::parse_authority("[::1]:80", None).unwrap();
        assert_eq!(v6.to_string(), "[::1]:80");
        assert_eq!(v6.host.to_string(), "::1");
        assert_eq!(v6.host_header(), "[::1]");
        let named = Destination::parse_authority("Example.com:8080", None).unwrap();
        assert_eq!(named.host_header(), "example.com:8080");
        let plain = Destination::parse_authority("example.com", Some(80)).unwrap();
        assert_eq!(plain.host_header(), "example.com");
    }
}
