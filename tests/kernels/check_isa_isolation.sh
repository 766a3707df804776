#!/bin/sh
# The CPU op files (kernels/cpu/ops/) are compiled once per instruction set; everything else must
# run on any x86-64 CPU. Two checks that nothing built for AVX2 or AVX-512 leaks out of its copy:
#
#   check_isa_isolation.sh objects ISA OBJECT...
#     Fails when an object of ISA's copy defines a global or weak function outside that copy's
#     namespace. The linker keeps one of several weak definitions for the whole program, so such a
#     function (typically inline std:: code an op file instantiated) could carry AVX-512 into code
#     any CPU runs.
#   check_isa_isolation.sh binary FILE
#     Fails when a function of the linked FILE outside the AVX2/AVX-512 copies holds an AVX
#     (VEX/EVEX, mnemonic v...), BMI/LZCNT/MOVBE or AMX tile instruction.
set -eu
copies='::isa_avx2::|::isa_avx2_vnni::|::isa_avx512::|::isa_avx512_vnni::|::isa_avx512_amx::'
case ${1:-} in
  objects)
    isa=$2
    shift 2
    bad=$(nm -C --defined-only "$@" | awk '$2 == "W" || $2 == "T"' | grep -v "::isa_${isa}::" || true)
    if [ -n "$bad" ]; then
      echo "functions outside flashserve::kernels::isa_${isa} in the ${isa} copy of the CPU ops:" >&2
      echo "$bad" >&2
      exit 1
    fi
    echo "isa_${isa}: every global or weak function of $# objects is in its own namespace"
    ;;
  binary)
    file=$2
    objdump -f "$file" >/dev/null || exit 2
    counts=$(objdump -d --no-show-raw-insn -C "$file" | awk -F'\t' -v copies="$copies" '
      /^[0-9a-f]+ <.*>:$/ { fn = $0; inside = fn ~ copies; next }
      NF >= 2 {
        split($2, a, " ")
        m = a[1]
        if (m ~ /^v/ || m ~ /^(shlx|shrx|sarx|rorx|pdep|pext|lzcnt|andn|bzhi|blsr|blsi|blsmsk|movbe|mulx)$/ ||
            m ~ /^(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilezero|tilerelease|tdpb[su][su]d)$/) {
          if (inside) n_in++; else { n_out++; print m "\t" fn > "/dev/stderr" }
        }
      }
      END { print n_in + 0, n_out + 0 }')
    set -- $counts
    if [ "$2" != 0 ]; then
      echo "$file: $2 AVX/BMI instructions outside the AVX2/AVX-512 copies of the CPU ops (listed above)" >&2
      exit 1
    fi
    echo "$file: all $1 AVX/BMI instructions are inside the AVX2/AVX-512 copies of the CPU ops"
    ;;
  *)
    echo "usage: $0 objects ISA OBJECT... | binary FILE" >&2
    exit 2
    ;;
esac
