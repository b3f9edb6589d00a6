//! The network proxy's request parsing (issue 28): arbitrary bytes as a SOCKS5
//! greeting and CONNECT request, and (when they are UTF-8) as a host and as an
//! authority (a CONNECT target, a Host header).
//!
//! Checked, besides "no panic":
//! - a complete SOCKS message says how many bytes it took, no more than were
//!   given; every shorter prefix of it is incomplete (nothing is decided on
//!   bytes that have not arrived), and bytes after it change nothing;
//! - a SOCKS error found on a prefix is the same error on the whole input (the
//!   reply a client gets does not depend on how its bytes were split);
//! - a host that parses is in its normal form: printing and parsing it again
//!   gives the same host; a name is lower-case, at most 253 bytes, without a
//!   trailing dot, and does not end in a numeric label;
//! - an authority that parses prints as one that parses back to itself, and
//!   its port is not 0;
//! - a SOCKS domain request names the host `Host::parse` makes of its name.

#![no_main]

use dsh::exec::netproxy::socks::{self, Parsed, SocksError};
use dsh::exec::netproxy::{Destination, Host};
use libfuzzer_sys::fuzz_target;

type Parser<T> = fn(&[u8]) -> Result<Parsed<T>, SocksError>;

fn check_message<T: PartialEq + std::fmt::Debug>(data: &[u8], parse: Parser<T>) {
    let whole = parse(data);
    for end in 0..data.len() {
        if let Err(early) = parse(&data[..end]) {
            assert_eq!(whole.as_ref().err(), Some(&early), "{data:?} cut at {end}");
        }
    }
    let Ok(Parsed::Complete { value, consumed }) = &whole else {
        return;
    };
    assert!(*consumed <= data.len(), "{data:?}");
    for end in 0..*consumed {
        assert_eq!(
            parse(&data[..end]),
            Ok(Parsed::Incomplete),
            "{data:?} cut at {end}"
        );
    }
    let exact = parse(&data[..*consumed]);
    let want = Parsed::Complete {
        value,
        consumed: *consumed,
    };
    assert_eq!(exact.as_ref().map(as_ref), Ok(want), "{data:?}");
}

fn as_ref<T>(parsed: &Parsed<T>) -> Parsed<&T> {
    match parsed {
        Parsed::Incomplete => Parsed::Incomplete,
        Parsed::Complete { value, consumed } => Parsed::Complete {
            value,
            consumed: *consumed,
        },
    }
}

fn check_host(text: &str) {
    let Ok(host) = Host::parse(text) else {
        return;
    };
    let printed = host.to_string();
    assert_eq!(Host::parse(&printed).as_ref(), Ok(&host), "{text:?}");
    if let Host::Name(name) = &host {
        let name = name.as_str();
        assert!(name.len() <= 253 && !name.ends_with('.'), "{text:?}");
        assert!(!name.bytes().any(|b| b.is_ascii_uppercase()), "{text:?}");
        let last = name.rsplit('.').next().unwrap_or_default();
        assert!(!last.bytes().all(|b| b.is_ascii_digit()), "{text:?}");
    }
}

fn check_authority(text: &str) {
    for default_port in [None, Some(80)] {
        let Ok(destination) = Destination::parse_authority(text, default_port) else {
            continue;
        };
        assert_ne!(destination.port, 0, "{text:?}");
        let printed = destination.to_string();
        let again = Destination::parse_authority(&printed, None);
        assert_eq!(again.as_ref(), Ok(&destination), "{text:?}");
    }
}

/// A domain request's host is the one its name parses to.
fn check_domain_request(data: &[u8]) {
    let Ok(Parsed::Complete { value, .. }) = socks::parse_request(data) else {
        return;
    };
    if data[3] != 0x03 {
        return;
    }
    let name = &data[5..5 + usize::from(data[4])];
    let name = std::str::from_utf8(name).expect("a parsed name is UTF-8");
    assert_eq!(Host::parse(name).as_ref(), Ok(&value.host), "{data:?}");
}

fuzz_target!(|data: &[u8]| {
    check_message(data, socks::parse_greeting);
    check_message(data, socks::parse_request);
    check_domain_request(data);
    if let Ok(text) = std::str::from_utf8(data) {
        check_host(text);
        check_authority(text);
    }
});
