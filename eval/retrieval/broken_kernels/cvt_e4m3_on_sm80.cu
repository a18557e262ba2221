// arch: sm_80
// expect: 9.7.9.21
// what: conversion to packed fp8 e4m3 on sm_80
__global__ void k(unsigned short *o, float a, float b) {
  unsigned short r; asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(a), "f"(b)); o[0] = r;
}
