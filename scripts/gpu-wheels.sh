#!/usr/bin/env bash
# Download, into .whl/, the cp312 manylinux wheels that a GPU box with only torch + the CUDA toolkit (such as the
# lent H200's image) lacks for the sandbox and its service. Carry .whl/ there; scripts/gpu-env.sh installs them.
# Versions follow this checkout's .venv when it has the package, else the pins below.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
pkgs=(pydantic pydantic-core annotated-types typing-inspection typing-extensions
      fastapi starlette annotated-doc opentelemetry-api importlib-metadata zipp uvicorn h11 tenacity)
specs=()
for p in "${pkgs[@]}"; do
  v=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('$p'))" 2>/dev/null || true)
  specs+=("$p${v:+==$v}")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "${specs[@]}"
du -sh .whl
