#pragma once
// The SIMD level's declarations are in core/cpu_settings.h with the other CPU settings (see
// CHANGELOG.md). This forwarding header stays for one release.
#include "core/cpu_settings.h"
