#pragma once
// Moved to core/kernel_bodies/elementwise_math.h with the rest of the code both backends compile (see
// CHANGELOG.md). This forwarding header is deprecated since 0.2.0 and goes in 0.3.0.
#pragma message("ember: core/elementwise_math.h is deprecated and goes in 0.3.0; "
                "include core/kernel_bodies/elementwise_math.h instead")
#include "core/kernel_bodies/elementwise_math.h"
