// ptxrag_sm90/control.cuh: register reallocation between warpgroups (setmaxnreg, PTX ISA 9.7.19.5) and
// programmatic dependent launch (griddepcontrol, 9.7.13.13).
// Contracts: corpus/contracts/warp-specialization.md, corpus/contracts/pdl.md.
#ifndef PTXRAG_SM90_CONTROL_CUH
#define PTXRAG_SM90_CONTROL_CUH

#include <cstdint>

namespace ptxrag {

// setmaxnreg.inc / .dec .sync.aligned.u32 (9.7.19.5), sm_90a. Raise (inc) or lower (dec) the per-thread register
// budget of the executing WARPGROUP to Regs (24..256, a multiple of 8). All threads of the warpgroup execute the
// same call. The kernel must be compiled with a register cap at entry (__launch_bounds__ with min blocks, or
// -maxrregcount); otherwise ptxas drops the instruction with warning C7508/C7510. Typical: producer warpgroup
// dec<40>, consumer warpgroups inc<232> in a 384-thread CTA. inc blocks until enough registers are free.
template <uint32_t Regs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(Regs >= 24 && Regs <= 256 && Regs % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <uint32_t Regs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(Regs >= 24 && Regs <= 256 && Regs % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}

// griddepcontrol.wait (9.7.13.13): block until the prerequisite grids this grid depends on have completed and
// their memory is visible. A kernel launched with programmatic stream serialization MUST call this before
// reading anything the previous kernel writes (without it, it may read stale data). No-op otherwise.
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// griddepcontrol.launch_dependents (9.7.13.13): allow the dependent grid (launched with the programmatic
// serialization attribute) to be scheduled before this grid finishes. A hint: it does NOT publish this grid's
// memory; the dependent must still call griddep_wait() before reading results.
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace ptxrag

#endif  // PTXRAG_SM90_CONTROL_CUH
