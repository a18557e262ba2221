"""The GPU stages, each owning its checks: correctness, execution (Nsight Compute), mutation, timing."""
