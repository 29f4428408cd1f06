#pragma once
// Moved to cuda/cudnn/library.h with the rest of the cuDNN path (see CHANGELOG.md). This forwarding
// header stays for one release.
#include "cuda/cudnn/library.h"
