from adapters.sqlite.journal import SqliteJournal
from adapters.sqlite.ledger import SqliteLedger
from adapters.sqlite.store import SqliteStore

__all__ = ["SqliteJournal", "SqliteLedger", "SqliteStore"]
