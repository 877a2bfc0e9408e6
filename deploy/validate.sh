#!/usr/bin/env bash
# Renders every kustomization under deploy/ offline (`kubectl kustomize`, no cluster needed) and
# fails on the first error. The production and cnpg overlays are rendered from a temporary copy
# that uses their secrets.env.example in place of the git-ignored secrets.env.
#   bash deploy/validate.sh [OUTDIR]     (rendered manifests go to OUTDIR if given)
#   bash deploy/validate.sh deploy/rendered   refreshes the renders kept in git, which
#                                             test/deploy/manifests.test.ts validates against
#                                             the Kubernetes schemas (and checks are fresh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-}"
command -v kubectl >/dev/null || { echo "validate.sh: needs kubectl (it embeds kustomize)" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$here" "$tmp/deploy"
rm -rf "$tmp/deploy/rendered"
for overlay in production cnpg; do
  cp "$tmp/deploy/overlays/$overlay/secrets.env.example" "$tmp/deploy/overlays/$overlay/secrets.env"
done

for dir in base nats overlays/local overlays/production overlays/cnpg; do
  rendered="$tmp/$(echo "$dir" | tr / -).yaml"
  kubectl kustomize "$tmp/deploy/$dir" >"$rendered"
  echo "ok  deploy/$dir: $(grep -c '^kind:' "$rendered") objects"
  if [ -n "$out" ]; then mkdir -p "$out" && cp "$rendered" "$out/"; fi
done
