"""HITL_API_KEYS and HITL_API_KEYS_FILE: entries, roles, keys given by their SHA-256, and the errors that stop
start-up (one line, naming the entry, never the key)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gateway.app import create_app
from gateway.settings import ConfigurationError, load_settings
from tests.conftest import TEST_AGENT

KEY = "dGhpcyBpcyBhIGJhc2U2NCBrZXk="  # base64, with `=` padding
OTHER = "another-key-of-24-characters"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in ("HITL_API_KEYS", "HITL_API_KEYS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'hitl.db'}")
    monkeypatch.setenv("HITL_AGENT", TEST_AGENT)
    return monkeypatch


def who(value: str) -> list[tuple[str, str]]:
    """HITL_API_KEYS=value -> (principal id, role) of each entry."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HITL_API_KEYS", value)
        return [(key.principal_id, key.role) for key in load_settings().all_api_keys]


@pytest.mark.parametrize(("value", "expected"), [
    (f"{KEY}=alice", [("alice", "user")]),  # split at the last `=`: the key keeps its padding
    (f"{KEY}=alice:operator", [("alice", "operator")]),
    (f"{KEY}=ci-bot:agent, {OTHER}=bob:user", [("ci-bot", "agent"), ("bob", "user")]),
    (f"{KEY}=slack:T1:U1", [("slack:T1:U1", "user")]),  # a principal id may hold `:`
    (f"{KEY}=slack:T1:U1:operator", [("slack:T1:U1", "operator")]),
    (f"{KEY}=alice:Operator", [("alice", "operator")]),
    (f"{KEY}=team:agent:user", [("team:agent", "user")]),  # a principal id ending in a role name
    (f"{KEY}=alice:admin", [("alice:admin", "user")]),  # not a role: part of the id
    (f" , {KEY}=alice ,", [("alice", "user")]),
], ids=lambda value: value if isinstance(value, str) else "")
def test_entries_name_a_principal_and_a_role(env: pytest.MonkeyPatch, value: str,
                                             expected: list[tuple[str, str]]) -> None:
    assert who(value) == expected


@pytest.mark.parametrize(("value", "problem"), [
    ("short-key=alice", "HITL_API_KEYS: the key of entry 1 is shorter than 24 characters"),
    (f"{KEY}=alice,{OTHER}", "HITL_API_KEYS: entries look like key=principalId or key=principalId:role "
                             "(role: operator, user or agent), and entry 2 does not"),
    (f"{KEY}=", "HITL_API_KEYS: entries look like"),
    (f"{KEY}=:operator", "HITL_API_KEYS: entries look like"),
    (f"{KEY}=alice,{KEY}=bob", "HITL_API_KEYS entry 2 holds the same key as HITL_API_KEYS entry 1"),
    (f"sha256:{'0' * 63}=alice", "HITL_API_KEYS: the key of entry 1 starts with sha256: but is not "
                                 "64 hex digits after it"),
])
def test_a_bad_entry_stops_start_up_naming_it_never_its_key(env: pytest.MonkeyPatch, value: str,
                                                            problem: str) -> None:
    env.setenv("HITL_API_KEYS", value)

    with pytest.raises(ConfigurationError) as raised:
        load_settings()

    message = str(raised.value)
    assert message.startswith(f"bad settings: {problem}"), message
    assert "\n" not in message and KEY not in message and "short-key" not in message and OTHER not in message


def test_a_key_file_holds_entries_and_digests_instead_of_keys(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    keys.write_text(f"# the gateway's keys\n\nsha256:{digest.upper()}=alice:operator\n  # ci\n{OTHER}=ci:agent\n")
    env.setenv("HITL_API_KEYS_FILE", str(keys))
    env.setenv("HITL_API_KEYS", f"sha256:{hashlib.sha256(b'third-key-of-24-characters').hexdigest()}=carol")
    app = create_app(load_settings())
    try:
        client = app.test_client()
        me = {key: client.get("/api/me", headers={"Authorization": f"Bearer {key}"}).get_json()
              for key in (KEY, OTHER, "third-key-of-24-characters", digest)}
    finally:
        app.extensions["hitl"].executor.shutdown()
        app.extensions["hitl"].db.dispose()

    assert [(m["principal"]["principalId"], m["role"]) for m in list(me.values())[:3]] == [
        ("alice", "operator"), ("ci", "agent"), ("carol", "user")]
    assert me[digest]["error"]["code"] == "unauthorized"  # the digest is not the key


@pytest.mark.parametrize(("text", "problem"), [
    ("# keys\nsha256:abc=alice\n", "the key of line 2 starts with sha256: but is not 64 hex digits after it"),
    (f"{KEY}=alice\n\ntiny=bob\n", "the key of line 3 is shorter than 24 characters"),
    (f"{KEY}=alice\n{KEY}\n", "entries look like key=principalId or key=principalId:role"),
])
def test_a_bad_key_file_stops_start_up_naming_the_line(env: pytest.MonkeyPatch, tmp_path: Path, text: str,
                                                       problem: str) -> None:
    keys = tmp_path / "keys"
    keys.write_text(text)
    env.setenv("HITL_API_KEYS_FILE", str(keys))

    with pytest.raises(ConfigurationError) as raised:
        load_settings()

    assert str(raised.value).startswith(f"bad settings: HITL_API_KEYS_FILE: {problem}"), raised.value
    assert KEY not in str(raised.value) and "tiny" not in str(raised.value)


def test_a_key_in_both_places_or_a_missing_file_stops_start_up(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"sha256:{hashlib.sha256(KEY.encode()).hexdigest()}=bob\n")
    env.setenv("HITL_API_KEYS_FILE", str(keys))
    env.setenv("HITL_API_KEYS", f"{KEY}=alice")
    with pytest.raises(ConfigurationError, match="HITL_API_KEYS_FILE line 1 holds the same key as HITL_API_KEYS "
                                                 "entry 1"):
        load_settings()

    env.setenv("HITL_API_KEYS_FILE", str(tmp_path / "nope"))
    with pytest.raises(ConfigurationError, match=r"HITL_API_KEYS_FILE: the file cannot be read \(No "
                                                 r"such file or directory\)"):
        load_settings()
