"""Pod templates and revisions: what a Deployment's template says (image, args) and which revision it names.

Every field here exists in the Kubernetes (or the CRD's) OpenAPI schema; tests validate the built-in kinds
with kubernetes-validate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.pods import TERMINATED, Pod, Revision

IMAGE = "vllm/vllm-openai"

PORT = 8000

LWS = "leaderworkerset.sigs.k8s.io"


def container(fleet: Fleet, rev: Revision) -> dict[str, Any]:
    cfg = fleet.cfg
    args = ["--model", cfg.model_name, "--revision", rev.model_revision, "--tensor-parallel-size", str(cfg.tp),
            "--port", str(PORT)]
    if rev.enforce_eager:
        args.append("--enforce-eager")
    gpus = str(cfg.tp)
    return {
        "name": "vllm", "image": f"{IMAGE}:v{rev.vllm_version}", "imagePullPolicy": "IfNotPresent",
        "args": args,
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        "readinessProbe": {"httpGet": {"path": "/health", "port": PORT, "scheme": "HTTP"}, "periodSeconds": 5,
                           "failureThreshold": 2, "successThreshold": 1, "timeoutSeconds": 1},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }


def pod_spec(fleet: Fleet, rev: Revision) -> dict[str, Any]:
    return {"containers": [container(fleet, rev)], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "securityContext": {}}


def template(fleet: Fleet, rev: Revision, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": dict(labels)}, "spec": pod_spec(fleet, rev)}


@dataclass(frozen=True)
class TemplateSpec:
    """What a pod template says about a revision: the image's vLLM version, the model revision, the flags."""

    vllm_version: str
    model_revision: str
    enforce_eager: bool


def parse_template(tpl: Any) -> TemplateSpec | str:
    """The revision a written template asks for, or why the simulator cannot run it."""
    try:
        containers = tpl["spec"]["containers"]
        c = next(x for x in containers if x.get("name") == "vllm")
        image = str(c["image"])
        args = [str(a) for a in c.get("args", [])]
    except (KeyError, TypeError, StopIteration):
        return "spec.template.spec.containers: the vllm container (image, args) is required"
    repo, _, tag = image.rpartition(":")
    if repo != IMAGE or not tag.startswith("v"):
        return f"spec.template.spec.containers[vllm].image: {image!r}: the simulator runs {IMAGE}:v<version> only"
    model = args[args.index("--revision") + 1] if "--revision" in args[:-1] else "main"
    return TemplateSpec(tag[1:], model, "--enforce-eager" in args)


def lws_mode(fleet: Fleet) -> bool:
    return fleet.cfg.group_size > 1


def live_pods(fleet: Fleet) -> list[Pod]:
    return [p for p in fleet.pods if p.state != TERMINATED]


def canary_revision(fleet: Fleet) -> Revision | None:
    ro = fleet.rollout
    return ro.new if ro is not None and ro.canary_weight is not None else None


def template_revision(fleet: Fleet) -> Revision:
    """The revision the Deployment's template names (a rolling update's new one; never a canary's)."""
    ro = fleet.rollout
    if ro is not None and ro.canary_weight is None:
        return ro.new
    canary = canary_revision(fleet)
    live = [p.revision for p in live_pods(fleet) if p.revision is not canary]
    if live:
        names = [r.name for r in live]
        return max(live, key=lambda r: (names.count(r.name), fleet.revisions.index(r)))
    return fleet.revisions[-1]


def deployment_of(fleet: Fleet, rev: Revision) -> str:
    return f"{fleet.cfg.deployment}-canary" if rev is canary_revision(fleet) else fleet.cfg.deployment
