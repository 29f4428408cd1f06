#pragma once
// Note [Printing settings]
// print(model) shows each layer as Name(settings), the settings in PyTorch's words and order
// (extra_repr), so a printed ember model reads like the PyTorch model it mirrors. A window size
// that PyTorch keeps as the caller wrote it (pooling: MaxPool2d(2) prints kernel_size=2) prints
// as one number when both sides agree and as a tuple otherwise; one that PyTorch always keeps as
// a tuple (Conv2d) prints as a tuple.
#include <string>

#include "core/ops.h"

namespace ember::nn {

inline std::string tuple_repr(Pair p) { return ember::detail::concat("(", p[0], ", ", p[1], ")"); }
inline std::string window_repr(Pair p) { return p[0] == p[1] ? std::to_string(p[0]) : tuple_repr(p); }
inline const char* bool_repr(bool b) { return b ? "True" : "False"; }

}  // namespace ember::nn
