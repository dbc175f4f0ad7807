"""The SSRF deny list (app/services/addresses.py), form by form: every address a webhook must not
reach, in every spelling that carries it, and the public ones it must still reach."""

from __future__ import annotations

import pytest

from app.services.addresses import forbidden_reason
from app.services.targets import is_reserved_header

FORBIDDEN = [
    # cloud metadata
    ("169.254.169.254", "AWS/GCP/Azure IMDS"),
    ("169.254.170.2", "AWS ECS task metadata"),
    ("192.0.0.192", "Oracle Cloud metadata"),
    ("100.100.100.200", "Alibaba Cloud metadata"),
    ("168.63.129.16", "Azure WireServer (a public address)"),
    ("fd00:ec2::254", "AWS IMDS over IPv6"),
    # IPv4 ranges
    ("0.0.0.0", "this network"),
    ("10.1.2.3", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("169.254.1.1", "link-local"),
    ("172.16.5.4", "private"),
    ("192.0.0.8", "IETF protocol assignments"),
    ("192.0.2.1", "documentation"),
    ("192.88.99.1", "6to4 relay anycast"),
    ("192.168.1.1", "private"),
    ("198.18.0.1", "benchmarking"),
    ("198.51.100.1", "documentation"),
    ("203.0.113.1", "documentation"),
    ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    # IPv6 ranges
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local with a zone id"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("100::1", "discard-only"),
    ("2001:db8::1", "documentation"),
    ("64:ff9b:1::a9fe:a9fe", "local-use NAT64"),
    # IPv4-mapped and IPv4-compatible
    ("::ffff:127.0.0.1", "mapped loopback"),
    ("::ffff:169.254.169.254", "mapped metadata"),
    ("::ffff:10.0.0.1", "mapped private"),
    ("::127.0.0.1", "compatible loopback"),
    ("::a9fe:a9fe", "compatible metadata"),
    ("::5db8:d70e", "compatible public (deprecated form)"),
    ("::ffff:0:7f00:1", "IPv4-translated loopback"),
    # 6to4: 2002:<v4>::/48
    ("2002:a9fe:a9fe::", "6to4 of 169.254.169.254"),
    ("2002:7f00:1::", "6to4 of 127.0.0.1"),
    ("2002:a00:1::1", "6to4 of 10.0.0.1"),
    ("2002:c000:c0::", "6to4 of 192.0.0.192"),
    # NAT64 well-known prefix: 64:ff9b::<v4>
    ("64:ff9b::a9fe:a9fe", "NAT64 of 169.254.169.254"),
    ("64:ff9b::7f00:1", "NAT64 of 127.0.0.1"),
    ("64:ff9b::c0a8:101", "NAT64 of 192.168.1.1"),
    # Teredo: 2001:0:<server v4>:<flags>:<port>:<client v4 inverted>
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo, public server and client"),
    ("2001:0:a9fe:a9fe::", "Teredo, metadata as the server"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "Teredo, metadata as the client"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo, loopback as the client"),
]

ALLOWED = [
    ("93.184.215.14", "public IPv4"),
    ("1.1.1.1", "public IPv4"),
    ("2606:4700::1111", "public IPv6"),
    ("2a00:1450:4001:80b::200e", "public IPv6"),
    ("::ffff:93.184.215.14", "mapped public"),
    ("2002:5db8:d70e::", "6to4 of a public address"),
    ("64:ff9b::5db8:d70e", "NAT64 of a public address"),
]


@pytest.mark.parametrize(("address", "why"), FORBIDDEN, ids=[a for a, _ in FORBIDDEN])
def test_forbidden_addresses_are_refused(address: str, why: str) -> None:
    assert forbidden_reason(address, allow_private=False) is not None, why


@pytest.mark.parametrize(("address", "why"), ALLOWED, ids=[a for a, _ in ALLOWED])
def test_public_addresses_are_allowed(address: str, why: str) -> None:
    assert forbidden_reason(address, allow_private=False) is None, why


METADATA_FORMS = [
    "169.254.169.254",
    "::ffff:169.254.169.254",
    "::a9fe:a9fe",
    "2002:a9fe:a9fe::",
    "64:ff9b::a9fe:a9fe",
    "2001:0:a9fe:a9fe::",
    "2001:0:4136:e378:8000:63bf:5601:5601",
    "192.0.0.192",
    "100.100.100.200",
    "fd00:ec2::254",
]


@pytest.mark.parametrize("address", METADATA_FORMS)
def test_metadata_stays_refused_where_private_targets_are_allowed(address: str) -> None:
    assert forbidden_reason(address, allow_private=True) == "cloud metadata"


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.0.0.1", "fd12::1", "2002:7f00:1::"])
def test_allow_private_lifts_the_other_refusals(address: str) -> None:
    assert forbidden_reason(address, allow_private=True) is None


RESERVED = [
    "Transfer-Encoding",
    "transfer-encoding",
    "Content-Length",
    "Content-Type",
    "Content-Encoding",
    "Host",
    "Connection",
    "Keep-Alive",
    "Proxy-Authorization",
    "Proxy-Connection",
    "proxy-anything",
    "TE",
    "Trailer",
    "Upgrade",
    "Expect",
    "HTTP2-Settings",
    "webhook-id",
    "Webhook-Signature",
    "webhook-timestamp",
    "Scheduler-Run-Id",
    "Scheduler-Anything",
    "traceparent",
    "tracestate",
]


@pytest.mark.parametrize("name", RESERVED)
def test_framing_hop_by_hop_and_signature_headers_are_reserved(name: str) -> None:
    assert is_reserved_header(name)


@pytest.mark.parametrize("name", ["Authorization", "X-Team", "User-Agent", "Accept", "Webhooks-Are-Fun"])
def test_ordinary_headers_are_a_jobs_to_set(name: str) -> None:
    assert not is_reserved_header(name)
