#!/usr/bin/env python3
"""Offline checks of the Kubernetes manifests in deploy/k8s (ctest deploy_k8s_manifests).

No cluster is reachable, and kubeconform is not a Debian package, so this is a schema check of our
own: yamllint (Debian's) on every file; each overlay rendered with `kubectl kustomize` when kubectl
is installed (else the base and the gateway component are read as they are); then, for every
object, the fields its kind requires (apiVersion per kind, metadata.name, the spec fields the API
server would refuse without) and the references between objects (selectors that match the pod
template, named ports that exist, ConfigMaps / PVCs / ServiceAccounts / InferencePool that are
defined, the HPA's target). With the tokenmill binary given, every TOKENMILL_* variable and every
key of a serve config file must be a real `tokenmill serve` option.

Usage: check_manifests.py SOURCE_DIR [TOKENMILL_BINARY]
"""
import os
import re
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("python3-yaml not installed: skipped")
    sys.exit(77)

SRC = sys.argv[1]
BIN = sys.argv[2] if len(sys.argv) > 2 else None
K8S = os.path.join(SRC, "deploy", "k8s")
errors = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


API = {
    "Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "ServiceAccount": "v1",
    "PersistentVolumeClaim": "v1", "Deployment": "apps/v1", "PodDisruptionBudget": "policy/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2", "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1", "ServiceMonitor": "monitoring.coreos.com/v1",
    "InferencePool": "inference.networking.k8s.io/v1", "HTTPRoute": "gateway.networking.k8s.io/v1",
}


def get(obj, path, default=None):
    for k in path.split("."):
        if not isinstance(obj, dict) or k not in obj:
            return default
        obj = obj[k]
    return obj


def need(o, where, *paths):
    for p in paths:
        if get(o, p) in (None, "", [], {}):
            err(where, f"missing {p}")


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def qty(v):  # "500m" -> 0.5, "1Gi" -> bytes
    s = str(v)
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}
    for u, f in sorted(units.items(), key=lambda x: -len(x[0])):
        if s.endswith(u):
            return float(s[: -len(u)]) * f
    return float(s)


def serve_options():
    if not BIN:
        return None
    out = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"^\s+(?:-\w, ?)?--([a-z0-9-]+)", out, re.M)), set(re.findall(r"Env:(TOKENMILL_\w+)", out))


SERVE = serve_options()


def check_serve_config(where, text):
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as e:
        err(where, f"config.yaml does not parse: {e}")
        return
    if not isinstance(cfg, dict):
        err(where, "config.yaml is not a mapping")
        return
    if SERVE:
        for k in cfg:
            if k.replace("_", "-") not in SERVE[0]:
                err(where, f"config.yaml key '{k}' is not a tokenmill serve option")


def check_epp_config(where, text):
    cfg = yaml.safe_load(text)
    if cfg.get("kind") != "EndpointPickerConfig":
        err(where, "EPP config kind is not EndpointPickerConfig")
    names = {p.get("name", p.get("type")) for p in cfg.get("plugins", [])}
    profiles = cfg.get("schedulingProfiles") or []
    if not profiles:
        err(where, "EPP config has no schedulingProfiles")
    for prof in profiles:
        refs = [p.get("pluginRef") for p in prof.get("plugins", [])]
        for r in refs:
            if r not in names:
                err(where, f"profile {prof.get('name')} refers to undefined plugin {r}")
        if not any(r and r.endswith("picker") for r in refs):
            err(where, f"profile {prof.get('name')} has no picker")


def check(objs, label):
    by = {}
    for o in objs:
        kind, name = o.get("kind"), get(o, "metadata.name")
        where = f"{label}: {kind}/{name}"
        if kind not in API:
            err(where, "unknown kind")
            continue
        if o.get("apiVersion") != API[kind]:
            err(where, f"apiVersion {o.get('apiVersion')}, expected {API[kind]}")
        need(o, where, "metadata.name")
        by.setdefault(kind, {})[name] = o
    deps = by.get("Deployment", {})
    pod_labels = {n: get(d, "spec.template.metadata.labels", {}) for n, d in deps.items()}
    cms, pvcs, sas = by.get("ConfigMap", {}), by.get("PersistentVolumeClaim", {}), by.get("ServiceAccount", {})
    for n, d in deps.items():
        w = f"{label}: Deployment/{n}"
        need(d, w, "spec.selector.matchLabels", "spec.template.metadata.labels", "spec.template.spec.containers")
        if not matches(get(d, "spec.selector.matchLabels"), pod_labels[n]):
            err(w, "selector does not match the pod template's labels")
        spec = get(d, "spec.template.spec", {})
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for v in vols.values():
            if "configMap" in v and cms and v["configMap"]["name"] not in cms:
                err(w, f"volume {v['name']}: ConfigMap {v['configMap']['name']} is not defined")
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] not in pvcs:
                err(w, f"volume {v['name']}: PVC {v['persistentVolumeClaim']['claimName']} is not defined")
        sa = spec.get("serviceAccountName")
        if sa and sa not in sas:
            err(w, f"serviceAccountName {sa} is not defined")
        for c in spec.get("containers", []):
            cw = f"{w} container {c.get('name')}"
            need(c, cw, "name", "image")
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                p = c.get(probe)
                if p is None:
                    if c.get("name") == "tokenmill":
                        err(cw, f"no {probe}")
                    continue
                handler = p.get("httpGet") or p.get("grpc") or p.get("tcpSocket")
                if not handler:
                    err(cw, f"{probe} has no handler")
                elif isinstance(handler.get("port"), str) and handler["port"] not in ports:
                    err(cw, f"{probe} port {handler['port']} is not a container port")
            for m in c.get("volumeMounts", []):
                if m["name"] not in vols:
                    err(cw, f"volumeMount {m['name']} has no volume")
            req, lim = get(c, "resources.requests", {}), get(c, "resources.limits", {})
            for r in req:
                if r in lim and qty(req[r]) > qty(lim[r]):
                    err(cw, f"request {r} {req[r]} above limit {lim[r]}")
            if c.get("name") == "tokenmill" and not (req.get("memory") and lim.get("memory")):
                err(cw, "memory request and limit are required (the weights and KV cache live in the pod)")
            for e in c.get("env", []):
                if SERVE and e["name"].startswith("TOKENMILL_") and e["name"] != "TOKENMILL_CONFIG" \
                        and e["name"] not in SERVE[1] and e["name"] != "TOKENMILL_API_KEY":
                    err(cw, f"env {e['name']} is not a tokenmill serve option")
    for n, s in by.get("Service", {}).items():
        w = f"{label}: Service/{n}"
        need(s, w, "spec.selector", "spec.ports")
        targets = [d for d, l in pod_labels.items() if matches(get(s, "spec.selector"), l)]
        if not targets:
            err(w, "selector matches no Deployment's pods")
        for p in get(s, "spec.ports", []):
            tp = p.get("targetPort")
            if isinstance(tp, str):
                names = {q.get("name") for d in targets for c in get(deps[d], "spec.template.spec.containers", [])
                         for q in c.get("ports", [])}
                if tp not in names:
                    err(w, f"targetPort {tp} is not a port of its pods")
    for n, p in by.get("PodDisruptionBudget", {}).items():
        w = f"{label}: PodDisruptionBudget/{n}"
        if not any(matches(get(p, "spec.selector.matchLabels"), l) for l in pod_labels.values()):
            err(w, "selector matches no Deployment's pods")
        if get(p, "spec.minAvailable") is None and get(p, "spec.maxUnavailable") is None:
            err(w, "needs minAvailable or maxUnavailable")
    for n, h in by.get("HorizontalPodAutoscaler", {}).items():
        w = f"{label}: HorizontalPodAutoscaler/{n}"
        need(h, w, "spec.scaleTargetRef.name", "spec.maxReplicas", "spec.metrics")
        if get(h, "spec.scaleTargetRef.kind") != "Deployment" or get(h, "spec.scaleTargetRef.name") not in deps:
            err(w, "scaleTargetRef is not a Deployment defined here")
        if get(h, "spec.minReplicas", 1) > get(h, "spec.maxReplicas", 0):
            err(w, "minReplicas above maxReplicas")
        for m in get(h, "spec.metrics", []):
            if m.get("type") == "Pods" and not get(m, "pods.metric.name"):
                err(w, "Pods metric without a name")
    for n, sm in by.get("ServiceMonitor", {}).items():
        w = f"{label}: ServiceMonitor/{n}"
        svcs = [s for s in by.get("Service", {}).values()
                if matches(get(sm, "spec.selector.matchLabels"), get(s, "metadata.labels", {}))]
        if not svcs:
            err(w, "selector matches no Service's labels")
        for ep in get(sm, "spec.endpoints", []):
            if not any(ep.get("port") == p.get("name") for s in svcs for p in get(s, "spec.ports", [])):
                err(w, f"endpoint port {ep.get('port')} is not a port of the Service")
    for n, ip in by.get("InferencePool", {}).items():
        w = f"{label}: InferencePool/{n}"
        need(ip, w, "spec.selector.matchLabels", "spec.targetPorts", "spec.endpointPickerRef.name")
        pods = [d for d, l in pod_labels.items() if matches(get(ip, "spec.selector.matchLabels"), l)]
        if not pods:
            err(w, "selector matches no Deployment's pods")
        cports = {q["containerPort"] for d in pods for c in get(deps[d], "spec.template.spec.containers", [])
                  for q in c.get("ports", [])}
        for tp in get(ip, "spec.targetPorts", []):
            if tp.get("number") not in cports:
                err(w, f"targetPort {tp.get('number')} is not a container port of the pool's pods")
        epp = by.get("Service", {}).get(get(ip, "spec.endpointPickerRef.name"))
        if not epp:
            err(w, "endpointPickerRef names no Service")
        elif get(ip, "spec.endpointPickerRef.port.number") not in [p["port"] for p in get(epp, "spec.ports", [])]:
            err(w, "endpointPickerRef port is not a port of its Service")
        if get(ip, "spec.endpointPickerRef.failureMode", "FailClose") not in ("FailOpen", "FailClose"):
            err(w, "failureMode must be FailOpen or FailClose")
    for n, r in by.get("HTTPRoute", {}).items():
        w = f"{label}: HTTPRoute/{n}"
        need(r, w, "spec.parentRefs", "spec.rules")
        for rule in get(r, "spec.rules", []):
            for b in rule.get("backendRefs", []):
                if b.get("kind") == "InferencePool" and b.get("name") not in by.get("InferencePool", {}):
                    err(w, f"backendRef InferencePool {b.get('name')} is not defined")
    for n, cm in cms.items():
        for key, text in (cm.get("data") or {}).items():
            if key == "config.yaml":
                check_serve_config(f"{label}: ConfigMap/{n}", text)
            elif key == "epp-config.yaml":
                check_epp_config(f"{label}: ConfigMap/{n}", text)
    return by


def load(paths):
    objs = []
    for p in paths:
        with open(p) as f:
            objs += [d for d in yaml.safe_load_all(f) if d]
    return objs


# 1. yamllint, every YAML file under deploy/.
if shutil.which("yamllint"):
    r = subprocess.run(["yamllint", "-c", os.path.join(SRC, "deploy", ".yamllint.yml"), os.path.join(SRC, "deploy")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        err("yamllint", "\n" + r.stdout + r.stderr)
else:
    print("yamllint not installed: skipped (Debian package yamllint)")

# 2. Each overlay as kubectl would apply it, or the raw files.
overlays = sorted(os.listdir(os.path.join(K8S, "overlays")))
if shutil.which("kubectl"):
    for ov in overlays:
        r = subprocess.run(["kubectl", "kustomize", os.path.join(K8S, "overlays", ov)], capture_output=True, text=True)
        if r.returncode != 0:
            err(f"overlay {ov}", "kubectl kustomize failed: " + r.stderr)
            continue
        objs = [d for d in yaml.safe_load_all(r.stdout) if d]
        by = check(objs, f"overlay {ov}")
        print(f"overlay {ov}: {len(objs)} objects checked")
        if ov == "production":
            for kind in ("InferencePool", "HTTPRoute", "ServiceMonitor", "HorizontalPodAutoscaler", "PodDisruptionBudget"):
                if kind not in by:
                    err(f"overlay {ov}", f"no {kind}")
else:
    print("kubectl not installed: overlays not rendered; base + gateway component checked as files")
    files = [os.path.join(d, f) for d in (os.path.join(K8S, "base"), os.path.join(K8S, "gateway"))
             for f in sorted(os.listdir(d)) if f.endswith(".yaml") and f != "kustomization.yaml"]
    check(load(files), "base+gateway")
for ov in overlays:  # overlays' own serve config files
    p = os.path.join(K8S, "overlays", ov, "config.yaml")
    if os.path.exists(p):
        check_serve_config(f"overlay {ov} config.yaml", open(p).read())
check_serve_config("deploy/config.yaml", open(os.path.join(SRC, "deploy", "config.yaml")).read())

if errors:
    print("\n".join(errors))
    sys.exit(1)
print("manifests: OK" + ("" if SERVE else " (no tokenmill binary given: option names not checked)"))
