"""Fake clusters: the declarative cluster description shared by `koordctl simulate` and the e2e
harness, and the simulation runner on the in-memory backend."""
