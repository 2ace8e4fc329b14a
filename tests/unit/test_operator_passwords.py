"""Operators' password hashes name the scrypt cost they were made with, so the cost can be
raised without locking anyone out; hashes made before costs were named still log in."""

from __future__ import annotations

import base64
import hashlib

import pytest

from payhooks.operations import operators

PASSWORD = "correct horse battery staple"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def test_a_hash_names_the_products_cost_and_checks_only_its_password():
    stored = operators.hash_password(PASSWORD)
    assert stored.startswith("scrypt$ln=14,r=8,p=1$")
    assert operators.password_matches(PASSWORD, stored)
    assert not operators.password_matches(PASSWORD + "!", stored)


def test_a_hash_made_before_costs_were_named_still_logs_in():
    salt = b"0123456789abcdef"
    digest = hashlib.scrypt(PASSWORD.encode(), salt=salt, n=2**14, r=8, p=1)
    stored = f"scrypt${_b64(salt)}${_b64(digest)}"
    assert operators.password_matches(PASSWORD, stored)
    assert not operators.password_matches("another password", stored)


def test_a_hash_is_checked_at_the_cost_it_names():
    cheap = operators.hash_password(PASSWORD, cost=(10, 8, 1))
    assert cheap.startswith("scrypt$ln=10,r=8,p=1$")
    assert operators.password_matches(PASSWORD, cheap)
    # The same salt and digest under another cost is another hash: it matches nothing.
    assert not operators.password_matches(PASSWORD, cheap.replace("ln=10", "ln=11", 1))


@pytest.mark.parametrize("cost", [(9, 8, 1), (16, 16, 1), (14, 8, 5), (14, 0, 1)])
def test_no_hash_is_made_at_a_cost_it_could_not_be_checked_at(cost):
    with pytest.raises(ValueError, match="scrypt cost"):
        operators.hash_password(PASSWORD, cost=cost)


def test_a_right_hash_of_less_than_the_least_cost_is_refused():
    salt = b"0123456789abcdef"
    digest = hashlib.scrypt(PASSWORD.encode(), salt=salt, n=2**9, r=8, p=1)
    stored = f"scrypt$ln=9,r=8,p=1${_b64(salt)}${_b64(digest)}"
    assert not operators.password_matches(PASSWORD, stored)


@pytest.mark.parametrize(
    "cost",
    [
        "ln=20,r=8,p=1",  # 1 GiB: beyond the memory a check may take
        "ln=14,r=99,p=1",
        "ln=14,r=8,p=5",
        "ln=14,r=0,p=1",
        "n=16384,r=8,p=1",
        "ln=14;r=8;p=1",
    ],
)
def test_a_stored_cost_out_of_bounds_or_malformed_is_refused_before_any_hashing(cost, monkeypatch):
    made = operators.hash_password(PASSWORD, cost=(10, 8, 1)).split("$")
    stored = "$".join([made[0], cost, *made[2:]])
    hashed: list[object] = []
    monkeypatch.setattr(operators.hashlib, "scrypt", lambda *a, **k: hashed.append(k) or b"")
    assert not operators.password_matches(PASSWORD, stored)
    assert hashed == []


@pytest.mark.parametrize(
    "stored",
    ["", "scrypt", "scrypt$only", "bcrypt$a$b", "scrypt$a$b$c$d", "scrypt$a$b", "scrypt$%%$%%"],
)
def test_anything_else_stored_matches_nothing(stored):
    assert not operators.password_matches(PASSWORD, stored)
