"""Validates the Kubernetes manifests in deploy/k8s/ against the Kubernetes API's own schemas.

Usage: .cache/venv/bin/python scripts/validate_k8s.py [FILE...]   (default: every deploy/k8s/*.yaml)

No cluster is reachable from where flashserve is built, so the check is offline: kubernetes-validate
(pinned in tests/requirements.txt) holds the OpenAPI schemas of each Kubernetes release. Every
object is validated strictly (an unknown or misspelled field fails, not just a wrong type) against
the oldest and the newest release we support. Objects of CustomResourceDefinitions
(monitoring.coreos.com's ServiceMonitor) have no schema there and are named as not checked;
documents that are not Kubernetes objects (prometheus-adapter's Helm values) are only parsed.
Exits 1 if any object fails.
"""

import glob
import os
import sys

import kubernetes_validate
import yaml

VERSIONS = ("1.29.0", "1.37.0")
CRD_GROUPS = ("monitoring.coreos.com",)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sys.argv[1:] or sorted(glob.glob(os.path.join(root, "deploy", "k8s", "*.yaml")))
    failed = 0
    for path in files:
        name = os.path.relpath(path, root)
        with open(path) as f:
            documents = [d for d in yaml.safe_load_all(f) if d is not None]
        for doc in documents:
            kind, api = doc.get("kind"), doc.get("apiVersion")
            if not kind or not api:
                print(f"parsed   {name}: not a Kubernetes object (no kind/apiVersion)")
                continue
            what = f"{kind} {doc.get('metadata', {}).get('name', '?')}"
            if api.split("/")[0] in CRD_GROUPS:
                print(f"skipped  {name}: {what} is a custom resource ({api}); its schema is not in the API's")
                continue
            errors = []
            for version in VERSIONS:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as e:
                    errors.append(f"Kubernetes {version}: {getattr(e, 'message', str(e))}")
            for error in errors:
                print(f"FAILED   {name}: {what} against {error}")
            if not errors:
                print(f"valid    {name}: {what} ({api}) against Kubernetes {', '.join(VERSIONS)}, strict")
            failed += bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
