"""Slugs and the public-address rule."""

from __future__ import annotations

import ipaddress

import pytest

from manifest.addresses import is_public_address
from payments.chain.contracts import charge_id as chain_charge_id
from payments.ids import IdPrefix, charge_id, charge_seq, new_id
from payments.slugs import RESERVED_SLUGS, is_valid_slug, slugify


@pytest.mark.parametrize(("name", "slug"), [
    ("Space Blaster 2!", "space-blaster-2"),
    ("  Café  Crème ", "cafe-creme"),
    ("a" * 80, "a" * 63),
    ("---", ""),
    ("Über--Game", "uber-game"),
])
def test_slugify(name: str, slug: str) -> None:
    assert slugify(name) == slug


@pytest.mark.parametrize(("slug", "valid"), [
    ("demo", True), ("a", True), ("a-b-1", True), ("-a", False), ("a-", False),
    ("a--b", False), ("A", False), ("a_b", False), ("a" * 64, False), ("", False),
])
def test_is_valid_slug(slug: str, valid: bool) -> None:
    assert is_valid_slug(slug) is valid


def test_reserved_list_is_the_spec_list() -> None:
    assert {"dev", "docs", "api", "app", "apps", "authorize", "health",
                              "statusz", "supported", "verify", "settle", "assets", "admin",
                              "login", "settings", "account"} == RESERVED_SLUGS


@pytest.mark.parametrize("prefix", list(IdPrefix))
def test_ids_have_exact_prefixes(prefix: IdPrefix) -> None:
    a, b = new_id(prefix), new_id(prefix)
    assert a.startswith(prefix.value) and a != b


def test_charge_id_is_the_contracts_bytes32_of_the_sequence() -> None:
    assert charge_id(1) == "0x" + "0" * 63 + "1"
    assert charge_id(256) == "0x" + "0" * 61 + "100"
    assert charge_seq(charge_id(123456789)) == 123456789
    assert bytes.fromhex(charge_id(77)[2:]) == chain_charge_id(77)
    for bad in ("0x1", "0x" + "g" * 64, "1" * 66, "0x" + "0" * 64):
        assert charge_seq(bad) is None
    # Aliases int(x, 16) would read as charge 1 (or 10): not the id the service gave out.
    for alias in ("0x" + "0" * 59 + "0_0_1", "0x" + " " * 63 + "1", "0x+" + "0" * 62 + "1",
                  "0x" + "0" * 63 + "A", "0X" + "0" * 63 + "1", "0x" + "0" * 63 + "1\n"):
        assert charge_seq(alias) is None, alias
    with pytest.raises(ValueError, match="positive"):
        charge_id(0)


@pytest.mark.parametrize(("ip", "public"), [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True),
    ("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("::1", False),
    ("fe80::1", False), ("fc00::1", False), ("::ffff:127.0.0.1", False),
    ("::ffff:8.8.8.8", True), ("2002:7f00:1::", False), ("64:ff9b::a00:1", False),
    ("224.0.0.1", False), ("255.255.255.255", False), ("198.18.0.1", False),
    ("::127.0.0.1", False), ("::8.8.8.8", False), ("::ffff:0:7f00:1", False),
    ("::ffff:0:808:808", False), ("fec0::1", False), ("fecf::1", False),
])
def test_public_address_rule(ip: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(ip)) is public
