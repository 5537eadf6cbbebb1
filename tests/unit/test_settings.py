from __future__ import annotations

from pathlib import Path

import pytest

from yuxi.settings import Settings, SettingsError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("YUXI_HOME", "YUXI_DATABASE_URL", "YUXI_HOST", "YUXI_PORT"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings.from_env()
    assert (settings.home, settings.database_url, settings.host, settings.port) == (
        Path(".yuxi"),
        None,
        "127.0.0.1",
        8000,
    )
    assert settings.pgdata == Path(".yuxi/pgdata")


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_HOME", "/srv/yuxi")
    monkeypatch.setenv("YUXI_DATABASE_URL", "postgresql://db/yuxi")
    monkeypatch.setenv("YUXI_PORT", "9000")
    settings = Settings.from_env()
    assert (settings.pgdata, settings.database_url, settings.port) == (
        Path("/srv/yuxi/pgdata"),
        "postgresql://db/yuxi",
        9000,
    )


def test_a_bad_number_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_PORT", "eighty")
    with pytest.raises(SettingsError, match="YUXI_PORT must be an integer, got 'eighty'"):
        Settings.from_env()


def test_cors_origins_are_read_as_a_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YUXI_CORS_ORIGINS", raising=False)
    assert Settings.from_env().cors_origins == ()
    monkeypatch.setenv("YUXI_CORS_ORIGINS", " https://chat.example.com, http://127.0.0.1:3000 ,")
    assert Settings.from_env().cors_origins == ("https://chat.example.com", "http://127.0.0.1:3000")
    monkeypatch.setenv("YUXI_CORS_ORIGINS", "*")
    assert Settings.from_env().cors_origins == ("*",)


@pytest.mark.parametrize(
    "value",
    [
        "chat.example.com",  # no scheme
        "https://chat.example.com/",  # a trailing slash
        "https://chat.example.com/app",  # a path
        "ftp://chat.example.com",
        "https://*.example.com",
        "https://Chat.example.com",  # browsers send it in lower case
        "*,https://chat.example.com",
    ],
)
def test_a_bad_cors_origin_stops_the_start(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("YUXI_CORS_ORIGINS", value)
    with pytest.raises(SettingsError, match="YUXI_CORS_ORIGINS"):
        Settings.from_env()
