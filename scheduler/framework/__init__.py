"""The scheduling framework: extension-point protocols, Status, CycleState, the runtime that runs a
profile's plugins, and the registry that builds them."""
