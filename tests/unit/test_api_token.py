"""The generated API token: created once, kept private, never empty."""

from __future__ import annotations

import stat

from payhooks.cli.commands import api_token
from payhooks.service.config import Settings


def test_token_is_generated_once_and_kept(tmp_path):
    settings = Settings(home=tmp_path)
    first, generated = api_token(settings)
    again, generated_again = api_token(settings)
    assert generated and not generated_again and first == again and len(first) >= 24


def test_token_file_is_private(tmp_path):
    api_token(Settings(home=tmp_path))
    assert stat.S_IMODE((tmp_path / "api-token").stat().st_mode) == 0o600


def test_an_empty_token_file_counts_as_no_token(tmp_path):
    (tmp_path / "api-token").write_text("\n")
    token, generated = api_token(Settings(home=tmp_path))
    assert generated and token


def test_configured_token_wins(tmp_path):
    assert api_token(Settings(home=tmp_path, api_token="set")) == ("set", False)
