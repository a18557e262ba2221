// arch: sm_90a
// expect: 9.7.9.27.2.2
// what: cp.async.bulk.wait_group given a register count
__global__ void k(int n) { asm volatile("cp.async.bulk.wait_group.read %0;" :: "r"(n) : "memory"); }
