"""One process at a time on a journal and ledger file: the second open names the file and the holder's pid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamrelay.adapters.sqlite.lock import LedgerLockedError
from streamrelay.adapters.sqlite.store import SqliteStore

pytestmark = pytest.mark.timeout(30)


async def test_a_second_open_names_the_file_and_the_holder_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    first = await SqliteStore.open(path)
    with pytest.raises(LedgerLockedError) as caught:
        await SqliteStore.open(path)
    assert str(path) in str(caught.value) and f"pid {os.getpid()}" in str(caught.value)
    assert caught.value.pid == os.getpid()
    await first.close()
    again = await SqliteStore.open(path)  # the lock went with the close
    await again.close()


async def test_memory_stores_are_never_locked() -> None:
    first, second = await SqliteStore.open(":memory:"), await SqliteStore.open(":memory:")
    await first.close()
    await second.close()
