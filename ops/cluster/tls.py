"""A local certificate authority and the edge's certificate, made with trustme.

The edge presents one certificate for every host it serves: the service hosts and the
wildcard ``*.{apps_domain}``, as production does with a wildcard certificate for the
runtime hosts (docs/deploy.md). Clients trust ``ca.pem``; nothing here is trusted by the
system.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EdgeTls:
    ca: Path  # PEM, for clients (curl --cacert, httpx verify=, a browser's policy)
    cert: Path  # the chain nginx presents
    key: Path


def make_edge_tls(directory: Path, hosts: list[str], apps_domain: str) -> EdgeTls:
    import trustme  # a dev dependency: the local topology only, never a real edge

    directory.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA(organization_name="svc local topology")
    issued = authority.issue_cert(*hosts, f"*.{apps_domain}")
    tls = EdgeTls(directory / "ca.pem", directory / "edge.pem", directory / "edge.key")
    authority.cert_pem.write_to_path(str(tls.ca))
    issued.private_key_pem.write_to_path(str(tls.key))
    tls.key.chmod(0o600)
    with tls.cert.open("wb") as out:
        for blob in issued.cert_chain_pems:
            out.write(blob.bytes())
    return tls
