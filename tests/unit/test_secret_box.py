"""The server key and sealed secrets (yuxi/models/secret_box.py)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from yuxi.models.secret_box import SecretBox, SecretError, new_key, server_key_id
from yuxi.settings import SettingsError


def test_a_key_is_generated_once_into_home_with_mode_0600(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("YUXI_SECRET_KEY", raising=False)
    monkeypatch.delenv("YUXI_SECRET_KEY_PREVIOUS", raising=False)
    first = SecretBox.from_env(tmp_path)
    path = tmp_path / "secret.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert SecretBox.from_env(tmp_path).current == first.current
    assert [p.name for p in tmp_path.iterdir()] == ["secret.key"]


def test_sealed_values_open_only_for_their_row_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_SECRET_KEY", new_key())
    monkeypatch.delenv("YUXI_SECRET_KEY_PREVIOUS", raising=False)
    box = SecretBox.from_env(tmp_path)
    sealed = box.seal("sk-secret-value", "row-1")
    assert b"sk-secret-value" not in sealed
    assert box.open(sealed, "row-1") == "sk-secret-value"
    assert box.seal("sk-secret-value", "row-1") != sealed  # a fresh nonce each time
    with pytest.raises(SecretError) as other_row:
        box.open(sealed, "row-2")
    assert "sk-secret" not in str(other_row.value)
    with pytest.raises(SecretError):
        box.open(sealed[:-1] + bytes([sealed[-1] ^ 1]), "row-1")
    # rotation: a new current key, the old one kept as previous
    old = os.environ["YUXI_SECRET_KEY"]
    monkeypatch.setenv("YUXI_SECRET_KEY", new_key())
    monkeypatch.setenv("YUXI_SECRET_KEY_PREVIOUS", old)
    rotated = SecretBox.from_env(tmp_path)
    assert rotated.open(sealed, "row-1") == "sk-secret-value"
    assert rotated.needs_rekey(sealed) and not rotated.needs_rekey(rotated.seal("x", "r"))
    monkeypatch.delenv("YUXI_SECRET_KEY_PREVIOUS")
    with pytest.raises(SecretError, match="YUXI_SECRET_KEY_PREVIOUS"):
        SecretBox.from_env(tmp_path).open(sealed, "row-1")


@pytest.mark.parametrize("raw", ["not base64 !!", "c2hvcnQ"])
def test_a_bad_server_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("YUXI_SECRET_KEY", raw)
    with pytest.raises(SettingsError, match="YUXI_SECRET_KEY"):
        SecretBox.from_env(tmp_path)


def test_the_recorded_identifier_names_a_key_without_revealing_it() -> None:
    key, other = b"k" * 32, b"o" * 32
    identifier = server_key_id(key)
    assert identifier == server_key_id(key) != server_key_id(other)
    assert len(identifier) == 32 and int(identifier, 16) >= 0
    # not the plain hash that sealed values carry, nor any part of the key
    assert identifier[:16] != hashlib.sha256(key).digest()[:8].hex()
    assert key.hex() not in identifier
    box = SecretBox(key, (other,))
    assert box.key_id == identifier and box.previous_key_ids == [server_key_id(other)]
