// arch: sm_80
// expect: 9.7.13.13
// what: programmatic dependent launch control on sm_80
__global__ void k() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
