"""kubernetes_asyncio's generated modules are imported at first use, not with ``apis.client``
(``apis.client.lazy_k8s``); every name reads as the eager package's, and the kubeconfig loader
works without them. Each case runs in a fresh interpreter: this one imported the package whole."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_koord_schedulers_imports_leave_the_generated_apis_and_models_unimported() -> None:
    out = run(
        """
        import sys
        import scheduler.__main__
        loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.")]
        print(sorted(m for m in loaded if m.split(".")[2] in ("api", "models") and m.count(".") > 2))
        print("kubernetes_asyncio.client.api_client" in loaded)
        """
    )
    assert out.splitlines() == ["[]", "True"]


def test_every_name_is_the_eager_packages_object_once_read() -> None:
    out = run(
        """
        import importlib
        import kubernetes_asyncio
        import apis.client.kubernetes
        from kubernetes_asyncio import client, config, watch
        from kubernetes_asyncio.client.api_client import ApiClient
        def real(module, name):
            return getattr(importlib.import_module(module), name)
        checks = [
            client.ApiClient is ApiClient,
            client.Configuration is real("kubernetes_asyncio.client.configuration", "Configuration"),
            client.ApiException is real("kubernetes_asyncio.client.exceptions", "ApiException"),
            client.CoreV1Api is real("kubernetes_asyncio.client.api.core_v1_api", "CoreV1Api"),
            client.V1Pod is real("kubernetes_asyncio.client.models.v1_pod", "V1Pod"),
            client.models.V1Lease is real("kubernetes_asyncio.client.models.v1_lease", "V1Lease"),
            kubernetes_asyncio.__version__ == client.__version__,
            watch.Watch is real("kubernetes_asyncio.watch.watch", "Watch"),
            config.load_kube_config is real("kubernetes_asyncio.config.kube_config", "load_kube_config"),
        ]
        print(all(checks), [i for i, ok in enumerate(checks) if not ok])
        try:
            client.NoSuchThing
        except AttributeError:
            print("AttributeError")
        """
    )
    assert out.splitlines() == ["True []", "AttributeError"]


def test_the_kubeconfig_loads_and_a_response_deserializes_into_a_generated_model(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Config
            clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
            users: [{name: u, user: {token: secret-token}}]
            contexts: [{name: x, context: {cluster: c, user: u}}]
            current-context: x
            """
        )
    )
    out = run(
        f"""
        import asyncio, sys
        from pathlib import Path
        from apis.client.connection import client_configuration
        from kubernetes_asyncio.client import ApiClient

        async def main():
            configuration = await client_configuration(Path({str(kubeconfig)!r}))
            print(configuration.host, configuration.api_key.get("BearerToken") or configuration.api_key)
            models = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models.")]
            print(len(models))
            api = ApiClient(configuration)
            pod = api._ApiClient__deserialize({{"metadata": {{"name": "p"}}}}, "V1Pod")
            print(type(pod).__name__, pod.metadata.name)
            await api.close()

        asyncio.run(main())
        """
    )
    host, models, pod = out.splitlines()
    assert host.startswith("https://127.0.0.1:6443")
    assert "secret-token" in host
    assert models == "0"
    assert pod == "V1Pod p"
