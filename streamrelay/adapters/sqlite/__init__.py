from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.adapters.sqlite.ledger import SqliteLedger
from streamrelay.adapters.sqlite.store import SqliteStore

__all__ = ["SqliteJournal", "SqliteLedger", "SqliteStore"]
