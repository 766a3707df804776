// Which compiled copy of the CPU ops runs (kernels/cpu_isa.h): the choice from cpuid's answer, and
// the switch that lets ctest run this whole binary once per copy the machine supports
// (FLASHSERVE_TEST_CPU_KERNELS; tests/CMakeLists.txt). The copies' results are compared with the
// scalar one in tests/backend_ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu_isa.h"
#include "kernels/matmul.h"

namespace flashserve::test {
namespace {

using namespace kernels;

// Runs every test of this binary on the copy FLASHSERVE_TEST_CPU_KERNELS names, all skipped when
// this CPU cannot run it.
class CpuKernelsFromEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* name = std::getenv("FLASHSERVE_TEST_CPU_KERNELS");
    if (!name || !*name) return;
    const auto isa = parse_cpu_isa(name);
    ASSERT_TRUE(isa.has_value()) << "FLASHSERVE_TEST_CPU_KERNELS=" << name;
    if (!cpu_supports(*isa)) GTEST_SKIP() << "this CPU cannot run the " << name << " kernels";
    set_cpu_isa(*isa);
    std::printf("[ kernels  ] %s\n", cpu_isa_name(cpu_isa()));
  }
};
const auto* const cpu_kernels_env = ::testing::AddGlobalTestEnvironment(new CpuKernelsFromEnvironment);

CpuFeatures v3() {
  CpuFeatures f;
  f.avx = f.avx2 = f.fma = f.f16c = f.bmi1 = f.bmi2 = f.lzcnt = f.movbe = true;
  return f;
}

CpuFeatures v4() {
  CpuFeatures f = v3();
  f.avx512f = f.avx512bw = f.avx512cd = f.avx512dq = f.avx512vl = true;
  return f;
}

TEST(CpuIsa, EachLevelNeedsEveryFeatureItsCopyIsCompiledFor) {
  EXPECT_TRUE(cpu_supports(CpuFeatures{}, CpuIsa::Scalar));
  EXPECT_FALSE(cpu_supports(CpuFeatures{}, CpuIsa::Avx2));
  EXPECT_TRUE(cpu_supports(v3(), CpuIsa::Avx2));
  EXPECT_FALSE(cpu_supports(v3(), CpuIsa::Avx512));
  for (bool CpuFeatures::*f : {&CpuFeatures::avx, &CpuFeatures::avx2, &CpuFeatures::fma, &CpuFeatures::f16c,
                               &CpuFeatures::bmi1, &CpuFeatures::bmi2, &CpuFeatures::lzcnt, &CpuFeatures::movbe}) {
    CpuFeatures missing = v4();
    missing.*f = false;
    EXPECT_FALSE(cpu_supports(missing, CpuIsa::Avx2));
    EXPECT_FALSE(cpu_supports(missing, CpuIsa::Avx512));
  }
  EXPECT_TRUE(cpu_supports(v4(), CpuIsa::Avx512));
  EXPECT_FALSE(cpu_supports(v4(), CpuIsa::Avx512Vnni));
  for (bool CpuFeatures::*f : {&CpuFeatures::avx512f, &CpuFeatures::avx512bw, &CpuFeatures::avx512cd,
                               &CpuFeatures::avx512dq, &CpuFeatures::avx512vl}) {
    CpuFeatures missing = v4();
    missing.avx512vnni = true;
    missing.*f = false;
    EXPECT_TRUE(cpu_supports(missing, CpuIsa::Avx2));
    EXPECT_FALSE(cpu_supports(missing, CpuIsa::Avx512));
    EXPECT_FALSE(cpu_supports(missing, CpuIsa::Avx512Vnni));
  }
  CpuFeatures vnni = v4();
  vnni.avx512vnni = true;
  EXPECT_TRUE(cpu_supports(vnni, CpuIsa::Avx512Vnni));
  EXPECT_FALSE(cpu_supports(vnni, CpuIsa::Avx2Vnni)) << "Cascade Lake: AVX-512 VNNI without AVX-VNNI";
  EXPECT_FALSE(cpu_supports(vnni, CpuIsa::Avx512Amx));
  CpuFeatures sapphire_rapids = vnni;
  sapphire_rapids.amx_int8 = true;
  EXPECT_TRUE(cpu_supports(sapphire_rapids, CpuIsa::Avx512Amx));
  sapphire_rapids.avx512vnni = false;
  EXPECT_FALSE(cpu_supports(sapphire_rapids, CpuIsa::Avx512Amx)) << "the tile copy's other loops are avx512-vnni's";
  CpuFeatures alder_lake = v3();
  alder_lake.avxvnni = true;
  EXPECT_TRUE(cpu_supports(alder_lake, CpuIsa::Avx2Vnni));
  EXPECT_FALSE(cpu_supports(alder_lake, CpuIsa::Avx512));
  alder_lake.movbe = false;
  EXPECT_FALSE(cpu_supports(alder_lake, CpuIsa::Avx2Vnni));
}

TEST(CpuIsa, NamesRoundTripAndUnknownOnesAreRefused) {
  for (CpuIsa isa : kCpuIsas) EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa)), isa);
  EXPECT_FALSE(parse_cpu_isa("native").has_value());
  EXPECT_FALSE(parse_cpu_isa("AVX2").has_value());
}

TEST(CpuIsa, SupportedLevelsStartWithScalarAndEndWithTheBest) {
  const auto levels = supported_cpu_isas();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), CpuIsa::Scalar);
  EXPECT_TRUE(std::is_sorted(levels.begin(), levels.end()));
  if (levels.size() > 1) {
    EXPECT_EQ(levels[1], CpuIsa::Avx2) << "every vector level includes AVX2";
  }
  EXPECT_EQ(best_cpu_isa(), levels.back());
  std::string names;
  for (CpuIsa isa : levels) names += std::string(" ") + cpu_isa_name(isa);
  std::printf("[ this CPU ]%s\n", names.c_str());
}

TEST(CpuIsa, ALevelThisCpuLacksIsRefused) {
  for (CpuIsa isa : kCpuIsas) {
    if (cpu_supports(isa)) continue;
    EXPECT_THROW(set_cpu_isa(isa), std::invalid_argument) << cpu_isa_name(isa);
    EXPECT_THROW(make_cpu_backend(false, isa), std::invalid_argument) << cpu_isa_name(isa);
  }
  const CpuIsa now = cpu_isa();
  set_cpu_isa(CpuIsa::Scalar);
  EXPECT_NE(make_cpu_backend()->name().find("scalar kernels"), std::string::npos);
  set_cpu_isa(now);
  EXPECT_NE(make_cpu_backend()->name().find(std::string(cpu_isa_name(now)) + " kernels"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::test
