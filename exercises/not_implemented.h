#pragma once
// What an exercise stub throws until the learner fills it in.
#include "core/check.h"

namespace ember::exercises {

[[noreturn]] inline void not_implemented(int exercise) {
  EMBER_FAIL("not implemented yet: exercise ", exercise, ", see exercises/README.md");
}

}  // namespace ember::exercises
