"""A self-signed serving certificate for the admission webhook when koord-manager runs outside
the cluster (`make up`, the e2e tests): the API server then calls https://127.0.0.1:<port>.

In a cluster the Helm chart mounts a certificate instead.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["ensure_self_signed"]


def ensure_self_signed(directory: Path, host: str) -> tuple[Path, Path]:
    """(certfile, keyfile) for ``host`` (an IP or a DNS name), created once and reused."""
    directory.mkdir(parents=True, exist_ok=True)
    certfile, keyfile = directory / "webhook.crt", directory / "webhook.key"
    if certfile.exists() and keyfile.exists():
        return certfile, keyfile
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    try:
        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    keyfile.chmod(0o600)
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return certfile, keyfile
