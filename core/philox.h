#pragma once
// Moved to core/kernel_bodies/philox.h with the rest of the code both backends compile (see
// CHANGELOG.md). This forwarding header stays for one release.
#include "core/kernel_bodies/philox.h"
