"""Which addresses a webhook may reach: an explicit deny list, not the interpreter's tables alone.

`ipaddress`'s `is_global` & co. change between Python versions and miss what matters here (3.11
calls 192.0.0.192, Oracle Cloud's metadata address, and 2002:a9fe:a9fe::, 6to4 for 169.254.169.254,
"global"). So the ranges are listed here with the reason each is refused, IPv6 forms that carry an
IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by the IPv4 address they carry,
and `is_global` stays only as a backstop for what the list does not name.

Cloud metadata endpoints are refused even where private targets are allowed (dev, tests): no
deployment has a reason to let a tenant's job read the node's credentials.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

_Address = IPv4Address | IPv6Address

# Instance metadata and similar node-credential services of the big clouds. Most sit in ranges refused
# below anyway; 168.63.129.16 is a public address, so only this list catches it.
METADATA_ADDRESSES: frozenset[_Address] = frozenset(
    ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack IMDS
        "169.254.170.2",  # AWS ECS task metadata and credentials
        "169.254.170.23",  # AWS EKS pod identity agent
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity agent over IPv6
        "192.0.0.192",  # Oracle Cloud (legacy metadata)
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer
    )
)

DENIED_IPV4: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), why)
    for net, why in (
        ("0.0.0.0/8", "this network"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.31.196.0/24", "AS112"),
        ("192.52.193.0/24", "AMT"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("192.175.48.0/24", "AS112"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)

DENIED_IPV6: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), why)
    for net, why in (
        ("::/96", "unspecified, loopback or IPv4-compatible (deprecated)"),
        ("::ffff:0:0:0/96", "IPv4-translated"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/23", "IETF protocol assignments (Teredo included)"),
        ("2001:db8::/32", "documentation"),
        ("2620:4f:8000::/48", "AS112"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    )
)

_NAT64 = IPv6Network("64:ff9b::/96")
_COMPATIBLE = IPv6Network("::/96")


def embedded_ipv4(ip: IPv6Address) -> list[IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, which is where a packet to it may end up."""
    carried: list[IPv4Address] = []
    if ip.ipv4_mapped is not None:
        carried.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        carried.append(ip.sixtofour)
    if ip.teredo is not None:
        carried.extend(ip.teredo)  # the Teredo server and the (de-obfuscated) client
    if ip in _NAT64 or ip in _COMPATIBLE:
        carried.append(IPv4Address(int(ip) & 0xFFFFFFFF))
    return carried


def _denied(ip: _Address) -> str | None:
    table = DENIED_IPV4 if isinstance(ip, IPv4Address) else DENIED_IPV6
    for network, why in table:
        if ip in network:
            return why
    if not ip.is_global:  # the interpreter's tables: a backstop for what the list above does not name
        return "not globally routable"
    return None


def forbidden_reason(address: str, *, allow_private: bool) -> str | None:
    """Why a webhook must not connect to `address` (None: it may). `allow_private` lifts every
    refusal but the metadata one."""
    ip = ip_address(address.split("%", 1)[0])  # an IPv6 zone id names an interface, not an address
    forms: list[_Address] = [ip, *(embedded_ipv4(ip) if isinstance(ip, IPv6Address) else [])]
    for form in forms:
        if form in METADATA_ADDRESSES:
            return "cloud metadata"
    if allow_private:
        return None
    for form in forms[1:] + forms[:1]:  # the carried address first: it names the real destination
        why = _denied(form)
        if why is not None:
            return why if form is ip else f"IPv4-embedding address whose IPv4 is {why}"
    return None
