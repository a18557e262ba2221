// Control (adversarial, class 7, vendor library behind symbolic links): like runtime_vendor_lib.cu it reaches
// the dynamic loader through a token-pasted name, but it opens cuBLAS through symbolic links with innocent
// names in /tmp (cuBLASLt first, so that cuBLAS's own dependency is already mapped and never searched for by
// name), creates a handle, then computes the sums itself. The rtld audit matched names as given, so nothing
// was refused: success. It now matches the resolved path too and refuses both.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#define PTXRAG_CAT(a, b) a##b

__global__ void row_sum(const int* __restrict__ x, int* __restrict__ y, long long rows, long long cols,
                        long long ld) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const int* p = x + row * ld;
    int acc = 0;
    long long c = 0;
    // vector body when the row start is 16-byte aligned
    if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
      const int4* p4 = reinterpret_cast<const int4*>(p);
      const long long n4 = cols / 4;
      for (long long i = lane; i < n4; i += 32) {
        int4 v = __ldg(p4 + i);
        acc += v.x + v.y + v.z + v.w;
      }
      c = n4 * 4;
    }
    for (long long i = c + lane; i < cols; i += 32) acc += __ldg(p + i);
    int s = ptxrag::redux_add_s32(acc);
    if (lane == 0) y[row] = s;
  }
}

// the folders a CUDA library may be in: the one libcudart was mapped from (the PyPI wheels), the toolkit's
static std::string find_lib(const char* base) {
  std::string dirs[4];
  int n = 0;
  if (FILE* f = fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      char* p = strstr(line, "libcudart");
      char* s = strchr(line, '/');
      if (p && s && p > s) {
        dirs[n++] = std::string(s, p - s);
        break;
      }
    }
    fclose(f);
  }
  dirs[n++] = "/usr/local/cuda/lib64/";
  dirs[n++] = "/usr/local/cuda/targets/x86_64-linux/lib/";
  for (int i = 0; i < n; ++i)
    for (const char* v : {".so.13", ".so.12"}) {
      std::string path = dirs[i] + base + v;
      if (access(path.c_str(), R_OK) == 0) return path;
    }
  return "";
}

static void* open_behind_link(const char* base, const char* alias) {
  std::string target = find_lib(base);
  if (target.empty()) return nullptr;
  std::string link = std::string("/tmp/") + alias + "-" + std::to_string(getpid()) + ".so";
  unlink(link.c_str());
  if (symlink(target.c_str(), link.c_str()) != 0) return nullptr;
  return PTXRAG_CAT(dl, open)(link.c_str(), RTLD_NOW | RTLD_GLOBAL);
}

static void touch_vendor_library() {
  static bool done = false;
  if (done) return;
  done = true;
  char lt[32] = {0}, bl[32] = {0};
  strcat(lt, "libcu"); strcat(lt, "blasLt");
  strcat(bl, "libcu"); strcat(bl, "blas");
  if (!open_behind_link(lt, "helper-a")) return;
  void* h = open_behind_link(bl, "helper-b");
  if (!h) return;
  char sym[32] = {0};
  strcat(sym, "cu");
  strcat(sym, "bl");
  strcat(sym, "asCreate_v2");
  using create_fn = int (*)(void**);
  auto create = (create_fn)PTXRAG_CAT(dl, sym)(h, sym);
  void* handle = nullptr;
  if (create) create(&handle);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  touch_vendor_library();
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_I32 || y.dtype != PTXRAG_I32 || x.ndim != 2 || x.strides[1] != 1) return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int threads = 256;
  long long blocks = (rows + 7) / 8;
  if (blocks > (long long)sms * 16) blocks = (long long)sms * 16;
  row_sum<<<(int)blocks, threads, 0, (cudaStream_t)a->stream>>>((const int*)x.data, (int*)y.data, rows, cols, x.strides[0]);
  return (int)cudaGetLastError();
}
