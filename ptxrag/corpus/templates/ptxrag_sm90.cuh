// ptxrag_sm90.cuh: small, documented inline-PTX wrappers for Hopper (sm_90a).
//
// Include it from a candidate or a reference solution:
//     #include "ptxrag_abi.h"
//     #include "ptxrag_sm90.cuh"
// The sandbox puts this folder on nvcc's include path. Build with -gencode=arch=compute_90a,code=sm_90a
// (wgmma and setmaxnreg exist only on the `a` target).
//
// Everything lives in namespace ptxrag. Each wrapper is one PTX instruction (or one short idiom such as the
// try_wait retry loop) and names the PTX ISA 9.1 section it comes from. Shared-memory addresses are passed as
// 32-bit shared-window addresses (`uint32_t`, from ptxrag::smem_u32(ptr)), the form the instructions take.
//
// Families (one header each, all included here):
//   ptxrag_sm90/common.cuh    smem_u32, lane/warp/warpgroup ids
//   ptxrag_sm90/mbarrier.cuh  mbarrier init/arrive/expect_tx/try_wait.parity/inval, phase tracking
//   ptxrag_sm90/fence.cuh     fence.proxy.async, fence.mbarrier_init, fence.acq_rel
//   ptxrag_sm90/bulk.cuh      1-D cp.async.bulk load/store, cp.reduce.async.bulk, bulk prefetch,
//                             cp.async.bulk.commit_group / wait_group
//   ptxrag_sm90/tma.cuh       cp.async.bulk.tensor load/multicast/store/reduce/prefetch, prefetch.tensormap,
//                             host helpers that build a CUtensorMap through ptxrag_get_driver_fn (no -lcuda)
//   ptxrag_sm90/wgmma.cuh     wgmma.fence/commit_group/wait_group, shared-memory matrix descriptors with
//                             swizzle modes, wgmma.mma_async m64nNk16 (bf16, f16) and m64nNk32 (e4m3) with f32
//                             accumulators for N = 8, 16, 32, 64, 96, 128, 192, 256
//   ptxrag_sm90/warp.cuh      ldmatrix, stmatrix, elect.sync, redux.sync
//   ptxrag_sm90/cluster.cuh   cluster rank/size, mapa, ld/st.shared::cluster, st.async, barrier.cluster,
//                             remote mbarrier arrive
//   ptxrag_sm90/control.cuh   setmaxnreg.inc/dec, griddepcontrol.wait/launch_dependents
//
// The rules behind these wrappers (what hangs, what gives wrong results) are in the contract documents of the
// knowledge pack (corpus/contracts/*.md). Each wrapper has a unit kernel in corpus/templates/unit/.
#ifndef PTXRAG_SM90_CUH
#define PTXRAG_SM90_CUH

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 900)
#error "ptxrag_sm90.cuh needs sm_90a: build with -gencode=arch=compute_90a,code=sm_90a"
#endif

#include "ptxrag_sm90/common.cuh"
#include "ptxrag_sm90/mbarrier.cuh"
#include "ptxrag_sm90/fence.cuh"
#include "ptxrag_sm90/bulk.cuh"
#include "ptxrag_sm90/tma.cuh"
#include "ptxrag_sm90/wgmma.cuh"
#include "ptxrag_sm90/warp.cuh"
#include "ptxrag_sm90/cluster.cuh"
#include "ptxrag_sm90/control.cuh"

#endif  // PTXRAG_SM90_CUH
