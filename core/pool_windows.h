#pragma once
// Moved to core/kernel_bodies/pool_windows.h with the rest of the code both backends compile (see
// CHANGELOG.md). This forwarding header is deprecated since 0.2.0 and goes in 0.3.0.
#pragma message("ember: core/pool_windows.h is deprecated and goes in 0.3.0; "
                "include core/kernel_bodies/pool_windows.h instead")
#include "core/kernel_bodies/pool_windows.h"
