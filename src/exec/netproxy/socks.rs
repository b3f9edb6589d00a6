//! The SOCKS5 wire format (RFC 1928), the part the proxy speaks: the greeting
//! with "no authentication", and the CONNECT request.
//!
//! Hand-written, as pure functions over bytes: the subset is two small
//! fixed-layout messages, so a crate would bring more surface (BIND, UDP
//! associate, authentication, its own sockets and resolver) than the ten lines
//! it saves, and a pure parser is what a fuzz target can drive. The async side
//! (reading, replying, tunnelling) is in `socks_conn.rs`.

use super::address::{AddressError, Destination, Host};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The protocol version byte; also what the proxy sniffs to tell SOCKS from HTTP.
pub const VERSION: u8 = 0x05;
/// The one method offered: no authentication (the socket is already private).
const NO_AUTH: u8 = 0x00;
/// "No acceptable methods": the reply when the client does not offer `NO_AUTH`.
pub const NO_ACCEPTABLE_METHOD: u8 = 0xFF;
const CMD_CONNECT: u8 = 0x01;
const ATYP_IPV4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_IPV6: u8 = 0x04;

/// What a parser made of the bytes so far: a whole message and how many bytes
/// it took (the rest belongs to what follows), or a message not yet whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    Incomplete,
    Complete { value: T, consumed: usize },
}

/// Why a message cannot be served, and which reply says so. Every one ends the
/// connection after its reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SocksError {
    #[error("SOCKS version {0} (only 5 is spoken)")]
    Version(u8),
    #[error("SOCKS command {0} (only CONNECT is served)")]
    Command(u8),
    #[error("SOCKS address type {0}")]
    AddressType(u8),
    #[error("SOCKS destination: {0}")]
    Address(AddressError),
}

impl SocksError {
    /// The reply code a client gets for this error.
    pub fn reply(&self) -> Reply {
        match self {
            SocksError::Command(_) => Reply::CommandNotSupported,
            SocksError::AddressType(_) => Reply::AddressTypeNotSupported,
            // No code means "bad version" or "bad name": the general one.
            SocksError::Version(_) | SocksError::Address(_) => Reply::GeneralFailure,
        }
    }
}

/// The reply codes of RFC 1928 §6 the proxy sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reply {
    Succeeded = 0x00,
    GeneralFailure = 0x01,
    NotAllowed = 0x02,
    NetworkUnreachable = 0x03,
    HostUnreachable = 0x04,
    ConnectionRefused = 0x05,
    CommandNotSupported = 0x07,
    AddressTypeNotSupported = 0x08,
}

impl Reply {
    /// The whole reply message. The bound address is always 0.0.0.0:0: the
    /// host-side address the proxy connected from is none of the sandbox's
    /// business, and CONNECT clients do not use it.
    pub fn encode(self) -> [u8; 10] {
        [VERSION, self as u8, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0]
    }
}

/// The client's greeting: whether it offers "no authentication", the only
/// method served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    pub offers_no_auth: bool,
}

/// `VER NMETHODS METHODS...`.
pub fn parse_greeting(buf: &[u8]) -> Result<Parsed<Greeting>, SocksError> {
    let [version, count, rest @ ..] = buf else {
        return Ok(Parsed::Incomplete);
    };
    if *version != VERSION {
        return Err(SocksError::Version(*version));
    }
    let Some(methods) = rest.get(..usize::from(*count)) else {
        return Ok(Parsed::Incomplete);
    };
    Ok(Parsed::Complete {
        value: Greeting {
            offers_no_auth: methods.contains(&NO_AUTH),
        },
        consumed: 2 + methods.len(),
    })
}

/// `VER CMD RSV ATYP DST.ADDR DST.PORT`, CONNECT only. The reserved byte is
/// not checked (RFC 1928 says 0; clients that send something else mean no
/// harm by it). A bad command is refused as soon as its byte arrives.
pub fn parse_request(buf: &[u8]) -> Result<Parsed<Destination>, SocksError> {
    let [version, command, _reserved, address_type, rest @ ..] = buf else {
        return match buf {
            [version, ..] if *version != VERSION => Err(SocksError::Version(*version)),
            [_, command, ..] if *command != CMD_CONNECT => Err(SocksError::Command(*command)),
            _ => Ok(Parsed::Incomplete),
        };
    };
    if *version != VERSION {
        return Err(SocksError::Version(*version));
    }
    if *command != CMD_CONNECT {
        return Err(SocksError::Command(*command));
    }
    let Some((host, address_len)) = parse_address(*address_type, rest)? else {
        return Ok(Parsed::Incomplete);
    };
    let Some(port) = rest.get(address_len..address_len + 2) else {
        return Ok(Parsed::Incomplete);
    };
    let port = u16::from_be_bytes([port[0], port[1]]);
    if port == 0 {
        return Err(SocksError::Address(AddressError::BadPort));
    }
    Ok(Parsed::Complete {
        value: Destination { host, port },
        consumed: 4 + address_len + 2,
    })
}

/// The address and how many bytes it took, or `None` while incomplete.
fn parse_address(address_type: u8, rest: &[u8]) -> Result<Option<(Host, usize)>, SocksError> {
    match address_type {
        ATYP_IPV4 => Ok(rest.get(..4).map(|b| {
            let v4 = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
            (Host::from(IpAddr::V4(v4)), 4)
        })),
        ATYP_IPV6 => Ok(rest.get(..16).map(|b| {
            let octets: [u8; 16] = b.try_into().expect("16 bytes");
            (Host::from(IpAddr::V6(Ipv6Addr::from(octets))), 16)
        })),
        ATYP_DOMAIN => parse_domain(rest),
        other => Err(SocksError::AddressType(other)),
    }
}

/// A length byte and the name; the name goes through the same normalisation as
/// an HTTP host, so an address written as a name is judged as the address.
fn parse_domain(rest: &[u8]) -> Result<Option<(Host, usize)>, SocksError> {
    let Some((&len, rest)) = rest.split_first() else {
        return Ok(None);
    };
    let Some(name) = rest.get(..usize::from(len)) else {
        return Ok(None);
    };
    let name =
        std::str::from_utf8(name).map_err(|_| SocksError::Address(AddressError::NotAscii))?;
    let host = Host::parse(name).map_err(SocksError::Address)?;
    Ok(Some((host, 1 + usize::from(len))))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Outcome<T> = Result<Parsed<T>, SocksError>;

    fn complete<T>(value: T, consumed: usize) -> Outcome<T> {
        Ok(Parsed::Complete { value, consumed })
    }

    fn dest(authority: &str) -> Destination {
        Destination::parse_authority(authority, None).unwrap()
    }

    #[test]
    fn greetings() {
        let no_auth = Greeting {
            offers_no_auth: true,
        };
        let other = Greeting {
            offers_no_auth: false,
        };
        let cases: &[(&[u8], Outcome<Greeting>)] = &[
            (b"", Ok(Parsed::Incomplete)),
            (b"\x05", Ok(Parsed::Incomplete)),
            (b"\x05\x02\x00", Ok(Parsed::Incomplete)),
            (b"\x05\x01\x00", complete(no_auth.clone(), 3)),
            (b"\x05\x02\x02\x00rest", complete(no_auth, 4)),
            (b"\x05\x01\x02", complete(other.clone(), 3)),
            (b"\x05\x00", complete(other, 2)),
            (b"\x04\x01\x00", Err(SocksError::Version(4))),
        ];
        for (input, want) in cases {
            assert_eq!(&parse_greeting(input), want, "{input:?}");
        }
    }

    #[test]
    fn requests() {
        let cases: &[(&[u8], Outcome<Destination>)] = &[
            (b"", Ok(Parsed::Incomplete)),
            (b"\x05\x01\x00", Ok(Parsed::Incomplete)),
            (b"\x05\x01\x00\x01\x7f\x00\x00", Ok(Parsed::Incomplete)),
            (b"\x05\x01\x00\x01\x7f\x00\x00\x01\x01", Ok(Parsed::Incomplete)),
            (b"\x05\x01\x00\x01\x7f\x00\x00\x01\x01\xbb", complete(dest("127.0.0.1:443"), 10)),
            (b"\x05\x01\x00\x03\x0bExample.COM\x00\x50xx", complete(dest("example.com:80"), 18)),
            (b"\x05\x01\x00\x03\x05host.\x00\x50", complete(dest("host:80"), 12)),
            (b"\x05\x01\x00\x03\x09127.0.0.1\x00\x50", complete(dest("127.0.0.1:80"), 16)),
            (
                b"\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x16",
                complete(dest("[::1]:22"), 22),
            ),
            (
                b"\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x7f\x00\x00\x01\x00\x16",
                complete(dest("127.0.0.1:22"), 22),
            ),
            (b"\x05\x02", Err(SocksError::Command(2))),
            (b"\x05\x03\x00\x01", Err(SocksError::Command(3))),
            (b"\x04\x01\x00\x01", Err(SocksError::Version(4))),
            (b"\x05\x01\x00\x02\x00", Err(SocksError::AddressType(2))),
            (b"\x05\x01\x00\x03\x00\x00\x50", Err(SocksError::Address(AddressError::Empty))),
            (b"\x05\x01\x00\x03\x03a b\x00\x50", Err(SocksError::Address(AddressError::BadCharacter))),
            (b"\x05\x01\x00\x03\x02\xc3\x28\x00\x50", Err(SocksError::Address(AddressError::NotAscii))),
            (b"\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x00", Err(SocksError::Address(AddressError::BadPort))),
        ];
        for (input, want) in cases {
            assert_eq!(&parse_request(input), want, "{input:?}");
        }
    }

    #[test]
    fn errors_map_to_their_replies() {
        assert_eq!(SocksError::Command(2).reply(), Reply::CommandNotSupported);
        assert_eq!(
            SocksError::AddressType(9).reply(),
            Reply::AddressTypeNotSupported
        );
        assert_eq!(Reply::NotAllowed.encode(), [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
}
