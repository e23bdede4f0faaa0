"""koordinator-py's shared API package: Koordinator's custom resources as pydantic models, the
label and annotation keys with typed parsers, and exact Kubernetes quantity arithmetic.

It imports nothing else of koordinator-py; everything else imports it.
"""
