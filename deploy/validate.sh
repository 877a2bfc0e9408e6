#!/usr/bin/env bash
# Renders every kustomization under deploy/ offline (`kubectl kustomize`, no cluster needed) and
# fails on the first error. The production overlay is rendered from a temporary copy that uses
# secrets.env.example in place of the git-ignored secrets.env.
#   bash deploy/validate.sh [OUTDIR]     (rendered manifests go to OUTDIR if given)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-}"
command -v kubectl >/dev/null || { echo "validate.sh: needs kubectl (it embeds kustomize)" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$here" "$tmp/deploy"
cp "$tmp/deploy/overlays/production/secrets.env.example" "$tmp/deploy/overlays/production/secrets.env"

for dir in base nats overlays/local overlays/production; do
  rendered="$tmp/$(echo "$dir" | tr / -).yaml"
  kubectl kustomize "$tmp/deploy/$dir" >"$rendered"
  echo "ok  deploy/$dir: $(grep -c '^kind:' "$rendered") objects"
  if [ -n "$out" ]; then mkdir -p "$out" && cp "$rendered" "$out/"; fi
done
