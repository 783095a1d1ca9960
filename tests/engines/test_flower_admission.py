"""Admission on a loopback deployment, with certificates made here: TLS between SuperNodes and SuperLink, and
SuperNode authentication that lets a registered node join and run the federation and keeps an unregistered
one out (slow: real flower-superlink / flower-supernode processes)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from fedpref.cli import main  # noqa: E402
from fedpref.experiments import federation as fed  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.flower, pytest.mark.slow]


def write_pki(folder: Path) -> fed.Tls:
    """A CA and a server certificate it signed for 127.0.0.1 and localhost (PEM files in `folder`)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedpref test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA384())
    )
    sans = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(sans, critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    tls = fed.Tls(folder / "ca.crt", folder / "server.pem", folder / "server.key")
    tls.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    tls.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    pem, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    tls.key.write_bytes(server_key.private_bytes(pem, pkcs8, serialization.NoEncryption()))
    return tls


def write_node_key(folder: Path, name: str) -> tuple[Path, Path]:
    """(private, public) OpenSSH files of a P-384 key, as `ssh-keygen -t ecdsa -b 384` writes them."""
    key = ec.generate_private_key(ec.SECP384R1())
    private, public = folder / name, folder / f"{name}.pub"
    openssh = serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    private.write_bytes(key.private_bytes(*openssh))
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return private, public


DATA = ["data.group_sizes=[1, 1, 0, 0]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]


def test_tls_and_node_authentication_admit_only_the_registered_node(tmp_path):
    pooled, clients = tmp_path / "pooled.jsonl", tmp_path / "clients"
    sets = [a for d in [*DATA, "federation.clients_per_round=2"] for a in ("--set", d)]
    assert main(["data", "export", "configs/tiny.toml", *sets, "--out", str(pooled)]) == 0
    assert main(["data", "split-clients", str(pooled), "--out", str(clients), "--user-key", "client"]) == 0
    mine, stranger = fed.client_files(clients)
    tls = write_pki(tmp_path)
    keys = {name: write_node_key(tmp_path, name) for name in ("mine", "stranger")}
    out, logs = tmp_path / "run", tmp_path / "logs"
    logs.mkdir()
    env, link = fed.loopback_env(tmp_path / "flwr", tls)
    processes = []
    try:
        processes.append(fed.start_superlink(link, env, logs, logs / "superlink.log", tls, node_auth=True))
        registered = fed.register_node(keys["mine"][1], env)
        for path, name in ((mine, "mine"), (stranger, "stranger")):
            home = tmp_path / "nodes" / name
            home.mkdir(parents=True)
            own = f'data-path="{path.resolve()}"'
            node_log = logs / f"node-{name}.log"
            processes.append(fed.start_supernode(link, own, env, home, node_log, tls.ca, keys[name][0]))

        def online() -> list[str]:
            return [n["node-id"] for n in fed.list_nodes(env) if n["status"] == "online"]

        fed.wait_until(lambda: online() == [registered], 90, "the registered node coming online")
        refused = processes[-1]
        fed.wait_until(lambda: refused.poll() is not None, 120, "the unregistered node giving up")
        assert refused.returncode != 0 and "Failed to activate SuperNode" in (logs / "node-stranger.log").read_text()
        assert online() == [registered] and len(fed.list_nodes(env)) == 1  # it was never admitted

        # the admitted node runs a federation over TLS to the end
        sets = [*DATA, "data.source=jsonl", "data.path=own.jsonl", "federation.rounds=1"]
        sets += ["federation.clients_per_round=1", "personalization.steps=[0]"]
        fed.submit(ROOT / "configs/tiny.toml", 1, out, ["FL"], sets, env, logs)
        results = fed.wait_for_results(out / "results.json", ["FL"], processes[:-1], 600, print)
        assert len(results["methods"]["FL"]["personalization"]["per_client"]) == 1
    finally:
        fed.stop(processes)
    assert all(p.poll() is not None for p in processes)
