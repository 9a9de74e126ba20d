from adapters.sqlite.journal import SqliteJournal
from adapters.sqlite.ledger import SqliteLedger

__all__ = ["SqliteJournal", "SqliteLedger"]
