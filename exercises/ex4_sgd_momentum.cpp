// Exercise 4: SGD with momentum. Read exercises/README.md (exercise 4) first.
#include "ex4_sgd_momentum.h"

#include "not_implemented.h"

namespace ember::exercises {

// Members: params_, options_ (lr_, momentum_, dampening_, weight_decay_, nesterov_, maximize_)
// and momentum_buffers_ (one per parameter, undefined at first).
void MomentumSGD::step() { not_implemented(4); }

}  // namespace ember::exercises
