// Preloaded into the counting child under valgrind (instruction_count.cc sets LD_PRELOAD),
// and nowhere else: a function wrapper that valgrind's redirection installs over one
// function of libhwy, so that counting runs on CPUs whose CPUID hides RDTSCP.
//
// Why: Debian's LibTorch links OpenCV, which loads libjxl and with it libhwy, whose static
// initializer calls hwy::platform::TimerResolution(). That function executes RDTSCP
// unconditionally. On a virtual machine whose CPUID does not announce RDTSCP, valgrind's
// decoder refuses the instruction and the child dies of SIGILL before main(), so nothing
// could be counted there. The wrapper answers instead, without running the original; no
// seqbench code reaches libhwy afterwards (nothing decodes JPEG XL), and the initializer
// runs before counting starts (--collect-atstart=no), so no count moves.
//
// Outside valgrind the name below is an ordinary unused symbol: the object changes nothing.
// Thread-safety: the wrapper is a pure function.
#include <valgrind/valgrind.h>

#include <cstdint>

extern "C" {

// The wrapped function: `uint64_t hwy::platform::TimerResolution()` in the object whose
// soname is libhwy.so.1 (Z-encoded: '.' is "Zd"); the answer is its ticks per timer
// resolution, a value only libhwy's own benchmarking reads.
uint64_t I_WRAP_SONAME_FNNAME_ZU(libhwyZdsoZd1, _ZN3hwy8platform15TimerResolutionEv)() { return 1; }

}  // extern "C"
