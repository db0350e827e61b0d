// Everything in optim/: optimizers, parameter groups, clipping, schedules.
#pragma once

#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
