// arch: sm_80
// expect: 9.7.9.25.3.3
// what: cp.async.wait_group with a register operand
__global__ void k(int n) { asm volatile("cp.async.wait_group %0;" :: "r"(n) : "memory"); }
