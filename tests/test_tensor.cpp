#include <gtest/gtest.h>

#include "core/ops.h"

using namespace ember;

TEST(Tensor, Zeros) {
  Tensor t = zeros({2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.sum().item(), 0.0);
}
