"""Fuzzing the ingest contract over real HTTP (issue 12, item 7).

Four modules (``test_ingest_fuzz*.py``) each post one kind of input to a real sidecar of their own (conftest.py)
while a victim run streams through it (victim.py). Every body gets a 2xx or a 4xx that names the problem, never a
5xx, never a hang (checks.py); reads of the runs never fail; the victim's answer shows once, whole.

The tests of each module run in file order: the victim starts with the first and is checked by the last. Being four
modules, each with its own sidecar and victim, lets xdist spread them over its workers.
"""
