"""A throw-away certificate authority and a broker certificate for 127.0.0.1, in PEM, made with openssl."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Tls:
    ca: Path  # the CA certificate: the clients' trust store (ssl.truststore.type=PEM)
    keystore: Path  # the broker's unencrypted PKCS#8 key and certificate (ssl.keystore.type=PEM)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_tls(directory: Path) -> Tls:
    """Made once per session; valid for a day, for IP address 127.0.0.1 and localhost."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (directory / n for n in ("ca.key", "ca.pem", "broker.key", "broker.csr",
                                                           "broker.pem"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
             "-subj", "/CN=mirrord test CA")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "1", "-extfile", str(ext))
    keystore = directory / "broker-keystore.pem"
    pkcs8 = subprocess.run(["openssl", "pkcs8", "-topk8", "-nocrypt", "-in", str(key)], check=True,
                           capture_output=True, timeout=60).stdout
    keystore.write_bytes(pkcs8 + cert.read_bytes())
    return Tls(ca=ca, keystore=keystore)
