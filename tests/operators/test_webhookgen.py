"""The chart's webhook configurations are the ones koord-manager's handlers need (operators.webhookgen)."""

from __future__ import annotations

from kopf._core.intents import causes

from operators import webhookgen
from operators.__main__ import build_registry, parse_args


def test_the_chart_template_is_up_to_date() -> None:
    """Fails after a webhook handler is added or changed: run `python -m operators.webhookgen`."""
    assert webhookgen.TEMPLATE.read_text() == webhookgen.render()
    assert webhookgen.main(["--check"]) == 0


def test_every_webhook_handler_is_served_through_the_chart_service() -> None:
    every_gate = ",".join(f"{gate}=true" for gate in webhookgen.GATED.values())
    handlers = build_registry(
        parse_args(["--standalone", f"--feature-gates={every_gate}"])
    )._webhooks.get_all_handlers()
    rendered = {
        w["clientConfig"]["service"]["path"]: w
        for reason in (causes.WebhookType.VALIDATING, causes.WebhookType.MUTATING)
        for w in webhookgen.webhooks(reason)
    }
    assert set(rendered) == {f"/{h.id}" for h in handlers}
    quota = rendered["/validate-elasticquota-tree"]
    assert quota["rules"] == [
        {
            "apiGroups": ["scheduling.sigs.k8s.io"],
            "apiVersions": ["v1alpha1"],
            "resources": ["elasticquotas"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "scope": "*",
        }
    ]
    assert quota["clientConfig"]["service"]["name"] == "koord-manager"
    assert quota["clientConfig"]["service"]["port"] == 9443
    assert quota["failurePolicy"] == "Fail"


def test_only_the_local_process_manages_the_webhook_configurations() -> None:
    assert parse_args([]).manage_webhook_configuration  # `make up`, the e2e tests
    assert not parse_args(["--no-manage-webhook-configuration"]).manage_webhook_configuration  # the chart


def test_the_pod_webhook_adds_the_quota_tree_affinity_at_create_and_never_blocks_pods() -> None:
    pods = {w["clientConfig"]["service"]["path"]: w for w in webhookgen.webhooks(causes.WebhookType.MUTATING)}
    hook = pods["/quota-tree-affinity"]
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "operations": ["CREATE"],
            "scope": "*",
        }
    ]
    assert hook["failurePolicy"] == "Ignore"


def test_the_node_webhook_amplifies_status_updates_only_with_its_gate() -> None:
    without = build_registry(parse_args(["--standalone"]))._webhooks.get_all_handlers()
    assert "node-resource-amplification" not in {h.id for h in without}
    hooks = {
        w["clientConfig"]["service"]["path"]: w for w in webhookgen.webhooks(causes.WebhookType.MUTATING)
    }
    hook = hooks["/node-resource-amplification"]
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["nodes/status"],
            "operations": ["UPDATE"],
            "scope": "*",
        }
    ]
    assert hook["failurePolicy"] == "Ignore"
    template = webhookgen.TEMPLATE.read_text()
    gated = template.index('regexMatch "(^|,)\\\\s*NodeMutatingWebhook')
    assert gated < template.index("path: /node-resource-amplification") < template.index("{{- end }}", gated)
