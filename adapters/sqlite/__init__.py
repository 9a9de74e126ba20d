from adapters.sqlite.ledger import SqliteLedger

__all__ = ["SqliteLedger"]
