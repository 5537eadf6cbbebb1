"""Secrets kept at rest (model API keys): AES-256-GCM under the server key.

The server key is ``YUXI_SECRET_KEY`` (32 bytes, URL-safe base64), or else a key
generated into ``<YUXI_HOME>/secret.key`` (mode 0600) the first time one is needed.
Keys listed in ``YUXI_SECRET_KEY_PREVIOUS`` (comma-separated) still decrypt, so a
rotation is: set the new key, move the old one to ``YUXI_SECRET_KEY_PREVIOUS``, run
``yuxi model rekey``, then drop the old key.

A sealed value is ``b"y1" + key id (8 bytes) + nonce (12) + ciphertext``; the key id is
the first 8 bytes of the key's SHA-256, so a value names the key it needs without
revealing it. Each value is bound to a context string (e.g. the model's id) as GCM
associated data: a ciphertext copied into another row does not open there.

Every host of one database needs the same server key: the database records its
identifier (``server_key_id``, a keyed hash; yuxi/models/server_key.py checks it at
start).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from yuxi.settings import SettingsError

VERSION = b"y1"
KEY_FILE = "secret.key"
# what the identifier the database records is the HMAC of: a fixed label, so the
# identifier is of no use for anything but telling keys apart
_KEY_ID_LABEL = b"yuxi server key identifier v1"


class SecretError(ValueError):
    """A sealed value that cannot be opened (wrong key, other row, damaged). Its message
    never contains the value."""


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:8]


def server_key_id(key: bytes) -> str:
    """The identifier the database records for a server key: HMAC-SHA256 of a fixed
    label under the key, its first 16 bytes in hex. It names the key without revealing
    it (and without the key, none can be made to match)."""
    return hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).digest()[:16].hex()


def _decode_key(raw: str, name: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(raw.strip() + "=" * (-len(raw.strip()) % 4))
    except (binascii.Error, ValueError):
        raise SettingsError(f"{name} is not URL-safe base64") from None
    if len(key) != 32:
        raise SettingsError(f"{name} must encode 32 bytes, got {len(key)}")
    return key


def new_key() -> str:
    """A fresh server key, as YUXI_SECRET_KEY takes it."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


@dataclass(frozen=True)
class SecretBox:
    """Seals with the current key; opens with it or any previous one."""

    current: bytes
    previous: tuple[bytes, ...] = ()

    @classmethod
    def from_env(cls, home: Path) -> SecretBox:
        raw = os.environ.get("YUXI_SECRET_KEY", "")
        current = _decode_key(raw, "YUXI_SECRET_KEY") if raw else _home_key(home)
        previous = tuple(
            _decode_key(part, "YUXI_SECRET_KEY_PREVIOUS")
            for part in os.environ.get("YUXI_SECRET_KEY_PREVIOUS", "").split(",")
            if part.strip()
        )
        return cls(current, previous)

    def seal(self, plaintext: str, context: str) -> bytes:
        nonce = os.urandom(12)
        sealed = AESGCM(self.current).encrypt(nonce, plaintext.encode(), context.encode())
        return VERSION + _key_id(self.current) + nonce + sealed

    def open(self, value: bytes, context: str) -> str:
        if len(value) < 2 + 8 + 12 + 16 or value[:2] != VERSION:
            raise SecretError("the stored secret is damaged")
        key_id, nonce, sealed = value[2:10], value[10:22], value[22:]
        for key in (self.current, *self.previous):
            if _key_id(key) == key_id:
                try:
                    return AESGCM(key).decrypt(nonce, sealed, context.encode()).decode()
                except InvalidTag:
                    raise SecretError("the stored secret does not open for this row") from None
        raise SecretError(
            "the stored secret was sealed with a server key that is not configured"
            " (set it in YUXI_SECRET_KEY_PREVIOUS)"
        )

    @property
    def key_id(self) -> str:
        """The current key's identifier (``server_key_id``)."""
        return server_key_id(self.current)

    @property
    def previous_key_ids(self) -> list[str]:
        """The previous keys' identifiers, in the order YUXI_SECRET_KEY_PREVIOUS lists them."""
        return [server_key_id(key) for key in self.previous]

    def needs_rekey(self, value: bytes) -> bool:
        """Whether ``value`` was sealed with a key other than the current one."""
        return value[2:10] != _key_id(self.current)


def _home_key(home: Path) -> bytes:
    """``<home>/secret.key``, created (0600, exclusively) when missing."""
    path = home / KEY_FILE
    try:
        return _decode_key(path.read_text(), str(path))
    except FileNotFoundError:
        pass
    home.mkdir(parents=True, exist_ok=True)
    key = new_key()
    # written whole to a temporary file, then linked into place: another process
    # sees either no key file or a complete one, and the first link wins
    temporary = home / f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            return _decode_key(path.read_text(), str(path))
    finally:
        temporary.unlink(missing_ok=True)
    return _decode_key(key, str(path))
