// ST_VECTOR_CLONES: compile a loop for AVX-512, AVX2 and baseline x86-64, the loader picking the
// widest the CPU has (function multiversioning). For files compiled with -O3 -ffp-contract=off
// (the Makefile's VECTOR_LOOPS), where no clone may fuse a multiply-add, so that every clone
// rounds exactly as the plain code does.
#pragma once

#if defined(__x86_64__)
#define ST_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ST_VECTOR_CLONES
#endif
