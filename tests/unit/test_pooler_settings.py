"""The pooler settings are checked at start-up: a pooler needs a database URL to lead to, and a
direct URL means nothing without a pooler."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from werk.config import Settings

URL = "postgresql://postgres@127.0.0.1:6432/werk"
DIRECT = "postgresql://postgres@127.0.0.1:5432/werk"


def test_a_pooler_with_its_url_and_a_direct_one_is_accepted() -> None:
    settings = Settings(database_url=URL, database_pooler="transaction", direct_database_url=DIRECT)
    assert settings.pooled
    assert not Settings(database_url=URL).pooled


def test_a_pooler_without_a_database_url_is_refused() -> None:
    with pytest.raises(ValidationError, match="WERK_DATABASE_POOLER needs WERK_DATABASE_URL"):
        Settings(database_pooler="transaction")


def test_a_direct_url_without_a_pooler_is_refused() -> None:
    with pytest.raises(ValidationError, match="WERK_DIRECT_DATABASE_URL is for a pooled"):
        Settings(database_url=URL, direct_database_url=DIRECT)


def test_an_unknown_pooling_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="database_pooler"):
        Settings(database_url=URL, database_pooler="session")


def test_the_search_index_behind_a_pooler_needs_the_direct_url() -> None:
    """Its builder holds a session lock, which a transaction pooler cannot keep."""
    with pytest.raises(ValidationError, match="WERK_SEARCH_AVAILABLE behind a pooler needs"):
        Settings(database_url=URL, database_pooler="transaction", search_available=True)
    settings = Settings(
        database_url=URL,
        database_pooler="transaction",
        direct_database_url=DIRECT,
        search_available=True,
    )
    assert settings.session_database_url == DIRECT
    assert Settings(database_url=URL, search_available=True).session_database_url == URL
