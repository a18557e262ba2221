/* Test helper: dlopen a compiled candidate and call ptxrag_launch with no tensors, on the CPU.
 * A C program (not Python) so it runs as an unprivileged uid that cannot reach the test's interpreter. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 3; }
  int (*launch)(const void*) = (int (*)(const void*))dlsym(h, "ptxrag_launch");
  if (!launch) { fprintf(stderr, "no ptxrag_launch\n"); return 4; }
  /* ptxrag_args with abi_version 1 and no tensors: fields after the counts are NULL/0 */
  unsigned char args[128];
  memset(args, 0, sizeof args);
  args[0] = 1;
  setvbuf(stdout, NULL, _IONBF, 0);
  printf("rc %d\n", launch(args));
  return 0;
}
