"""The first pod list asked for before koord-scheduler's heavy imports (issue 32).

At 5,000 nodes and 50,000 pods the API server took seconds from the list's request to its first
byte, and the scheduler asked only once every module (the plugins, the app, the what-if) was
imported and the configuration loaded. ``koord-scheduler`` now reads the configuration's
``clientConnection`` alone (``client_connection_ahead``), connects, asks for the pod list
(``KubernetesBackend.ask_first_list``) and only then imports the rest and loads the whole
configuration, in a thread, while the event loop sends the request; the pod watch then reads that
response. Where the whole configuration's connection turns out different (or the file is not
read here), that backend is closed and the scheduler connects as before.

Only without leader election: a standby replica reads its first list when it wins the Lease,
maybe hours later, and a list asked for at its start would only hold the API server's response
(and memory) until the API server's request timeout ended it.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from scheduler.config import DEFAULT_CONFIG_YAML
from scheduler.config.models import ClientConnectionConfiguration

__all__ = ["client_connection_ahead"]


def client_connection_ahead(
    config: Path | None, leader_elect: bool | None
) -> ClientConnectionConfiguration | None:
    """The ``clientConnection`` of the configuration file ``config`` (None: the shipped default),
    read without the rest, where the scheduler runs without leader election (``leader_elect``,
    the flag, else the file's ``leaderElection.leaderElect``, true by default); None where it
    elects or the file cannot be read so (the whole load says why)."""
    try:
        raw = yaml.safe_load(config.read_text() if config is not None else DEFAULT_CONFIG_YAML)
        if not isinstance(raw, dict):
            return None
        election = raw.get("leaderElection") or {}
        if leader_elect is None:
            leader_elect = election.get("leaderElect", True) if isinstance(election, dict) else True
        if leader_elect is not False:
            return None
        return ClientConnectionConfiguration.model_validate(raw.get("clientConnection") or {})
    except (OSError, yaml.YAMLError, ValidationError):
        return None
