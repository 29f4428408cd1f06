// Generators: Philox known answers, reproducibility, state save/restore, distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/generator.h"
#include "core/ops.h"
#include "core/kernel_bodies/philox.h"

using namespace ember;

TEST(Random, PhiloxKnownAnswer) {
  // Philox4x32-10 with counter 0 and key 0, from the reference implementation's test vectors.
  philox::Block b = philox::generate(0, 0);
  EXPECT_EQ(b.v[0], 0x6627e8d5u);
  EXPECT_EQ(b.v[1], 0xe169c58du);
  EXPECT_EQ(b.v[2], 0xbc57ac4cu);
  EXPECT_EQ(b.v[3], 0x9b00dbd8u);
}

// The CPU kernel computes blocks eight at a time (Note [Philox blocks side by side]); every
// element must still be the scalar definition's, past group boundaries and 2^32 counters too.
TEST(Random, DrawsAreTheScalarDefinitionElementByElement) {
  for (const uint64_t offset : {uint64_t{0}, (uint64_t{1} << 32) - 3}) {
    Generator& g = default_generator(kCPU);
    g.set_state({0x123456789abcdefULL, offset});
    const std::vector<double> u = rand({77}, kFloat64).to_vector<double>();
    const std::vector<float> z = randn({77}).to_vector<float>();
    for (uint64_t i = 0; i < 77; ++i) {
      EXPECT_EQ(u[i], philox::uniform(0x123456789abcdefULL, offset, i)) << i;
      EXPECT_EQ(z[i], static_cast<float>(philox::normal(0x123456789abcdefULL, offset + 20, i))) << i;  // 77 -> 20 counters
    }
  }
  uint32_t words[4][8];
  philox::generate_group<8>(5, (uint64_t{1} << 32) - 4, words);
  for (int l = 0; l < 8; ++l)
    for (int w = 0; w < 4; ++w) EXPECT_EQ(words[w][l], philox::generate(5, (uint64_t{1} << 32) - 4 + l).v[w]);
}

TEST(Random, ManualSeedReproduces) {
  manual_seed(7);
  std::vector<float> a = rand({1000}).to_vector<float>();
  std::vector<float> an = randn({10}).to_vector<float>();
  manual_seed(7);
  EXPECT_EQ(rand({1000}).to_vector<float>(), a);
  EXPECT_EQ(randn({10}).to_vector<float>(), an);
  manual_seed(8);
  EXPECT_NE(rand({1000}).to_vector<float>(), a);
}

TEST(Random, StateSaveAndRestoreReplaysADraw) {
  Generator& g = default_generator(kCPU);
  GeneratorState s = g.state();
  std::vector<float> first = randn({33}).to_vector<float>();
  EXPECT_EQ(g.state().offset, s.offset + 9);  // ceil(33 / 4) counters
  g.set_state(s);
  EXPECT_EQ(randn({33}).to_vector<float>(), first);
}

TEST(Random, GuardRestoresEveryGenerator) {
  manual_seed(3);
  GeneratorState before = default_generator().state();
  std::vector<float> expected;
  {
    RngStateGuard guard;
    expected = rand({5}).to_vector<float>();
    EXPECT_NE(default_generator().state(), before);
  }
  EXPECT_EQ(default_generator().state(), before);
  EXPECT_EQ(rand({5}).to_vector<float>(), expected);
}

TEST(Random, Distributions) {
  manual_seed(11);
  const int64_t n = 200000;
  Tensor u = rand({n}, kFloat64);
  EXPECT_GE(min(u).item(), 0.0);
  EXPECT_LT(max(u).item(), 1.0);
  EXPECT_NEAR(mean(u).item(), 0.5, 0.005);
  Tensor z = randn({n}, kFloat64);
  EXPECT_NEAR(mean(z).item(), 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(mean(z * z).item()), 1.0, 0.01);
  Tensor r = randint(-3, 4, {5000});
  EXPECT_EQ(r.dtype(), kInt64);
  std::vector<int64_t> seen = r.to_vector<int64_t>();
  std::set<int64_t> distinct(seen.begin(), seen.end());
  EXPECT_EQ(distinct, (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  EXPECT_THROW(randint(2, 2, {1}), Error);
  EXPECT_THROW(rand({2}, kInt64), Error);
}
