#pragma once
// Everything of ember::nn in one include.
#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/pool.h"
#include "nn/residual.h"
#include "nn/sequential.h"
#include "nn/serialize.h"
