"""GPU-side code of the sandbox. Standard library (+ torch for worker.py) only, so these files run by
path in any CUDA container without installing ptxrag's other dependencies."""
