#pragma once
// Moved to cuda/cudnn/api.h with the rest of the cuDNN path (see CHANGELOG.md). This forwarding
// header is deprecated since 0.2.0 and goes in 0.3.0.
#pragma message("ember: cuda/cudnn.h is deprecated and goes in 0.3.0; "
                "include cuda/cudnn/api.h instead")
#include "cuda/cudnn/api.h"
