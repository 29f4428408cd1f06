#pragma once
// The kernel table's catalogue: the mechanism (core/kernel_table.h, Note [The kernel table]) and
// every kernel's signature and slot, one family to a header in core/kernels/. Code that calls or
// fills many kernels includes this; a header that needs one family can include just that one.
// It also brings the matmul operands' BLAS layouts (core/kernel_bodies/gemm_layout.h), declared
// here before the kernels had headers of their own.
#include "core/kernel_bodies/gemm_layout.h"
#include "core/kernel_table.h"
#include "core/kernels/batch_norm.h"
#include "core/kernels/conv_pool.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/cumsum.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/fingerprint.h"
#include "core/kernels/fused_attention.h"
#include "core/kernels/index.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/matmul.h"
#include "core/kernels/random.h"
#include "core/kernels/reduce.h"
#include "core/kernels/softmax.h"
#include "core/kernels/sort.h"
