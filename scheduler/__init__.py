"""koord-scheduler: a standalone asyncio scheduler for pods whose schedulerName is koord-scheduler.

Data flows one way: backend watch -> events -> cache -> per-cycle snapshot -> queue pop ->
framework runtime -> plugins (-> solver) -> binder -> backend.
"""
