"""The SSRF guard's address rules: which IPs web_fetch may connect to (pure)."""

from __future__ import annotations

import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4_BLOCKED = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)
_V6_BLOCKED = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::1/128",
        "::/128",
        "ff00::/8",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "2001:db8::/32",
        "2001::/32",
        "64:ff9b:1::/48",
        "100::/64",
    )
)
# IPv6 ranges whose low 32 bits are an IPv4 address: mapped, compatible, SIIT-translated, NAT64.
_V4_IN_LOW_BITS = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::ffff:0:0/96",
        "::/96",
        "::ffff:0:0:0/96",
        "64:ff9b::/96",
    )
)
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


def embedded_v4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if any."""
    for net in _V4_IN_LOW_BITS:
        if addr in net:
            return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(addr) >> 80) & 0xFFFFFFFF)
    return None


def is_public(addr: IPAddress) -> bool:
    """False for every loopback, private, link-local, reserved or otherwise non-routable address."""
    if isinstance(addr, ipaddress.IPv4Address):
        return not any(addr in net for net in _V4_BLOCKED)
    if addr.scope_id:
        return False
    if any(addr in net for net in _V6_BLOCKED):
        return False
    inner = embedded_v4(addr)
    return inner is None or is_public(inner)


def parse_literal(host: str) -> IPAddress | None:
    """The address a URL host denotes literally, including decimal, octal and hex IPv4 forms."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def parse_address(text: str) -> IPAddress:
    """A resolver's answer as an address (a scope suffix is kept so it counts as non-public)."""
    return ipaddress.ip_address(text)
