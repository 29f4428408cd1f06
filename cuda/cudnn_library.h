#pragma once
// Moved to cuda/cudnn/library.h with the rest of the cuDNN path (see CHANGELOG.md). This forwarding
// header is deprecated since 0.2.0 and goes in 0.3.0.
#pragma message("ember: cuda/cudnn_library.h is deprecated and goes in 0.3.0; "
                "include cuda/cudnn/library.h instead")
#include "cuda/cudnn/library.h"
