"""`make image`: the OCI image of every koordinator-py component, built from Debian packages and
PyPI wheels alone (e2e/image/build.sh; docs/image.md says how and why)."""
