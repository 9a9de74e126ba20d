"""Ingest: whether an input line is taken (admission), who sent it and what they may use (clients, quota), how far
the loop lags (pressure), per-run input order (sequencer), and the HTTP surface port the routes need (surface)."""
