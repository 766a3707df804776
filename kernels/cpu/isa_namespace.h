// The op files (kernels/CMakeLists.txt lists them) are compiled once per instruction set, each copy
// with its own -march and FLASHSERVE_ISA naming a namespace of its own. Everything those files and
// the headers they share define lives in that namespace, so two copies of an inline helper built
// for different CPUs can never be merged by the linker. A file compiled once (dtype.cpp) gets the
// scalar copy's namespace, which it shares with the scalar op files built with the same flags.
#pragma once

#ifndef FLASHSERVE_ISA
#define FLASHSERVE_ISA isa_scalar
#endif
