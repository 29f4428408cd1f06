#pragma once
// Renamed nn/batch_norm.h, the spelling of every other batch-norm file (see CHANGELOG.md). This
// forwarding header stays for one release.
#include "nn/batch_norm.h"
