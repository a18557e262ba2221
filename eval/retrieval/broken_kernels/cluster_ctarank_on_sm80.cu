// arch: sm_80
// expect: 10.16
// what: %cluster_ctarank read on sm_80
__global__ void k(unsigned *o) { unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); o[0] = r; }
