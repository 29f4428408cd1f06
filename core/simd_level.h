#pragma once
// The SIMD level's declarations are in core/cpu_settings.h with the other CPU settings (see
// CHANGELOG.md). This forwarding header is deprecated since 0.2.0 and goes in 0.3.0.
#pragma message("ember: core/simd_level.h is deprecated and goes in 0.3.0; "
                "include core/cpu_settings.h instead")
#include "core/cpu_settings.h"
