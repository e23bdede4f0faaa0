"""The chart RBAC renderer both components' generators share."""

from __future__ import annotations

import yaml

from apis.client.rbac import PolicyRule
from apis.client.rbacchart import ChartRBAC, merged_rules

CHART = ChartRBAC(component="koord-x", label="x", values_key="x", generator="gen", source="here")
PODS = PolicyRule(("",), ("pods",), ("list", "watch"), why="informer")


def test_a_rule_granted_earlier_is_left_out_with_its_first_owner_kept() -> None:
    again = PolicyRule(("",), ("pods",), ("list", "watch"), why="again")
    scale = PolicyRule(("apps",), ("*/scale",), ("get",), why="scale")
    assert merged_rules([("core", [PODS]), ("plugin", [again, scale])]) == [("core", PODS), ("plugin", scale)]


def test_the_template_is_four_objects_for_the_component_with_quoted_wildcards() -> None:
    rules = [("core", PODS), ("any", PolicyRule(("*",), ("*/scale",), ("get",), why="scale"))]
    text = CHART.render(rules)
    assert text.startswith("{{- if .Values.x.enabled }}\n")
    assert text.endswith("{{- end }}\n")
    body = "\n".join(line for line in text.splitlines() if "{{" not in line)  # the Helm directives aside
    docs = list(yaml.safe_load_all(body))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ClusterRole", "koord-x"),
        ("ClusterRoleBinding", "koord-x"),
        ("Role", "koord-x-leader-election"),
        ("RoleBinding", "koord-x-leader-election"),
    ]
    assert docs[0]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]},
    ]
    assert docs[0]["metadata"]["labels"] == {"app.kubernetes.io/component": "x"}
    assert [s["name"] for s in docs[1]["subjects"]] == ["koord-x"]
    assert docs[2]["rules"][1]["resourceNames"] == ["koord-x"]
    assert "# any: scale" in text
