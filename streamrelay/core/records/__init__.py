"""What is kept durably and told truthfully: the journal port (accepted input lines), the ledger port (intents and
acknowledgements of every platform call) and the delivery report."""
