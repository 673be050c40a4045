"""The three patch types a kube-apiserver accepts: JSON patch (RFC 6902), merge patch (RFC 7386) and strategic
merge patch (lists merged by their `patchMergeKey`, e.g. containers by name; `$patch` directives).

Strategic merge is only defined for built-in kinds: the server refuses it for custom resources (415).
"""

from __future__ import annotations

import copy
from typing import Any

from llm_oncall.sim.kubeapi.model import ApiStatus, ResourceType

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """The patch cannot be applied (the server answers 422 / 400)."""


# patchMergeKey of the list fields the simulator serves (from the Kubernetes OpenAPI `x-kubernetes-patch-merge-key`);
# a list not named here is atomic (replaced whole), e.g. spec.taints and container args.
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "conditions": "type",
    "ownerReferences": "uid", "imagePullSecrets": "name", "hostAliases": "ip", "addresses": "type",
    "containerStatuses": "name", "tolerations": "",
}
SET_LISTS = frozenset({"finalizers"})
"""Lists of scalars merged as sets (`x-kubernetes-patch-strategy: merge` without a key)."""


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(doc: Any, pointer: str) -> tuple[Any, str]:
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}")
    parts = [_unescape(t) for t in pointer[1:].split("/")]
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchError(f"doc is missing path: {pointer}")
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                raise PatchError(f"doc is missing path: {pointer}") from None
        else:
            raise PatchError(f"doc is missing path: {pointer}")
    return cur, parts[-1]


def _get(doc: Any, pointer: str) -> Any:
    if pointer == "":
        return doc
    parent, key = _walk(doc, pointer)
    try:
        return parent[int(key)] if isinstance(parent, list) else parent[key]
    except (KeyError, ValueError, IndexError, TypeError):
        raise PatchError(f"doc is missing path: {pointer}") from None


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations")
    out = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "test":
            if _get(out, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed")
            continue
        if kind in ("move", "copy"):
            value = copy.deepcopy(_get(out, op.get("from", "")))
            if kind == "move":
                out = json_patch(out, [{"op": "remove", "path": op["from"]}])
            out = json_patch(out, [{"op": "add", "path": path, "value": value}])
            continue
        if path == "":
            if kind in ("add", "replace"):
                out = copy.deepcopy(op.get("value"))
                continue
            raise PatchError("cannot remove the whole document")
        parent, key = _walk(out, path)
        if kind == "add":
            if isinstance(parent, list):
                idx = len(parent) if key == "-" else _index(key, len(parent) + 1)
                parent.insert(idx, copy.deepcopy(op.get("value")))
            elif isinstance(parent, dict):
                parent[key] = copy.deepcopy(op.get("value"))
            else:
                raise PatchError(f"doc is missing path: {path}")
        elif kind in ("remove", "replace"):
            if isinstance(parent, list):
                idx = _index(key, len(parent))
                if kind == "remove":
                    del parent[idx]
                else:
                    parent[idx] = copy.deepcopy(op.get("value"))
            elif isinstance(parent, dict):
                if key not in parent:
                    raise PatchError(f"Unable to {kind} nonexistent key: {key}: missing value")
                if kind == "remove":
                    del parent[key]
                else:
                    parent[key] = copy.deepcopy(op.get("value"))
            else:
                raise PatchError(f"doc is missing path: {path}")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return out


def _index(key: str, n: int) -> int:
    try:
        idx = int(key)
    except ValueError:
        raise PatchError(f"invalid array index {key!r}") from None
    if not 0 <= idx < n:
        raise PatchError(f"array index {idx} out of bounds")
    return idx


def merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge(doc: Any, patch: Any, field: str = "") -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            if isinstance(out.get(name), list) and isinstance(v, list):
                out[name] = [x for x in out[name] if x not in v]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list):
            out[k] = _merge_list(out.get(k), v, k)
        elif isinstance(v, dict):
            merged = strategic_merge(out.get(k), v, k)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        else:
            out[k] = v
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(cur: Any, items: list[Any], field: str) -> list[Any]:
    key = MERGE_KEYS.get(field)
    if field in SET_LISTS and isinstance(cur, list):
        return [*cur, *(x for x in items if x not in cur)]
    if not key or not isinstance(cur, list):
        if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in items):
            return [copy.deepcopy(x) for x in items if not (isinstance(x, dict) and "$patch" in x)]
        return [copy.deepcopy(x) for x in items if not (isinstance(x, dict) and "$patch" in x)]
    out = copy.deepcopy(cur)
    for item in items:
        if not isinstance(item, dict):
            raise PatchError(f"{field}: list items must be objects with {key!r}")
        if item.get("$patch") == "replace":
            return [copy.deepcopy(x) for x in items if x is not item]
        if key not in item:
            raise PatchError(f"{field}: map: {item} does not contain declared merge key: {key}")
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append(strategic_merge({}, item, field))
        else:
            out[idx] = strategic_merge(out[idx], item, field)
    return out


def apply_patch(rt: ResourceType, cur: dict[str, Any], content_type: str, body: Any) -> dict[str, Any]:
    """The object `cur` with the request's patch applied, by its Content-Type; the server's errors for patch types
    it refuses (415: strategic merge on a custom resource, unknown types) and patches that do not apply."""
    ct = content_type.split(";", 1)[0].strip()
    try:
        if ct == JSON_PATCH:
            out = json_patch(cur, body)
        elif ct == MERGE_PATCH:
            out = merge_patch(cur, body)
        elif ct == STRATEGIC_PATCH:
            if rt.crd:
                raise ApiStatus(415, "the body of the request was in an unknown format - accepted media types "
                                "include: application/json-patch+json, application/merge-patch+json, "
                                "application/apply-patch+yaml", reason="UnsupportedMediaType")
            out = strategic_merge(cur, body)
        elif ct == APPLY_PATCH:
            if not isinstance(body, dict):
                raise ApiStatus(400, "apply patches must be objects")
            out = strategic_merge(cur, body) if not rt.crd else merge_patch(cur, body)
        else:
            raise ApiStatus(415, f"the body of the request was in an unknown format - accepted media types "
                            f"include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}"
                            + ("" if rt.crd else f", {STRATEGIC_PATCH}"), reason="UnsupportedMediaType")
    except PatchError as exc:
        raise ApiStatus(422 if ct == JSON_PATCH else 400, str(exc)) from None
    if not isinstance(out, dict):
        raise ApiStatus(400, "the patched object is not a JSON object")
    return out
