"""Protobuf modules generated from NRI's api.proto and ttrpc's envelopes (README.md, make protos)."""
