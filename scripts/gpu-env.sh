#!/usr/bin/env bash
# Source this on a GPU machine that has torch and the CUDA toolkit but no network (e.g. a CUDA container):
# it makes `python3 -m ptxrag` importable from this checkout without installing ptxrag's other dependencies.
# Wheels for pydantic and its needs may be carried in .whl/ (see docs/validation/README.md).
#   source scripts/gpu-env.sh && python3 -m ptxrag tasks validate --all
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
site="${PTXRAG_GPU_SITE:-/tmp/ptxrag-site}"
mkdir -p "$site"
if [ -d "$repo/.whl" ] && ls "$repo"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$repo"/.whl/*.whl
fi
# the checkout's ptxrag/ is the package itself (no install needed): put the checkout first on the path
rm -rf "$site/ptxrag"
export PYTHONPATH="$repo:$site${PYTHONPATH:+:$PYTHONPATH}"
export PTXRAG_CUDA_HOME="${PTXRAG_CUDA_HOME:-/usr/local/cuda}"
python3 -c "import ptxrag.sandbox, pydantic" || echo "gpu-env: ptxrag.sandbox does not import" >&2
