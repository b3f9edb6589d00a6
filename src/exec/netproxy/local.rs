//! Which addresses are this machine's, or otherwise not public (E10): what the
//! sandbox's network never lets through by a default, and what a name must not
//! lead to.
//!
//! The classes follow codex-rs' `is_non_public_ip` (its network proxy), and are at
//! least as strict: loopback, unspecified, private IPv4, shared address space
//! (100.64/10), link-local, multicast, broadcast, `0/8`, the IETF protocol block,
//! the documentation and benchmarking ranges, `240/4`; unique-local, link-local and
//! site-local IPv6 and IPv6 documentation; an IPv4 address inside IPv6 (mapped,
//! compatible, NAT64, 6to4) as the IPv4 address it carries. Beyond the classes,
//! every address of this machine's own interfaces (a server's public address is
//! this machine too), read with `getifaddrs` and kept for [`INTERFACES_FRESH`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a reading of the interfaces' addresses is used before it is read
/// again: an address added since (a VPN coming up) counts from then on.
pub const INTERFACES_FRESH: Duration = Duration::from_secs(2);

/// Whether `ip` is local in E10's sense: this machine by any of its addresses, or
/// a non-public address ([`is_non_public`]).
pub fn is_local(ip: IpAddr) -> bool {
    is_non_public(ip) || is_this_machine(ip)
}

/// Whether `ip` is this machine: loopback, unspecified (which reaches it too), or
/// an address of one of its interfaces. When the interfaces cannot be read, every
/// address is (the closed side).
pub fn is_this_machine(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    if ip.is_loopback() || ip.is_unspecified() {
        return true;
    }
    match interfaces() {
        Some(own) => own.contains(&ip),
        None => true,
    }
}

/// Whether `ip` is in a range no public host has (see the module docs).
pub fn is_non_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn non_public_v4(ip: Ipv4Addr) -> bool {
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || [
            ([0, 0, 0, 0], 8),       // "this network"
            ([100, 64, 0, 0], 10),   // shared address space (carrier-grade NAT)
            ([192, 0, 0, 0], 24),    // IETF protocol assignments
            ([192, 0, 2, 0], 24),    // documentation (TEST-NET-1)
            ([198, 18, 0, 0], 15),   // benchmarking
            ([198, 51, 100, 0], 24), // documentation (TEST-NET-2)
            ([203, 0, 113, 0], 24),  // documentation (TEST-NET-3)
            ([240, 0, 0, 0], 4),     // reserved
        ]
        .iter()
        .any(|(net, bits)| in_v4(ip, *net, *bits))
}

fn non_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return non_public_v4(v4);
    }
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique-local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated, still routed privately)
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
}

/// The IPv4 address an IPv6 one carries, where it is only a way to reach that one:
/// mapped (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`, not `::` or `::1`), NAT64
/// (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return Some(low);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// Every address of this machine's interfaces now (canonical), or `None` when they
/// cannot be read: for `dsh status`-like reports and tests that need one.
pub fn interface_addresses() -> Option<Vec<IpAddr>> {
    interfaces().map(|a| a.to_vec())
}

/// This machine's interface addresses, read at most every [`INTERFACES_FRESH`];
/// `None` when they cannot be read.
fn interfaces() -> Option<Arc<Vec<IpAddr>>> {
    static SEEN: Mutex<Option<(Instant, Arc<Vec<IpAddr>>)>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, addresses)) = seen.as_ref()
        && at.elapsed() < INTERFACES_FRESH
    {
        return Some(addresses.clone());
    }
    let addresses = Arc::new(read_interfaces()?);
    *seen = Some((Instant::now(), addresses.clone()));
    Some(addresses)
}

/// Every IPv4 and IPv6 address of every interface, up or not, canonical.
fn read_interfaces() -> Option<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list that is ours until freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = Vec::new();
    let mut node = head;
    while !node.is_null() {
        // SAFETY: `node` is an entry of the list getifaddrs returned, alive until the
        // freeifaddrs below; its address, when set, is a sockaddr of the family it
        // names, so the casts read what is there.
        unsafe {
            let addr = (*node).ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(addr as *const libc::sockaddr_in);
                        found.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            sin.sin_addr.s_addr,
                        ))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(addr as *const libc::sockaddr_in6);
                        found.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            node = (*node).ifa_next;
        }
    }
    // SAFETY: the list getifaddrs made, freed once, nothing of it used after.
    unsafe { libc::freeifaddrs(head) };
    Some(found.into_iter().map(|ip| ip.to_canonical()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// E10: every non-public class is local, in every IPv6 spelling of an IPv4
    /// address; public addresses are not (unless this machine has them).
    #[test]
    fn e10_non_public_classes_are_local_in_every_spelling() {
        let local = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "192.0.0.8",
            "192.0.2.2",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::2",
            "fc00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
        ];
        for ip in local {
            assert!(is_non_public(ip.parse().unwrap()), "{ip}");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "100.128.0.1",
            "100.63.255.255",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ];
        for ip in public {
            assert!(!is_non_public(ip.parse().unwrap()), "{ip}");
        }
    }

    /// E10: every address this machine's interfaces hold is this machine.
    #[test]
    fn e10_every_interface_address_is_this_machine() {
        let own = read_interfaces().expect("getifaddrs");
        assert!(own.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{own:?}");
        for ip in own {
            assert!(is_this_machine(ip) && is_local(ip), "{ip}");
        }
        assert!(!is_this_machine("8.8.8.8".parse().unwrap()) || interfaces().is_none());
    }
}
