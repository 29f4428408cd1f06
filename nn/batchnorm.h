#pragma once
// Renamed nn/batch_norm.h, the spelling of every other batch-norm file (see CHANGELOG.md). This
// forwarding header is deprecated since 0.2.0 and goes in 0.3.0.
#pragma message("ember: nn/batchnorm.h is deprecated and goes in 0.3.0; "
                "include nn/batch_norm.h instead")
#include "nn/batch_norm.h"
